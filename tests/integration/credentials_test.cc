// Scoped credentials against a real coordinator, real workers and the real CLI (issue
// 13): an API token never registers a worker, the worker credential never calls the
// API, a read token reads (status, report, workers) but cannot submit or cancel, and a
// second process taking a live worker's name neither gets in nor disconnects it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "protocol/frame_codec.h"
#include "tests/integration/raw_connection.h"
#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::Contains;
using testing::ProcessGuard;
using testing::RawConnection;
using testing::TestCluster;
using testing::WaitFor;

const std::string kSweep = testing::QuickSweep("scoped", 3);

class CredentialsTest : public testing::ClusterTest {
 protected:
  CredentialsTest() : ClusterTest("bakeoff-credentials") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ClusterTest::SetUp());
    std::ofstream(dir_ / "read-token") << "# the dashboards' token\nreader-secret\n";
    ASSERT_TRUE(cluster_->StartCoordinator({"--read-token-file", (dir_ / "read-token").string()}));
  }

  // `bakeoff ARGS` with no BAKEOFF_TOKEN; its exit code (-1: did not exit within 60 s).
  int RunCli(const std::string& name, std::vector<std::string> args) {
    return testing::RunBakeoffCli(std::move(args), log(name));
  }
  std::string log(const std::string& name) const { return (dir_ / (name + ".log")).string(); }
  std::string Log(const std::string& name) const { return testing::ReadFile(log(name)); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  // A simulated worker (no trainer): trials end in moments.
  void StartSimulatedWorker(const std::string& name, int index) {
    testing::WorkerHost host;
    host.extra_args = {"--simulate", "--simulate-step-ms", "1"};
    cluster_->StartWorker(name, index, 0, host);
  }
};

// Done-when of issue 13: `--token-file` with a read token can report and show status
// but not submit, through the real CLI binary.
TEST_F(CredentialsTest, ReadTokenReportsAndShowsStatusButCannotSubmitOrCancel) {
  std::ofstream(dir_ / "sweep.yaml") << kSweep;
  const std::string url = cluster_->url();
  ASSERT_EQ(RunCli("submit", {"submit", "--coordinator", url, "--token-file", file("token"), file("sweep.yaml")}), 0)
      << Log("submit");
  StartSimulatedWorker("w1", 0);
  cluster_->set_sweep_id(1);
  ASSERT_TRUE(WaitFor([&] { return cluster_->SweepFinished(); }, 60s)) << cluster_->Trials().dump();

  EXPECT_EQ(RunCli("status", {"status", "--coordinator", url, "--token-file", file("read-token"), "scoped"}), 0)
      << Log("status");
  EXPECT_TRUE(Contains(Log("status"), "scoped")) << Log("status");
  EXPECT_EQ(RunCli("report", {"report", "--coordinator", url, "--token-file", file("read-token"), "--format", "json",
                              "--output", file("report.json"), "scoped"}),
            0)
      << Log("report");
  EXPECT_TRUE(json::parse(testing::ReadFile(file("report.json")), nullptr, false).is_object())
      << testing::ReadFile(file("report.json"));
  EXPECT_EQ(RunCli("workers", {"workers", "--coordinator", url, "--token-file", file("read-token")}), 0)
      << Log("workers");

  // Submit and cancel need the submit role: 403, said plainly, exit code 2.
  EXPECT_EQ(RunCli("read-submit", {"submit", "--coordinator", url, "--token-file", file("read-token"),
                                   file("sweep.yaml")}),
            2);
  EXPECT_TRUE(Contains(Log("read-submit"), "HTTP 403")) << Log("read-submit");
  EXPECT_TRUE(Contains(Log("read-submit"), "read role")) << Log("read-submit");
  EXPECT_EQ(RunCli("read-cancel", {"cancel", "--coordinator", url, "--token-file", file("read-token"), "scoped"}), 2);
  EXPECT_TRUE(Contains(Log("read-cancel"), "HTTP 403")) << Log("read-cancel");
  auto sweeps = cluster_->client().GetJson("/api/v1/sweeps");
  ASSERT_TRUE(sweeps.ok());
  EXPECT_EQ(sweeps->size(), 1u) << "the read token submitted nothing: " << sweeps->dump();
}

TEST_F(CredentialsTest, AnApiTokenCannotRegisterAWorker) {
  // A real worker given the API token (submit role) is rejected and exits with 2.
  ProcessGuard worker({std::string(BAKEOFF_BINARY_DIR) + "/bakeoff", "worker", "--coordinator",
                       "127.0.0.1:" + std::to_string(cluster_->worker_port()), "--name", "api-token-worker",
                       "--slots", "1", "--simulate", "--token-file", file("token"), "--work-dir", file("w")},
                      {"BAKEOFF_TOKEN="}, log("api-token-worker"));
  auto code = worker.WaitExit(60s);
  ASSERT_TRUE(code.has_value()) << Log("api-token-worker");
  EXPECT_EQ(*code, 2) << Log("api-token-worker");
  EXPECT_TRUE(Contains(Log("api-token-worker"), "wrong worker token")) << Log("api-token-worker");
  // The read token neither.
  RawConnection raw(cluster_->worker_port());
  raw.Write(*protocol::EncodeFrame(testing::RegisterMessage("reader", "reader-secret")));
  bool closed = false;
  EXPECT_TRUE(Contains(raw.ReadUntilClosed(&closed), "wrong worker token"));
  EXPECT_TRUE(closed);
  auto workers = cluster_->client().GetJson("/api/v1/workers");
  ASSERT_TRUE(workers.ok());
  EXPECT_TRUE(workers->empty()) << workers->dump();
}

TEST_F(CredentialsTest, TheWorkerCredentialCannotCallTheApi) {
  auto as_worker = cli::CoordinatorClient::Create(cluster_->url(), TestCluster::kWorkerToken, 10s);
  ASSERT_TRUE(as_worker.ok());
  for (const std::string route : {"/api/v1/sweeps", "/api/v1/workers", "/api/v1/sd"}) {
    auto reply = as_worker->Get(route);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->status, 401) << route;
    EXPECT_TRUE(Contains(reply->body, "worker credential")) << reply->body;
  }
  auto submit = as_worker->Post("/api/v1/sweeps", kSweep, "application/yaml");
  ASSERT_TRUE(submit.ok());
  EXPECT_EQ(submit->status, 401);
  std::ofstream(dir_ / "sweep.yaml") << kSweep;
  EXPECT_EQ(RunCli("worker-submit", {"submit", "--coordinator", cluster_->url(), "--token-file", file("worker-token"),
                                     file("sweep.yaml")}),
            2);
  EXPECT_TRUE(Contains(Log("worker-submit"), "HTTP 401")) << Log("worker-submit");
}

// A second process with a live worker's name (and the worker credential) is refused
// without disconnecting the worker; once that worker is gone, the name is free again.
TEST_F(CredentialsTest, ASecondProcessWithALiveWorkersNameDoesNotDisconnectIt) {
  StartSimulatedWorker("w1", 0);
  ASSERT_TRUE(WaitFor([&] { return cluster_->WorkersConnected(1); }, 30s)) << Log("w1-1");
  {
    RawConnection impostor(cluster_->worker_port());
    json reg = testing::RegisterMessage("w1");
    reg["resources"]["cpu_slots"] = 64;
    impostor.Write(*protocol::EncodeFrame(reg));
    bool closed = false;
    const std::string reply = impostor.ReadUntilClosed(&closed);
    EXPECT_TRUE(Contains(reply, "rejected")) << reply;
    EXPECT_TRUE(Contains(reply, "in use by a live worker")) << reply;
    EXPECT_TRUE(closed);
  }
  // A real second worker process of that name keeps being refused, and waits.
  ProcessGuard second({std::string(BAKEOFF_BINARY_DIR) + "/bakeoff", "worker", "--coordinator",
                       "127.0.0.1:" + std::to_string(cluster_->worker_port()), "--name", "w1", "--slots", "1",
                       "--simulate", "--token-file", file("worker-token"), "--work-dir", file("second"),
                       "--store-ports", "29800-29810"},
                      {"BAKEOFF_TOKEN="}, log("second"));
  ASSERT_TRUE(WaitFor([&] { return Contains(Log("second"), "refused this registration for now"); }, 30s))
      << Log("second");
  EXPECT_TRUE(cluster_->WorkersConnected(1));
  auto workers = cluster_->client().GetJson("/api/v1/workers");
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0]["cpu_slots"], 1) << "the impostor's 64 slots replaced the worker's";
  EXPECT_FALSE(Contains(Log("w1-1"), "connection to the coordinator lost")) << Log("w1-1");
  EXPECT_FALSE(second.WaitExit(0ms).has_value()) << "a temporary refusal is retried: " << Log("second");

  // The first worker stops cleanly (goodbye: gone); the second takes the name.
  cluster_->worker("w1").Kill(SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return Contains(Log("second"), "registered worker=w1"); }, 60s)) << Log("second");
  EXPECT_TRUE(WaitFor([&] { return cluster_->WorkersConnected(1); }, 30s));
}

}  // namespace
}  // namespace bakeoff
