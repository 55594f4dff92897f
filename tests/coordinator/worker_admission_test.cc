// Who may register as a worker: each refusal says why, and an admitted registration is
// scraped at an address that is a host, never a link-local one.
#include "coordinator/worker_admission.h"

#include <gtest/gtest.h>

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
    auto admitted = AdmitWorker(m, config_, registry_, "10.0.0.5");
    auto* rejected = std::get_if<protocol::RejectedMessage>(&admitted);
    return rejected ? rejected->reason : "";
  }

  FakeClock clock_;
  WorkerRegistry registry_{clock_, 1000ms};
  CoordinatorConfig config_;
};

TEST_F(WorkerAdmissionTest, AWellFormedRegistrationWithTheWorkerTokenIsAdmitted) {
  EXPECT_EQ(Refusal(Reg()), "");
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
  auto admitted = AdmitWorker(second, config_, registry_, "10.0.0.6");
  auto* rejected = std::get_if<protocol::RejectedMessage>(&admitted);
  ASSERT_NE(rejected, nullptr);
  EXPECT_GT(rejected->retry_after_ms, 0) << "temporary: the name is free once that worker is lost";
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
