// GraphedMicroBatch's control flow on a CPU, with a graph that behaves as a CUDA graph
// does (capture records and runs nothing; replay reruns what was recorded on the same
// buffers): warm-up runs, one capture, replays over the static input, and gradients that
// accumulate exactly as the eager step's. The CUDA graph itself needs a GPU (bench/gpu).
#include "experiments/trainer/graphed_micro_batch.h"

#include <gtest/gtest.h>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/lora_model.h"
#include "experiments/trainer/zero_optimizer.h"

namespace bakeoff::trainer {
namespace {

class DeferringGraph : public StepGraph {
 public:
  explicit DeferringGraph(int* captures) : captures_(captures) {}
  void Warmup(const std::function<void()>& body) override { body(); }
  void Capture(const std::function<void()>& body) override {
    ++*captures_;
    recorded_ = body;
  }
  void Replay() override { recorded_(); }

 private:
  int* captures_;
  std::function<void()> recorded_;
};

TrainerConfig Small() {
  TrainerConfig c{.seq_len = 8, .micro_batch = 2, .grad_accum = 4, .lora_targets = {"q", "v", "down"}, .threads = 1};
  EXPECT_TRUE(FinalizeConfig(&c).ok());
  return c;
}

torch::Tensor Tokens(const TrainerConfig& c, int64_t index, int64_t seq_len) {
  auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(100 + index));
  return torch::randint(c.dims.vocab, {c.micro_batch, seq_len + 1}, gen, torch::kInt64);
}

// Trains `steps` optimizer steps of grad_accum micro-batches; returns every micro-batch's
// loss, and the adapters after each step.
struct Trajectory {
  std::vector<double> losses;
  std::vector<torch::Tensor> adapters;
};
Trajectory Train(const TrainerConfig& c, int steps, bool graphed_mode, int* captures = nullptr,
                 nlohmann::json* evidence = nullptr) {
  LocalCommunicator comm;
  LoraModel model(c, torch::kCPU, &comm);
  ZeroOptimizer optimizer(c, &model.adapters(), &comm);
  const auto forward_backward = MicroBatchForwardBackward(&model, &optimizer, c.grad_accum);
  std::unique_ptr<GraphedMicroBatch> graphed;
  if (graphed_mode) graphed = std::make_unique<GraphedMicroBatch>(std::make_unique<DeferringGraph>(captures), forward_backward);
  Trajectory t;
  for (int step = 0; step < steps; ++step) {
    optimizer.BeginStep();
    for (int64_t micro = 0; micro < c.grad_accum; ++micro) {
      auto tokens = Tokens(c, step * c.grad_accum + micro, c.seq_len);
      auto loss = graphed ? graphed->Run(tokens) : forward_backward(tokens);
      EXPECT_TRUE(optimizer.AfterBackward().ok());
      t.losses.push_back(loss.item<double>());
    }
    EXPECT_TRUE(optimizer.Step(1e-2).ok());
    t.adapters.push_back(model.adapters().flat().clone());
  }
  if (evidence != nullptr && graphed) *evidence = graphed->Evidence();
  return t;
}

TEST(GraphedMicroBatchTest, ReplaysTrainExactlyAsTheEagerStepMicroBatchByMicroBatch) {
  const TrainerConfig c = Small();
  const Trajectory eager = Train(c, 3, false);
  int captures = 0;
  nlohmann::json evidence;
  const Trajectory graphed = Train(c, 3, true, &captures, &evidence);

  ASSERT_EQ(graphed.losses.size(), 12u);
  // Same operators on the same buffers: equal to the bit, warm-up and replays alike.
  EXPECT_EQ(graphed.losses, eager.losses);
  for (size_t step = 0; step < eager.adapters.size(); ++step) {
    EXPECT_TRUE(torch::equal(graphed.adapters[step], eager.adapters[step])) << "after step " << step;
  }
  // Each replay read its own micro-batch from the static buffer: no two losses repeat.
  EXPECT_EQ(std::set<double>(graphed.losses.begin(), graphed.losses.end()).size(), graphed.losses.size());
  EXPECT_EQ(captures, 1);
  EXPECT_EQ(evidence["warmup_micro_batches"], GraphedMicroBatch::kWarmupMicroBatches);
  EXPECT_EQ(evidence["captured"], true);
  EXPECT_EQ(evidence["replays"], 12 - GraphedMicroBatch::kWarmupMicroBatches);
}

TEST(GraphedMicroBatchTest, AMicroBatchOfAnotherShapeAfterCaptureIsRefusedWithBothShapes) {
  const TrainerConfig c = Small();
  int captures = 0;
  GraphedMicroBatch graphed(std::make_unique<DeferringGraph>(&captures),
                            [](const torch::Tensor& tokens) { return tokens.to(torch::kFloat32).mean(); });
  for (int i = 0; i <= GraphedMicroBatch::kWarmupMicroBatches; ++i) graphed.Run(Tokens(c, i, c.seq_len));
  ASSERT_TRUE(graphed.captured());
  try {
    graphed.Run(Tokens(c, 9, c.seq_len + 1));
    FAIL() << "a new shape replayed a graph captured for another";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 10] differs from the captured [2, 9]"), std::string::npos)
        << e.what();
  }
}

TEST(GraphedMicroBatchTest, FewerMicroBatchesThanTheWarmUpNeverCaptureAndSayTheGraphDidNotRun) {
  const TrainerConfig c = Small();
  int captures = 0;
  GraphedMicroBatch graphed(std::make_unique<DeferringGraph>(&captures),
                            [](const torch::Tensor& tokens) { return tokens.to(torch::kFloat32).mean(); });
  for (int i = 0; i < GraphedMicroBatch::kWarmupMicroBatches; ++i) graphed.Run(Tokens(c, i, c.seq_len));
  EXPECT_FALSE(graphed.captured());
  EXPECT_EQ(captures, 0);
  EXPECT_EQ(graphed.Evidence()["replays"], 0);
}

}  // namespace
}  // namespace bakeoff::trainer
