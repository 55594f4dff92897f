// Network faults between a worker and the coordinator (issue 7), through a TCP proxy
// the test controls: a connection cut mid-trial is repaired by the worker's reconnect
// and the trial is reclaimed, with every event stored once; a partition longer than the
// heartbeat timeout loses the attempt once, the trial runs again elsewhere, and what the
// cut-off worker reports after healing never becomes a second result.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/integration/tcp_proxy.h"
#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::ReadFile;
using testing::TcpProxy;
using testing::TestCluster;
using testing::WaitFor;

class NetworkFaultsTest : public testing::ClusterTest {
 protected:
  NetworkFaultsTest() : ClusterTest("bakeoff-netfaults", testing::RealTrainerPath(), /*skip_without_trainer=*/true) {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ClusterTest::SetUp());
    if (IsSkipped()) return;
    ASSERT_TRUE(cluster_->StartCoordinator(testing::kFastFailureArgs));
    // w1 reaches the coordinator only through the proxy; w2 directly.
    proxy_ = std::make_unique<TcpProxy>(cluster_->worker_port());
    cluster_->StartWorker("w1", 1, proxy_->port());
    cluster_->StartWorker("w2", 2);
    ASSERT_TRUE(WaitFor([&] { return cluster_->WorkersConnected(2); }, 30s)) << "workers did not register";
    cluster_->Submit(testing::kFourTrialSweep);
  }
  void TearDown() override {
    ClusterTest::TearDown();  // the cluster first, then the proxy it talks through
    proxy_.reset();
  }

  // A trial running on w1 whose rank has started, or -1 after a minute.
  int TrialRunningOnW1() { return cluster_->WaitForTrialStartedOn("w1"); }

  // Step rows stored for each trial's final attempt.
  std::map<std::int64_t, int> StepRowsPerTrial() {
    std::map<std::int64_t, int> rows;
    for (const auto& r : cluster_->Query(
             "SELECT t.id, count(m.step) FROM trials t LEFT JOIN step_metrics m ON m.trial_id = t.id AND "
             "m.attempt = t.attempts_used WHERE t.sweep_id = " + std::to_string(cluster_->sweep_id()) +
             " GROUP BY t.id")) {
      rows[r[0].get<std::int64_t>()] = r[1].get<int>();
    }
    return rows;
  }

  std::unique_ptr<TcpProxy> proxy_;
};

TEST_F(NetworkFaultsTest, ConnectionCutMidTrialIsRepairedAndTheTrialReclaimedWithEveryEventOnce) {
  TestCluster& c = *cluster_;
  const int trial = TrialRunningOnW1();
  ASSERT_GE(trial, 0) << "nothing ran on w1";
  proxy_->CutAll();
  // The worker reconnects (backoff from 200 ms) well within the heartbeat timeout.
  ASSERT_TRUE(WaitFor([&] { return proxy_->connections_accepted() >= 2 && c.WorkersConnected(2); }, 20s))
      << ReadFile(c.WorkerLog("w1"));
  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(4));
  // Nothing was lost, so nothing ran twice, and the cut trial kept its only attempt.
  auto attempts = c.Query("SELECT attempt, outcome, worker_id FROM attempts WHERE trial_id = " +
                          std::to_string(trial));
  ASSERT_EQ(attempts.size(), 1u) << "the cut trial ran again";
  EXPECT_EQ(attempts[0][2], "w1");
  EXPECT_EQ(c.WorkerState("w1"), "alive");
  // Events sent but unacknowledged when the connection died were sent again and stored
  // once: the cut trial has as many step rows as the others (301 each: warmup + 300).
  for (const auto& [id, rows] : StepRowsPerTrial()) EXPECT_EQ(rows, 301) << "trial " << id;
}

TEST_F(NetworkFaultsTest, PartitionPastTheHeartbeatTimeoutLosesTheAttemptOnceAndLateReportsAreIgnored) {
  TestCluster& c = *cluster_;
  const int trial = TrialRunningOnW1();
  ASSERT_GE(trial, 0) << "nothing ran on w1";
  proxy_->SetPartitioned(true);
  const auto cut_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return c.WorkerState("w1") == "lost"; }, 15s));
  EXPECT_LT(std::chrono::steady_clock::now() - cut_at, 6s) << "the partition was noticed late";
  // Meanwhile w1's rank runs on and its events wait; heal once the lost attempt is
  // durable (its requeue is stored), so everything w1 reports after healing is late.
  const std::string first_attempt =
      "SELECT outcome FROM attempts WHERE attempt = 1 AND trial_id = " + std::to_string(trial);
  ASSERT_TRUE(WaitFor([&] {
    auto rows = c.Query(first_attempt);
    return !rows.empty() && rows[0][0] == "lost";
  }, 15s)) << c.Trials().dump();
  proxy_->SetPartitioned(false);
  ASSERT_TRUE(WaitFor([&] { return c.WorkersConnected(2); }, 30s)) << ReadFile(c.WorkerLog("w1"));

  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(4));
  // The partitioned attempt stays lost whatever w1 reported after healing; the trial's
  // one result is its second attempt's.
  const auto outcomes = c.AttemptOutcomes(trial);
  ASSERT_GE(outcomes.size(), 2u);
  EXPECT_EQ(outcomes.front(), "lost");
  EXPECT_EQ(outcomes.back(), "succeeded");
  auto stale_summaries = c.Query("SELECT count(*) FROM trial_summaries WHERE trial_id = " + std::to_string(trial) +
                                 " AND attempt = 1");
  EXPECT_EQ(stale_summaries[0][0], 0) << "the lost attempt's late summary was stored";
  for (const auto& [id, rows] : StepRowsPerTrial()) EXPECT_EQ(rows, 301) << "trial " << id;
}

}  // namespace
}  // namespace bakeoff
