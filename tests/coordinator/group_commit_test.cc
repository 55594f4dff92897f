// GroupCommit: one store group per turn of the event loop, and what the turn decided
// (frames, acknowledgements) runs only once that group has committed, in order.
#include "coordinator/group_commit.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "metrics/store/results_reader.h"
#include "tests/coordinator/group_commit_fixture.h"

namespace bakeoff::coordinator {
namespace {

using namespace std::chrono_literals;

class GroupCommitTest : public testing::GroupCommitFixture {
 protected:
  // A small real store write.
  void Write(const std::string& worker) {
    metrics::WorkerRecord record;
    record.id = worker;
    record.name = worker;
    ASSERT_TRUE(store_->UpsertWorker(record).ok());
  }
  // What another connection (a user's `bakeoff status`) sees stored.
  std::size_t WorkersVisibleOutside() {
    auto reader = metrics::ResultsReader::Open((dir_ / "results.db").string());
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return 0;
    auto workers = (*reader)->ListWorkers();
    return workers.ok() ? workers->size() : 0;
  }

  // A turn's group opened, worker w1 stored in it, and send 1 waiting for its commit.
  void BeginTurnThatStoresAndWaitsToSend() {
    group_->Begin();
    Write("w1");
    group_->AfterCommit([this] { sent_.push_back(1); });
  }

  std::vector<int> sent_;
};

TEST_F(GroupCommitTest, WhatWaitsRunsInOrderOnlyOnceTheTurnsGroupCommitted) {
  BeginTurnThatStoresAndWaitsToSend();
  group_->AfterCommit([this] { sent_.push_back(2); });
  EXPECT_TRUE(sent_.empty()) << "nothing leaves on a write that could still be lost";
  EXPECT_EQ(WorkersVisibleOutside(), 0u) << "the group's write is not committed yet";

  io_.run();  // the end of the turn
  EXPECT_EQ(sent_, (std::vector<int>{1, 2}));
  EXPECT_EQ(before_commit_, 1) << "the deferred scheduling joins the group before it commits";
  EXPECT_FALSE(store_->in_group());
  EXPECT_EQ(WorkersVisibleOutside(), 1u);
  EXPECT_EQ(lost_, 0);

  group_->AfterCommit([this] { sent_.push_back(3); });
  EXPECT_EQ(sent_, (std::vector<int>{1, 2, 3})) << "with no group open it runs at once";
}

TEST_F(GroupCommitTest, ABusyTurnCommitsOncePastTheWindowAndNotBefore) {
  BeginTurnThatStoresAndWaitsToSend();
  group_->CommitIfOld();
  EXPECT_TRUE(sent_.empty());
  EXPECT_TRUE(store_->in_group());

  clock_.Advance(6ms);
  group_->CommitIfOld();
  EXPECT_EQ(sent_, (std::vector<int>{1}));
  EXPECT_EQ(before_commit_, 1);
  EXPECT_FALSE(store_->in_group());
  EXPECT_EQ(WorkersVisibleOutside(), 1u);
}

TEST_F(GroupCommitTest, StopKeepsWhatWasStoredAndSendsNothingThatWaited) {
  BeginTurnThatStoresAndWaitsToSend();
  group_->Stop();
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(WorkersVisibleOutside(), 1u) << "a stop commits what the turn stored";
  io_.run();  // the posted end of the turn does nothing after a stop
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(before_commit_, 0);
}

}  // namespace
}  // namespace bakeoff::coordinator
