// Requests that once stalled, bloated or misled a real coordinator process (issue 13):
// a report with a huge bootstrap, a million-point grid, a worker advertising a
// link-local metrics address, and a database that cannot be written. Each is answered
// with a clear error while heartbeats and /healthz keep flowing, and /healthz tells the
// truth about the store.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"
#include "metrics/store/results_store.h"
#include "protocol/frame_codec.h"
#include "tests/integration/raw_connection.h"
#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::TestCluster;

// Stores, as the coordinator would, a finished sweep of `variants` one-repeat variants
// (micro_batch 1..N, baseline 1), every trial succeeded with `steps` measured steps:
// each comparison's interval is then a bootstrap over the measured steps.
void SeedFinishedSweep(const std::string& db, const std::string& name, int variants, int steps) {
  std::string yaml = "name: " + name + "\nworkload: {executor: lora, model: tiny, steps: " + std::to_string(steps) +
                     "}\nparameters:\n  micro_batch: {values: [";
  for (int i = 1; i <= variants; ++i) yaml += (i > 1 ? ", " : "") + std::to_string(i);
  yaml += "]}\nbaseline: {micro_batch: 1}\nrepeats: 1\n";
  auto spec = spec::ParseSweepText(yaml, "seed.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto expanded = spec::Expand(*spec);
  ASSERT_TRUE(expanded.ok()) << expanded.status().ToString();
  metrics::StoreOptions options;
  options.path = db;
  auto opened = metrics::ResultsStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  metrics::ResultsStore& store = **opened;
  metrics::SweepRecord record;
  record.name = spec->name;
  record.yaml = yaml;
  record.spec = spec::ToJson(*spec);
  std::vector<metrics::VariantRecord> records;
  for (const auto& v : expanded->variants) {
    metrics::VariantRecord vr;
    vr.key = v.key;
    vr.ordinal = static_cast<std::int64_t>(v.index);
    for (const auto& [axis, value] : v.axis_values) vr.params[axis] = value;
    vr.trainer_config = v.config.Merged();
    vr.counterpart_key = v.counterpart_key;
    vr.is_baseline = v.is_baseline;
    records.push_back(vr);
  }
  std::vector<metrics::NewTrial> trials;
  for (const auto& t : expanded->trials) {
    trials.push_back({expanded->variants[t.variant].key, t.repeat, static_cast<std::int64_t>(t.index), 1});
  }
  auto created = store.CreateSweep(record, records, trials);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE(store.UpsertWorker({"w-1", "node-a", "node-a", {}, "", metrics::WorkerState::kIdle}).ok());
  for (std::int64_t trial_id : created->trial_ids) {
    metrics::AttemptRecord placement;
    placement.worker_id = "w-1";
    placement.host = "node-a";
    placement.ranks = {{0, "w-1", "node-a", "cpu"}};
    auto assigned = store.AssignTrial(trial_id, 0, placement);
    ASSERT_TRUE(assigned.ok() && assigned->applied);
    ASSERT_TRUE(store.MarkRunning(trial_id, assigned->attempt).ok());
    metrics::MetricsBatch batch;
    for (int step = 1; step <= steps; ++step) {
      metrics::StepRecord m;
      m.trial_id = trial_id;
      m.attempt = assigned->attempt;
      m.row.step = step;
      m.phase = "measure";
      m.row.step_s = 0.1 * (1 + 0.01 * (step % 7)) * (1 + 0.001 * static_cast<double>(trial_id % 13));
      m.row.loss = 2.0 - 0.001 * step;
      batch.steps.push_back(m);
    }
    batch.summaries.push_back(
        metrics::ReadSummaryRecord(
            {trial_id, assigned->attempt, 0,
             {{"step_s_median", 0.1}, {"tokens_per_s", 1000.0 + static_cast<double>(trial_id % 13)},
              {"peak_mem_bytes", 1000000}, {"warmup_s", 1.0}, {"first_step_s", 1.0}}})
            .value());
    ASSERT_TRUE(store.AppendBatch(batch).ok());
    auto finished = store.FinishTrial(trial_id, assigned->attempt, metrics::Outcome::kSucceeded, "");
    ASSERT_TRUE(finished.ok() && finished->applied);
  }
  ASSERT_TRUE(store.SetSweepState(created->sweep_id, metrics::SweepState::kFinished).ok());
}

// The peak resident set of process `pid` in bytes (/proc/PID/status VmHWM), or -1.
std::int64_t PeakRssBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

class CoordinatorBoundsTest : public testing::ClusterTest {
 protected:
  CoordinatorBoundsTest() : ClusterTest("bakeoff-bounds") {}
  void TearDown() override {
    ExpectCoordinatorAlive();
    ClusterTest::TearDown();
  }
  // A client of its own: a request in flight on another thread does not share its socket.
  cli::CoordinatorClient Client(std::chrono::milliseconds timeout) {
    auto client = cli::CoordinatorClient::Create(cluster_->url(), "cluster-secret", timeout);
    EXPECT_TRUE(client.ok());
    return *client;
  }
  bool Start() { return cluster_->StartCoordinator(); }
};

// 61 one-repeat variants of 100 measured steps: 60 comparisons x 200 steps = 12,000
// steps to resample. At 20,000 resamples that is 2.4e8 draws, over the 2e8 budget.
TEST_F(CoordinatorBoundsTest, AReportOverTheBootstrapBudgetIs413AndOverTheMaximumResamplesIs400) {
  SeedFinishedSweep(cluster_->db(), "many", 61, 100);
  ASSERT_TRUE(Start());
  auto over_budget = cluster_->client().Get("/api/v1/sweeps/many/report?format=json&resamples=20000");
  ASSERT_TRUE(over_budget.ok()) << over_budget.status().ToString();
  EXPECT_EQ(over_budget->status, 413) << over_budget->body;
  EXPECT_NE(over_budget->body.find("20000 resamples x 12000 measured steps"), std::string::npos) << over_budget->body;
  EXPECT_NE(over_budget->body.find("over the limit of 200000000 bootstrap draws"), std::string::npos)
      << over_budget->body;
  EXPECT_NE(over_budget->body.find("ask for at most 16666 resamples"), std::string::npos) << over_budget->body;
  auto over_max = cluster_->client().Get("/api/v1/sweeps/many/report?resamples=1000000");
  ASSERT_TRUE(over_max.ok());
  EXPECT_EQ(over_max->status, 400) << over_max->body;
  EXPECT_NE(over_max->body.find("a whole number in [100, 100000]"), std::string::npos) << over_max->body;
  auto fine = cluster_->client().Get("/api/v1/sweeps/many/report?format=json&resamples=200");
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine->status, 200) << fine->body;
}

// The report is built on a worker thread: while a big one (6e7 draws, allowed; about
// 3 s here, 92 s once on the event loop at 1e6 resamples) is built, /healthz answers at once. No timing of the report itself is asserted.
TEST_F(CoordinatorBoundsTest, ABigReportDoesNotDelayHealthz) {
  SeedFinishedSweep(cluster_->db(), "many", 61, 100);
  ASSERT_TRUE(Start());
  auto report = std::async(std::launch::async, [&] {
    return Client(600s).Get("/api/v1/sweeps/many/report?format=json&resamples=5000");
  });
  int answered = 0;
  do {
    auto health = std::async(std::launch::async, [&] { return Client(30s).Get("/healthz"); });
    ASSERT_EQ(health.wait_for(5s), std::future_status::ready) << "/healthz waited on the report";
    auto reply = health.get();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->status, 200);
    ++answered;
  } while (report.wait_for(100ms) != std::future_status::ready);
  auto built = report.get();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(built->status, 200) << built->body.substr(0, 500);
  EXPECT_GE(answered, 1);
}

// A 1 KB 100x100x100 grid: refused at the trial cap by a count, never built (it once
// took the coordinator to 1.39 GB before the 413).
TEST_F(CoordinatorBoundsTest, AMillionPointGridIsRefusedAtTheCapWithBoundedMemory) {
  ASSERT_TRUE(Start());
  std::string yaml = "name: huge\nworkload: {executor: lora, model: tiny, adapters_out: " + std::string(250, 'a') +
                     "}\nparameters:\n";
  for (const char* axis : {"seed", "micro_batch", "lora_rank"}) {
    yaml += std::string("  ") + axis + ": {values: [";
    for (int i = 1; i <= 100; ++i) yaml += (i > 1 ? "," : "") + std::to_string(i);
    yaml += "]}\n";
  }
  yaml += "repeats: 1\n";
  auto reply = cluster_->client().Post("/api/v1/sweeps", yaml, "application/yaml");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->status, 413) << reply->body;
  EXPECT_NE(reply->body.find("1000000 trials (1000000 variants x 1 repeats) is over the cap of 10000"),
            std::string::npos)
      << reply->body;
  const std::int64_t peak = PeakRssBytes(cluster_->coordinator().pid());
  ASSERT_GT(peak, 0);
  EXPECT_LT(peak, 256 << 20) << "peak RSS of the coordinator: " << peak << " bytes";
  auto health = cluster_->client().Get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

// Sends one register frame on the worker port and returns what came back until close
// (or `wait` passed).
std::string RegisterRaw(int port, const json& reg, std::chrono::seconds wait) {
  testing::RawConnection connection(port, wait);
  auto frame = protocol::EncodeFrame(reg);
  if (!connection.connected() || !frame.ok()) return "";
  connection.Write(*frame);
  bool closed = false;
  return connection.ReadUntilClosed(&closed);
}

json Registration(const std::string& name, const std::string& metrics_host) {
  json reg = testing::RegisterMessage(name);
  reg["store_ports"] = {{"first", 30000}, {"last", 30010}};
  reg["metrics_port"] = 80;
  reg["metrics_host"] = metrics_host;
  return reg;
}

// A worker credential must not point Prometheus at the cloud metadata address (or
// anything that is not a host) through /api/v1/sd.
TEST_F(CoordinatorBoundsTest, ALinkLocalOrMalformedMetricsHostIsRefusedAndNeverDiscovered) {
  ASSERT_TRUE(Start());
  // 127.0.0.2: loopback that is not the connection's own address (issue 32, hole 11: a
  // worker credential pointing Prometheus at the coordinator host's Redis, 127.0.0.1:6379,
  // from another host).
  for (const std::string host : {"169.254.169.254", "fe80::1", "evil/path", "a b", "127.0.0.2"}) {
    const std::string reply = RegisterRaw(cluster_->worker_port(), Registration("meta", host), 15s);
    EXPECT_NE(reply.find("rejected"), std::string::npos) << host << ": " << reply;
    EXPECT_NE(reply.find("metrics host"), std::string::npos) << host << ": " << reply;
  }
  auto sd = cluster_->client().GetJson("/api/v1/sd");
  ASSERT_TRUE(sd.ok()) << sd.status().ToString();
  EXPECT_EQ(sd->dump().find("169.254"), std::string::npos) << sd->dump();
  EXPECT_TRUE(sd->empty()) << sd->dump();
}

// Holds the database's write lock from another process's point of view (a second
// connection) until destroyed.
class WriteLockHolder {
 public:
  explicit WriteLockHolder(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) == SQLITE_OK) {
      locked_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
    }
  }
  ~WriteLockHolder() { sqlite3_close(db_); }
  void Release() {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    locked_ = false;
  }
  bool locked() const { return locked_; }

 private:
  sqlite3* db_ = nullptr;
  bool locked_ = false;
};

// Not a full disk: the store cannot write because another process holds the lock past
// the busy timeout. /healthz says so (503 with the reason) and recovers by itself.
TEST_F(CoordinatorBoundsTest, HealthzIs503WhileTheStoreCannotWriteForAnyReasonAndRecovers) {
  ASSERT_TRUE(Start());
  const std::string sweep = "name: s\nworkload: {executor: lora, model: tiny, steps: 2}\nparameters:\n"
                            "  micro_batch: {values: [1, 2]}\nrepeats: 1\n";
  WriteLockHolder lock(cluster_->db());
  ASSERT_TRUE(lock.locked());
  auto refused = Client(60s).Post("/api/v1/sweeps", sweep, "application/yaml");
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 503) << refused->body;
  auto health = cluster_->client().Get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 503) << health->body;
  EXPECT_NE(health->body.find("lock"), std::string::npos) << health->body;
  lock.Release();
  // The coordinator probes the store every 5 s; healthy again after a real write.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto h = cluster_->client().Get("/healthz");
        return h.ok() && h->status == 200;
      },
      60s));
  auto accepted = cluster_->client().Post("/api/v1/sweeps", sweep, "application/yaml");
  ASSERT_TRUE(accepted.ok());
  EXPECT_EQ(accepted->status, 201) << accepted->body;
}

// The database made read-only under the coordinator: chmod for an ordinary user; root
// ignores permissions, so as root the files are made immutable (chattr +i) where the
// file system supports it.
TEST_F(CoordinatorBoundsTest, HealthzIs503WhileTheDatabaseIsReadOnlyAndRecovers) {
  ASSERT_TRUE(Start());
  const std::string db = cluster_->db();
  const std::vector<std::string> files{db, db + "-wal"};
  auto make_read_only = [&](bool read_only) {
    bool ok = true;
    for (const auto& f : files) {
      std::string command = geteuid() == 0 ? std::string("chattr ") + (read_only ? "+i" : "-i") + " '" + f + "'"
                                           : std::string("chmod ") + (read_only ? "a-w" : "u+w") + " '" + f + "'";
      ok = ok && std::system((command + " 2>/dev/null").c_str()) == 0;
    }
    return ok;
  };
  if (!make_read_only(true)) {
    make_read_only(false);
    GTEST_SKIP() << "cannot make the database read-only here (root without chattr +i support)";
  }
  const std::string sweep = "name: s\nworkload: {executor: lora, model: tiny, steps: 2}\nparameters:\n"
                            "  micro_batch: {values: [1, 2]}\nrepeats: 1\n";
  auto refused = cluster_->client().Post("/api/v1/sweeps", sweep, "application/yaml");
  auto health = cluster_->client().Get("/healthz");
  ASSERT_TRUE(make_read_only(false));
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 503) << refused->body;
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->status, 503) << health->body;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto h = cluster_->client().Get("/healthz");
        return h.ok() && h->status == 200;
      },
      60s));
}

}  // namespace
}  // namespace bakeoff
