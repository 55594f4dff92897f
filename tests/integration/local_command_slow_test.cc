// `bakeoff local` runs a sweep on this machine end to end and leaves results.db.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "metrics/store/results_store.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

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
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

TEST_F(LocalCommandTest, RunsTheSweepAndLeavesTheDatabase) {
  const std::string sweep = Write("sweep.yaml",
                                  "name: local-test\n"
                                  "workload: {executor: lora, model: tiny, seq_len: 16, warmup_steps: 1, steps: 2}\n"
                                  "parameters:\n"
                                  "  micro_batch: {values: [1, 2]}\n"
                                  "  world_size: {value: 2}\n"
                                  "baseline: {micro_batch: 1}\n"
                                  "repeats: 2\n");
  const std::string db = (dir_ / "results.db").string();
  ProcessGuard local({kBin + "/bakeoff", "local", sweep, "--workers", "2", "--db", db, "--trainer",
                      kBin + "/bakeoff-fake-trainer", "--work-dir", (dir_ / "work").string(), "--output",
                      (dir_ / "report.txt").string()},
                     {}, (dir_ / "local.log").string());
  auto code = local.WaitExit(180s);
  ASSERT_TRUE(code.has_value()) << "bakeoff local did not finish";
  EXPECT_EQ(*code, 0) << "see " << (dir_ / "local.log");
  metrics::StoreOptions options;
  options.path = db;
  options.read_only = true;
  auto store = metrics::ResultsStore::Open(options);
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
  const std::string sweep = Write("cuda.yaml",
                                  "name: cuda-here\n"
                                  "workload: {executor: lora, model: tiny, seq_len: 16, warmup_steps: 1, steps: 2}\n"
                                  "parameters:\n"
                                  "  micro_batch: {values: [1, 2]}\n"
                                  "baseline: {micro_batch: 1}\n"
                                  "resources: {device: cuda}\n");
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

}  // namespace
}  // namespace bakeoff
