// ZeroOptimizer: AdamW over the flat adapter buffer, data parallel with the ZeRO stage
// the configuration asks for.
//   stage 0: gradients all-reduced in buckets; every rank updates every parameter.
//   stage 1: gradients all-reduced; optimizer state partitioned: each rank updates its
//            shard and the updated parameters are all-gathered.
//   stage 2, 3: gradients reduce-scattered after each micro-batch, each rank keeping only
//            its shard (stage 3 also shards the frozen weights, see FrozenWeights).
// Offload `optimizer` keeps the optimizer state, a master copy of the shard and the update
// on the host. Gradients are averaged over ranks (each rank's loss is its own mean).
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include "experiments/trainer/adapters.h"
#include "experiments/trainer/communicator.h"
#include "experiments/trainer/trainer_config.h"
#include "protocol/status.h"

namespace bakeoff::trainer {

class ZeroOptimizer {
 public:
  // REQUIRES: adapters and comm outlive the optimizer.
  ZeroOptimizer(const TrainerConfig& config, Adapters* adapters, Communicator* comm);

  // Before the first micro-batch of an optimizer step.
  void BeginStep();
  // Before each micro-batch's backward (stage 2/3 re-create the full gradient buffer).
  void BeforeBackward();
  // After each micro-batch's backward (stage 2/3 reduce-scatter into the shard).
  Status AfterBackward();
  // Reduces (stage 0/1), clips, updates with learning rate `lr`, gathers parameters.
  // Returns the global gradient norm before clipping.
  Result<double> Step(double lr);

  // Bytes held by kind on this rank, between steps.
  int64_t grad_bytes() const;
  int64_t optimizer_bytes() const;
  int64_t trainable_bytes() const { return adapters_->flat().nbytes(); }
  double offload_copy_s() const { return offload_copy_s_; }

 private:
  torch::Tensor Shard(const torch::Tensor& flat) const;
  Status AllReduceBuckets(torch::Tensor& flat);

  TrainerConfig config_;
  Adapters* adapters_;
  Communicator* comm_;
  Partition partition_;
  int stage_;
  bool offload_;
  torch::Tensor flat_grad_;   // [padded] while it exists (stages 0/1: always)
  torch::Tensor shard_grad_;  // [shard] stages 2/3
  torch::Tensor exp_avg_;     // [shard] or [padded] (stage 0)
  torch::Tensor exp_avg_sq_;
  torch::Tensor master_;      // host copy of the updated parameters (offload only)
  int64_t step_ = 0;
  double offload_copy_s_ = 0;
};

}  // namespace bakeoff::trainer
