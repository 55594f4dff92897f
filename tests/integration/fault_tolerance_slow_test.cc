// Fault tolerance with real processes and real signals on loopback (issue 7): a worker
// SIGKILLed mid-trial is noticed within the heartbeat timeout, its attempt is `lost`,
// its rank dies with it, and the trial runs again on the other worker; a gang trial
// whose worker stops answering has its ranks on the other worker stopped by the
// coordinator; a coordinator SIGKILLed mid-sweep and restarted on the same database and
// ports gets its workers back, which reclaim their running trials, and the sweep
// completes with no trial run twice. In each, every trial ends with exactly one final
// outcome and its results in SQLite.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>

#include "protocol/frame_codec.h"
#include "tests/integration/raw_connection.h"
#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::RawConnection;
using testing::ReadFile;
using testing::TestCluster;
using testing::WaitFor;

// Two gang trials of two ranks (Gloo), each rank on a different one-slot worker.
const std::string kGangSweep = testing::TinyLoraSweep{.name = "gang-faults",
                                                      .question = "are a lost gang's other ranks stopped?",
                                                      .seq_len = 64,
                                                      .steps = 400,
                                                      .parameters = {"micro_batch: {values: [1, 2]}",
                                                                     "world_size: {value: 2}"},
                                                      .repeats = 1,
                                                      .max_attempts = 3}
                                   .Yaml();

class FaultToleranceTest : public testing::ClusterTest {
 protected:
  FaultToleranceTest() : ClusterTest("bakeoff-faults", testing::RealTrainerPath(), /*skip_without_trainer=*/true) {}

  // The coordinator (heartbeat timeout 2 s), one-slot workers w1..wN, then the sweep.
  void StartAndSubmit(int workers, const std::string& sweep) {
    ASSERT_NO_FATAL_FAILURE(StartCluster(workers, testing::kFastFailureArgs));
    cluster_->Submit(sweep);
  }

  // `trial` ran twice: its first attempt lost on w1 (`reason` in its reason), its second
  // succeeded on w2.
  void ExpectLostOnW1AndSucceededOnW2(int trial, const std::string& reason = "") {
    auto attempts = cluster_->Query("SELECT attempt, outcome, worker_id, reason FROM attempts WHERE trial_id = " +
                                    std::to_string(trial) + " ORDER BY attempt");
    ASSERT_EQ(attempts.size(), 2u);
    EXPECT_EQ(attempts[0][1], "lost");
    EXPECT_EQ(attempts[0][2], "w1");
    if (!reason.empty()) {
      EXPECT_NE(attempts[0][3].get<std::string>().find(reason), std::string::npos) << attempts[0][3];
    }
    EXPECT_EQ(attempts[1][1], "succeeded");
    EXPECT_EQ(attempts[1][2], "w2");
  }
};

TEST_F(FaultToleranceTest, WorkerKilledMidTrialIsLostAndTheTrialRunsAgainElsewhere) {
  ASSERT_NO_FATAL_FAILURE(StartAndSubmit(2, testing::kFourTrialSweep));
  TestCluster& c = *cluster_;
  const int victim_trial = c.WaitForTrialStartedOn("w1");
  ASSERT_GE(victim_trial, 0) << "nothing ran on w1";
  const int rank_pid = c.RankPids(victim_trial, 1).at(0);
  ASSERT_TRUE(TestCluster::Alive(rank_pid));
  c.worker("w1").Kill(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();

  // Its rank dies with it rather than computing on for nothing.
  EXPECT_TRUE(WaitFor([&] { return !TestCluster::Alive(rank_pid); }, 5s)) << "the orphaned rank kept running";
  // Noticed within the heartbeat timeout (2 s) plus the housekeeping tick and the poll.
  ASSERT_TRUE(WaitFor([&] { return c.WorkerState("w1") == "lost"; }, 15s));
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 6s) << "the loss was noticed late";

  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(4));
  // The victim's first attempt is lost (on w1); it succeeded on its second, on w2.
  ExpectLostOnW1AndSucceededOnW2(victim_trial);
  // Nothing else ran twice.
  auto retried = c.Query("SELECT count(*) FROM trials WHERE attempts_used > 1 AND sweep_id = " +
                         std::to_string(c.sweep_id()));
  EXPECT_EQ(retried[0][0], 1);
}

// A node drained or a pod deleted sends SIGTERM: with --on-sigterm requeue (the Kubernetes
// DaemonSet's setting) the worker hands its attempt back as lost and the trial runs again
// elsewhere, instead of ending cancelled for good.
TEST_F(FaultToleranceTest, AWorkerToldToRequeueOnSigtermHandsItsTrialBackToRunElsewhere) {
  TestCluster& c = *cluster_;
  ASSERT_TRUE(c.StartCoordinator(testing::kFastFailureArgs));
  testing::WorkerHost requeue;
  requeue.extra_args = {"--on-sigterm", "requeue"};
  c.StartWorker("w1", 1, 0, requeue);
  c.StartWorker("w2", 2);
  ASSERT_TRUE(WaitFor([&] { return c.WorkersConnected(2); }, 30s)) << "workers did not register";
  c.Submit(testing::kFourTrialSweep);
  const int victim_trial = c.WaitForTrialStartedOn("w1");
  ASSERT_GE(victim_trial, 0) << "nothing ran on w1";
  c.worker("w1").Kill(SIGTERM);

  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(4));
  ExpectLostOnW1AndSucceededOnW2(victim_trial, "SIGTERM");
}

TEST_F(FaultToleranceTest, GangRanksOnOtherWorkersAreStoppedWhenOneWorkerIsLost) {
  ASSERT_NO_FATAL_FAILURE(StartAndSubmit(3, kGangSweep));
  TestCluster& c = *cluster_;
  // The first trial whose two ranks both started.
  std::int64_t trial = -1;
  std::map<int, int> pids;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& t : c.Trials()) {
          pids = c.RankPids(t["id"], 1);
          if (pids.size() == 2) {
            trial = t["id"];
            return true;
          }
        }
        return false;
      },
      60s))
      << "no gang trial started";
  const std::string victim = c.WorkerOf(pids.at(0));
  const std::string survivor = c.WorkerOf(pids.at(1));
  ASSERT_FALSE(victim.empty());
  ASSERT_FALSE(survivor.empty());
  ASSERT_NE(victim, survivor) << "the gang was not spread over two workers";

  // The victim's node freezes: its worker and rank stop answering. The surviving rank
  // blocks in its next collective (whose own timeout is 120 s), so only the
  // coordinator's cancel can stop it within the heartbeat timeout.
  kill(pids.at(0), SIGSTOP);
  c.worker(victim).Signal(SIGSTOP);
  const auto frozen_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return !TestCluster::Alive(pids.at(1)); }, 20s))
      << "the gang's rank on " << survivor << " was left running";
  EXPECT_LT(std::chrono::steady_clock::now() - frozen_at, 10s);
  EXPECT_NE(ReadFile(c.WorkerLog(survivor)).find("cancel trial=" + std::to_string(trial) + " attempt=1"),
            std::string::npos)
      << ReadFile(c.WorkerLog(survivor));
  c.worker(victim).Kill(SIGKILL);  // its stopped rank dies with it

  // The trial runs again on the two live workers; the sweep completes.
  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(2));
  EXPECT_EQ(c.AttemptOutcomes(trial), (std::vector<std::string>{"lost", "succeeded"}));
}

TEST_F(FaultToleranceTest, CoordinatorKilledMidSweepIsRestartedAndWorkersReclaimTheirTrials) {
  ASSERT_NO_FATAL_FAILURE(StartAndSubmit(2, testing::kFourTrialSweep));
  TestCluster& c = *cluster_;
  int running = -1;
  ASSERT_TRUE(WaitFor([&] { return (running = c.RunningOn("w1")) >= 0 || (running = c.RunningOn("w2")) >= 0; }, 60s));

  // The ranks keep running meanwhile; the workers retry with backoff until it is back.
  ASSERT_TRUE(c.RestartCoordinator());
  ASSERT_TRUE(WaitFor([&] { return c.WorkersConnected(2); }, 30s)) << "workers did not come back";
  // The new coordinator took the running attempt back from its worker's report.
  const std::string reclaimed = "reclaimed trial=" + std::to_string(running) + " attempt=1";
  ASSERT_TRUE(WaitFor([&] { return ReadFile(c.CoordinatorLog()).find(reclaimed) != std::string::npos; }, 30s))
      << ReadFile(c.CoordinatorLog());
  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(4));
  // The trial running during the outage was reclaimed, not run again.
  auto attempts = c.Query("SELECT attempt, outcome FROM attempts WHERE trial_id = " + std::to_string(running));
  ASSERT_EQ(attempts.size(), 1u) << "the running trial ran twice";
  EXPECT_EQ(attempts[0][1], "succeeded");
  auto retried = c.Query("SELECT count(*) FROM trials WHERE attempts_used > 1 AND sweep_id = " +
                         std::to_string(c.sweep_id()));
  EXPECT_EQ(retried[0][0], 0) << "no attempt was lost, so none may run twice";
}

// Security review 2026-12-02, finding 5: right after a restart, a holder of the worker
// credential registered a running worker's name first, reclaimed its attempt, and could
// then forge its result or have it lost. Now the name is held for its worker's secret.
TEST_F(FaultToleranceTest, AfterARestartAnImpostorCannotTakeTheNameOfAWorkerWithARunningTrial) {
  ASSERT_NO_FATAL_FAILURE(StartAndSubmit(2, testing::kFourTrialSweep));
  TestCluster& c = *cluster_;
  int running = -1;
  std::string victim;
  ASSERT_TRUE(WaitFor([&] {
    for (const char* w : {"w1", "w2"}) {
      if ((running = c.RunningOn(w)) >= 0) victim = w;
    }
    return !victim.empty();
  }, 60s));
  ASSERT_TRUE(c.RestartCoordinator());
  // The impostor is first: the real workers retry with a back-off.
  nlohmann::json reg = testing::RegisterMessage(victim);
  reg["running"] = nlohmann::json::array({{{"trial_id", running}, {"attempt", 1}}});
  const std::string answer = testing::AnswerToRegister(c.worker_port(), reg);
  EXPECT_NE(answer.find("rejected"), std::string::npos) << answer;
  EXPECT_TRUE(answer.find("awaiting reclaim") != std::string::npos ||
              answer.find("in use by a live worker") != std::string::npos)
      << answer;
  // The real worker comes back, reclaims its trial, and the sweep ends with every trial
  // run once: nothing was taken over.
  ASSERT_TRUE(WaitFor([&] { return c.WorkersConnected(2); }, 30s)) << "workers did not come back";
  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(4));
  auto attempts = c.Query("SELECT attempt, outcome, worker_id FROM attempts WHERE trial_id = " + std::to_string(running));
  ASSERT_EQ(attempts.size(), 1u) << "the running trial ran twice";
  EXPECT_EQ(attempts[0][1], "succeeded");
  EXPECT_EQ(attempts[0][2], victim);
}

// Security review 2026-12-02, finding 1: a worker that was never given a trial wrote a
// forged summary (1 token/s, 909 TiB) for another worker's running trial. Its events are
// now dropped at ingest as foreign, and the report reads the real worker's summary.
TEST_F(FaultToleranceTest, AWorkerCannotForgeTheResultOfAnotherWorkersRunningTrial) {
  ASSERT_NO_FATAL_FAILURE(StartAndSubmit(1, testing::kFourTrialSweep));
  TestCluster& c = *cluster_;
  int running = -1;
  ASSERT_TRUE(WaitFor([&] { return (running = c.RunningOn("w1")) >= 0; }, 60s));
  RawConnection forger(c.worker_port());
  ASSERT_TRUE(forger.connected());
  const nlohmann::json forged_summary = {{"event", "summary"}, {"tokens_per_s", 1.0}, {"step_s_median", 99.0},
                                         {"peak_mem_bytes", 1e15}, {"applied", {{"fell_back", true}}}};
  const nlohmann::json events = {
      {"type", "events"},
      {"outbox_seq", 1},
      {"events", nlohmann::json::array({{{"trial_id", running}, {"attempt", 1}, {"rank", 0}, {"seq", 999},
                                         {"event", forged_summary}}})}};
  for (const nlohmann::json& message : {testing::RegisterMessage("forger"), events}) {
    auto frame = protocol::EncodeFrame(message);
    ASSERT_TRUE(frame.ok());
    forger.Write(*frame);
  }
  ASSERT_TRUE(WaitFor([&] {
    auto metrics = c.client().GetText("/metrics");
    return metrics.ok() && metrics->find("bakeoff_worker_foreign_events_total 1") != std::string::npos;
  }, 30s)) << "the forged summary was not counted as foreign";
  ASSERT_NO_FATAL_FAILURE(c.ExpectSweepToFinishWithEveryTrialSucceededOnce(4));
  auto summaries = c.Query("SELECT tokens_per_s, peak_mem_bytes FROM trial_summaries WHERE trial_id = " +
                           std::to_string(running));
  ASSERT_EQ(summaries.size(), 1u) << "one summary, the real worker's";
  EXPECT_GT(summaries[0][0].get<double>(), 1.0);
  EXPECT_LT(summaries[0][1].get<double>(), 1e12);
}

}  // namespace
}  // namespace bakeoff
