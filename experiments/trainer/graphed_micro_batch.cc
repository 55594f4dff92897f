#include "experiments/trainer/graphed_micro_batch.h"

#include <chrono>
#include <stdexcept>

#include "experiments/trainer/lora_model.h"
#include "experiments/trainer/torch_compat.h"
#include "experiments/trainer/zero_optimizer.h"

namespace bakeoff::trainer {
namespace {

class CudaStepGraph final : public StepGraph {
 public:
  explicit CudaStepGraph(const torch::Device& device) : graph_(device) {}
  void Warmup(const std::function<void()>& body) override { graph_.Warmup(body); }
  void Capture(const std::function<void()>& body) override { graph_.Capture(body); }
  void Replay() override { graph_.Replay(); }

 private:
  compat::CudaGraph graph_;
};

std::string Shape(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

}  // namespace

std::function<torch::Tensor(const torch::Tensor&)> MicroBatchForwardBackward(LoraModel* model,
                                                                             ZeroOptimizer* optimizer,
                                                                             int64_t grad_accum) {
  return [model, optimizer, grad_accum](const torch::Tensor& tokens) {
    auto loss = model->Loss(tokens);
    optimizer->BeforeBackward();
    (loss / static_cast<double>(grad_accum)).backward();
    return loss.detach();
  };
}

std::unique_ptr<StepGraph> MakeCudaStepGraph(const torch::Device& device) {
  return std::make_unique<CudaStepGraph>(device);
}

GraphedMicroBatch::GraphedMicroBatch(std::unique_ptr<StepGraph> graph,
                                     std::function<torch::Tensor(const torch::Tensor&)> forward_backward)
    : graph_(std::move(graph)), forward_backward_(std::move(forward_backward)) {}

torch::Tensor GraphedMicroBatch::Run(const torch::Tensor& tokens) {
  if (warmups_ < kWarmupMicroBatches) {
    torch::Tensor loss;
    graph_->Warmup([&] { loss = forward_backward_(tokens); });
    ++warmups_;
    return loss;
  }
  if (!captured_) {
    // The graph reads its input from this buffer and writes its loss to static_loss_,
    // at the addresses the capture saw.
    static_tokens_ = tokens.clone();
    const auto start = std::chrono::steady_clock::now();
    graph_->Capture([this] { static_loss_ = forward_backward_(static_tokens_); });
    capture_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    captured_ = true;
  } else {
    if (!tokens.sizes().equals(static_tokens_.sizes())) {
      throw std::runtime_error("cudagraph: micro-batch shape " + Shape(tokens) + " differs from the captured " +
                               Shape(static_tokens_) + "; a CUDA graph replays fixed shapes");
    }
    static_tokens_.copy_(tokens);
  }
  graph_->Replay();
  ++replays_;
  return static_loss_;
}

nlohmann::json GraphedMicroBatch::Evidence() const {
  return {{"warmup_micro_batches", warmups_},
          {"captured", captured_},
          {"replays", replays_},
          {"capture_s", capture_s_}};
}

}  // namespace bakeoff::trainer
