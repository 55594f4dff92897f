// RecomputeFunction: a custom autograd function that runs a segment of the model (a
// block, or the head and loss) without keeping its activations, and runs it again in
// backward to get the gradients. It serves gradient checkpointing and ZeRO stage 3, whose
// segments also gather their sharded weights on entry and drop them on exit, in forward
// and again in backward. With dropout the RNG state is restored for the recomputation.
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace bakeoff::trainer {

struct RecomputeSegment {
  // Runs the segment on x; acquires and releases whatever weights it needs. Throws on a
  // communication failure (autograd has no other error path).
  std::function<torch::Tensor(const torch::Tensor& x)> run;
  torch::Device device = torch::kCPU;
  bool restore_rng = false;
};

// Returns segment.run(x), recorded so that backward recomputes it; the trainable tensors
// the segment uses get their gradients accumulated during that backward.
// REQUIRES: x requires grad (else autograd never calls back); `segment` outlives the
// backward pass.
torch::Tensor RunRecomputed(RecomputeSegment* segment, const torch::Tensor& x);

}  // namespace bakeoff::trainer
