// FrozenWeights: the base model's weights, generated deterministically from the seed and
// never trained, grouped in units (the embedding, each block, the head). Stage < 3 keeps
// every unit whole on every rank; ZeRO stage 3 keeps 1/N of each unit per rank and
// all-gathers a unit just before it runs (Acquire) and drops it after (Release).
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/model_math.h"
#include "protocol/status.h"

namespace bakeoff::trainer {

class FrozenWeights {
 public:
  struct Options {
    ModelDims dims;
    torch::ScalarType dtype = torch::kFloat32;
    torch::Device device = torch::kCPU;
    uint64_t seed = 0;
    bool sharded = false;  // ZeRO stage 3
    // Where shards live: the device, or the host for `offload: parameters`.
    torch::Device shard_device = torch::kCPU;
  };

  // REQUIRES: comm outlives this object.
  FrozenWeights(const Options& options, Communicator* comm);

  // Returns the embedding [vocab, dim]; when sharded it is gathered and must be released.
  Result<torch::Tensor> AcquireEmbedding();
  Result<BlockWeights> AcquireBlock(int layer);
  Result<HeadWeights> AcquireHead();
  // Drops the gathered copy of a unit (no-op when replicated).
  void ReleaseEmbedding() { Release(0); }
  void ReleaseBlock(int layer) { Release(1 + layer); }
  void ReleaseHead() { Release(units_.size() - 1); }

  bool sharded() const { return options_.sharded; }
  // Bytes this rank holds between uses (full units, or its shards).
  int64_t held_bytes() const;
  // The most bytes of gathered units held at one time (0 when replicated).
  int64_t peak_gathered_bytes() const { return peak_gathered_bytes_; }
  // Seconds spent copying offloaded shards to the device.
  double offload_copy_s() const { return offload_copy_s_; }

 private:
  struct Unit {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<bool> is_norm;
    Partition partition;
    torch::Tensor stored;    // whole unit, or this rank's shard when sharded
    torch::Tensor gathered;  // the gathered unit while acquired (sharded only)
  };
  Result<std::vector<torch::Tensor>> Acquire(size_t index);
  void Release(size_t index);

  Options options_;
  Communicator* comm_;
  std::vector<Unit> units_;
  int64_t gathered_bytes_ = 0;
  int64_t peak_gathered_bytes_ = 0;
  double offload_copy_s_ = 0;
};

}  // namespace bakeoff::trainer
