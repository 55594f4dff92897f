// GlooCommunicator: the CPU backend, LibTorch's c10d ProcessGroupGloo over a c10d
// TCPStore that rank 0 hosts. Each rank's Gloo device binds to its own host's address or
// interface, never to the store's (rank 0's) address. Reduce-scatter is emulated with an
// all-reduce of the whole buffer, moving twice the bytes a ring reduce-scatter would
// (docs/distributed.md): LibTorch 1.13's Gloo had none; 2.x's reduce_scatter is not used yet.
// Thread-safety: one training thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/rendezvous_store.h"
#include "protocol/status.h"


namespace bakeoff::trainer {

class GlooCommunicator : public Communicator {
 public:
  // This rank's Gloo sockets bind to bind_address, else (when empty) to bind_interface;
  // one of the two is required (communicator_factory.h chooses).
  using Options = GroupOptions;
  // Rendezvous: blocks until every rank has joined or the rendezvous timeout passes.
  static Result<std::unique_ptr<GlooCommunicator>> Create(const Options& options);
  ~GlooCommunicator() override;

  int rank() const override { return options_.store.rank; }
  int world_size() const override { return options_.store.world_size; }
  std::string backend() const override { return "gloo"; }
  std::string local_address() const override { return local_address_; }
  std::string reduce_scatter_note() const override {
    return "emulated: all-reduce of the whole buffer, then the local shard";
  }

  Status AllReduceSum(torch::Tensor& tensor) override;
  Status ReduceScatterSum(const torch::Tensor& input, torch::Tensor& output) override;
  Status AllGather(const torch::Tensor& input, torch::Tensor& output) override;
  Status Broadcast(torch::Tensor& tensor, int root) override;
  Status Barrier() override;

 private:
  explicit GlooCommunicator(const Options& options) : options_(options) {}
  template <typename Fn>
  Status Timed(const char* what, int64_t bytes, Fn&& fn);

  Options options_;
  std::string local_address_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

}  // namespace bakeoff::trainer
