// TLS end to end: a real coordinator serving HTTPS and TLS to workers (certificates
// the test makes with the openssl CLI), a real worker connecting with --tls-ca, a
// sweep submitted over https:// with the fake trainer run to the end, and the CLI
// reading it back; plain clients on the TLS ports fail cleanly and the coordinator
// keeps serving; bad TLS flags are usage errors (exit 2) naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/coordinator_client.h"
#include "tests/integration/loopback_cluster_test.h"
#include "tests/integration/test_sweeps.h"
#include "tests/protocol/test_certificates.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::Contains;
using testing::WaitFor;

const std::string kToken = "tls-secret";

std::string Sweep() {
  return testing::TinyLoraSweep{.name = "tls-e2e", .question = "does a sweep run over TLS?"}.Yaml();
}

class TlsEndToEndTest : public testing::LoopbackClusterTest {
 protected:
  TlsEndToEndTest() : LoopbackClusterTest("bakeoff-tls-e2e", kToken) {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(LoopbackClusterTest::SetUp());
    auto certs = testing::MakeTestCertificates(dir_ / "certs");
    ASSERT_TRUE(certs.ok()) << certs.status().message();
    certs_ = *certs;
  }

  // A coordinator with TLS on both listeners; fills the ports, and client_ over HTTPS.
  void StartTlsCoordinator() {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator({"--tls-cert", certs_.server_cert, "--tls-key", certs_.server_key}));
    ASSERT_NO_FATAL_FAILURE(Connect(https_url(), certs_.ca_cert));
  }

  // A worker with the stand-in trainer; `tls_flags` picks how it connects ({} = plain).
  void StartWorkerWith(const std::string& name, const std::vector<std::string>& tls_flags) {
    std::vector<std::string> flags{"--metrics-listen", "off"};
    flags.insert(flags.end(), tls_flags.begin(), tls_flags.end());
    StartWorker(name, 2, kBin + "/bakeoff-fake-trainer", "29900-29949", flags);
  }

  // Runs a `bakeoff` CLI command to its end; its exit code, output in log(name).
  int RunCli(const std::string& name, std::vector<std::string> args, std::vector<std::string> env = {}) {
    return testing::RunBakeoffCli(std::move(args), log(name), std::move(env));
  }

  std::string https_url() const { return "https://127.0.0.1:" + std::to_string(http_port_); }

  testing::TestCertificates certs_;
};

TEST_F(TlsEndToEndTest, SweepRunsOverTlsOnBothListeners) {
  StartTlsCoordinator();
  StartWorkerWith("tls-w1", {"--tls", "--tls-ca", certs_.ca_cert});
  ASSERT_TRUE(WaitFor([&] { return ConnectedWorkers() == 1; }, 30s))
      << "the TLS worker did not register; see " << log("tls-w1");

  const json sweep = RunSweep(Sweep(), 120s);
  ASSERT_EQ(sweep.value("state", ""), "finished") << sweep.dump();
  const int id = sweep["id"];
  EXPECT_EQ(sweep["counts"]["succeeded"], 4) << sweep.dump();

  // The CLI over https://, the CA from the flag, then from BAKEOFF_TLS_CA with the
  // certificate's DNS name.
  const std::string out = (dir_ / "status.json").string();
  ASSERT_EQ(RunCli("status", {"status", std::to_string(id), "--coordinator", https_url(), "--tls-ca", certs_.ca_cert,
                              "--token-file", (dir_ / "token").string(), "--format", "json", "--output", out}),
            0)
      << testing::ReadFile(log("status"));
  json trials = json::parse(std::ifstream(out))["trials"];
  ASSERT_EQ(trials.size(), 4u);
  for (const auto& t : trials) EXPECT_EQ(t["outcome"], "succeeded");
  EXPECT_EQ(RunCli("status-env",
                   {"status", "--coordinator", "https://localhost:" + std::to_string(http_port_), "--token-file",
                    (dir_ / "token").string()},
                   {"BAKEOFF_TLS_CA=" + certs_.ca_cert}),
            0)
      << testing::ReadFile(log("status-env"));
  EXPECT_TRUE(Contains(testing::ReadFile(log("status-env")), "tls-e2e"));
  EXPECT_TRUE(Contains(testing::ReadFile(log("coordinator")), "HTTPS API on port"));
}

TEST_F(TlsEndToEndTest, PlainClientsOnTheTlsPortsFailCleanly) {
  StartTlsCoordinator();
  StartWorkerWith("tls-w1", {"--tls-ca", certs_.ca_cert});  // --tls-ca implies --tls
  ASSERT_TRUE(WaitFor([&] { return ConnectedWorkers() == 1; }, 30s))
      << "the TLS worker did not register; see " << log("tls-w1");

  // Plain HTTP on the HTTPS port: an error that points at https://.
  auto plain = cli::CoordinatorClient::Create("http://127.0.0.1:" + std::to_string(http_port_), kToken, 10s);
  ASSERT_TRUE(plain.ok());
  auto health = plain->Get("/healthz");
  ASSERT_FALSE(health.ok());
  EXPECT_EQ(health.status().code(), Status::Code::kUnavailable) << health.status().ToString();
  EXPECT_TRUE(Contains(health.status().message(), "https://")) << health.status().ToString();
  EXPECT_EQ(RunCli("status-plain", {"status", "--coordinator", "http://127.0.0.1:" + std::to_string(http_port_),
                                    "--token-file", (dir_ / "token").string()}),
            3);
  // HTTPS without the private CA: the system store does not trust it.
  EXPECT_EQ(RunCli("status-no-ca", {"status", "--coordinator", https_url(), "--token-file",
                                    (dir_ / "token").string()},
                   {"BAKEOFF_TLS_CA="}),
            3);
  EXPECT_TRUE(Contains(testing::ReadFile(log("status-no-ca")), "certificate verify failed"))
      << testing::ReadFile(log("status-no-ca"));
  // A CA file that cannot be read is a usage error naming it.
  const std::string missing = (dir_ / "missing-ca.pem").string();
  EXPECT_EQ(RunCli("status-bad-ca", {"status", "--coordinator", https_url(), "--tls-ca", missing}), 2);
  EXPECT_TRUE(Contains(testing::ReadFile(log("status-bad-ca")), missing)) << testing::ReadFile(log("status-bad-ca"));

  // A plain worker on the TLS worker port never registers.
  StartWorkerWith("plain-w2", {});
  const std::string refused = "worker connection: TLS handshake failed peer=127.0.0.1";
  ASSERT_TRUE(WaitFor([&] { return Contains(testing::ReadFile(log("coordinator")), refused); }, 10s))
      << testing::ReadFile(log("coordinator"));

  // The coordinator is still up, serving the TLS worker and HTTPS clients.
  ASSERT_FALSE(coordinator_->WaitExit(1s).has_value()) << "the coordinator exited";
  auto healthy = client_->GetJson("/healthz");
  ASSERT_TRUE(healthy.ok()) << healthy.status().ToString();
  EXPECT_EQ(ConnectedWorkers(), 1);
  auto workers = client_->GetJson("/api/v1/workers");
  ASSERT_TRUE(workers.ok());
  for (const auto& w : *workers) EXPECT_NE(w.value("name", ""), "plain-w2") << w.dump();
  const std::string coordinator_log = testing::ReadFile(log("coordinator"));
  EXPECT_TRUE(Contains(coordinator_log, "HTTPS connection: TLS handshake failed peer=127.0.0.1")) << coordinator_log;
}

TEST_F(TlsEndToEndTest, TlsWorkerAgainstAPlainCoordinatorSaysSo) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinator());
  StartWorkerWith("tls-w1", {"--tls-ca", certs_.ca_cert});
  ASSERT_TRUE(WaitFor([&] { return Contains(testing::ReadFile(log("coordinator")), "speaks TLS"); }, 10s))
      << testing::ReadFile(log("coordinator"));
  ASSERT_TRUE(WaitFor([&] { return Contains(testing::ReadFile(log("tls-w1")), "TLS handshake failed"); }, 10s))
      << testing::ReadFile(log("tls-w1"));
  // An https:// client against the plain HTTP port: a failed handshake, and a line there.
  auto client = cli::CoordinatorClient::Create(https_url(), kToken, 10s, certs_.ca_cert);
  ASSERT_TRUE(client.ok());
  auto health = client->Get("/healthz");
  ASSERT_FALSE(health.ok());
  EXPECT_TRUE(Contains(health.status().message(), "TLS handshake")) << health.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return Contains(testing::ReadFile(log("coordinator")), "serves plain HTTP"); }, 10s))
      << testing::ReadFile(log("coordinator"));
  ASSERT_FALSE(coordinator_->WaitExit(1s).has_value()) << "the coordinator exited";
}

TEST_F(TlsEndToEndTest, BadTlsFlagsAreUsageErrorsNamingTheFile) {
  const std::string missing = (dir_ / "missing.pem").string();
  const std::string db = (dir_ / "results.db").string();
  EXPECT_EQ(RunCli("no-cert", {"coordinator", "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0", "--db", db,
                               "--tls-cert", missing, "--tls-key", certs_.server_key}),
            2);
  EXPECT_TRUE(Contains(testing::ReadFile(log("no-cert")), missing)) << testing::ReadFile(log("no-cert"));
  EXPECT_FALSE(std::filesystem::exists(db)) << "checked before the database is opened";
  EXPECT_EQ(RunCli("wrong-key", {"coordinator", "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0", "--db",
                                 db, "--tls-cert", certs_.server_cert, "--tls-key", certs_.elsewhere_key}),
            2);
  EXPECT_TRUE(Contains(testing::ReadFile(log("wrong-key")), certs_.elsewhere_key));
  EXPECT_EQ(RunCli("cert-only", {"coordinator", "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0", "--db",
                                 db, "--tls-cert", certs_.server_cert}),
            2);
  EXPECT_TRUE(Contains(testing::ReadFile(log("cert-only")), "--tls-key"));
  EXPECT_EQ(RunCli("worker-no-ca", {"worker", "--coordinator", "127.0.0.1:1", "--slots", "1", "--trainer",
                                    kBin + "/bakeoff-fake-trainer", "--work-dir", (dir_ / "w").string(),
                                    "--metrics-listen", "off", "--tls-ca", missing}),
            2);
  EXPECT_TRUE(Contains(testing::ReadFile(log("worker-no-ca")), missing)) << testing::ReadFile(log("worker-no-ca"));
}

}  // namespace
}  // namespace bakeoff
