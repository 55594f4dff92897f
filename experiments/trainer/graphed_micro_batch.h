// GraphedMicroBatch: compile_mode `cudagraph` and `jit+cudagraph`. One micro-batch's
// forward and backward run eagerly for the first few micro-batches (warm-up: lazy
// initialization, and TorchScript's profiling runs under jit), are then captured once as
// a CUDA graph over a static input buffer, and every later micro-batch copies its tokens
// into that buffer and replays the graph: one launch instead of thousands. The optimizer
// step and its collectives run outside the graph (docs/compile-modes.md).
// The graph backend is an interface so the control flow is testable on a CPU.
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

namespace bakeoff::trainer {

class LoraModel;
class ZeroOptimizer;

// One micro-batch's forward and backward, as the training step runs it eagerly and as a
// GraphedMicroBatch captures it: `model`'s loss on the tokens, the optimizer's hook before
// backward, and backward of the loss scaled by 1/`grad_accum` (gradients accumulate over
// the step's micro-batches). Returns the unscaled loss, detached. `model` and `optimizer`
// must outlive the function.
std::function<torch::Tensor(const torch::Tensor&)> MicroBatchForwardBackward(LoraModel* model,
                                                                             ZeroOptimizer* optimizer,
                                                                             int64_t grad_accum);

// What a captured graph must do (compat::CudaGraph on a GPU; a deferring fake in tests).
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Runs `body` now, as the capture stream would.
  virtual void Warmup(const std::function<void()>& body) = 0;
  // Records `body` without running it; called once.
  virtual void Capture(const std::function<void()>& body) = 0;
  // Runs what was recorded, reading the buffers `body` read and writing those it wrote.
  virtual void Replay() = 0;
};

// A StepGraph on a CUDA device (throws std::logic_error in a build without CUDA).
std::unique_ptr<StepGraph> MakeCudaStepGraph(const torch::Device& device);

class GraphedMicroBatch {
 public:
  // PyTorch's make_graphed_callables warms up 3 times; so do we.
  static constexpr int kWarmupMicroBatches = 3;

  // `forward_backward(tokens)` runs one micro-batch's forward and backward (gradients
  // accumulate into buffers that stay put) and returns its detached loss.
  GraphedMicroBatch(std::unique_ptr<StepGraph> graph,
                    std::function<torch::Tensor(const torch::Tensor&)> forward_backward);

  // Runs forward and backward of `tokens`; returns the loss, a tensor the next Run
  // overwrites (read it first). Every micro-batch after the warm-up must have the
  // captured shape: throws std::runtime_error otherwise.
  torch::Tensor Run(const torch::Tensor& tokens);

  // For the summary's applied.cuda_graph: warm-up runs, capture, replays, capture seconds.
  nlohmann::json Evidence() const;
  bool captured() const { return captured_; }

 private:
  std::unique_ptr<StepGraph> graph_;
  std::function<torch::Tensor(const torch::Tensor&)> forward_backward_;
  torch::Tensor static_tokens_;
  torch::Tensor static_loss_;
  int64_t warmups_ = 0;
  int64_t replays_ = 0;
  bool captured_ = false;
  double capture_s_ = 0;
};

}  // namespace bakeoff::trainer
