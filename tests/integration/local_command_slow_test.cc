// `bakeoff local` runs a sweep on this machine end to end and leaves results.db.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "metrics/store/results_store.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"
#include "tests/integration/test_sweeps.h"  // kProbeCatalogHead

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::ProcessGuard;

const std::string kBin = BAKEOFF_BINARY_DIR;

class LocalCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-local");
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  // The run's results database, read-only (as `bakeoff report` opens it).
  static Result<std::unique_ptr<metrics::ResultsReader>> OpenResults(const std::string& db) {
    return metrics::ResultsReader::Open(db);
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  // FILE: a sweep NAME of micro_batch 1 (the baseline) against 2 on the tiny model, one
  // warm-up step and `steps` measured ones; `axes` adds parameter lines, `tail` the
  // top-level lines after the baseline.
  std::string WriteTinySweep(const std::string& file, const std::string& name, const std::string& tail,
                             int steps = 2, const std::string& axes = "") {
    return Write(file, "name: " + name + "\nworkload: {executor: lora, model: tiny, seq_len: 16, warmup_steps: 1, steps: " +
                           std::to_string(steps) + "}\nparameters:\n  micro_batch: {values: [1, 2]}\n" + axes +
                           "baseline: {micro_batch: 1}\n" + tail);
  }
  std::filesystem::path dir_;
};

TEST_F(LocalCommandTest, RunsTheSweepAndLeavesTheDatabase) {
  const std::string sweep = WriteTinySweep("sweep.yaml", "local-test", "repeats: 2\n", 2, "  world_size: {value: 2}\n");
  const std::string db = (dir_ / "results.db").string();
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--workers", "2", "--db", db, "--trainer",
                      kBin + "/bakeoff-fake-trainer", "--work-dir", (dir_ / "work").string(), "--output",
                      (dir_ / "report.txt").string()},
                     {}, (dir_ / "local.log").string());
  auto code = local.WaitExit(180s);
  ASSERT_TRUE(code.has_value()) << "bakeoff local did not finish";
  EXPECT_EQ(*code, 0) << "see " << (dir_ / "local.log");
  auto store = OpenResults(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto found = (*store)->FindSweep("local-test");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->state, metrics::SweepState::kFinished);
  auto trials = (*store)->ListTrialResults(found->id);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 4u);
  for (const auto& t : *trials) {
    EXPECT_EQ(t.trial.outcome, metrics::Outcome::kSucceeded) << t.trial.reason;
    EXPECT_FALSE(t.summaries.empty());
  }
  // Issue 29: the screen is the progress line's. Its first line is the page's address
  // (issue 31), its second names the log file, which holds the coordinator's and
  // workers' lines; none of them reaches the screen.
  const std::string screen = testing::ReadFile(dir_ / "local.log");
  const std::string log_path = (dir_ / "results.log").string();
  EXPECT_EQ(screen.rfind("bakeoff local: watch it at http://127.0.0.1:", 0), 0u) << screen;
  EXPECT_NE(screen.find("\nbakeoff local: logs in " + log_path), std::string::npos) << screen;
  EXPECT_EQ(screen.find("INFO  coordinator:"), std::string::npos) << screen;
  EXPECT_EQ(screen.find("INFO  worker:"), std::string::npos) << screen;
  const std::string log = testing::ReadFile(log_path);
  EXPECT_NE(log.find(" INFO  coordinator: sweep submitted id="), std::string::npos) << log;
  EXPECT_NE(log.find(" INFO  worker: registered worker=local-1"), std::string::npos) << log;
  EXPECT_NE(log.find(" INFO  worker: finished trial="), std::string::npos) << log;
}

TEST_F(LocalCommandTest, VerboseShowsTheLogLinesOnTheScreenToo) {
  const std::string sweep = WriteTinySweep("sweep.yaml", "local-verbose", "repeats: 1\n");
  const std::string log_path = (dir_ / "named.log").string();
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "-v", "--log-file", log_path, "--db",
                      (dir_ / "results.db").string(), "--trainer", kBin + "/bakeoff-fake-trainer", "--output",
                      (dir_ / "report.txt").string()},
                     {}, (dir_ / "local.log").string());
  auto code = local.WaitExit(120s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  const std::string screen = testing::ReadFile(dir_ / "local.log");
  EXPECT_EQ(screen.rfind("bakeoff local: watch it at http://127.0.0.1:", 0), 0u) << screen;
  EXPECT_NE(screen.find("\nbakeoff local: logs in " + log_path + "\n"), std::string::npos) << screen;
  EXPECT_NE(screen.find(" INFO  coordinator: sweep submitted id="), std::string::npos) << screen;
  EXPECT_NE(testing::ReadFile(log_path).find(" INFO  coordinator: sweep submitted id="), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "results.log")) << "--log-file replaces the default";
}

// Issue 29: Ctrl-C cancels the sweep, keeps what finished, prints the report of what
// finished and exits 130.
TEST_F(LocalCommandTest, InterruptCancelsKeepsWhatFinishedPrintsTheReportAndExits130) {
  const std::string sweep = WriteTinySweep("sweep.yaml", "local-interrupted", "repeats: 2\n");
  const std::string db = (dir_ / "results.db").string();
  // Every micro_batch 2 trial hangs until it is cancelled.
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--db", db, "--trainer", kBin + "/bakeoff-fake-trainer",
                      "--output", (dir_ / "report.txt").string()},
                     {"FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH=2=hang"}, (dir_ / "local.log").string());
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool one_succeeded = false;
  while (!one_succeeded && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
    auto store = OpenResults(db);
    if (!store.ok()) continue;
    auto found = (*store)->FindSweep("local-interrupted");
    if (!found.ok()) continue;
    auto trials = (*store)->ListTrialResults(found->id);
    if (!trials.ok()) continue;
    for (const auto& t : *trials) one_succeeded = one_succeeded || t.trial.outcome == metrics::Outcome::kSucceeded;
  }
  ASSERT_TRUE(one_succeeded) << testing::ReadFile(dir_ / "local.log");
  local.Signal(SIGINT);
  auto code = local.WaitExit(60s);
  ASSERT_TRUE(code.has_value()) << "bakeoff local did not end after Ctrl-C";
  EXPECT_EQ(*code, 130) << testing::ReadFile(dir_ / "local.log");
  auto store = OpenResults(db);
  ASSERT_TRUE(store.ok());
  auto found = (*store)->FindSweep("local-interrupted");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->state, metrics::SweepState::kCancelled);
  auto trials = (*store)->ListTrialResults(found->id);
  ASSERT_TRUE(trials.ok());
  int succeeded = 0;
  for (const auto& t : *trials) succeeded += t.trial.outcome == metrics::Outcome::kSucceeded;
  EXPECT_GE(succeeded, 1) << "what finished is kept";
  const std::string report = testing::ReadFile(dir_ / "report.txt");
  EXPECT_NE(report.find("local-interrupted"), std::string::npos) << report;
  EXPECT_NE(testing::ReadFile(dir_ / "local.log").find("interrupted; cancelling the sweep"), std::string::npos);
}

TEST_F(LocalCommandTest, InvalidSweepExitsWithUsageCode) {
  const std::string sweep = Write("bad.yaml", "name: bad\nparameters: {nonsense_axis: {values: [1, 2]}}\n");
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--db", (dir_ / "results.db").string(), "--trainer",
                      kBin + "/bakeoff-fake-trainer"},
                     {}, (dir_ / "local.log").string());
  auto code = local.WaitExit(60s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  const std::string text = testing::ReadFile(dir_ / "local.log");
  EXPECT_NE(text.find("nonsense_axis"), std::string::npos) << text;
}

// Issue 33: a sweep no local worker could ever place is refused at once, with its
// reason, and leaves no sweep behind (it used to wait "queued 4 · remaining ?" forever).
TEST_F(LocalCommandTest, ACudaSweepOnCpuWorkersIsRefusedAtOnceWithItsReason) {
  const std::string sweep = WriteTinySweep("cuda.yaml", "cuda-here", "resources: {device: cuda}\n");
  const std::string db = (dir_ / "results.db").string();
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--db", db, "--trainer", kBin + "/bakeoff-fake-trainer"},
                     {}, (dir_ / "local.log").string());
  auto code = local.WaitExit(60s);
  ASSERT_TRUE(code.has_value()) << "bakeoff local waited instead of refusing";
  EXPECT_EQ(*code, 2);
  const std::string text = testing::ReadFile(dir_ / "local.log");
  EXPECT_NE(text.find("resources.device is cuda"), std::string::npos) << text;
  EXPECT_EQ(text.find("trials on"), std::string::npos) << "no sweep was stored: " << text;
}

// Issue 29: the main job runs the Python stack through a command template, so
// `bakeoff local` starts its workers without a trainer when no variant needs one (the
// main job builds only `bakeoff`); a sweep that does need it is still refused at once.
TEST_F(LocalCommandTest, ACommandTemplateSweepRunsWithNoTrainerBuiltAndANativeOneIsRefused) {
  Write("probe.py",
        "import bakeoff_report\n"
        "run = bakeoff_report.init()\n"
        "run.ready()\n"
        "for i in range(run.config.get('warmup_steps', 1) + run.config.get('steps', 2)):\n"
        "    with run.step(tokens=16) as step:\n"
        "        step.loss = 1.0\n"
        "run.summary()\n");
  const std::string catalog =
      Write("executors.yaml",
            std::string(testing::kProbeCatalogHead) + "    trainer_fields: [steps, warmup_steps, world_size, micro_batch]\n");
  const std::string missing = (dir_ / "no-such-trainer").string();
  const std::string sweep = Write("command.yaml",
                                  "name: no-trainer\n"
                                  "workload: {executor: command, command: {template: probe}, warmup_steps: 1, steps: 2}\n"
                                  "parameters:\n"
                                  "  micro_batch: {values: [1, 2]}\n"
                                  "baseline: {micro_batch: 1}\n"
                                  "repeats: 1\n");
  const std::string db = (dir_ / "results.db").string();
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--db", db, "--trainer", missing, "--executors", catalog},
                     {}, (dir_ / "local.log").string());
  auto code = local.WaitExit(120s);
  ASSERT_TRUE(code.has_value()) << "bakeoff local did not finish";
  EXPECT_EQ(*code, 0) << testing::ReadFile(dir_ / "local.log");
  auto store = OpenResults(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto found = (*store)->FindSweep("no-trainer");
  ASSERT_TRUE(found.ok());
  auto trials = (*store)->ListTrialResults(found->id);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 2u);
  for (const auto& t : *trials) EXPECT_EQ(t.trial.outcome, metrics::Outcome::kSucceeded) << t.trial.reason;

  const std::string native = WriteTinySweep("native.yaml", "native", "");
  ProcessGuard refused({kBin + "/bakeoff", "local", native, "--db", (dir_ / "native.db").string(), "--trainer",
                        missing, "--executors", catalog},
                       {}, (dir_ / "native.log").string());
  code = refused.WaitExit(60s);
  ASSERT_TRUE(code.has_value()) << "bakeoff local waited instead of refusing";
  EXPECT_EQ(*code, 1);
  const std::string text = testing::ReadFile(dir_ / "native.log");
  EXPECT_NE(text.find("the trainer '" + missing + "' is not an executable file"), std::string::npos) << text;
}

// Trials that adaptive repeats found not needed are the design at work, not failures:
// the sweep exits 0 and says how many it saved. (The fake trainer's throughput does not
// depend on micro_batch, so every pair's ratio is exactly 1 and the rule stops at `min`.)
TEST_F(LocalCommandTest, AnAdaptiveSweepThatStopsEarlyExitsZeroAndSaysWhatItDidNotNeed) {
  const std::string sweep = WriteTinySweep("adaptive.yaml", "local-adaptive", "repeats: {min: 2, max: 5, until: {ci_half_width: 0.05}}\n", 3);
  const std::string db = (dir_ / "results.db").string();
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--db", db, "--trainer", kBin + "/bakeoff-fake-trainer",
                      "--output", (dir_ / "report.txt").string()},
                     {}, (dir_ / "local.log").string());
  auto code = local.WaitExit(120s);
  ASSERT_TRUE(code.has_value());
  const std::string screen = testing::ReadFile(dir_ / "local.log");
  EXPECT_EQ(*code, 0) << screen;
  // Two workers run at once, so a trial may start before the rule stops its pair.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(screen, m, std::regex(R"(sweep 1 finished: (\d+) of 10 trials succeeded, (\d+) not needed \(adaptive repeats\))")))
      << screen;
  EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]), 10) << screen;
  EXPECT_GE(std::stoi(m[2]), 4) << screen;
}

// Issue 33, item 3: `bakeoff calibrate` measures this machine's noise for a workload on
// real trainer processes and stores it; `validate` and the report of any sweep with that
// workload then say how many repeats a 5% difference needs here.
TEST_F(LocalCommandTest, CalibrateStoresThisMachinesNoiseAndValidateAndTheReportUseIt) {
  const std::string trainer = kBin + "/bakeoff-trainer";
  if (!std::filesystem::exists(trainer)) GTEST_SKIP() << "bakeoff-trainer is not built in " << kBin;
  const std::string sweep = WriteTinySweep("sweep.yaml", "calibrated", "repeats: 2\n", 4);
  const std::string db = (dir_ / "results.db").string();
  ProcessGuard calibrate({kBin + "/bakeoff", "calibrate", sweep, "--pairs", "3", "--db", db, "--trainer", trainer,
                          "--format", "json", "--output", (dir_ / "calibration.json").string()},
                         {}, (dir_ / "calibrate.log").string());
  auto code = calibrate.WaitExit(180s);
  ASSERT_TRUE(code.has_value()) << "bakeoff calibrate did not finish";
  ASSERT_EQ(*code, 0) << testing::ReadFile(dir_ / "calibrate.log");
  // Both orders (the native trainer takes turns): interleaved first, then lockstep, and
  // which needs fewer pairs here.
  const auto calibrations = nlohmann::json::parse(testing::ReadFile(dir_ / "calibration.json"));
  ASSERT_EQ(calibrations["calibrations"].size(), 2u) << calibrations.dump();
  EXPECT_EQ(calibrations["calibrations"][1]["order"], "lockstep");
  EXPECT_FALSE(calibrations["fewer_pairs"].is_null());
  const auto calibration = calibrations["calibrations"][0];  // the sweep's own order
  EXPECT_EQ(calibration["order"], "interleaved");
  EXPECT_EQ(calibration["calibrated_sweep"], "calibrated");
  EXPECT_EQ(calibration["pairs"], 3);
  EXPECT_GE(calibration["sd_log_ratio"].get<double>(), 0);
  EXPECT_GE(calibration["repeats_to_resolve"]["5%"].get<int>(), 2);
  {
    // The A/A sweep is stored like any other: 3 pairs of two variants that differ only in
    // their seed, each at the baseline's micro_batch, on real trainer processes.
    auto store = OpenResults(db);
    ASSERT_TRUE(store.ok());
    auto aa = (*store)->FindSweep("calibrate-calibrated");
    ASSERT_TRUE(aa.ok());
    EXPECT_EQ(aa->id, calibration["sweep_id"].get<int64_t>());
    EXPECT_EQ(aa->counts.succeeded, 6);
    auto variants = (*store)->ListVariants(aa->id);
    ASSERT_TRUE(variants.ok());
    ASSERT_EQ(variants->size(), 2u);
    for (const auto& v : *variants) {
      EXPECT_TRUE(v.params.contains("seed")) << v.key;
      EXPECT_EQ(v.params.value("micro_batch", 1), 1) << v.key;
    }
  }
  // `validate` of the sweep itself finds it.
  ProcessGuard validate({kBin + "/bakeoff", "validate", sweep, "--db", db, "--format", "json", "--output",
                         (dir_ / "validate.json").string()},
                        {}, (dir_ / "validate.log").string());
  ASSERT_EQ(validate.WaitExit(60s), 0);
  const auto validated = nlohmann::json::parse(testing::ReadFile(dir_ / "validate.json"));
  EXPECT_EQ(validated["calibration"]["id"], calibration["id"]);
  // And the report of the sweep, run now, plans its repeats with it.
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--db", db, "--trainer", kBin + "/bakeoff-fake-trainer",
                      "--format", "json", "--output", (dir_ / "report.json").string()},
                     {}, (dir_ / "local.log").string());
  ASSERT_EQ(local.WaitExit(120s), 0) << testing::ReadFile(dir_ / "local.log");
  const auto report = nlohmann::json::parse(testing::ReadFile(dir_ / "report.json"));
  EXPECT_EQ(report["calibration"]["id"], calibration["id"]);
  EXPECT_EQ(report["calibration"]["repeats_to_resolve"], calibration["repeats_to_resolve"]["5%"]);
  EXPECT_DOUBLE_EQ(report["options"]["assumed_sd_log_ratio"].get<double>(), calibration["sd_log_ratio"].get<double>());
  bool said = false;
  for (const auto& c : report["callouts"]) said = said || c.get<std::string>().find("Noise on this machine") == 0;
  EXPECT_TRUE(said) << report["callouts"].dump();
}

}  // namespace
}  // namespace bakeoff
