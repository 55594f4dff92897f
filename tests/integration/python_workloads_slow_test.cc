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

// A workload on the tiny model with 32 tokens a sequence, one warmup step and `steps`
// measured: `executor` (its lines, "" when an axis picks it), then `more` lines.
std::string TinyWorkload(const std::string& executor, int steps, const std::string& more) {
  return "workload:\n" + executor + "  model: tiny\n  seq_len: 32\n  warmup_steps: 1\n  steps: " +
         std::to_string(steps) + "\n" + more;
}
const std::string kTorchReference = "  executor: command\n  command: {template: torch-reference}\n";

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
  // Runs the one-repeat sweep `name` (`body`: its workload and axes, each attempt limited
  // to 15 minutes) with `bakeoff local` (two one-slot workers), expects exit code
  // `expected_code`, and returns the summaries. The workers use the default {cache},
  // where scripts/setup built DeepSpeed's op.
  // `workers`: `bakeoff local`'s --workers and --slots (a lockstep group of two-rank
  // trials needs one worker of two slots).
  std::map<std::string, std::vector<json>> RunLocal(const std::string& name, const std::string& body,
                                                    int expected_code = 0,
                                                    std::vector<std::string> workers = {"--workers", "2"}) {
    std::ofstream(dir_ / "sweep.yaml") << "name: " << name << "\n"
                                       << body << "repeats: 1\nlimits: {trial_timeout: 15m, max_attempts: 1}\n";
    std::vector<std::string> argv = {kBin + "/bakeoff", "local", (dir_ / "sweep.yaml").string(), "--db", db(),
                                     "--work-dir", (dir_ / "work").string(), "--output",
                                     (dir_ / "report.txt").string()};
    argv.insert(argv.end(), workers.begin(), workers.end());
    ProcessGuard local(argv, {}, (dir_ / "local.log").string());
    auto code = local.WaitExit(1200s);
    EXPECT_TRUE(code.has_value()) << "bakeoff local did not finish; see " << dir_;
    EXPECT_EQ(code.value_or(-1), expected_code) << "see " << dir_;
    return Summaries();
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

  // Variant `base` has `steps` losses (warmup and measured), and variant `other` the same
  // ones within `relative` of each.
  void ExpectSameLosses(const std::string& base, const std::string& other, std::size_t steps, double relative) {
    auto losses = Losses();
    ASSERT_EQ(losses[base].size(), steps) << "see " << dir_;
    for (const auto& [step, loss] : losses[base]) {
      ASSERT_TRUE(losses[other].count(step)) << other << " step " << step;
      EXPECT_NEAR(losses[other][step], loss, relative * std::abs(loss)) << other << " step " << step;
    }
  }
  // The measured turns of `variant`'s rank 0 (repeat 0), in step order.
  std::vector<std::int64_t> Turns(const std::string& variant) {
    std::vector<std::int64_t> turns;
    for (const auto& row : Query("SELECT m.turn FROM step_metrics m JOIN trials t ON t.id = m.trial_id WHERE "
                                 "m.rank = 0 AND m.phase = 'measure' AND t.variant_key = '" + variant +
                                 "' AND m.turn IS NOT NULL ORDER BY m.step")) {
      turns.push_back(row[0].get<std::int64_t>());
    }
    return turns;
  }
  // Both sides' measured steps took alternating turns, step for step.
  void ExpectAlternatingTurns(const std::string& a, const std::string& b, std::size_t steps) {
    const auto ta = Turns(a);
    const auto tb = Turns(b);
    ASSERT_EQ(ta.size(), steps) << a << "; see " << dir_;
    ASSERT_EQ(tb.size(), steps) << b << "; see " << dir_;
    for (std::size_t i = 0; i < steps; ++i) EXPECT_EQ(std::abs(ta[i] - tb[i]), 1) << "step " << i;
  }
  std::filesystem::path dir_;
};

TEST_F(PythonWorkloadsTest, TorchCompileAgainstEagerOnTwoRanksShowsGraphsALongerFirstStepAndTheSameLosses) {
  auto summaries = RunLocal("compile-vs-eager", TinyWorkload(kTorchReference, 6, "  world_size: 2\n") +
                                                     "parameters:\n"
                                                     "  compile_mode: {values: [eager, default]}\n"
                                                     "baseline: {compile_mode: eager}\n");
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
  ExpectSameLosses("compile_mode=eager", "compile_mode=default", 7, 0.01);
}

// order: lockstep through the reporting library (docs/lockstep.md): torch-reference's
// eager and compiled sides on the same two cores take turns step by step, and the
// report's interval comes from the lockstep pair.
TEST_F(PythonWorkloadsTest, TorchReferenceSidesTakeLockstepTurnsOnTwoRanks) {
  auto summaries = RunLocal("lockstep-torch-reference",
                            TinyWorkload(kTorchReference, 6, "  world_size: 2\n  threads: 1\n") +
                                "parameters:\n"
                                "  compile_mode: {values: [eager, default]}\n"
                                "baseline: {compile_mode: eager}\n"
                                "order: lockstep\n",
                            0, {"--workers", "1", "--slots", "2"});
  ASSERT_EQ(summaries["compile_mode=eager"].size(), 1u) << "see " << dir_;
  ASSERT_EQ(summaries["compile_mode=default"].size(), 1u) << "see " << dir_;
  ExpectAlternatingTurns("compile_mode=eager", "compile_mode=default", 6);
  EXPECT_NE(testing::ReadFile(dir_ / "report.txt").find("lockstep pairs"), std::string::npos);
}

// The hf-peft workload (transformers, PEFT, DeepSpeed) takes turns too.
TEST_F(PythonWorkloadsTest, HfPeftSidesTakeLockstepTurnsOnTwoRanks) {
  auto summaries = RunLocal("lockstep-hf-peft",
                            TinyWorkload("  executor: command\n  command: {template: hf-peft}\n", 4,
                                         "  world_size: 2\n  threads: 1\n  lora: {rank: 4, targets: [q, v]}\n") +
                                "parameters:\n"
                                "  zero_stage: {values: [0, 1]}\n"
                                "baseline: {zero_stage: 0}\n"
                                "order: lockstep\n",
                            0, {"--workers", "1", "--slots", "2"});
  ASSERT_EQ(summaries["zero_stage=0"].size(), 1u) << "see " << dir_;
  ASSERT_EQ(summaries["zero_stage=1"].size(), 1u) << "see " << dir_;
  ExpectAlternatingTurns("zero_stage=0", "zero_stage=1", 4);
}

TEST_F(PythonWorkloadsTest, ReduceOverheadOnACpuIsReportedAsFallenBackNeverAsCudaGraphs) {
  auto summaries =
      RunLocal("reduce-overhead-cpu", TinyWorkload(kTorchReference, 3, "  compile_mode: reduce-overhead\n"));
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
  auto summaries = RunLocal("hf-peft-zero",
                            TinyWorkload("  executor: command\n  command: {template: hf-peft}\n", 4,
                                         "  precision: bf16\n"
                                         "  world_size: 2\n"
                                         "  threads: 1\n"
                                         "  lora: {rank: 4, targets: [q, v]}\n") +
                                "parameters:\n"
                                "  zero_stage: {values: [0, 1, 2, 3]}\n"
                                "  offload: {values: [none, optimizer]}\n"
                                "exclude:\n"
                                "  - {zero_stage: 0, offload: optimizer}\n"
                                "  - {zero_stage: 1, offload: optimizer}\n"
                                "  - {zero_stage: 3, offload: optimizer}\n"
                                "baseline: {zero_stage: 0, offload: none}\n",
                            /*expected_code=*/4);  // the offload trial ends unsupported
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
  for (int stage : {1, 2, 3}) {
    ExpectSameLosses("zero_stage=0,offload=none", "zero_stage=" + std::to_string(stage) + ",offload=none", 5, 0.01);
  }
}

// One sweep compares executors: the native trainer (LibTorch C++) and torch-reference
// (the same model, weights, data and step in plain PyTorch) on two ranks. Both succeed
// and train the same loss curve, step for step.
TEST_F(PythonWorkloadsTest, AnExecutorAxisComparesTheNativeTrainerWithTorchReferenceAtTheSameLosses) {
  auto summaries = RunLocal("native-vs-python", TinyWorkload("", 6,
                                                              "  world_size: 2\n"
                                                              "  threads: 1\n"
                                                              "  lora: {rank: 4, targets: [q, v, down]}\n") +
                                                     "parameters:\n"
                                                     "  executor: {values: [lora, torch-reference]}\n"
                                                     "baseline: {executor: lora}\n");
  ASSERT_EQ(summaries["executor=lora"].size(), 1u) << "see " << dir_;
  ASSERT_EQ(summaries["executor=torch-reference"].size(), 1u) << "see " << dir_;
  EXPECT_EQ(summaries["executor=torch-reference"][0]["applied"].value("compile_mode", ""), "eager");
  ExpectSameLosses("executor=lora", "executor=torch-reference", 7, 1e-4);
}

}  // namespace
}  // namespace bakeoff
