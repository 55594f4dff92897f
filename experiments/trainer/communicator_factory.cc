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
  const auto rendezvous = std::chrono::milliseconds(static_cast<int64_t>(c.rendezvous_timeout_s * 1000));
  const auto collective = std::chrono::milliseconds(static_cast<int64_t>(c.collective_timeout_s * 1000));
  StoreOptions store;
  store.host = host;
  store.port = port;
  store.rank = static_cast<int>(c.rank);
  store.world_size = static_cast<int>(c.world_size);
  store.agent_hosts_store = c.agent_store;
  store.attempt = c.restart_count;
  store.timeout = rendezvous;
  if (device.is_cuda()) {
#ifdef BAKEOFF_WITH_NCCL
    NcclCommunicator::Options o;
    o.store = store;
    o.device_index = device.index();
    o.collective_timeout = collective;
    o.bind_interface = bind_interface.empty() ? protocol::InterfaceHolding(bind_address) : bind_interface;
    o.bind_address = bind_address;
    auto nccl = NcclCommunicator::Create(o);
    if (!nccl.ok()) return nccl.status();
    return std::unique_ptr<Communicator>(std::move(nccl).value());
#else
    return Status::Unsupported("device cuda with world_size > 1 needs NCCL; this trainer was built without it");
#endif
  }
#ifdef BAKEOFF_WITH_GLOO
  GlooCommunicator::Options o;
  o.store = store;
  o.bind_address = bind_address;
  o.bind_interface = bind_interface;
  o.collective_timeout = collective;
  auto gloo = GlooCommunicator::Create(o);
  if (!gloo.ok()) return gloo.status();
  return std::unique_ptr<Communicator>(std::move(gloo).value());
#else
  return Status::Unsupported("device cpu with world_size > 1 needs Gloo; this trainer was built with "
                             "-DBAKEOFF_GLOO=OFF (experiments/trainer/third_party/gloo/README.md)");
#endif
}

}  // namespace bakeoff::trainer
