// LoopbackClusterTest: the fixture of the end-to-end suites that start their own
// `bakeoff coordinator` and `bakeoff worker` processes on loopback, with flags that
// TestCluster (test_cluster.h) does not take (TLS, metrics endpoints, a stand-in NVML):
// a fresh directory with the API token (`token`) and the workers' credential
// (`worker-token`), the coordinator on port 0 for both listeners, workers, a client of
// the API, and a sweep run to its end. Every process ends with the test (ProcessGuard
// kills its group). Thread-safety: one owner, the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/coordinator_client.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff::testing {

class LoopbackClusterTest : public ::testing::Test {
 protected:
  using json = nlohmann::json;

  // `dir_prefix` names the test's directory (FreshTestDir); `token` is the API token, and
  // `token`-worker the workers' credential.
  LoopbackClusterTest(std::string dir_prefix, std::string token)
      : dir_prefix_(std::move(dir_prefix)), token_(std::move(token)) {}

  void SetUp() override {
    dir_ = FreshTestDir(dir_prefix_);
    std::ofstream(dir_ / "token") << token_ << "\n";
    std::ofstream(dir_ / "worker-token") << token_ << "-worker\n";
  }
  // The workers first, then the coordinator; the directory stays when the test failed.
  void TearDown() override {
    workers_.clear();
    coordinator_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // The coordinator on 127.0.0.1 port 0 for both listeners, its database db(), then
  // `extra_args`; logs to log("coordinator"). Fills http_port_ and worker_port_, or fails
  // the test when it did not write its ports within 30 s.
  void StartCoordinator(const std::vector<std::string>& extra_args = {}) {
    const std::string ports = (dir_ / "ports.json").string();
    std::vector<std::string> argv{kBin + "/bakeoff", "coordinator", "--listen", "127.0.0.1:0", "--worker-listen",
                                  "127.0.0.1:0", "--db", db(), "--ports-file", ports, "--worker-token-file",
                                  (dir_ / "worker-token").string()};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    coordinator_ = std::make_unique<ProcessGuard>(argv, std::vector<std::string>{"BAKEOFF_TOKEN=" + token_},
                                                  log("coordinator"));
    ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ports); }, std::chrono::seconds(30)))
        << "coordinator did not start";
    json p = json::parse(std::ifstream(ports));
    http_port_ = p["http_port"];
    worker_port_ = p["worker_port"];
  }
  // client_: the API at `url` with the token (TLS verified against `ca_file` when given).
  void Connect(const std::string& url, const std::string& ca_file = "") {
    auto client = cli::CoordinatorClient::Create(url, token_, std::chrono::seconds(10), ca_file);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::make_unique<cli::CoordinatorClient>(*client);
  }

  // Worker `name` connecting to the coordinator's worker port: `slots` CPU slots,
  // `trainer`, TCPStore ports `store_ports` ("FIRST-LAST"), its directory dir_/`name`,
  // then `extra_args`; no BAKEOFF_TOKEN; logs to log(`name`).
  void StartWorker(const std::string& name, int slots, const std::string& trainer, const std::string& store_ports,
                   const std::vector<std::string>& extra_args = {}) {
    std::vector<std::string> argv{kBin + "/bakeoff", "worker", "--coordinator",
                                  "127.0.0.1:" + std::to_string(worker_port_), "--slots", std::to_string(slots),
                                  "--name", name, "--token-file", (dir_ / "worker-token").string(), "--trainer",
                                  trainer, "--store-ports", store_ports, "--work-dir", (dir_ / name).string()};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    workers_.push_back(std::make_unique<ProcessGuard>(argv, std::vector<std::string>{"BAKEOFF_TOKEN="}, log(name)));
  }
  // Workers the API lists as connected (-1 when it cannot be read).
  int ConnectedWorkers() const {
    auto workers = client_->GetJson("/api/v1/workers");
    if (!workers.ok()) return -1;
    int connected = 0;
    for (const auto& w : *workers) connected += w.value("connected", false);
    return connected;
  }

  // Submits `yaml` over HTTP and waits up to `timeout` for the sweep to leave "running";
  // the sweep as the API last showed it ({} when it was not created).
  json RunSweep(const std::string& yaml, std::chrono::seconds timeout) {
    auto created = client_->PostJson("/api/v1/sweeps", yaml, "application/yaml");
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (!created.ok()) return {};
    return WaitForSweepEnd(std::to_string((*created)["id"].get<int>()), timeout);
  }
  // Waits up to `timeout` for sweep `id` to leave "running" (a failure when it does not);
  // the sweep as the API last showed it.
  json WaitForSweepEnd(const std::string& id, std::chrono::seconds timeout) {
    json sweep;
    EXPECT_TRUE(WaitFor(
        [&] {
          auto got = client_->GetJson("/api/v1/sweeps/" + id);
          if (got.ok()) sweep = *got;
          return got.ok() && sweep.value("state", "") != "running";
        },
        timeout))
        << "sweep did not finish: " << sweep.dump();
    return sweep;
  }

  std::string log(const std::string& name) const { return (dir_ / (name + ".log")).string(); }
  std::string db() const { return (dir_ / "results.db").string(); }

  const std::string kBin = BAKEOFF_BINARY_DIR;
  std::filesystem::path dir_;
  std::unique_ptr<ProcessGuard> coordinator_;
  std::vector<std::unique_ptr<ProcessGuard>> workers_;
  std::unique_ptr<cli::CoordinatorClient> client_;
  int http_port_ = 0;
  int worker_port_ = 0;

 private:
  std::string dir_prefix_;
  std::string token_;
};

}  // namespace bakeoff::testing
