// The stack users run, through the public command (`bakeoff local`) and the shipped
// allowlist (experiments/executors.yaml), on two CPU ranks: torch.compile against eager
// with torch-reference (graphs, a longer first step, the same losses), reduce-overhead on
// a CPU reported as fallen back (never as CUDA graphs that ran), and hf-peft (a
// transformers Llama, PEFT LoRA, DeepSpeed) at ZeRO 0-3 with offload ending unsupported, and one sweep comparing the
// native trainer with torch-reference at the same losses. Needs the project's
// Python environment (scripts/setup). Slow: torch.compile compiles on 2 cores.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "metrics/store/read_only_query.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::ProcessGuard;

const std::string kBin = BAKEOFF_BINARY_DIR;

class PythonWorkloadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/opt/bakeoff/venv/bin/python") && std::getenv("BAKEOFF_VENV") == nullptr) {
      GTEST_SKIP() << "no project Python environment; run scripts/setup";
    }
    dir_ = testing::FreshTestDir("bakeoff-python");
  }
  void TearDown() override {
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Runs `yaml` with `bakeoff local` (two one-slot workers) and returns its exit code.
  // The workers use the default {cache}, where scripts/setup built DeepSpeed's op.
  int RunLocal(const std::string& yaml, std::chrono::seconds limit) {
    std::ofstream(dir_ / "sweep.yaml") << yaml;
    ProcessGuard local({kBin + "/bakeoff", "local", (dir_ / "sweep.yaml").string(), "--workers", "2", "--db", db(),
                        "--work-dir", (dir_ / "work").string(), "--output", (dir_ / "report.txt").string()},
                       {}, (dir_ / "local.log").string());
    auto code = local.WaitExit(limit);
    EXPECT_TRUE(code.has_value()) << "bakeoff local did not finish; see " << dir_;
    return code.value_or(-1);
  }
  std::vector<std::vector<json>> Query(const std::string& sql) {
    auto result = metrics::RunReadOnlyQuery(db(), sql);
    EXPECT_TRUE(result.ok()) << sql << ": " << result.status().ToString();
    return result.ok() ? result->rows : std::vector<std::vector<json>>{};
  }
  std::string db() const { return (dir_ / "results.db").string(); }
  // variant key -> rank 0's summary_json of each succeeded trial.
  std::map<std::string, std::vector<json>> Summaries() {
    std::map<std::string, std::vector<json>> out;
    for (const auto& row : Query("SELECT t.variant_key, s.summary_json FROM trial_summaries s JOIN trials t "
                                 "ON t.id = s.trial_id WHERE s.rank = 0 AND t.outcome = 'succeeded'")) {
      out[row[0].get<std::string>()].push_back(json::parse(row[1].get<std::string>()));
    }
    return out;
  }
  // variant key -> step -> rank 0's loss (the first repeat).
  std::map<std::string, std::map<int, double>> Losses() {
    std::map<std::string, std::map<int, double>> out;
    for (const auto& row : Query("SELECT t.variant_key, m.step, m.loss FROM step_metrics m JOIN trials t "
                                 "ON t.id = m.trial_id WHERE m.rank = 0 AND t.repeat = 0")) {
      out[row[0].get<std::string>()][row[1].get<int>()] = row[2].get<double>();
    }
    return out;
  }

  std::filesystem::path dir_;
};

TEST_F(PythonWorkloadsTest, TorchCompileAgainstEagerOnTwoRanksShowsGraphsALongerFirstStepAndTheSameLosses) {
  const int code = RunLocal(
      "name: compile-vs-eager\n"
      "workload:\n"
      "  executor: command\n"
      "  command: {template: torch-reference}\n"
      "  model: tiny\n"
      "  seq_len: 32\n"
      "  warmup_steps: 1\n"
      "  steps: 6\n"
      "  world_size: 2\n"
      "parameters:\n"
      "  compile_mode: {values: [eager, default]}\n"
      "baseline: {compile_mode: eager}\n"
      "repeats: 1\n"
      "limits: {trial_timeout: 15m, max_attempts: 1}\n",
      1200s);
  EXPECT_EQ(code, 0) << "see " << dir_;
  auto summaries = Summaries();
  ASSERT_EQ(summaries["compile_mode=eager"].size(), 1u);
  ASSERT_EQ(summaries["compile_mode=default"].size(), 1u);
  const json& eager = summaries["compile_mode=eager"][0];
  const json& compiled = summaries["compile_mode=default"][0];
  EXPECT_EQ(compiled["applied"]["compile_mode"], "default");
  EXPECT_FALSE(compiled["applied"].value("fell_back", false)) << compiled["applied"];
  EXPECT_GE(compiled["compile"].value("graphs", 0), 1) << compiled["compile"];
  EXPECT_GT(compiled["first_step_s"].get<double>(), eager["first_step_s"].get<double>());
  EXPECT_EQ(eager["environment"]["torch_version"].get<std::string>().substr(0, 2), "2.");
  // Same seed, same data: the compiled losses are eager's within 1%.
  auto losses = Losses();
  ASSERT_EQ(losses["compile_mode=eager"].size(), 7u);
  for (const auto& [step, loss] : losses["compile_mode=eager"]) {
    ASSERT_TRUE(losses["compile_mode=default"].count(step));
    EXPECT_NEAR(losses["compile_mode=default"][step], loss, 0.01 * std::abs(loss)) << "step " << step;
  }
}

TEST_F(PythonWorkloadsTest, ReduceOverheadOnACpuIsReportedAsFallenBackNeverAsCudaGraphs) {
  const int code = RunLocal(
      "name: reduce-overhead-cpu\n"
      "workload:\n"
      "  executor: command\n"
      "  command: {template: torch-reference}\n"
      "  model: tiny\n"
      "  seq_len: 32\n"
      "  warmup_steps: 1\n"
      "  steps: 3\n"
      "  compile_mode: reduce-overhead\n"
      "repeats: 1\n"
      "limits: {trial_timeout: 15m, max_attempts: 1}\n",
      1200s);
  EXPECT_EQ(code, 0) << "see " << dir_;
  auto summaries = Summaries();
  ASSERT_EQ(summaries["default"].size(), 1u) << "see " << dir_;
  const json& applied = summaries["default"][0]["applied"];
  EXPECT_TRUE(applied.value("cuda_graphs_requested", false)) << applied;
  EXPECT_FALSE(applied.value("cuda_graphs_ran", true)) << applied;
  EXPECT_TRUE(applied.value("fell_back", false)) << applied;
  EXPECT_NE(applied.value("fallback_reason", "").find("CUDA graphs did not run"), std::string::npos) << applied;
  // The report flags it rather than comparing it.
  EXPECT_NE(testing::ReadFile(dir_ / "report.txt").find("CUDA graphs did not run"), std::string::npos);
}

// Every ZeRO stage runs on a CPU (DeepSpeed's CPU accelerator, Gloo); optimizer offload
// ends unsupported with the reason (the partitions are in host memory already).
TEST_F(PythonWorkloadsTest, HfPeftRunsEveryDeepSpeedZeroStageOnTwoRanksAndOffloadEndsUnsupported) {
  const int code = RunLocal(
      "name: hf-peft-zero\n"
      "workload:\n"
      "  executor: command\n"
      "  command: {template: hf-peft}\n"
      "  model: tiny\n"
      "  seq_len: 32\n"
      "  warmup_steps: 1\n"
      "  steps: 4\n"
      "  precision: bf16\n"
      "  world_size: 2\n"
      "  threads: 1\n"
      "  lora: {rank: 4, targets: [q, v]}\n"
      "parameters:\n"
      "  zero_stage: {values: [0, 1, 2, 3]}\n"
      "  offload: {values: [none, optimizer]}\n"
      "exclude:\n"
      "  - {zero_stage: 0, offload: optimizer}\n"
      "  - {zero_stage: 1, offload: optimizer}\n"
      "  - {zero_stage: 3, offload: optimizer}\n"
      "baseline: {zero_stage: 0, offload: none}\n"
      "repeats: 1\n"
      "limits: {trial_timeout: 15m, max_attempts: 1}\n",
      1200s);
  EXPECT_EQ(code, 4) << "the offload trial ends unsupported; see " << dir_;
  auto summaries = Summaries();
  for (int stage : {0, 1, 2, 3}) {
    const std::string key = "zero_stage=" + std::to_string(stage) + ",offload=none";
    ASSERT_EQ(summaries[key].size(), 1u) << key << "; see " << dir_;
    const json& s = summaries[key][0];
    EXPECT_EQ(s["applied"]["zero_stage"], stage);
    EXPECT_EQ(s["applied"]["precision"], "bf16");
    EXPECT_EQ(s["applied"]["lora_modules"], 4);  // q and v in each of tiny's 2 layers
    EXPECT_FALSE(s["environment"].value("deepspeed_version", "").empty());
  }
  auto offload = Query("SELECT outcome, reason FROM trials WHERE variant_key = 'zero_stage=2,offload=optimizer'");
  ASSERT_EQ(offload.size(), 1u);
  EXPECT_EQ(offload[0][0], "unsupported");
  EXPECT_NE(offload[0][1].get<std::string>().find("host memory already"), std::string::npos) << offload[0][1];
  // ZeRO partitions the optimizer (1, 2) and the weights (3); the losses stay ZeRO-0's.
  auto losses = Losses();
  const auto& base = losses["zero_stage=0,offload=none"];
  ASSERT_EQ(base.size(), 5u) << "see " << dir_;
  for (int stage : {1, 2, 3}) {
    const auto& other = losses["zero_stage=" + std::to_string(stage) + ",offload=none"];
    for (const auto& [step, loss] : base) {
      ASSERT_TRUE(other.count(step)) << "stage " << stage << " step " << step;
      EXPECT_NEAR(other.at(step), loss, 0.01 * std::abs(loss)) << "stage " << stage << " step " << step;
    }
  }
}

// One sweep compares executors: the native trainer (LibTorch C++) and torch-reference
// (the same model, weights, data and step in plain PyTorch) on two ranks. Both succeed
// and train the same loss curve, step for step.
TEST_F(PythonWorkloadsTest, AnExecutorAxisComparesTheNativeTrainerWithTorchReferenceAtTheSameLosses) {
  const int code = RunLocal(
      "name: native-vs-python\n"
      "workload:\n"
      "  model: tiny\n"
      "  seq_len: 32\n"
      "  warmup_steps: 1\n"
      "  steps: 6\n"
      "  world_size: 2\n"
      "  threads: 1\n"
      "  lora: {rank: 4, targets: [q, v, down]}\n"
      "parameters:\n"
      "  executor: {values: [lora, torch-reference]}\n"
      "baseline: {executor: lora}\n"
      "repeats: 1\n"
      "limits: {trial_timeout: 15m, max_attempts: 1}\n",
      1200s);
  EXPECT_EQ(code, 0) << "see " << dir_;
  auto summaries = Summaries();
  ASSERT_EQ(summaries["executor=lora"].size(), 1u) << "see " << dir_;
  ASSERT_EQ(summaries["executor=torch-reference"].size(), 1u) << "see " << dir_;
  EXPECT_EQ(summaries["executor=torch-reference"][0]["applied"].value("compile_mode", ""), "eager");
  auto losses = Losses();
  ASSERT_EQ(losses["executor=lora"].size(), 7u) << "see " << dir_;
  for (const auto& [step, loss] : losses["executor=lora"]) {
    ASSERT_TRUE(losses["executor=torch-reference"].count(step)) << "step " << step;
    EXPECT_NEAR(losses["executor=torch-reference"][step], loss, 1e-4 * std::abs(loss)) << "step " << step;
  }
}

}  // namespace
}  // namespace bakeoff
