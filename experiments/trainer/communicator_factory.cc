#include "experiments/trainer/communicator_factory.h"

#include "experiments/trainer/rendezvous_store.h"
#include "protocol/host_network.h"
#ifdef BAKEOFF_WITH_GLOO
#include "experiments/trainer/gloo_communicator.h"
#endif
#ifdef BAKEOFF_WITH_NCCL
#include "experiments/trainer/nccl_communicator.h"
#endif

namespace bakeoff::trainer {

Result<std::unique_ptr<Communicator>> CreateCommunicator(const TrainerConfig& c,
                                                         const torch::Device& device) {
  if (c.world_size == 1) return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>());
  const auto colon = c.store.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument("store: expected HOST:PORT, got \"" + c.store + "\"");
  }
  const std::string host = c.store.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(c.store.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;
  }
  if (port <= 0 || port > 65535) {
    return Status::InvalidArgument("store: expected a port in 1..65535 in \"" + c.store + "\"");
  }
  // Where this rank binds: the launcher's choice, else the address that reaches rank 0
  // (torchrun or a hand start on several hosts), else the store's host as a last resort
  // (one host: it is local; several: Gloo's error then says it is not).
  std::string bind_address = c.rank_address;
  const std::string bind_interface = c.rank_interface;
  if (bind_address.empty() && bind_interface.empty()) {
    bind_address = protocol::LocalAddressToward(host);
    if (bind_address.empty()) bind_address = host;
  }
  GroupOptions group;
  group.store.host = host;
  group.store.port = port;
  group.store.rank = static_cast<int>(c.rank);
  group.store.world_size = static_cast<int>(c.world_size);
  group.store.agent_hosts_store = c.agent_store;
  group.store.attempt = c.restart_count;
  group.store.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.rendezvous_timeout_s * 1000));
  group.bind_address = bind_address;
  group.bind_interface = bind_interface;
  group.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.collective_timeout_s * 1000));
  if (device.is_cuda()) {
#ifdef BAKEOFF_WITH_NCCL
    NcclCommunicator::Options o{group, device.index()};
    if (o.bind_interface.empty()) o.bind_interface = protocol::InterfaceHolding(bind_address);
    auto nccl = NcclCommunicator::Create(o);
    if (!nccl.ok()) return nccl.status();
    return std::unique_ptr<Communicator>(std::move(nccl).value());
#else
    return Status::Unsupported("device cuda with world_size > 1 needs NCCL; this trainer was built without it");
#endif
  }
#ifdef BAKEOFF_WITH_GLOO
  auto gloo = GlooCommunicator::Create(group);
  if (!gloo.ok()) return gloo.status();
  return std::unique_ptr<Communicator>(std::move(gloo).value());
#else
  return Status::Unsupported("device cpu with world_size > 1 needs Gloo; this trainer was built with "
                             "-DBAKEOFF_GLOO=OFF (experiments/trainer/third_party/gloo/README.md)");
#endif
}

}  // namespace bakeoff::trainer
