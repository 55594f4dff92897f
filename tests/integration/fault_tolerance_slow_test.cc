// Fault tolerance with real processes and real signals on loopback (issue 7): a worker
// SIGKILLed mid-trial is noticed within the heartbeat timeout, its attempt is `lost` and
// the trial runs again on the other worker; a coordinator SIGKILLed mid-sweep and
// restarted on the same database and ports gets its workers back, which reclaim their
// running trials, and the sweep completes with no trial run twice. In both, every trial
// ends with exactly one final outcome and its results in SQLite.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "cli/coordinator_client.h"
#include "metrics/read_only_query.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::ProcessGuard;
using testing::ReadFile;
using testing::WaitFor;

const std::string kBin = BAKEOFF_BINARY_DIR;

// Four one-rank trials of the real trainer, each a few seconds long on this machine.
const char* kSweep =
    "name: faults\n"
    "question: does every trial end exactly once?\n"
    "workload:\n"
    "  executor: lora\n"
    "  model: tiny\n"
    "  seq_len: 64\n"
    "  warmup_steps: 1\n"
    "  steps: 300\n"
    "  threads: 1\n"
    "parameters:\n"
    "  micro_batch: {values: [1, 2]}\n"
    "baseline: {micro_batch: 1}\n"
    "repeats: 2\n"
    "limits: {trial_timeout: 5m, max_attempts: 3}\n";

class FaultToleranceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trainer_ = testing::RealTrainerPath();
    if (!std::filesystem::exists(trainer_)) GTEST_SKIP() << "bakeoff-trainer is not built in " << kBin;
    dir_ = testing::FreshTestDir("bakeoff-faults");
    std::ofstream(dir_ / "token") << "fault-secret\n";
  }
  void TearDown() override {
    workers_.clear();
    coordinator_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // Starts (or restarts, on the same ports and database) the coordinator.
  void StartCoordinator(const std::string& http = "127.0.0.1:0", const std::string& workers = "127.0.0.1:0") {
    const std::string ports = (dir_ / "ports.json").string();
    std::filesystem::remove(ports);
    coordinator_ = std::make_unique<ProcessGuard>(
        std::vector<std::string>{kBin + "/bakeoff", "coordinator", "--listen", http, "--worker-listen", workers, "--db",
                                 db(), "--ports-file", ports, "--heartbeat-timeout", "2s", "--recovery-grace", "20s"},
        std::vector<std::string>{"BAKEOFF_TOKEN=fault-secret"},
        (dir_ / ("coordinator-" + std::to_string(++coordinator_starts_) + ".log")).string());
    ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ports); }, 30s)) << "coordinator did not start";
    json p = json::parse(std::ifstream(ports));
    http_port_ = p["http_port"];
    worker_port_ = p["worker_port"];
    auto client = cli::CoordinatorClient::Create("http://127.0.0.1:" + std::to_string(http_port_), "fault-secret", 10s);
    ASSERT_TRUE(client.ok());
    client_ = std::make_unique<cli::CoordinatorClient>(*client);
  }

  void StartWorker(const std::string& name, int index) {
    workers_[name] = std::make_unique<ProcessGuard>(
        std::vector<std::string>{kBin + "/bakeoff", "worker", "--coordinator",
                                 "127.0.0.1:" + std::to_string(worker_port_), "--slots", "1", "--name", name,
                                 "--token-file", (dir_ / "token").string(), "--trainer", trainer_, "--store-ports",
                                 std::to_string(29900 + 40 * index) + "-" + std::to_string(29939 + 40 * index),
                                 "--work-dir", (dir_ / name).string()},
        std::vector<std::string>{"BAKEOFF_TOKEN="}, (dir_ / (name + ".log")).string());
  }

  bool WorkersConnected(int count) {
    auto w = client_->GetJson("/api/v1/workers");
    if (!w.ok()) return false;
    int connected = 0;
    for (const auto& x : *w) connected += x.value("connected", false) ? 1 : 0;
    return connected == count;
  }

  // The sweep's trials as the API lists them (empty on a transport error).
  json Trials() {
    auto got = client_->GetJson("/api/v1/sweeps/" + std::to_string(sweep_id_) + "/trials");
    return got.ok() ? *got : json::array();
  }

  // The id of a trial running on `worker`, or -1.
  int RunningOn(const std::string& worker) {
    for (const auto& t : Trials()) {
      if (t.value("state", "") == "running" && t.value("worker_id", "") == worker) return t["id"];
    }
    return -1;
  }

  bool SweepFinished() {
    auto got = client_->GetJson("/api/v1/sweeps/" + std::to_string(sweep_id_));
    return got.ok() && got->value("state", "") == "finished";
  }

  void Submit() {
    auto created = client_->PostJson("/api/v1/sweeps", kSweep, "application/yaml");
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    sweep_id_ = (*created)["id"];
  }

  // Rows of a read-only query on the results database (the test's own connection).
  std::vector<std::vector<json>> Query(const std::string& sql) {
    auto result = metrics::RunReadOnlyQuery(db(), sql);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? result->rows : std::vector<std::vector<json>>{};
  }

  // Every trial finished exactly once, succeeded, with a stored summary.
  void ExpectEveryTrialSucceededOnce() {
    auto rows = Query("SELECT id, state, outcome FROM trials WHERE sweep_id = " + std::to_string(sweep_id_));
    ASSERT_EQ(rows.size(), 4u);
    for (const auto& r : rows) {
      EXPECT_EQ(r[1], "finished") << "trial " << r[0];
      EXPECT_EQ(r[2], "succeeded") << "trial " << r[0];
    }
    auto summaries = Query(
        "SELECT t.id, count(s.trial_id) FROM trials t LEFT JOIN trial_summaries s ON s.trial_id = t.id "
        "AND s.attempt = t.attempts_used WHERE t.sweep_id = " + std::to_string(sweep_id_) + " GROUP BY t.id");
    for (const auto& r : summaries) EXPECT_GE(r[1].get<int>(), 1) << "trial " << r[0] << " has no summary";
  }

  std::string db() const { return (dir_ / "results.db").string(); }

  std::string trainer_;
  std::filesystem::path dir_;
  std::unique_ptr<ProcessGuard> coordinator_;
  std::map<std::string, std::unique_ptr<ProcessGuard>> workers_;
  std::unique_ptr<cli::CoordinatorClient> client_;
  int http_port_ = 0, worker_port_ = 0, coordinator_starts_ = 0;
  std::int64_t sweep_id_ = 0;
};

TEST_F(FaultToleranceTest, WorkerKilledMidTrialIsLostAndTheTrialRunsAgainElsewhere) {
  StartCoordinator();
  StartWorker("w1", 1);
  StartWorker("w2", 2);
  ASSERT_TRUE(WaitFor([&] { return WorkersConnected(2); }, 30s)) << "workers did not register";
  Submit();
  int victim_trial = -1;
  ASSERT_TRUE(WaitFor([&] { return (victim_trial = RunningOn("w1")) >= 0; }, 60s)) << "nothing ran on w1";
  workers_["w1"]->Kill(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();

  // Noticed within the heartbeat timeout (2 s) plus the housekeeping tick and the poll.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto w = client_->GetJson("/api/v1/workers");
        if (!w.ok()) return false;
        for (const auto& x : *w) {
          if (x.value("id", "") == "w1") return x.value("state", "") == "lost";
        }
        return false;
      },
      15s));
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 6s) << "the loss was noticed late";

  ASSERT_TRUE(WaitFor([&] { return SweepFinished(); }, 240s)) << Trials().dump();
  ExpectEveryTrialSucceededOnce();
  // The victim's first attempt is lost (on w1); it succeeded on its second, on w2.
  auto attempts = Query("SELECT attempt, outcome, worker_id FROM attempts WHERE trial_id = " +
                        std::to_string(victim_trial) + " ORDER BY attempt");
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0][1], "lost");
  EXPECT_EQ(attempts[0][2], "w1");
  EXPECT_EQ(attempts[1][1], "succeeded");
  EXPECT_EQ(attempts[1][2], "w2");
  // Nothing else ran twice.
  auto retried = Query("SELECT count(*) FROM trials WHERE attempts_used > 1 AND sweep_id = " +
                       std::to_string(sweep_id_));
  EXPECT_EQ(retried[0][0], 1);
}

TEST_F(FaultToleranceTest, CoordinatorKilledMidSweepIsRestartedAndWorkersReclaimTheirTrials) {
  StartCoordinator();
  StartWorker("w1", 1);
  StartWorker("w2", 2);
  ASSERT_TRUE(WaitFor([&] { return WorkersConnected(2); }, 30s)) << "workers did not register";
  Submit();
  int running = -1;
  ASSERT_TRUE(WaitFor([&] { return (running = RunningOn("w1")) >= 0 || (running = RunningOn("w2")) >= 0; }, 60s));
  const std::string http = "127.0.0.1:" + std::to_string(http_port_);
  const std::string workers = "127.0.0.1:" + std::to_string(worker_port_);
  coordinator_->Kill(SIGKILL);

  // The ranks keep running meanwhile; the workers retry with backoff until it is back.
  StartCoordinator(http, workers);
  ASSERT_TRUE(WaitFor([&] { return WorkersConnected(2); }, 30s)) << "workers did not come back";
  // The new coordinator took the running attempt back from its worker's report.
  const std::string reclaimed = "reclaimed trial=" + std::to_string(running) + " attempt=1";
  ASSERT_TRUE(WaitFor([&] { return ReadFile(dir_ / "coordinator-2.log").find(reclaimed) != std::string::npos; }, 30s))
      << ReadFile(dir_ / "coordinator-2.log");
  ASSERT_TRUE(WaitFor([&] { return SweepFinished(); }, 240s)) << Trials().dump();
  ExpectEveryTrialSucceededOnce();
  // The trial running during the outage was reclaimed, not run again.
  auto attempts = Query("SELECT attempt, outcome FROM attempts WHERE trial_id = " + std::to_string(running));
  ASSERT_EQ(attempts.size(), 1u) << "the running trial ran twice";
  EXPECT_EQ(attempts[0][1], "succeeded");
  auto retried = Query("SELECT count(*) FROM trials WHERE attempts_used > 1 AND sweep_id = " +
                       std::to_string(sweep_id_));
  EXPECT_EQ(retried[0][0], 0) << "no attempt was lost, so none may run twice";
}

}  // namespace
}  // namespace bakeoff
