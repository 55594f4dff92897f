#include "experiments/trainer/rendezvous_store.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "experiments/trainer/torch_compat.h"

namespace bakeoff::trainer {
namespace {

// Rank 0's listening socket for the store, bound to the store's own address (the
// worker's --host; 127.0.0.1 on one machine) rather than every interface, so that only
// that network reaches it (security review 2026-12-02, hole 13). An address this host
// does not have (EADDRNOTAVAIL: a name that resolves elsewhere, a NAT) falls back to
// every interface, said on stderr. Throws with strerror's text ("Address already in
// use"), which ConnectStore classifies.
int ListenOn(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    throw std::runtime_error("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  sockaddr_storage address{};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  const socklen_t address_len = found->ai_addrlen;
  const int family = found->ai_family;
  freeaddrinfo(found);
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&address), address_len);
  if (rc != 0 && errno == EADDRNOTAVAIL) {
    std::fprintf(stderr, "bakeoff-trainer: %s is not an address of this host; the store listens on every interface\n",
                 host.c_str());
    sockaddr_storage any{};
    any.ss_family = static_cast<sa_family_t>(family);
    if (family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&any)->sin6_port = htons(static_cast<uint16_t>(port));
    } else {
      reinterpret_cast<sockaddr_in*>(&any)->sin_port = htons(static_cast<uint16_t>(port));
    }
    rc = bind(fd, reinterpret_cast<sockaddr*>(&any), address_len);
  }
  if (rc == 0) rc = listen(fd, 1024);
  if (rc != 0) {
    const int err = errno;
    close(fd);
    throw std::runtime_error("binding " + host + ":" + std::to_string(port) + ": " + std::strerror(err));
  }
  return fd;
}

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
    if (host_here) {
      const int fd = ListenOn(options.host, options.port);
      if (!compat::ServeStoreOnSocket(so, fd)) close(fd);
    }
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
