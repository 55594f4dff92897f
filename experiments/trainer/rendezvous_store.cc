#include "experiments/trainer/rendezvous_store.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdio>
#include <cstring>

namespace bakeoff::trainer {
namespace {

std::string Seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f s", s);
  return buffer;
}

}  // namespace

bool AgentHostsStore(const char* value) {
  if (value == nullptr) return false;
  return std::strcmp(value, "True") == 0 || std::strcmp(value, "true") == 0 || std::strcmp(value, "1") == 0;
}

Result<c10::intrusive_ptr<c10d::Store>> ConnectStore(const StoreOptions& options) {
  const bool host_here = options.rank == 0 && !options.agent_hosts_store;
  const auto start = std::chrono::steady_clock::now();
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(options.port);
    so.isServer = host_here;
    so.numWorkers = options.world_size;
    // Every rank checks in and a hosting rank 0 waits for all of them; under an agent
    // nobody does (its store counts torchrun's own workers), and the collectives' own
    // rendezvous waits instead.
    so.waitWorkers = !options.agent_hosts_store;
    so.timeout = options.timeout;
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(options.host, so);
    if (options.agent_hosts_store) {
      store = c10::make_intrusive<c10d::PrefixStore>("bakeoff/attempt" + std::to_string(options.attempt), store);
    }
    return store;
  } catch (const std::exception& e) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string where = options.host + ":" + std::to_string(options.port);
    std::string what = "rank " + std::to_string(options.rank) + " of " + std::to_string(options.world_size) +
                       (host_here ? " hosting the store at " : " connecting to the store at ") + where +
                       (options.agent_hosts_store ? " (torchrun's agent hosts it)" : "");
    const std::string head = what + " failed after " + Seconds(waited) + " (rendezvous_timeout_s " +
                             Seconds(options.timeout.count() / 1000.0) + "):";
    // The hint goes before LibTorch's text, which ends in a backtrace that the event's
    // message leaves out (protocol/error_cause.h).
    if (host_here && std::strstr(e.what(), "ddress already in use") != nullptr) {
      // Bakeoff's machinery, not the variant: ResourceExhausted makes it the error kind
      // "infrastructure", which the worker ends `lost` and the coordinator retries.
      return Status::ResourceExhausted(
          head + " another process holds the port (it was free when the worker checked it): under torchrun the "
                 "agent hosts the store there (TORCHELASTIC_USE_AGENT_STORE=True makes every rank connect to it). " +
          e.what());
    }
    return Status::Unavailable(head + " " + e.what());
  }
}

}  // namespace bakeoff::trainer
