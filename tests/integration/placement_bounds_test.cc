// The 2026-12-07 security review's A2 on real coordinator and worker processes (issue
// 51): a worker whose trials end at once is quarantined while an honest worker finishes
// the sweep, whatever non-success outcome it reports; and the workers of one worker
// credential together offer no more than --max-credential-slots, while another
// credential's worker still registers.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "metrics/store/read_only_query.h"
#include "tests/integration/loopback_cluster_test.h"
#include "tests/integration/test_sweeps.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::ReadFile;
using testing::QuickSweep;
using testing::WaitFor;

class PlacementBoundsTest : public testing::LoopbackClusterTest {
 protected:
  PlacementBoundsTest() : LoopbackClusterTest("bakeoff-placement-bounds", "placement-secret") {}

  // Worker `name` with `slots` slots presenting the token in `token_file`, its trainer
  // run with `env` added (the fake trainer's behaviour); logs to log(`name`).
  void StartWorkerWith(const std::string& name, int slots, const std::string& token_file, int store_index,
                       const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv{kBin + "/bakeoff", "worker", "--coordinator",
                                  "127.0.0.1:" + std::to_string(worker_port_), "--slots", std::to_string(slots),
                                  "--name", name, "--share-cores", "--token-file", token_file, "--trainer",
                                  kBin + "/bakeoff-fake-trainer", "--store-ports",
                                  std::to_string(31100 + 40 * store_index) + "-" +
                                      std::to_string(31139 + 40 * store_index),
                                  "--work-dir", (dir_ / name).string()};
    std::vector<std::string> environment{"BAKEOFF_TOKEN="};
    environment.insert(environment.end(), env.begin(), env.end());
    workers_.push_back(std::make_unique<testing::ProcessGuard>(argv, environment, log(name)));
  }
  // The API's entry for worker `name` ({} when not listed).
  json Worker(const std::string& name) const {
    auto workers = client_->GetJson("/api/v1/workers");
    if (!workers.ok()) return json::object();
    for (const auto& w : *workers) {
      if (w.value("id", "") == name) return w;
    }
    return json::object();
  }
  std::vector<std::vector<json>> Query(const std::string& sql) const {
    auto result = metrics::RunReadOnlyQuery(db(), sql);
    EXPECT_TRUE(result.ok()) << sql << ": " << result.status().ToString();
    return result.ok() ? result->rows : std::vector<std::vector<json>>{};
  }
};

// A rogue worker with 4 slots, whose every trial ends at once (out of memory for one
// variant, a workload error for the other: two outcomes, one boundary), registers
// before an honest 1-slot worker. After 3 such endings in a row it is quarantined: it
// gets no trial more (at most its 4 slots and the 2 slots it freed before the third
// ending), the honest worker runs every other trial to success, and the quarantine shows
// in the API, the log and /metrics. The rogue's trials ended as it reported them (out of
// memory and workload errors are not retried).
TEST_F(PlacementBoundsTest, AWorkerWhoseTrialsEndAtOnceIsQuarantinedWhileAnHonestOneFinishesTheSweep) {
  StartCoordinator();
  Connect("http://127.0.0.1:" + std::to_string(http_port_));
  const std::string token = (dir_ / "worker-token").string();
  StartWorkerWith("rogue", 4, token, 0, {"FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH=1=error_oom,2=error_failed"});
  ASSERT_TRUE(WaitFor([&] { return ConnectedWorkers() == 1; }, 60s)) << ReadFile(log("rogue"));
  StartWorkerWith("honest", 1, token, 1);
  ASSERT_TRUE(WaitFor([&] { return ConnectedWorkers() == 2; }, 60s)) << ReadFile(log("honest"));

  const int kTrials = 16;  // 2 variants x 8 repeats
  json sweep = RunSweep(QuickSweep("capture", 3, kTrials / 2), 240s);
  ASSERT_EQ(sweep.value("state", ""), "finished") << sweep.dump();

  const json rogue = Worker("rogue");
  EXPECT_EQ(rogue.value("state", ""), "quarantined") << rogue.dump();
  EXPECT_GT(rogue.value("quarantine_s_left", 0.0), 60.0) << "5 minutes from its third ending";
  EXPECT_EQ(Worker("honest").value("state", ""), "alive");

  const auto on_rogue = Query("SELECT count(*) FROM attempts WHERE worker_id = 'rogue'");
  ASSERT_EQ(on_rogue.size(), 1u);
  const int rogue_attempts = on_rogue[0][0].get<int>();
  EXPECT_GE(rogue_attempts, 3);
  EXPECT_LE(rogue_attempts, 4 + 2) << "no trial after its quarantine";
  const auto honest = Query("SELECT count(*) FROM attempts WHERE worker_id = 'honest' AND outcome = 'succeeded'");
  ASSERT_EQ(honest.size(), 1u);
  EXPECT_EQ(honest[0][0].get<int>(), kTrials - rogue_attempts) << "every other trial succeeded on the honest worker";
  const auto rogue_outcomes =
      Query("SELECT count(*) FROM attempts WHERE worker_id = 'rogue' AND outcome IN ('oom', 'failed')");
  EXPECT_EQ(rogue_outcomes.at(0).at(0).get<int>(), rogue_attempts) << "ended as the worker reported";

  EXPECT_NE(ReadFile(log("coordinator")).find("worker quarantined"), std::string::npos);
  const std::string coordinator_log = ReadFile(log("coordinator"));
  EXPECT_NE(coordinator_log.find("worker=rogue for_s="), std::string::npos) << coordinator_log;
  EXPECT_EQ(coordinator_log.find("worker=honest for_s="), std::string::npos);
  auto metrics = client_->GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_NE(metrics->find("bakeoff_worker_quarantines_total 1"), std::string::npos);
}

// Two credentials (two lines of --worker-token-file), a cap of 4 slots per credential:
// two 2-slot workers of the first fill it, a third of it is refused for now (its log
// names the flag) and never listed, while a 4-slot worker of the second registers. From
// the other direction: once one of the first credential's workers stops, the refused one
// gets in by itself.
TEST_F(PlacementBoundsTest, TheWorkersOfOneCredentialTogetherOfferNoMoreThanItsCap) {
  std::ofstream(dir_ / "worker-token") << "party-a-token\nparty-b-token\n";
  std::ofstream(dir_ / "token-a") << "party-a-token\n";
  std::ofstream(dir_ / "token-b") << "party-b-token\n";
  StartCoordinator({"--max-credential-slots", "4"});
  Connect("http://127.0.0.1:" + std::to_string(http_port_));
  StartWorkerWith("a1", 2, (dir_ / "token-a").string(), 0);
  StartWorkerWith("a2", 2, (dir_ / "token-a").string(), 1);
  ASSERT_TRUE(WaitFor([&] { return ConnectedWorkers() == 2; }, 60s));
  StartWorkerWith("a3", 2, (dir_ / "token-a").string(), 2);
  StartWorkerWith("b1", 4, (dir_ / "token-b").string(), 3);
  ASSERT_TRUE(WaitFor([&] { return Worker("b1").value("connected", false); }, 60s)) << ReadFile(log("b1"));
  EXPECT_EQ(Worker("b1").value("credential", ""), "worker-token-2");
  EXPECT_EQ(Worker("a1").value("credential", ""), "worker-token-1");
  ASSERT_TRUE(WaitFor([&] { return ReadFile(log("a3")).find("--max-credential-slots") != std::string::npos; }, 30s))
      << ReadFile(log("a3"));
  EXPECT_TRUE(Worker("a3").empty()) << Worker("a3").dump();

  workers_.front()->Kill(SIGTERM);  // a1 says goodbye: its 2 slots free
  ASSERT_TRUE(WaitFor([&] { return Worker("a3").value("connected", false); }, 90s)) << ReadFile(log("a3"));
  EXPECT_EQ(ConnectedWorkers(), 3);
}

}  // namespace
}  // namespace bakeoff
