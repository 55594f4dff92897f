// Who may register as a worker: each refusal says why, and an admitted registration is
// scraped at an address that is a host, never a link-local one.
#include "coordinator/worker_admission.h"

#include <gtest/gtest.h>

#include "tests/protocol/test_env.h"

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;

class WorkerAdmissionTest : public ::testing::Test {
 protected:
  WorkerAdmissionTest() { config_.worker_tokens = {"worker-secret"}; }
  protocol::RegisterMessage Reg() {
    protocol::RegisterMessage m;
    m.worker_name = "w1";
    m.host = "10.0.0.5";
    m.token = "worker-secret";
    m.resources.cpu_slots = 2;
    m.protocol_version = protocol::kProtocolVersion;
    return m;
  }
  // The refusal's reason, or "" when admitted.
  std::string Refusal(const protocol::RegisterMessage& m) {
    auto admitted = AdmitWorker(m, config_, registry_, "10.0.0.5", log_);
    auto* rejected = std::get_if<protocol::RejectedMessage>(&admitted);
    return rejected ? rejected->reason : "";
  }

  FakeClock clock_;
  TestEnv env_{clock_};
  logging::Logger log_{env_, "coordinator"};
  WorkerRegistry registry_{clock_, 1000ms};
  CoordinatorConfig config_;
};

TEST_F(WorkerAdmissionTest, AWellFormedRegistrationWithTheWorkerTokenIsAdmitted) {
  EXPECT_EQ(Refusal(Reg()), "");
}

// The refusal's line goes through the Env the coordinator gave (protocol/env.h), stamped
// with its clock, the worker a typed field and a hostile name escaped onto one line.
TEST_F(WorkerAdmissionTest, ARefusalIsLoggedThroughTheGivenEnvOnItsClock) {
  protocol::RegisterMessage m = Reg();
  m.token = "api-token";
  ASSERT_NE(Refusal(m), "");
  m = Reg();
  m.worker_name = "bad\nname";
  ASSERT_NE(Refusal(m), "");
  EXPECT_EQ(env_.Lines(),
            (std::vector<std::string>{
                "2026-01-01T00:00:00.000Z WARN  coordinator: rejected a worker registration: wrong token worker=w1",
                "2026-01-01T00:00:00.000Z WARN  coordinator: rejected a worker registration: invalid name "
                "worker=bad\\nname"}));
}

TEST_F(WorkerAdmissionTest, EachRefusalSaysWhatToDo) {
  protocol::RegisterMessage m = Reg();
  m.worker_name = "bad\nname";
  EXPECT_NE(Refusal(m).find("invalid worker name"), std::string::npos);
  m = Reg();
  m.token = "api-token";
  EXPECT_NE(Refusal(m).find("--worker-token-file"), std::string::npos);
  m = Reg();
  m.resources.cpu_slots = 257;
  EXPECT_NE(Refusal(m).find("--max-worker-slots"), std::string::npos);
  m = Reg();
  m.protocol_version = protocol::kProtocolVersion + 1;
  EXPECT_NE(Refusal(m).find("is not supported"), std::string::npos);
  m = Reg();
  m.metrics_port = 9100;
  m.metrics_host = "169.254.169.254";  // a cloud metadata address
  EXPECT_NE(Refusal(m).find("metrics host"), std::string::npos);
}

TEST_F(WorkerAdmissionTest, ANameHeldByALiveWorkerIsRefusedForAWhileNotForever) {
  protocol::RegisterMessage first = Reg();
  WorkerInfo& held = registry_.Register(first);
  protocol::RegisterMessage second = Reg();
  second.worker_secret = "not-" + held.secret;
  auto admitted = AdmitWorker(second, config_, registry_, "10.0.0.6", log_);
  auto* rejected = std::get_if<protocol::RejectedMessage>(&admitted);
  ASSERT_NE(rejected, nullptr);
  EXPECT_GT(rejected->retry_after_ms, 0) << "temporary: the name is free once that worker is lost";
}

// Each line of --worker-token-file is a credential of its own, named by its line.
TEST_F(WorkerAdmissionTest, ACredentialIsNamedByItsLineAndNeverByItsText) {
  config_.worker_tokens = {"token-a", "token-b"};
  EXPECT_EQ(WorkerCredential(config_, "token-a"), "worker-token-1");
  EXPECT_EQ(WorkerCredential(config_, "token-b"), "worker-token-2");
  EXPECT_EQ(WorkerCredential(config_, "token-"), "");
  config_.worker_tokens.clear();
  EXPECT_EQ(WorkerCredential(config_, "anything"), "") << "no worker token: one credential, unnamed";
  // The admission hands on the credential it matched: the registry keeps that one.
  config_.worker_tokens = {"token-a", "token-b"};
  protocol::RegisterMessage m = Reg();
  m.token = "token-b";
  auto admitted = AdmitWorker(m, config_, registry_, "10.0.0.5", log_);
  auto* worker = std::get_if<AdmittedWorker>(&admitted);
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->credential, "worker-token-2");
  EXPECT_EQ(worker->message.worker_name, "w1");
}

// A2: the workers of one credential together get no more than --max-credential-slots;
// the refusal is temporary and names the flag; another credential, and the name that
// re-registers, are not counted against it.
TEST_F(WorkerAdmissionTest, TheWorkersOfOneCredentialTogetherStayUnderItsSlotCap) {
  config_.worker_tokens = {"token-a", "token-b"};
  config_.max_credential_slots = 4;
  auto reg = [&](const std::string& name, const std::string& token, int slots) {
    protocol::RegisterMessage m = Reg();
    m.worker_name = name;
    m.token = token;
    m.resources.cpu_slots = slots;
    return m;
  };
  registry_.Register(reg("a1", "token-a", 2), WorkerCredential(config_, "token-a"));
  EXPECT_EQ(Refusal(reg("a2", "token-a", 2)), "") << "2 + 2 is the cap";
  registry_.Register(reg("a2", "token-a", 2), WorkerCredential(config_, "token-a"));
  auto admitted = AdmitWorker(reg("a3", "token-a", 1), config_, registry_, "10.0.0.5", log_);
  auto* rejected = std::get_if<protocol::RejectedMessage>(&admitted);
  ASSERT_NE(rejected, nullptr) << "one slot past the cap";
  EXPECT_NE(rejected->reason.find("--max-credential-slots"), std::string::npos) << rejected->reason;
  EXPECT_NE(rejected->reason.find("worker-token-1"), std::string::npos) << rejected->reason;
  EXPECT_GT(rejected->retry_after_ms, 0) << "temporary: capacity frees when the credential's workers leave";
  EXPECT_EQ(Refusal(reg("b1", "token-b", 4)), "") << "another credential has a cap of its own";
  protocol::RegisterMessage again = reg("a2", "token-a", 2);
  again.worker_secret = registry_.Find("a2")->secret;
  EXPECT_EQ(Refusal(again), "") << "a re-registration does not count itself twice";
  again.resources.cpu_slots = 3;
  EXPECT_NE(Refusal(again).find("--max-credential-slots"), std::string::npos) << "nor may it grow past the cap";
  // From the other direction: a worker that leaves frees its share.
  registry_.SetGone("a1");
  EXPECT_EQ(Refusal(reg("a3", "token-a", 2)), "");
}

TEST_F(WorkerAdmissionTest, TheWorkersOfOneCredentialTogetherStayUnderItsGpuCap) {
  config_.max_credential_gpus = 8;
  protocol::RegisterMessage first = Reg();
  first.resources.cuda_devices = {0, 1, 2, 3, 4, 5};
  registry_.Register(first, WorkerCredential(config_, first.token));
  protocol::RegisterMessage second = Reg();
  second.worker_name = "w2";
  second.resources.cuda_devices = {0, 1, 2};
  EXPECT_NE(Refusal(second).find("--max-credential-gpus"), std::string::npos);
  second.resources.cuda_devices = {0, 1};
  EXPECT_EQ(Refusal(second), "");
}

TEST_F(WorkerAdmissionTest, NoCredentialCapByDefault) {
  for (int i = 0; i < 10; ++i) {
    protocol::RegisterMessage m = Reg();
    m.worker_name = "w" + std::to_string(i);
    m.resources.cpu_slots = 256;
    EXPECT_EQ(Refusal(m), "");
    registry_.Register(m, WorkerCredential(config_, m.token));
  }
}

TEST_F(WorkerAdmissionTest, TheStoredRowKeepsTheSecretsHashNeverTheSecret) {
  protocol::RegisterMessage m = Reg();
  WorkerInfo& info = registry_.Register(m);
  metrics::WorkerRecord record = WorkerRecordOf(m, info);
  EXPECT_EQ(record.id, info.id);
  EXPECT_EQ(record.resources["cpu_slots"], 2);
  EXPECT_EQ(record.secret_sha256.size(), 64u);
  EXPECT_NE(record.secret_sha256, info.secret);
  EXPECT_EQ(record.state, metrics::WorkerState::kIdle);
}

}  // namespace
}  // namespace bakeoff::coordinator
