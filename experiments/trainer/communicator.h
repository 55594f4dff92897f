// Communicator: the collectives the trainer's data parallelism needs, each timed and its
// bytes counted. Backends: LocalCommunicator (one rank), GlooCommunicator (CPU, c10d
// ProcessGroupGloo), NcclCommunicator (CUDA, the NCCL API). Tensors are contiguous and
// 1-D; shard operations take equal-size shards (callers pad, see Partition).
// Thread-safety: one training thread per communicator; collectives are blocking.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "protocol/status.h"

namespace bakeoff::trainer {

struct CommStats {
  double seconds = 0;
  int64_t bytes = 0;  // payload bytes this rank handed to collectives
  int64_t calls = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;

  // In place: every rank ends with the elementwise sum.
  virtual Status AllReduceSum(torch::Tensor& tensor) = 0;
  // input [world * n] on every rank; output [n] gets the sum of every rank's shard `rank`.
  virtual Status ReduceScatterSum(const torch::Tensor& input, torch::Tensor& output) = 0;
  // input [n] on every rank; output [world * n], rank r's input at r * n.
  virtual Status AllGather(const torch::Tensor& input, torch::Tensor& output) = 0;
  virtual Status Broadcast(torch::Tensor& tensor, int root) = 0;
  virtual Status Barrier() = 0;

  // The local address this rank's collectives bind to ("" when none: one rank).
  virtual std::string local_address() const { return ""; }

  // What reduce-scatter costs on this backend (documented in docs/distributed.md).
  virtual std::string reduce_scatter_note() const { return "native"; }

  const CommStats& stats() const { return stats_; }
  void ResetStats() { stats_ = CommStats{}; }

 protected:
  CommStats stats_;
};

// One rank: collectives are copies (or nothing), still counted so the accounting holds.
class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "local"; }
  Status AllReduceSum(torch::Tensor&) override { return Status::Ok(); }
  Status ReduceScatterSum(const torch::Tensor& input, torch::Tensor& output) override {
    output.copy_(input);
    return Status::Ok();
  }
  Status AllGather(const torch::Tensor& input, torch::Tensor& output) override {
    output.copy_(input);
    return Status::Ok();
  }
  Status Broadcast(torch::Tensor&, int) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
};

// Equal shards of a flat buffer of `numel` elements over `world` ranks: the buffer is
// padded to world * shard elements, so any size partitions.
struct Partition {
  int64_t numel = 0;
  int64_t shard = 0;   // elements per rank
  int64_t padded = 0;  // world * shard
  static Partition Of(int64_t numel, int world) {
    Partition p;
    p.numel = numel;
    p.shard = (numel + world - 1) / world;
    p.padded = p.shard * world;
    return p;
  }
};

}  // namespace bakeoff::trainer
