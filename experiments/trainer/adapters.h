// Adapters: every LoRA A and B of the model as leaf tensors that alias one flat fp32
// buffer, with gradients that alias one flat gradient buffer. Flat buffers are what the
// ZeRO stages partition, all-reduce, reduce-scatter and all-gather; the leaves are what
// autograd sees. A is Kaiming-uniform (bound 1/sqrt(in), as PEFT), B is zero.
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <array>
#include <vector>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/model_math.h"

namespace bakeoff::trainer {

class Adapters {
 public:
  Adapters(const ModelDims& dims, const std::vector<std::string>& targets, int64_t rank,
           uint64_t seed, const torch::Device& device, int world_size);

  // Flat fp32 parameters, padded to a multiple of the world size.
  torch::Tensor& flat() { return flat_; }
  const Partition& partition() const { return partition_; }
  int64_t numel() const { return partition_.numel; }

  const std::array<LoraPair, kNumProjections>& block(int layer) const { return blocks_[layer]; }
  // Leaves of one block, in a fixed order (for autograd functions that take them).
  std::vector<torch::Tensor> BlockLeaves(int layer) const;

  // Makes every leaf's .grad a view of `flat_grad` ([padded] fp32), so autograd
  // accumulates into it in place.
  void AttachGrads(const torch::Tensor& flat_grad);
  // Leaves' .grad undefined again (the flat gradient buffer may then be freed).
  void DetachGrads();

 private:
  struct Slot {
    torch::Tensor leaf;
    int64_t offset;
  };
  torch::Tensor flat_;
  Partition partition_;
  std::vector<std::array<LoraPair, kNumProjections>> blocks_;
  std::vector<Slot> slots_;
};

// A tensor that aliases `base`'s storage at `offset` with `shape`, without being an
// autograd view of it (so it can be a leaf or a .grad).
torch::Tensor AliasOf(const torch::Tensor& base, int64_t offset, at::IntArrayRef shape);

}  // namespace bakeoff::trainer
