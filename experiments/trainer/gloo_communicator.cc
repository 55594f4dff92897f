#include "experiments/trainer/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "protocol/host_network.h"

namespace bakeoff::trainer {

Result<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(const Options& options) {
  std::unique_ptr<GlooCommunicator> comm(new GlooCommunicator(options));
  const std::string where = options.store.host + ":" + std::to_string(options.store.port);
  const std::string rank = "rank " + std::to_string(options.store.rank);
  // The device first: a rank that cannot bind says so at once instead of after the
  // rendezvous, and names what it was given.
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    if (!options.bind_address.empty()) {
      device = c10d::ProcessGroupGloo::createDeviceForHostname(options.bind_address);
      comm->local_address_ = options.bind_address;
    } else {
      device = c10d::ProcessGroupGloo::createDeviceForInterface(options.bind_interface);
      auto address = protocol::InterfaceAddress(options.bind_interface);
      comm->local_address_ = address.ok() ? *address : "";
    }
  } catch (const std::exception& e) {
    const std::string what = options.bind_address.empty() ? "interface " + options.bind_interface
                                                          : "address " + options.bind_address;
    return Status::Unavailable(rank + " cannot bind its Gloo collectives to " + what +
                               " (the worker's --rank-address / --rank-interface, docs/distributed.md): " +
                               e.what());
  }
  auto store = ConnectStore(options.store);
  if (!store.ok()) return store.status();
  try {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.collective_timeout);
    gloo_options->devices.push_back(device);
    comm->group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(*store, options.store.rank,
                                                               options.store.world_size, gloo_options);
    comm->store_ = *store;
  } catch (const std::exception& e) {
    return Status::Unavailable("gloo process group of " + rank + " at " + comm->local_address_ + " (store " + where +
                               ") failed: " + e.what());
  }
  return comm;
}

GlooCommunicator::~GlooCommunicator() = default;

template <typename Fn>
Status GlooCommunicator::Timed(const char* what, int64_t bytes, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  try {
    fn();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string(what) + " failed on rank " + std::to_string(options_.store.rank) +
                               " (a peer rank died or timed out after " +
                               std::to_string(options_.collective_timeout.count() / 1000.0) + " s): " +
                               e.what());
  }
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.bytes += bytes;
  ++stats_.calls;
  return Status::Ok();
}

Status GlooCommunicator::AllReduceSum(torch::Tensor& tensor) {
  return Timed("all-reduce", tensor.nbytes(), [&] {
    std::vector<at::Tensor> tensors = {tensor};
    group_->allreduce(tensors)->wait(options_.collective_timeout);
  });
}

Status GlooCommunicator::ReduceScatterSum(const torch::Tensor& input, torch::Tensor& output) {
  return Timed("reduce-scatter (emulated)", input.nbytes(), [&] {
    std::vector<at::Tensor> tensors = {input.clone()};
    group_->allreduce(tensors)->wait(options_.collective_timeout);
    output.copy_(tensors[0].narrow(0, rank() * output.numel(), output.numel()));
  });
}

Status GlooCommunicator::AllGather(const torch::Tensor& input, torch::Tensor& output) {
  return Timed("all-gather", output.nbytes(), [&] {
    std::vector<at::Tensor> outputs;
    for (int r = 0; r < world_size(); ++r) outputs.push_back(output.narrow(0, r * input.numel(), input.numel()));
    std::vector<std::vector<at::Tensor>> output_lists = {outputs};
    std::vector<at::Tensor> inputs = {input.contiguous()};
    group_->allgather(output_lists, inputs)->wait(options_.collective_timeout);
  });
}

Status GlooCommunicator::Broadcast(torch::Tensor& tensor, int root) {
  return Timed("broadcast", tensor.nbytes(), [&] {
    std::vector<at::Tensor> tensors = {tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    group_->broadcast(tensors, opts)->wait(options_.collective_timeout);
  });
}

Status GlooCommunicator::Barrier() {
  return Timed("barrier", 0, [&] { group_->barrier()->wait(options_.collective_timeout); });
}

}  // namespace bakeoff::trainer
