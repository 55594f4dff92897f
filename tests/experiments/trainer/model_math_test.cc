// Numerical tests of the model's math and of the training step: LoRA identity at B = 0,
// adapter gradients against central finite differences, jit against eager for every
// compile scope, checkpointing against plain backward, and a learnable task.
#include "experiments/trainer/model_math.h"

#include <gtest/gtest.h>

#include <sstream>

#include "experiments/trainer/adapters.h"
#include "experiments/trainer/communicator.h"
#include "experiments/trainer/lora_model.h"
#include "experiments/trainer/trainer.h"
#include "experiments/trainer/unit_runner.h"

namespace bakeoff::trainer {
namespace {

ModelDims TinyDims() { return {.dim = 16, .layers = 1, .heads = 4, .kv_heads = 2, .ffn_dim = 24, .vocab = 11}; }

BlockWeights RandomBlock(const ModelDims& d, torch::ScalarType dtype) {
  BlockWeights w;
  auto opts = torch::TensorOptions().dtype(dtype);
  w.attn_norm = 1 + 0.1 * torch::randn({d.dim}, opts);
  w.mlp_norm = 1 + 0.1 * torch::randn({d.dim}, opts);
  for (int p = 0; p < kNumProjections; ++p) {
    ProjectionShape s = ProjectionShapeOf(d, LoraTargetNames()[p]);
    w.proj[p] = 0.3 * torch::randn({s.out, s.in}, opts);
  }
  return w;
}

std::array<LoraPair, kNumProjections> RandomLora(const ModelDims& d, int64_t rank,
                                                 torch::ScalarType dtype, bool zero_b) {
  std::array<LoraPair, kNumProjections> lora;
  auto opts = torch::TensorOptions().dtype(dtype);
  for (int p = 0; p < kNumProjections; ++p) {
    ProjectionShape s = ProjectionShapeOf(d, LoraTargetNames()[p]);
    lora[p].a = (0.3 * torch::randn({rank, s.in}, opts)).requires_grad_(true);
    lora[p].b = (zero_b ? torch::zeros({s.out, rank}, opts) : 0.3 * torch::randn({s.out, rank}, opts))
                    .requires_grad_(true);
  }
  return lora;
}

// One eager decoder block of TinyDims() with LoRA scale `lora_scale`, and what it runs
// on: attention tables for `seq_len` positions, a random batch of two inputs and random
// block weights, all in `dtype` (drawn in that order from the current seed).
struct TinyBlock {
  TinyBlock(double lora_scale, int64_t seq_len, torch::ScalarType dtype)
      : math({d, lora_scale, 0.0, true}, &runner),
        tables(MakeAttentionTables(d, seq_len, dtype, torch::kCPU)),
        x(torch::randn({2, seq_len, d.dim}, dtype)),
        w(RandomBlock(d, dtype)) {}

  // The block's output for x with the adapters `lora`.
  torch::Tensor Run(const std::array<LoraPair, kNumProjections>& lora) const { return math.Block(x, w, lora, tables); }

  const ModelDims d = TinyDims();
  UnitRunner runner{false, "full"};
  ModelMath math;
  AttentionTables tables;
  torch::Tensor x;
  BlockWeights w;
};

TEST(ModelMathTest, LoraWithZeroBLeavesTheBaseModelOutputUnchanged) {
  torch::manual_seed(1);
  TinyBlock block(2.0, 8, torch::kFloat32);
  const ModelDims& d = block.d;
  auto with_adapters = block.Run(RandomLora(d, 4, torch::kFloat32, /*zero_b=*/true));
  auto base = block.Run({});
  EXPECT_TRUE(torch::equal(with_adapters, base));
  // And a nonzero B does change it, so the comparison above can fail.
  auto changed = block.Run(RandomLora(d, 4, torch::kFloat32, false));
  EXPECT_FALSE(torch::allclose(changed, base));
}

TEST(ModelMathTest, AdapterGradientsMatchCentralFiniteDifferences) {
  torch::manual_seed(2);
  TinyBlock block(1.5, 6, torch::kFloat64);
  const ModelDims& d = block.d;
  auto lora = RandomLora(d, 3, torch::kFloat64, false);
  HeadWeights head{1 + 0.1 * torch::randn({d.dim}, torch::kFloat64), torch::randn({d.vocab, d.dim}, torch::kFloat64)};
  auto targets = torch::randint(d.vocab, {2, 6}, torch::kInt64);
  auto loss_fn = [&] { return block.math.HeadLoss(block.Run(lora), head, targets); };

  loss_fn().backward();
  const double eps = 1e-6;
  int checked = 0;
  for (int p = 0; p < kNumProjections; ++p) {
    for (torch::Tensor* param : {&lora[p].a, &lora[p].b}) {
      auto grad = param->grad().clone();
      auto flat = param->view({-1});
      // A handful of elements of every adapter matrix: every projection's path is checked.
      for (int64_t i = 0; i < flat.numel(); i += std::max<int64_t>(1, flat.numel() / 5)) {
        torch::NoGradGuard no_grad;
        const double saved = flat[i].item<double>();
        flat[i] = saved + eps;
        const double up = loss_fn().item<double>();
        flat[i] = saved - eps;
        const double down = loss_fn().item<double>();
        flat[i] = saved;
        const double numeric = (up - down) / (2 * eps);
        const double analytic = grad.view({-1})[i].item<double>();
        EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric))
            << LoraTargetNames()[p] << " element " << i;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 50);
}

std::vector<nlohmann::json> RunTrainerInProcess(TrainerConfig config, int* exit_code = nullptr) {
  EXPECT_TRUE(FinalizeConfig(&config).ok());
  std::stringstream out;
  EventWriter events(out);
  Trainer trainer(config, &events);
  const int code = trainer.Run();
  if (exit_code != nullptr) *exit_code = code;
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(out, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::vector<double> Losses(const std::vector<nlohmann::json>& events) {
  std::vector<double> losses;
  for (const auto& e : events) {
    if (e["event"] == "step") losses.push_back(e["loss"].get<double>());
  }
  return losses;
}

TrainerConfig SmallRun() {
  return {.seq_len = 16,
          .micro_batch = 2,
          .steps = 10,
          .warmup_steps = 0,
          .lora_targets = {"q", "k", "v", "o", "gate", "up", "down"},
          .lr = 1e-2,
          .threads = 1};
}

// SmallRun() in bf16 for `steps` steps, its matrix products run as `bf16_matmul` says.
TrainerConfig Bf16Run(int64_t steps, const std::string& bf16_matmul = "auto") {
  TrainerConfig c = SmallRun();
  c.precision = "bf16";
  c.steps = steps;
  c.bf16_matmul = bf16_matmul;
  return c;
}

TEST(TrainerNumericsTest, JitMatchesEagerLossTrajectoryForEveryScopeAndExecutor) {
  const auto eager = Losses(RunTrainerInProcess(SmallRun()));
  ASSERT_EQ(eager.size(), 10u);
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"full", "auto"}, {"attention", "auto"}, {"mlp", "auto"}, {"adapters", "auto"}, {"full", "profiling"}};
  for (const auto& [scope, executor] : runs) {
    TrainerConfig c = SmallRun();
    c.compile_mode = "jit";
    c.compile_scope = scope;
    c.jit_executor = executor;
    auto events = RunTrainerInProcess(c);
    const auto jit = Losses(events);
    ASSERT_EQ(jit.size(), eager.size()) << scope;
    // Stated tolerance: 1e-4 relative (fp32; symbolic autodiff may reorder reductions).
    for (size_t i = 0; i < jit.size(); ++i) {
      EXPECT_NEAR(jit[i], eager[i], 1e-4 * std::abs(eager[i])) << scope << "/" << executor << " step " << i;
    }
    const auto& applied = events.back()["applied"];
    EXPECT_EQ(applied["compile_mode"], "jit");
    EXPECT_EQ(applied["compile_scope"], scope);
    EXPECT_GE(applied["graphs"].get<int>(), 1) << scope;
    // Debian's LibTorch has no CPU fuser: the evidence must not claim fusion.
    EXPECT_EQ(applied["fusion_groups"].get<int>(), 0);
    EXPECT_EQ(applied["jit_executor"], executor == "auto" ? "legacy" : executor) << "auto on a CPU is legacy";
  }
}

TEST(TrainerNumericsTest, CheckpointingGivesTheSameGradientsEvenWithDropout) {
  TrainerConfig base = SmallRun();
  base.lora_dropout = 0.1;
  ASSERT_TRUE(FinalizeConfig(&base).ok());
  std::vector<torch::Tensor> grads[2];
  for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
    TrainerConfig c = base;
    c.grad_checkpointing = checkpointing == 1;
    LocalCommunicator comm;
    LoraModel model(c, torch::kCPU, &comm);
    ASSERT_EQ(model.recompute(), checkpointing == 1);
    torch::manual_seed(7);
    auto tokens = torch::randint(c.dims.vocab, {2, c.seq_len + 1}, torch::kInt64);
    model.Loss(tokens).backward();
    for (int layer = 0; layer < c.dims.layers; ++layer) {
      for (const auto& leaf : model.adapters().BlockLeaves(layer)) grads[checkpointing].push_back(leaf.grad().clone());
    }
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  double largest = 0;
  for (size_t i = 0; i < grads[0].size(); ++i) {
    largest = std::max(largest, grads[0][i].abs().max().item<double>());
    EXPECT_TRUE(torch::allclose(grads[0][i], grads[1][i], 1e-5, 1e-7)) << "leaf " << i;
  }
  EXPECT_GT(largest, 0.0);
}

TEST(TrainerNumericsTest, LossFallsOnALearnableTask) {
  TrainerConfig c = SmallRun();
  c.dataset = "repeat";
  c.steps = 40;
  const auto losses = Losses(RunTrainerInProcess(c));
  ASSERT_EQ(losses.size(), 40u);
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << losses.front() << " -> " << losses.back();
}

TEST(TrainerNumericsTest, Bf16TrainsWithFp32MasterAdapters) {
  TrainerConfig c = Bf16Run(20);
  c.dataset = "repeat";
  auto events = RunTrainerInProcess(c);
  const auto losses = Losses(events);
  ASSERT_EQ(losses.size(), 20u);
  EXPECT_LT(losses.back(), losses.front());
  EXPECT_EQ(events.back()["applied"]["precision"], "bf16");
  // Trainable bytes are fp32 masters: 4 bytes a parameter.
  EXPECT_EQ(events.back()["trainable_bytes"].get<int64_t>() % 4, 0);
}

TEST(ModelMathTest, MatmulViaFp32MatchesTheWidenedProductAndItsGradients) {
  torch::manual_seed(3);
  struct Case {
    std::vector<int64_t> a, b;
    bool transpose_b;  // b given as a transposed view, as projections pass w.t()
  };
  // A projection ([B, T, in] x [out, in]^T), attention's broadcast (q against k with one
  // KV head per group), probs x v, and a plain 2-D product.
  for (const Case& c : {Case{{2, 5, 8}, {6, 8}, true}, Case{{2, 2, 3, 5, 4}, {2, 2, 1, 4, 5}, false},
                        Case{{2, 2, 3, 5, 5}, {2, 2, 1, 5, 4}, false}, Case{{5, 8}, {8, 3}, false}}) {
    auto a = torch::randn(c.a).to(torch::kBFloat16).requires_grad_(true);
    auto b_leaf = torch::randn(c.b).to(torch::kBFloat16).requires_grad_(true);
    auto b = c.transpose_b ? b_leaf.t() : b_leaf;
    auto got = MatmulViaFp32(a, b);
    auto upstream = torch::randn(got.sizes()).to(torch::kBFloat16);
    auto got_grads = torch::autograd::grad({got}, {a, b_leaf}, {upstream});

    auto a2 = a.detach().requires_grad_(true);
    auto b2_leaf = b_leaf.detach().requires_grad_(true);
    auto b2 = c.transpose_b ? b2_leaf.t() : b2_leaf;
    auto want = torch::matmul(a2.to(torch::kFloat32), b2.to(torch::kFloat32)).to(torch::kBFloat16);
    auto want_grads = torch::autograd::grad({want}, {a2, b2_leaf}, {upstream});

    EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(got.sizes(), want.sizes());
    // Same fp32 arithmetic; only summation order may differ (one bf16 rounding step).
    EXPECT_TRUE(torch::allclose(got.to(torch::kFloat32), want.to(torch::kFloat32), 1e-2, 1e-2));
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(got_grads[i].sizes(), want_grads[i].sizes()) << i;
      EXPECT_EQ(got_grads[i].scalar_type(), torch::kBFloat16) << i;
      EXPECT_TRUE(torch::allclose(got_grads[i].to(torch::kFloat32), want_grads[i].to(torch::kFloat32), 1e-2, 1e-2))
          << "operand " << i << " of a " << c.a.size() << "-d product";
    }
  }
}

TEST(TrainerNumericsTest, Bf16ThroughTheFp32BlasMatchesNativeBf16Training) {
  TrainerConfig c = Bf16Run(5, "native");
  auto native = RunTrainerInProcess(c);
  c.bf16_matmul = "fp32";
  auto via_fp32 = RunTrainerInProcess(c);
  const auto a = Losses(native), b = Losses(via_fp32);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  // Both accumulate in fp32 and round to bf16; the order of the sums differs, so allow a
  // few bf16 steps (eps 2^-8) of drift over five optimizer steps.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 0.02 * std::abs(a[i])) << "step " << i;
  EXPECT_EQ(native.back()["applied"]["bf16_matmul"], "native");
  EXPECT_EQ(via_fp32.back()["applied"]["bf16_matmul"], "fp32");
  EXPECT_EQ(via_fp32.back()["applied"]["decisions"]["bf16_matmul"]["reason"], "requested");
}

TEST(TrainerNumericsTest, AutoBf16IsCalibratedOnThisMachineAndRecordedWithItsReason) {
  TrainerConfig c = Bf16Run(1, "auto");
  auto events = RunTrainerInProcess(c);
  ASSERT_FALSE(events.empty());
  const auto& summary = events.back();
  ASSERT_EQ(summary["event"], "summary") << summary.dump();
  const auto& decision = summary["applied"]["decisions"]["bf16_matmul"];
  const std::string value = decision["value"];
  EXPECT_TRUE(value == "native" || value == "fp32") << value;
  EXPECT_EQ(summary["applied"]["bf16_matmul"], value) << "the path that ran is the one decided";
  EXPECT_NE(decision["reason"].get<std::string>().find("calibrated"), std::string::npos) << decision.dump();
  EXPECT_FALSE(summary["applied"]["decisions"]["threads"]["reason"].get<std::string>().empty());
  const auto& env = summary["environment"];
  EXPECT_FALSE(env["torch_version"].get<std::string>().empty());
  EXPECT_TRUE(env["cpu_flags"].is_array());
  EXPECT_TRUE(env["gpu_model"].is_null()) << "a CPU trial has no GPU";
  EXPECT_NE(env["bakeoff_version"].get<std::string>().find('+'), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::trainer
