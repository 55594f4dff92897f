// NcclCommunicator: the CUDA backend, the NCCL API used directly. Rank 0 creates the
// NCCL unique id and publishes it through the c10d TCPStore it hosts. Collectives run on
// the legacy default stream (the one LibTorch uses unless told otherwise), so they are
// ordered with the training step's kernels; each call then waits for completion, polling
// so that a dead peer ends in a clear error after the collective timeout, not a hang.
// Thread-safety: one training thread.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/rendezvous_store.h"
#include "protocol/status.h"

struct ncclComm;

namespace bakeoff::trainer {

class NcclCommunicator : public Communicator {
 public:
  // bind_address is this rank's own address and bind_interface the interface holding it
  // ("" when unknown). NCCL picks its bootstrap and socket interface from
  // NCCL_SOCKET_IFNAME; unless the operator set it, Create sets it to bind_interface
  // before the first NCCL call (rank 0's unique id carries the address its bootstrap
  // listens on).
  struct Options : GroupOptions {
    int device_index = 0;
  };
  static Result<std::unique_ptr<NcclCommunicator>> Create(const Options& options);
  ~NcclCommunicator() override;

  int rank() const override { return options_.store.rank; }
  int world_size() const override { return options_.store.world_size; }
  std::string backend() const override { return "nccl"; }
  std::string local_address() const override { return options_.bind_address; }

  Status AllReduceSum(torch::Tensor& tensor) override;
  Status ReduceScatterSum(const torch::Tensor& input, torch::Tensor& output) override;
  Status AllGather(const torch::Tensor& input, torch::Tensor& output) override;
  Status Broadcast(torch::Tensor& tensor, int root) override;
  Status Barrier() override;

 private:
  explicit NcclCommunicator(const Options& options) : options_(options) {}
  // Waits for the collective just enqueued; aborts the communicator on timeout.
  Status Finish(const char* what, int result, std::chrono::steady_clock::time_point start,
                int64_t bytes);
  // One collective on `typed`'s NCCL data type: `enqueue(type)` starts it and returns its
  // ncclResult_t; then Finish waits for it, counting `bytes`.
  template <typename Fn>
  Status Collective(const char* what, const torch::Tensor& typed, int64_t bytes, Fn&& enqueue);

  Options options_;
  c10::intrusive_ptr<c10d::Store> store_;
  ncclComm* comm_ = nullptr;
};

}  // namespace bakeoff::trainer
