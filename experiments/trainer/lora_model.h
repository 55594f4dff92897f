// LoraModel: the Llama-style decoder with frozen base weights and trainable LoRA
// adapters, composed from ModelMath's units: embedding, blocks, head and loss. Blocks
// run through RecomputeFunction when gradient checkpointing is on or the base weights
// are sharded (ZeRO stage 3), and plainly otherwise.
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "experiments/trainer/adapters.h"
#include "experiments/trainer/communicator.h"
#include "experiments/trainer/frozen_weights.h"
#include "experiments/trainer/model_math.h"
#include "experiments/trainer/recompute_function.h"
#include "experiments/trainer/trainer_config.h"
#include "experiments/trainer/unit_runner.h"

namespace bakeoff::trainer {

class LoraModel {
 public:
  // REQUIRES: config finalized; comm outlives the model.
  LoraModel(const TrainerConfig& config, const torch::Device& device, Communicator* comm);

  // Mean next-token cross-entropy (fp32 scalar) of `tokens` [batch, seq_len + 1].
  // Throws (LibTorch errors, allocation failures, communication failures in stage 3).
  torch::Tensor Loss(const torch::Tensor& tokens);

  Adapters& adapters() { return *adapters_; }
  FrozenWeights& frozen() { return *frozen_; }
  UnitRunner& runner() { return runner_; }
  const ModelMath& math() const { return math_; }
  bool recompute() const { return recompute_; }
  torch::ScalarType compute_dtype() const { return dtype_; }

 private:
  const AttentionTables& TablesFor(int64_t seq_len);

  TrainerConfig config_;
  torch::Device device_;
  torch::ScalarType dtype_;
  bool recompute_;
  UnitRunner runner_;
  ModelMath math_;
  std::unique_ptr<FrozenWeights> frozen_;
  std::unique_ptr<Adapters> adapters_;
  std::map<int64_t, AttentionTables> tables_;
  // Segments of the last forward, alive until its backward has run.
  std::vector<std::unique_ptr<RecomputeSegment>> segments_;
};

// Throws std::runtime_error carrying `status` when it is not ok.
void ThrowIfError(const Status& status);

}  // namespace bakeoff::trainer
