// A real coordinator and two real workers (processes, loopback) run a sweep submitted
// over HTTP to the end; every trial's outcome and summary land in SQLite and in the
// report; a world-size-2 trial spans two one-slot workers; no token means 401.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "cli/coordinator_client.h"
#include "metrics/store/results_store.h"
#include "tests/integration/loopback_cluster_test.h"
#include "tests/integration/test_sweeps.h"
#include "worker/core_partition.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::ProcessGuard;
using testing::WaitFor;

std::string GangSweep(int steps, int repeats) {
  return testing::TinyLoraSweep{.name = "e2e-gang",
                                .question = "does a sweep run end to end?",
                                .steps = steps,
                                .parameters = {"micro_batch: {values: [1, 2]}", "world_size: {value: 2}"},
                                .repeats = repeats}
      .Yaml();
}

class SweepEndToEndTest : public testing::LoopbackClusterTest {
 protected:
  SweepEndToEndTest() : LoopbackClusterTest("bakeoff-e2e", "e2e-secret") {}

  void StartCluster(const std::string& trainer) {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    for (int i = 1; i <= 2; ++i) {
      StartWorker("w" + std::to_string(i), 1, trainer,
                  std::to_string(29700 + 50 * i) + "-" + std::to_string(29749 + 50 * i));
    }
    ASSERT_NO_FATAL_FAILURE(Connect("http://127.0.0.1:" + std::to_string(http_port_)));
    ASSERT_TRUE(WaitFor([&] { return ConnectedWorkers() == 2; }, 30s)) << "workers did not register";
  }
};

void ExpectEveryTrialSucceededAcrossBothWorkers(const std::string& db, std::int64_t sweep_id, int trials) {
  auto store = metrics::ResultsReader::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto results = (*store)->ListTrialResults(sweep_id);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), static_cast<std::size_t>(trials));
  for (const auto& r : *results) {
    EXPECT_EQ(r.trial.state, metrics::TrialState::kFinished);
    ASSERT_TRUE(r.trial.outcome.has_value());
    EXPECT_EQ(*r.trial.outcome, metrics::Outcome::kSucceeded) << r.trial.reason;
    ASSERT_TRUE(r.attempt.has_value());
    ASSERT_EQ(r.attempt->ranks.size(), 2u) << "world size 2";
    std::set<std::string> workers;
    for (const auto& rank : r.attempt->ranks) workers.insert(rank.worker_id);
    EXPECT_EQ(workers, (std::set<std::string>{"w1", "w2"})) << "a gang over two one-slot workers";
    ASSERT_FALSE(r.summaries.empty()) << "trial " << r.trial.id << " has no summary";
    EXPECT_GT(r.summaries[0].figures.tokens_per_s.value_or(0.0), 0.0);
  }
}

TEST_F(SweepEndToEndTest, RequestWithoutTokenIsUnauthorized) {
  StartCluster(kBin + "/bakeoff-fake-trainer");
  auto anonymous = cli::CoordinatorClient::Create("http://127.0.0.1:" + std::to_string(http_port_), "", 10s);
  auto response = anonymous->Get("/api/v1/sweeps");
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 401);
  EXPECT_EQ(response->www_authenticate.rfind("Bearer", 0), 0u);
  auto health = anonymous->Get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

TEST_F(SweepEndToEndTest, GangSweepRunsToTheEndWithFakeTrainer) {
  StartCluster(kBin + "/bakeoff-fake-trainer");
  json sweep = RunSweep(GangSweep(3, 2), 120s);
  ASSERT_EQ(sweep.value("state", ""), "finished");
  EXPECT_EQ(sweep["counts"]["succeeded"], 4);
  ExpectEveryTrialSucceededAcrossBothWorkers(db(), sweep["id"], 4);

  // The same results through the CLI, from the file, with no server involved.
  ProcessGuard status({kBin + "/bakeoff", "status", std::to_string(sweep["id"].get<int>()), "--db", db(),
                       "--format", "json", "--output", (dir_ / "status.json").string()});
  ASSERT_EQ(status.WaitExit(60s), 0);
  json trials = json::parse(std::ifstream(dir_ / "status.json"))["trials"];
  ASSERT_EQ(trials.size(), 4u);
  for (const auto& t : trials) EXPECT_EQ(t["outcome"], "succeeded");
}

TEST_F(SweepEndToEndTest, ReportJsonHasEveryTrial) {
  StartCluster(kBin + "/bakeoff-fake-trainer");
  json sweep = RunSweep(GangSweep(3, 1), 120s);
  ASSERT_EQ(sweep.value("state", ""), "finished");
  ProcessGuard report({kBin + "/bakeoff", "report", std::to_string(sweep["id"].get<int>()), "--db", db(), "--format",
                       "json", "--output", (dir_ / "report.json").string()},
                      {}, (dir_ / "report.log").string());
  ASSERT_EQ(report.WaitExit(120s), 0) << "bakeoff report failed; see " << (dir_ / "report.log");
  json parsed = json::parse(std::ifstream(dir_ / "report.json"), nullptr, false);
  ASSERT_FALSE(parsed.is_discarded());
  const std::string text = parsed.dump();
  EXPECT_NE(text.find("micro_batch=1"), std::string::npos);
  EXPECT_NE(text.find("micro_batch=2"), std::string::npos);
  EXPECT_NE(text.find("succeeded"), std::string::npos);
}

TEST_F(SweepEndToEndTest, GangSweepRunsWithTheRealTrainer) {
  const std::string trainer = testing::RealTrainerPath();
  if (!std::filesystem::exists(trainer)) GTEST_SKIP() << "bakeoff-trainer is not built in " << kBin;
  StartCluster(trainer);
  json sweep = RunSweep(GangSweep(4, 1), 600s);
  ASSERT_EQ(sweep.value("state", ""), "finished");
  ExpectEveryTrialSucceededAcrossBothWorkers(db(), sweep["id"], 2);
  const std::string id = std::to_string(sweep["id"].get<int>());
  const std::string url = "http://127.0.0.1:" + std::to_string(http_port_);
  const std::string token = (dir_ / "token").string();

  // The report of this real finished sweep in every format, from the file and from the
  // running coordinator (same options, same bootstrap seed: the same text).
  for (const std::string format : {"table", "markdown", "json", "csv", "html"}) {
    const std::string from_db = (dir_ / ("report-db." + format)).string();
    const std::string from_api = (dir_ / ("report-api." + format)).string();
    ProcessGuard local({kBin + "/bakeoff", "report", id, "--db", db(), "--format", format, "--memory-budget",
                        "64GiB", "--output", from_db},
                       {}, (dir_ / ("report-db-" + format + ".log")).string());
    ASSERT_EQ(local.WaitExit(120s), 0) << format;
    ProcessGuard remote({kBin + "/bakeoff", "report", id, "--coordinator", url, "--token-file", token, "--format",
                         format, "--memory-budget", "64GiB", "--output", from_api},
                        {"BAKEOFF_TOKEN="}, (dir_ / ("report-api-" + format + ".log")).string());
    ASSERT_EQ(remote.WaitExit(120s), 0) << format;
    const std::string text = testing::ReadFile(from_db);
    const std::string served = testing::ReadFile(from_api);
    EXPECT_EQ(served, text) << format << ": the served report differs from the file's";
    // Markdown escapes '_' (MarkdownText), so a name cannot add emphasis.
    const std::string variant = format == "markdown" ? "micro\\_batch=2" : "micro_batch=2";
    ASSERT_NE(text.find(variant), std::string::npos) << format;
    if (format == "json") {
      json parsed = json::parse(text, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded());
      EXPECT_NE(parsed.dump().find("\"memory_budget_bytes\":68719476736"), std::string::npos)
          << "the memory budget reached the report";
    } else if (format == "csv") {
      EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << "a header and one row per variant";
    } else if (format == "markdown") {
      EXPECT_NE(text.find("| variant |"), std::string::npos);
    } else if (format == "html") {
      EXPECT_EQ(text.rfind("<!DOCTYPE html>", 0), 0u);
      EXPECT_NE(text.find("</html>"), std::string::npos);
      EXPECT_NE(text.find("id=\"chart-speedup\""), std::string::npos);
      EXPECT_NE(text.find("id=\"chart-memory\""), std::string::npos);
    } else {
      EXPECT_NE(text.find("succeeded"), std::string::npos);
    }
  }

  // Read-only SQL through the coordinator, and a write refused.
  const std::string rows = (dir_ / "query.json").string();
  ProcessGuard query({kBin + "/bakeoff", "query", "--coordinator", url, "--token-file", token, "--format", "json",
                      "--output", rows, "SELECT count(*) FROM trials WHERE outcome = 'succeeded' AND sweep_id = " + id},
                     {"BAKEOFF_TOKEN="}, (dir_ / "query.log").string());
  ASSERT_EQ(query.WaitExit(60s), 0);
  EXPECT_EQ(json::parse(std::ifstream(rows))["rows"][0][0], 2);
  ProcessGuard write({kBin + "/bakeoff", "query", "--coordinator", url, "--token-file", token, "DELETE FROM trials"},
                     {"BAKEOFF_TOKEN="}, (dir_ / "query-write.log").string());
  EXPECT_EQ(write.WaitExit(60s), 2) << "a write is a usage error";
  ExpectEveryTrialSucceededAcrossBothWorkers(db(), sweep["id"], 2);
}

// Issue 33, the reviewer's case: two workers started by hand on one host, the docs'
// eager-against-jit sweep with no `threads`, run twice back to back. Before isolation each
// trial took every core while another ran beside it, and the two runs said 0.16x [0.09-0.29]
// and 7.42x. Now each worker's rank is pinned to a core of its own (the second worker,
// refused the first one's cores, names its own with --cpus as the refusal says), and
// the two runs agree within their intervals.
TEST_F(SweepEndToEndTest, TheSameSweepTwiceOnTwoHandStartedWorkersAgreesWithinItsIntervals) {
  const std::string trainer = testing::RealTrainerPath();
  if (!std::filesystem::exists(trainer)) GTEST_SKIP() << "bakeoff-trainer is not built in " << kBin;
  const std::vector<int> cpus = worker::AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  ASSERT_NO_FATAL_FAILURE(StartCoordinator());
  StartWorker("a", 1, trainer, "29800-29849", {"--cpus", std::to_string(cpus[0])});
  StartWorker("b", 1, trainer, "29850-29899", {"--cpus", std::to_string(cpus[1])});
  ASSERT_NO_FATAL_FAILURE(Connect("http://127.0.0.1:" + std::to_string(http_port_)));
  ASSERT_TRUE(WaitFor([&] { return ConnectedWorkers() == 2; }, 30s)) << "workers did not register";
  std::vector<std::pair<double, double>> intervals;
  for (const std::string name : {"agree-1", "agree-2"}) {
    const std::string yaml = testing::TinyLoraSweep{.name = name,
                                                    .question = "is jit faster than eager?",
                                                    .seq_len = 64,
                                                    .warmup_steps = 2,
                                                    .steps = 40,
                                                    .one_thread = false,
                                                    .parameters = {"compile_mode: {values: [eager, jit]}"},
                                                    .baseline = "{compile_mode: eager}",
                                                    .repeats = 3}
                                 .Yaml();
    json sweep = RunSweep(yaml, 600s);
    ASSERT_EQ(sweep.value("state", ""), "finished") << sweep.dump();
    const std::string id = std::to_string(sweep["id"].get<int>());
    auto report = client_->GetJson("/api/v1/sweeps/" + id + "/report?format=json");
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    json speedup;
    for (const auto& v : (*report)["variants"]) {
      if (v.value("key", "") == "compile_mode=jit") speedup = v["comparison"]["speedup"];
    }
    ASSERT_TRUE(speedup.is_object() && speedup["ci_low"].is_number()) << report->dump();
    intervals.emplace_back(speedup["ci_low"].get<double>(), speedup["ci_high"].get<double>());
    // Why they agree: every rank ran on the one core its worker was given.
    auto store = metrics::ResultsReader::Open(db());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto results = (*store)->ListTrialResults(sweep["id"].get<int>());
    ASSERT_TRUE(results.ok());
    ASSERT_EQ(results->size(), 6u);
    for (const auto& r : *results) {
      ASSERT_FALSE(r.summaries.empty()) << "trial " << r.trial.id;
      ASSERT_TRUE(r.summaries[0].figures.applied.has_value()) << "trial " << r.trial.id;
      const json& applied = *r.summaries[0].figures.applied;
      const std::string reason = applied["decisions"]["threads"].value("reason", "");
      EXPECT_NE(reason.find("pinned to this rank alone"), std::string::npos) << reason;
      EXPECT_EQ(applied.value("threads", 0), 1) << "one core a worker: one thread";
    }
  }
  const auto& [low1, high1] = intervals[0];
  const auto& [low2, high2] = intervals[1];
  EXPECT_LE(std::max(low1, low2), std::min(high1, high2))
      << "the two runs disagree: [" << low1 << ", " << high1 << "] and [" << low2 << ", " << high2 << "]";
}

}  // namespace
}  // namespace bakeoff
