// TestCluster: a real `bakeoff coordinator` and real `bakeoff worker` processes on
// loopback (or workers on test hosts, test_hosts.h), each a ProcessGuard logging to the test's directory, with the helpers the
// fault-tolerance suites share: (re)start either side on the same ports and database,
// read the API, query SQLite, find rank processes and their workers. Every process
// ends with the cluster (ProcessGuard kills its group). Thread-safety: one owner.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/coordinator_client.h"
#include "metrics/store/read_only_query.h"
#include "protocol/frame_codec.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/raw_connection.h"
#include "tests/integration/test_files.h"
#include "tests/integration/test_sweeps.h"

namespace bakeoff::testing {

// Heartbeat timeout short enough that a loss is noticed within seconds.
inline const std::vector<std::string> kFastFailureArgs = {"--heartbeat-timeout", "2s", "--recovery-grace", "20s"};

// Where a worker runs: on this host (loopback), or on a test host (test_hosts.h): started
// through `launcher` (e.g. `ip netns exec NS`) with --host `address`.
struct WorkerHost {
  std::vector<std::string> launcher;
  std::string address = "127.0.0.1";
  std::vector<std::string> extra_args;  // more `bakeoff worker` flags
};

class TestCluster {
 public:
  using json = nlohmann::json;

  // `dir` holds the tokens, database, logs and worker directories: `token` the API's
  // (submit role, also in BAKEOFF_TOKEN), `worker-token` the workers' credential.
  TestCluster(std::filesystem::path dir, std::string trainer) : dir_(std::move(dir)), trainer_(std::move(trainer)) {
    std::ofstream(dir_ / "token") << "cluster-secret\n";
    std::ofstream(dir_ / "worker-token") << kWorkerToken << "\n";
  }
  static constexpr const char* kWorkerToken = "cluster-worker-secret";
  ~TestCluster() {
    workers_.clear();
    coordinator_.reset();
  }

  // Starts (or restarts, on the given ports and the same database) the coordinator.
  // Returns false (with a test failure) when it did not come up.
  bool StartCoordinator(const std::vector<std::string>& extra_args = {}, const std::string& http = "127.0.0.1:0",
                        const std::string& workers = "127.0.0.1:0") {
    const std::string ports = (dir_ / "ports.json").string();
    std::filesystem::remove(ports);
    std::vector<std::string> argv = coordinator_launcher_;
    const std::vector<std::string> command{kBin + "/bakeoff", "coordinator", "--listen", http, "--worker-listen",
                                           workers, "--db", db(), "--ports-file", ports, "--worker-token-file",
                                           (dir_ / "worker-token").string()};
    argv.insert(argv.end(), command.begin(), command.end());
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    coordinator_args_ = extra_args;
    coordinator_ = std::make_unique<ProcessGuard>(
        argv, std::vector<std::string>{"BAKEOFF_TOKEN=cluster-secret"},
        (dir_ / ("coordinator-" + std::to_string(++coordinator_starts_) + ".log")).string());
    if (!WaitFor([&] { return std::filesystem::exists(ports) && !ReadFile(ports).empty(); },
                 std::chrono::seconds(30))) {
      ADD_FAILURE() << "the coordinator did not start: " << ReadFile(CoordinatorLog());
      return false;
    }
    json p = json::parse(ReadFile(ports));
    http_port_ = p["http_port"];
    worker_port_ = p["worker_port"];
    http_host_ = http.substr(0, http.rfind(':'));
    worker_host_ = workers.substr(0, workers.rfind(':'));
    auto client = cli::CoordinatorClient::Create(url(), "cluster-secret", std::chrono::seconds(10));
    if (!client.ok()) {
      ADD_FAILURE() << client.status().ToString();
      return false;
    }
    client_ = std::make_unique<cli::CoordinatorClient>(*client);
    return true;
  }
  // A command the coordinator is started through from now on (e.g. `prlimit --nofile=64`:
  // it must exec the coordinator, so that the guard's pid is the coordinator's).
  void set_coordinator_launcher(std::vector<std::string> launcher) { coordinator_launcher_ = std::move(launcher); }
  // SIGKILLs the coordinator and starts it again on the same ports and database.
  bool RestartCoordinator() {
    coordinator_->Kill(SIGKILL);
    const std::string http = http_host_ + ":" + std::to_string(http_port_);
    const std::string workers = worker_host_ + ":" + std::to_string(worker_port_);
    return StartCoordinator(coordinator_args_, http, workers);
  }

  using WorkerHost = testing::WorkerHost;
  // Starts worker `name` with one CPU slot; `index` picks its TCPStore port range. It
  // connects to `coordinator_port` (default: the coordinator's, e.g. a proxy's else).
  void StartWorker(const std::string& name, int index, int coordinator_port = 0, const WorkerHost& host = {}) {
    const int port = coordinator_port != 0 ? coordinator_port : worker_port_;
    worker_ports_[name] = {index, port};
    worker_hosts_[name] = host;
    std::vector<std::string> argv = host.launcher;
    const std::vector<std::string> worker{
        kBin + "/bakeoff", "worker", "--coordinator", worker_host_ + ":" + std::to_string(port), "--host",
        host.address, "--slots", "1", "--name", name, "--token-file", (dir_ / "worker-token").string(), "--trainer", trainer_,
        "--store-ports", std::to_string(29900 + 40 * index) + "-" + std::to_string(29939 + 40 * index), "--work-dir",
        (dir_ / name).string()};
    argv.insert(argv.end(), worker.begin(), worker.end());
    argv.insert(argv.end(), host.extra_args.begin(), host.extra_args.end());
    workers_[name] = std::make_unique<ProcessGuard>(
        argv, worker_environment_, (dir_ / (name + "-" + std::to_string(++worker_starts_[name]) + ".log")).string());
  }
  // KEY=VALUE for workers started from now on (their ranks inherit it).
  void AddWorkerEnvironment(const std::string& entry) { worker_environment_.push_back(entry); }
  // SIGKILLs worker `name` (its ranks die with it) and starts it again, same name.
  void RestartWorker(const std::string& name) {
    workers_.at(name)->Kill(SIGKILL);
    StartWorker(name, worker_ports_.at(name).first, worker_ports_.at(name).second, worker_hosts_.at(name));
  }
  ProcessGuard& worker(const std::string& name) { return *workers_.at(name); }
  ProcessGuard& coordinator() { return *coordinator_; }

  bool WorkersConnected(int count) {
    auto w = client_->GetJson("/api/v1/workers");
    if (!w.ok()) return false;
    int connected = 0;
    for (const auto& x : *w) connected += x.value("connected", false) ? 1 : 0;
    return connected == count;
  }
  // The worker's state as the API lists it ("" when unknown or unreachable).
  std::string WorkerState(const std::string& name) {
    auto w = client_->GetJson("/api/v1/workers");
    if (!w.ok()) return "";
    for (const auto& x : *w) {
      if (x.value("id", "") == name) return x.value("state", "");
    }
    return "";
  }

  std::int64_t Submit(const std::string& yaml) {
    auto created = client_->PostJson("/api/v1/sweeps", yaml, "application/yaml");
    if (!created.ok()) {
      ADD_FAILURE() << created.status().ToString();
      return 0;
    }
    sweep_id_ = (*created)["id"];
    return sweep_id_;
  }
  // The sweep the helpers below look at, when it was submitted some other way (the CLI).
  void set_sweep_id(std::int64_t id) { sweep_id_ = id; }
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
  // A trial running on `worker` whose first attempt's ranks have started, waited for up
  // to a minute; -1 when none did.
  int WaitForTrialStartedOn(const std::string& worker) {
    int trial = -1;
    WaitFor([&] { return (trial = RunningOn(worker)) >= 0 && !RankPids(trial, 1).empty(); },
            std::chrono::seconds(60));
    return trial;
  }
  bool SweepFinished() {
    auto got = client_->GetJson("/api/v1/sweeps/" + std::to_string(sweep_id_));
    return got.ok() && got->value("state", "") == "finished";
  }

  // Rows of a read-only query on the results database (the test's own connection).
  std::vector<std::vector<json>> Query(const std::string& sql) {
    auto result = metrics::RunReadOnlyQuery(db(), sql);
    EXPECT_TRUE(result.ok()) << sql << ": " << result.status().ToString();
    return result.ok() ? result->rows : std::vector<std::vector<json>>{};
  }

  // Every trial of the sweep finished exactly once and succeeded, with a summary of
  // its final attempt.
  void ExpectEveryTrialSucceededOnce(std::size_t trials) {
    const std::string sweep = std::to_string(sweep_id_);
    auto rows = Query("SELECT id, state, outcome FROM trials WHERE sweep_id = " + sweep);
    ASSERT_EQ(rows.size(), trials);
    for (const auto& r : rows) {
      EXPECT_EQ(r[1], "finished") << "trial " << r[0];
      EXPECT_EQ(r[2], "succeeded") << "trial " << r[0];
    }
    auto summaries = Query(
        "SELECT t.id, count(s.trial_id) FROM trials t LEFT JOIN trial_summaries s ON s.trial_id = t.id "
        "AND s.attempt = t.attempts_used WHERE t.sweep_id = " + sweep + " GROUP BY t.id");
    for (const auto& r : summaries) EXPECT_GE(r[1].get<int>(), 1) << "trial " << r[0] << " has no summary";
    auto succeeded = Query("SELECT a.trial_id, count(*) FROM attempts a JOIN trials t ON t.id = a.trial_id "
                           "WHERE t.sweep_id = " + sweep + " AND a.outcome = 'succeeded' GROUP BY a.trial_id");
    for (const auto& r : succeeded) EXPECT_EQ(r[1], 1) << "trial " << r[0] << " succeeded more than once";
  }

  // Waits up to `timeout` for the sweep to finish (a fatal failure when it does not), then
  // ExpectEveryTrialSucceededOnce(`trials`).
  void ExpectSweepToFinishWithEveryTrialSucceededOnce(std::size_t trials,
                                                      std::chrono::seconds timeout = std::chrono::seconds(240)) {
    ASSERT_TRUE(WaitFor([&] { return SweepFinished(); }, timeout)) << Trials().dump();
    ExpectEveryTrialSucceededOnce(trials);
  }
  // The outcomes of `trial`'s attempts, the first attempt's first.
  std::vector<std::string> AttemptOutcomes(std::int64_t trial) {
    std::vector<std::string> out;
    for (const auto& r : Query("SELECT outcome FROM attempts WHERE trial_id = " + std::to_string(trial) +
                               " ORDER BY attempt")) {
      out.push_back(r[0].is_string() ? r[0].get<std::string>() : "");
    }
    return out;
  }

  // Every stored event of the sweep is there once and none of a final attempt is
  // missing: each rank of each trial's final attempt has one `started` and one `ready`
  // event, every warmup and measured step (`warmup_steps`, `steps`) once and one summary;
  // no attempt of any trial has a kind of event twice for a rank or a sequence number
  // twice; every attempt but the final one ended `lost` (only lost attempts rerun).
  void ExpectEveryEventStoredOnce(int warmup_steps, int steps) {
    const std::string sweep = std::to_string(sweep_id_);
    const std::string final_attempt =
        "JOIN trials t ON t.id = x.trial_id AND x.attempt = t.attempts_used WHERE t.sweep_id = " + sweep;
    // Per final attempt and rank (a rank is in the attempt's ranks_json): what it stored.
    const auto ranks = Query(
             "SELECT x.trial_id, x.attempt, r.value ->> '$.rank', "
             "(SELECT count(*) FROM step_metrics m WHERE m.trial_id = x.trial_id AND m.attempt = x.attempt "
             "AND m.rank = r.value ->> '$.rank' AND m.phase = 'warmup' AND m.step BETWEEN 0 AND " +
             std::to_string(warmup_steps - 1) +
             "), (SELECT count(*) FROM step_metrics m WHERE m.trial_id = x.trial_id AND m.attempt = x.attempt "
             "AND m.rank = r.value ->> '$.rank' AND m.phase = 'measure' AND m.step BETWEEN 0 AND " +
             std::to_string(steps - 1) +
             "), (SELECT count(*) FROM step_metrics m WHERE m.trial_id = x.trial_id AND m.attempt = x.attempt "
             "AND m.rank = r.value ->> '$.rank'), "
             "(SELECT count(*) FROM trial_summaries s WHERE s.trial_id = x.trial_id AND s.attempt = x.attempt "
             "AND s.rank = r.value ->> '$.rank'), "
             "(SELECT count(*) FROM events e WHERE e.trial_id = x.trial_id AND e.attempt = x.attempt "
             "AND e.rank = r.value ->> '$.rank' AND e.kind = 'started'), "
             "(SELECT count(*) FROM events e WHERE e.trial_id = x.trial_id AND e.attempt = x.attempt "
             "AND e.rank = r.value ->> '$.rank' AND e.kind = 'ready') "
             "FROM attempts x, json_each(x.ranks_json) r " + final_attempt);
    const auto trials = Query("SELECT count(*) FROM trials WHERE sweep_id = " + sweep);
    ASSERT_EQ(trials.size(), 1u);
    EXPECT_GE(static_cast<std::int64_t>(ranks.size()), trials[0][0].get<std::int64_t>()) << "final attempts' ranks";
    for (const auto& r : ranks) {
      const std::string where = "trial " + r[0].dump() + " attempt " + r[1].dump() + " rank " + r[2].dump();
      EXPECT_EQ(r[3], warmup_steps) << where << ": warmup steps";
      EXPECT_EQ(r[4], steps) << where << ": measured steps";
      EXPECT_EQ(r[5], warmup_steps + steps) << where << ": steps in all";
      EXPECT_EQ(r[6], 1) << where << ": summaries";
      EXPECT_EQ(r[7], 1) << where << ": started events";
      EXPECT_EQ(r[8], 1) << where << ": ready events";
    }
    const std::string of_sweep = " JOIN trials t ON t.id = x.trial_id WHERE t.sweep_id = " + sweep;
    for (const auto& r : Query("SELECT x.trial_id, x.attempt, x.rank, x.kind, count(*) FROM events x" + of_sweep +
                               " AND x.kind IN ('started', 'ready', 'error') "
                               "GROUP BY x.trial_id, x.attempt, x.rank, x.kind HAVING count(*) > 1")) {
      ADD_FAILURE() << "trial " << r[0] << " attempt " << r[1] << " rank " << r[2] << ": " << r[4] << " "
                    << r[3] << " events";
    }
    for (const auto& r : Query("SELECT x.trial_id, x.attempt, x.rank, x.seq, count(*) FROM events x" + of_sweep +
                               " AND x.seq IS NOT NULL GROUP BY x.trial_id, x.attempt, x.rank, x.seq "
                               "HAVING count(*) > 1")) {
      ADD_FAILURE() << "trial " << r[0] << " attempt " << r[1] << " rank " << r[2] << ": seq " << r[3]
                    << " stored " << r[4] << " times";
    }
    for (const auto& r : Query("SELECT x.trial_id, x.attempt, x.outcome FROM attempts x" + of_sweep +
                               " AND (x.outcome IS NULL OR (x.attempt < t.attempts_used AND x.outcome <> 'lost') "
                               "OR x.attempt > t.attempts_used)")) {
      ADD_FAILURE() << "trial " << r[0] << " attempt " << r[1] << " ended " << r[2]
                    << " (every attempt but the final one must be lost, and every one ended)";
    }
  }

  // rank -> pid of the attempt's rank processes, from their `started` events.
  std::map<int, int> RankPids(std::int64_t trial, int attempt) {
    std::map<int, int> out;
    for (const auto& r : Query("SELECT rank, data_json FROM events WHERE kind = 'started' AND trial_id = " +
                               std::to_string(trial) + " AND attempt = " + std::to_string(attempt))) {
      out[r[0].get<int>()] = json::parse(r[1].get<std::string>()).value("pid", 0);
    }
    return out;
  }
  // The worker (by name) whose process is `pid`'s parent, or "".
  std::string WorkerOf(int pid) {
    const int parent = ParentPid(pid);
    for (const auto& [name, guard] : workers_) {
      if (guard->pid() == parent) return name;
    }
    return "";
  }

  // A process that exists and is not a zombie.
  static bool Alive(int pid) {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    if (stat.empty() || paren == std::string::npos || paren + 2 >= stat.size()) return false;
    const char state = stat[paren + 2];
    return state != 'Z' && state != 'X';
  }
  static int ParentPid(int pid) {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos) return -1;
    return std::atoi(stat.c_str() + paren + 4);  // ") S PPID"
  }

  // The results database the coordinator opens (--db) and Query reads.
  std::string db() const { return db_.empty() ? (dir_ / "results.db").string() : db_; }
  // Another database file (e.g. on a file system of its own) from the coordinator's
  // next start on.
  void set_database(std::string path) { db_ = std::move(path); }
  std::filesystem::path CoordinatorLog() const {
    return dir_ / ("coordinator-" + std::to_string(coordinator_starts_) + ".log");
  }
  std::filesystem::path WorkerLog(const std::string& name) {
    return dir_ / (name + "-" + std::to_string(worker_starts_[name]) + ".log");
  }
  // The coordinator's API, e.g. for `bakeoff submit --coordinator`.
  std::string url() const { return "http://" + http_host_ + ":" + std::to_string(http_port_); }
  std::filesystem::path dir() const { return dir_; }
  int http_port() const { return http_port_; }
  int worker_port() const { return worker_port_; }
  std::int64_t sweep_id() const { return sweep_id_; }
  cli::CoordinatorClient& client() { return *client_; }

 private:
  const std::string kBin = BAKEOFF_BINARY_DIR;
  std::filesystem::path dir_;
  std::string trainer_;
  std::unique_ptr<ProcessGuard> coordinator_;
  std::vector<std::string> coordinator_launcher_;
  std::vector<std::string> coordinator_args_;
  std::map<std::string, std::unique_ptr<ProcessGuard>> workers_;
  std::map<std::string, std::pair<int, int>> worker_ports_;  // name -> (index, port)
  std::map<std::string, WorkerHost> worker_hosts_;
  std::map<std::string, int> worker_starts_;
  std::vector<std::string> worker_environment_{"BAKEOFF_TOKEN="};
  std::unique_ptr<cli::CoordinatorClient> client_;
  std::string http_host_ = "127.0.0.1", worker_host_ = "127.0.0.1";
  int http_port_ = 0, worker_port_ = 0, coordinator_starts_ = 0;
  std::int64_t sweep_id_ = 0;
  std::string db_;
};

// A worker's register message (docs/protocol.md) as `worker_name` with `token` (the
// cluster's worker credential unless given): one CPU slot, no GPU, on 127.0.0.1, running
// nothing. Tests change the fields they are about and send it with a RawConnection.
inline nlohmann::json RegisterMessage(const std::string& worker_name,
                                      const std::string& token = TestCluster::kWorkerToken) {
  return {{"type", "register"},
          {"token", token},
          {"worker_name", worker_name},
          {"host", "127.0.0.1"},
          {"resources", {{"cpu_slots", 1}, {"cuda_devices", nlohmann::json::array()}}},
          {"running", nlohmann::json::array()},
          {"protocol_version", 1}};
}

// What the coordinator answers the register message `reg` sent on a new worker
// connection to `port`, read until it closes the connection ("" and a failure when the
// connection or the frame could not be made).
inline std::string AnswerToRegister(int port, const nlohmann::json& reg) {
  RawConnection worker(port);
  auto frame = protocol::EncodeFrame(reg);
  if (!worker.connected() || !frame.ok()) {
    ADD_FAILURE() << "cannot send a register frame to port " << port;
    return "";
  }
  worker.Write(*frame);
  bool closed = false;
  return worker.ReadUntilClosed(&closed);
}

// A test with a fresh directory of its own (FreshTestDir(`dir_prefix`)) and a
// TestCluster in it, running `trainer`; the directory is removed when the test passed.
// With `skip_without_trainer`, a test whose trainer is not built is skipped. Suites
// derive from it, naming their directory in their constructor.
class ClusterTest : public ::testing::Test {
 protected:
  explicit ClusterTest(std::string dir_prefix, std::string trainer = RealTrainerPath(),
                       bool skip_without_trainer = false)
      : dir_prefix_(std::move(dir_prefix)), trainer_(std::move(trainer)), skip_without_trainer_(skip_without_trainer) {}
  void SetUp() override {
    if (skip_without_trainer_ && !std::filesystem::exists(trainer_)) GTEST_SKIP() << trainer_ << " is not built";
    dir_ = FreshTestDir(dir_prefix_);
    cluster_ = std::make_unique<TestCluster>(dir_, trainer_);
  }
  void TearDown() override {
    cluster_.reset();
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // The coordinator (with `coordinator_args`) and one-slot workers w1..w`workers`, all
  // registered.
  void StartCluster(int workers, const std::vector<std::string>& coordinator_args = {}) {
    ASSERT_TRUE(cluster_->StartCoordinator(coordinator_args));
    for (int w = 1; w <= workers; ++w) cluster_->StartWorker("w" + std::to_string(w), w);
    ASSERT_TRUE(WaitFor([&] { return cluster_->WorkersConnected(workers); }, std::chrono::seconds(30)))
        << "workers did not register";
  }
  // Fails the test when the coordinator, once started, is no longer running.
  void ExpectCoordinatorAlive() {
    if (cluster_ && cluster_->http_port() != 0) {
      EXPECT_FALSE(cluster_->coordinator().WaitExit(std::chrono::milliseconds(0)).has_value())
          << "the coordinator died";
    }
  }

  std::filesystem::path dir_;
  std::unique_ptr<TestCluster> cluster_;

 private:
  std::string dir_prefix_;
  std::string trainer_;
  bool skip_without_trainer_;
};

}  // namespace bakeoff::testing
