// Rank crash, out of memory and hang through the whole stack (issue 7): one worker with
// one slot runs four trials in turn whose (fake) trainer hangs, reports out of memory,
// fails, and succeeds. Each is classified (`timeout`, `oom`, `failed`, `succeeded`), the
// hung rank is killed with its process group (a child it started dies too), and the
// worker stays healthy and takes every next trial.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::TestCluster;
using testing::WaitFor;

const char* kSweep =
    "name: rank-failures\n"
    "question: is every failure classified, and does the worker carry on?\n"
    "workload: {executor: lora, model: tiny, steps: 3, warmup_steps: 0, seq_len: 16}\n"
    "parameters:\n"
    "  micro_batch: {values: [1, 2, 3, 4]}\n"
    "baseline: {micro_batch: 4}\n"
    "repeats: 1\n"
    "limits: {trial_timeout: 3s, max_attempts: 1}\n";

TEST(RankFailuresTest, EachFailureIsClassifiedAndTheWorkerTakesTheNextTrial) {
  const auto dir = testing::FreshTestDir("bakeoff-rank-failures");
  {
    TestCluster c(dir, BAKEOFF_BINARY_DIR "/bakeoff-fake-trainer");
    // Three of the four trials end within seconds on purpose: without --quarantine-after 0
    // the worker would be quarantined or not depending on the order they ran in
    // (PlacementBoundsTest covers the quarantine).
    ASSERT_TRUE(c.StartCoordinator({"--quarantine-after", "0"}));
    c.AddWorkerEnvironment("FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH=1=hang_with_child,2=error_oom,3=error_failed");
    c.StartWorker("w1", 1);
    ASSERT_TRUE(WaitFor([&] { return c.WorkersConnected(1); }, 30s));
    c.Submit(kSweep);
    ASSERT_TRUE(WaitFor([&] { return c.SweepFinished(); }, 120s)) << c.Trials().dump();

    std::map<std::string, std::string> outcome_by_variant;
    for (const auto& r : c.Query("SELECT variant_key, outcome, attempts_used FROM trials WHERE sweep_id = " +
                                 std::to_string(c.sweep_id()))) {
      outcome_by_variant[r[0].get<std::string>()] = r[1].get<std::string>();
      EXPECT_EQ(r[2], 1) << r[0] << ": a final outcome is not retried";
    }
    EXPECT_EQ(outcome_by_variant["micro_batch=1"], "timeout");
    EXPECT_EQ(outcome_by_variant["micro_batch=2"], "oom");
    EXPECT_EQ(outcome_by_variant["micro_batch=3"], "failed");
    EXPECT_EQ(outcome_by_variant["micro_batch=4"], "succeeded");
    // All four ran on the one worker, which is still alive and connected.
    auto workers = c.Query("SELECT DISTINCT a.worker_id FROM attempts a JOIN trials t ON t.id = a.trial_id "
                           "WHERE t.sweep_id = " + std::to_string(c.sweep_id()));
    ASSERT_EQ(workers.size(), 1u);
    EXPECT_EQ(workers[0][0], "w1");
    EXPECT_EQ(c.WorkerState("w1"), "alive");
    EXPECT_TRUE(c.WorkersConnected(1));
    // The hung rank and the child it started were killed with their process group.
    auto hung = c.Query("SELECT e.kind, e.data_json FROM events e JOIN trials t ON t.id = e.trial_id WHERE "
                        "t.variant_key = 'micro_batch=1' AND e.kind IN ('started', 'child')");
    ASSERT_EQ(hung.size(), 2u) << "expected the rank's started and child events";
    for (const auto& r : hung) {
      const int pid = json::parse(r[1].get<std::string>()).value("pid", 0);
      ASSERT_GT(pid, 0);
      EXPECT_TRUE(WaitFor([&] { return !TestCluster::Alive(pid); }, 5s)) << r[0] << " pid " << pid << " survived";
    }
  }
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bakeoff
