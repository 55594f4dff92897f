// WorkerLinks: one connection per worker (the newer wins), and frames and
// acknowledgements that leave only once the turn's store group has committed.
#include "coordinator/worker_links.h"

#include <gtest/gtest.h>

#include "tests/coordinator/group_commit_fixture.h"

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;

class Link : public WorkerLink {
 public:
  Status Send(const nlohmann::json& frame) override {
    sent.push_back(frame);
    return Status::Ok();
  }
  void Close() override { closed = true; }
  std::vector<nlohmann::json> sent;
  bool closed = false;
};

class WorkerLinksTest : public testing::GroupCommitFixture {
 protected:
  void SetUp() override {
    GroupCommitFixture::SetUp();
    links_ = std::make_unique<WorkerLinks>(*group_, log_);
  }
  void TearDown() override {
    links_.reset();
    GroupCommitFixture::TearDown();
  }
  std::unique_ptr<WorkerLinks> links_;
};

TEST_F(WorkerLinksTest, TheNewerConnectionWinsAndTheOlderIsClosedAndIgnored) {
  auto first = std::make_shared<Link>();
  auto second = std::make_shared<Link>();
  links_->Attach("w", first);
  links_->Attach("w", second);
  EXPECT_TRUE(first->closed);
  EXPECT_FALSE(links_->IsCurrent("w", first.get()));
  EXPECT_TRUE(links_->IsCurrent("w", second.get()));
  EXPECT_FALSE(links_->Detach("w", first.get())) << "a replaced connection's end changes nothing";
  EXPECT_TRUE(links_->connected("w"));
  EXPECT_TRUE(links_->Detach("w", second.get()));
  EXPECT_FALSE(links_->connected("w"));
}

TEST_F(WorkerLinksTest, FramesAndAcksLeaveInOrderOnlyOnceTheGroupCommitted) {
  auto link = std::make_shared<Link>();
  links_->Attach("w", link);
  group_->Begin();
  links_->Send("w", {{"type", "assign"}});
  links_->Ack("w", 7);
  links_->Ack("w", 0);  // nothing to acknowledge
  EXPECT_TRUE(link->sent.empty());
  EXPECT_EQ(links_->acked("w"), 0);
  io_.run();  // the end of the turn commits
  ASSERT_EQ(link->sent.size(), 2u);
  EXPECT_EQ(link->sent[0]["type"], "assign");
  EXPECT_EQ(link->sent[1]["type"], "ack");
  EXPECT_EQ(links_->acked("w"), 7);
  links_->Send("nobody", {{"type", "assign"}});  // no connection: nothing, no error
  links_->Drop("w");
  EXPECT_TRUE(link->closed);
  EXPECT_FALSE(links_->connected("w"));
}

}  // namespace
}  // namespace bakeoff::coordinator
