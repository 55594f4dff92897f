#include "coordinator/trial_state_machine.h"

#include <gtest/gtest.h>

namespace bakeoff::coordinator {
namespace {
using protocol::Outcome;
using Effect = TrialStateMachine::Effect;

TEST(TrialStateMachineTest, HappyPathQueuedAssignedRunningFinished) {
  TrialStateMachine t(3);
  auto attempt = t.Assign();
  ASSERT_TRUE(attempt.ok());
  EXPECT_EQ(*attempt, 1);
  EXPECT_EQ(t.phase(), TrialState::kAssigned);
  EXPECT_TRUE(t.MarkRunning(1));
  EXPECT_EQ(t.Report(1, Outcome::kSucceeded), Effect::kFinished);
  EXPECT_EQ(t.outcome(), Outcome::kSucceeded);
}

TEST(TrialStateMachineTest, LostAttemptIsRequeuedWhileAttemptsRemain) {
  TrialStateMachine t(2);
  ASSERT_TRUE(t.Assign().ok());
  EXPECT_EQ(t.Report(1, Outcome::kLost), Effect::kRequeued);
  EXPECT_EQ(t.phase(), TrialState::kQueued);
  EXPECT_EQ(*t.Assign(), 2);
  EXPECT_EQ(t.Report(2, Outcome::kLost), Effect::kFinished);
  EXPECT_EQ(t.outcome(), Outcome::kLost);
}

TEST(TrialStateMachineTest, DeterministicOutcomesAreNeverRetried) {
  for (auto o : {Outcome::kOom, Outcome::kUnsupported, Outcome::kDiverged, Outcome::kFailed,
                 Outcome::kTimeout}) {
    TrialStateMachine t(5);
    ASSERT_TRUE(t.Assign().ok());
    EXPECT_EQ(t.Report(1, o), Effect::kFinished) << protocol::OutcomeName(o);
    EXPECT_EQ(t.outcome(), o);
  }
}

TEST(TrialStateMachineTest, StaleAttemptReportIsIgnored) {
  TrialStateMachine t(3);
  ASSERT_TRUE(t.Assign().ok());
  EXPECT_EQ(t.Report(1, Outcome::kLost), Effect::kRequeued);
  ASSERT_TRUE(t.Assign().ok());
  EXPECT_EQ(t.Report(1, Outcome::kSucceeded), Effect::kIgnored);
  EXPECT_FALSE(t.MarkRunning(1));
  EXPECT_EQ(t.phase(), TrialState::kAssigned);
}

TEST(TrialStateMachineTest, DuplicateReportAfterFinishIsIgnored) {
  TrialStateMachine t(1);
  ASSERT_TRUE(t.Assign().ok());
  EXPECT_EQ(t.Report(1, Outcome::kOom), Effect::kFinished);
  EXPECT_EQ(t.Report(1, Outcome::kSucceeded), Effect::kIgnored);
  EXPECT_EQ(t.outcome(), Outcome::kOom);
}

TEST(TrialStateMachineTest, CancelFinishesFromAnyUnfinishedPhase) {
  TrialStateMachine queued(1);
  EXPECT_EQ(queued.Cancel(), Effect::kFinished);
  EXPECT_EQ(queued.outcome(), Outcome::kCancelled);
  TrialStateMachine running(1);
  ASSERT_TRUE(running.Assign().ok());
  running.MarkRunning(1);
  EXPECT_EQ(running.Cancel(), Effect::kFinished);
  EXPECT_EQ(running.Cancel(), Effect::kIgnored);
}

TEST(TrialStateMachineTest, AssignRequiresQueued) {
  TrialStateMachine t(3);
  ASSERT_TRUE(t.Assign().ok());
  EXPECT_FALSE(t.Assign().ok());
}

}  // namespace
}  // namespace bakeoff::coordinator
