#include "worker/turn_arbiter.h"

#include <gtest/gtest.h>

namespace bakeoff::worker {
namespace {

using Effect = TurnArbiter::Effect;
using Request = TurnArbiter::Request;
using namespace std::chrono_literals;

class TurnArbiterTest : public ::testing::Test {
 protected:
  TurnArbiter::TimePoint At(std::chrono::milliseconds t) const { return TurnArbiter::TimePoint{} + 1h + t; }

  // The sides told to go by `effects`, with their turn numbers.
  static std::vector<std::pair<int, std::int64_t>> Gos(const std::vector<Effect>& effects) {
    std::vector<std::pair<int, std::int64_t>> gos;
    for (const auto& e : effects) {
      if (e.kind == Effect::Kind::kGo) gos.emplace_back(e.side, e.turn);
    }
    return gos;
  }
  using Gos_t = std::vector<std::pair<int, std::int64_t>>;
};

TEST_F(TurnArbiterTest, WarmUpsRunOneSideAtATimeThenMeasuredStepsAlternate) {
  TurnArbiter arbiter(2, 60s);
  EXPECT_TRUE(arbiter.Join(0, 1, At(0ms)).empty());
  EXPECT_TRUE(arbiter.Join(1, 1, At(0ms)).empty());
  // Side 1 asks first, but warm-ups go in side order.
  EXPECT_TRUE(arbiter.Ask(1, 0, Request::kWarmup, At(1ms)).empty());
  EXPECT_EQ(Gos(arbiter.Ask(0, 0, Request::kWarmup, At(2ms))), (Gos_t{{0, 0}}));
  // Side 0 finishes its warm-up and asks for its first measured step: side 1 warms up.
  EXPECT_EQ(Gos(arbiter.Done(0, 0, At(3ms))), (Gos_t{{1, 1}}));
  EXPECT_TRUE(arbiter.Ask(0, 0, Request::kStep, At(4ms)).empty());
  // Side 1's warm-up ends: the rotation starts with side 0.
  EXPECT_EQ(Gos(arbiter.Done(1, 0, At(5ms))), (Gos_t{{0, 2}}));
  EXPECT_TRUE(arbiter.Ask(1, 0, Request::kStep, At(6ms)).empty());
  EXPECT_EQ(Gos(arbiter.Done(0, 0, At(7ms))), (Gos_t{{1, 3}}));
  EXPECT_TRUE(arbiter.Ask(0, 0, Request::kStep, At(8ms)).empty());  // waits for side 1's turn to end
  EXPECT_EQ(Gos(arbiter.Done(1, 0, At(9ms))), (Gos_t{{0, 4}}));
}

TEST_F(TurnArbiterTest, ATurnBeginsOnlyWhenEveryRankOfTheSideAskedAndEndsWhenEveryRankIsDone) {
  TurnArbiter arbiter(2, 60s);
  arbiter.Join(0, 2, At(0ms));
  arbiter.Join(1, 2, At(0ms));
  arbiter.Ask(1, 0, Request::kStep, At(0ms));
  arbiter.Ask(1, 1, Request::kStep, At(0ms));
  EXPECT_TRUE(arbiter.Ask(0, 0, Request::kStep, At(1ms)).empty());
  auto go = arbiter.Ask(0, 1, Request::kStep, At(2ms));
  ASSERT_EQ(go.size(), 1u);
  EXPECT_EQ(go[0].ranks, (std::vector<int>{0, 1}));  // both ranks of side 0 together
  EXPECT_TRUE(arbiter.Done(0, 0, At(4ms)).empty());  // rank 1 still computing
  EXPECT_EQ(arbiter.holder(), 0);
  EXPECT_EQ(Gos(arbiter.Done(0, 1, At(5ms))), (Gos_t{{1, 1}}));
}

TEST_F(TurnArbiterTest, ASideWithoutWarmUpStepsJoinsTheRotationAtOnce) {
  TurnArbiter arbiter(2, 60s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  EXPECT_EQ(Gos(arbiter.Ask(0, 0, Request::kStep, At(1ms))), (Gos_t{}));  // side 1 has not warmed up yet
  EXPECT_EQ(Gos(arbiter.Ask(1, 0, Request::kStep, At(2ms))), (Gos_t{{0, 0}}));
}

TEST_F(TurnArbiterTest, WhenOneSideEndsTheSurvivorGoesOnAlone) {
  TurnArbiter arbiter(2, 60s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kStep, At(1ms));
  EXPECT_EQ(Gos(arbiter.Ask(1, 0, Request::kStep, At(1ms))), (Gos_t{{0, 0}}));
  // Side 0 crashes while holding its turn.
  EXPECT_EQ(Gos(arbiter.EndRank(0, 0, At(2ms))), (Gos_t{{1, 1}}));
  arbiter.Done(1, 0, At(3ms));
  EXPECT_EQ(Gos(arbiter.Ask(1, 0, Request::kStep, At(4ms))), (Gos_t{{1, 2}}));
  EXPECT_FALSE(arbiter.finished());
  arbiter.EndSide(1, At(5ms));
  EXPECT_TRUE(arbiter.finished());
}

TEST_F(TurnArbiterTest, ASideHoldingAMeasuredTurnPastTheTimeoutIsTimedOutAndTheOtherGoesOn) {
  TurnArbiter arbiter(2, 10s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kStep, At(0ms));
  arbiter.Ask(1, 0, Request::kStep, At(0ms));  // side 0 goes, then hangs
  ASSERT_TRUE(arbiter.Deadline().has_value());
  EXPECT_EQ(*arbiter.Deadline(), At(10s));
  EXPECT_TRUE(arbiter.Expire(At(9s)).empty());
  auto effects = arbiter.Expire(At(10s));
  ASSERT_EQ(effects.size(), 2u);
  EXPECT_EQ(effects[0].kind, Effect::Kind::kTimedOut);
  EXPECT_EQ(effects[0].side, 0);
  EXPECT_NE(effects[0].reason.find("held its lockstep turn for more than 10 s"), std::string::npos);
  EXPECT_EQ(Gos(effects), (Gos_t{{1, 1}}));
}

TEST_F(TurnArbiterTest, ASideThatKeepsTheOthersWaitingForItsNextTurnIsTimedOut) {
  TurnArbiter arbiter(2, 10s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kStep, At(0ms));
  arbiter.Ask(1, 0, Request::kStep, At(0ms));
  arbiter.Done(0, 0, At(1s));   // side 1 goes
  arbiter.Done(1, 0, At(2s));   // side 0 is next, but never asks again
  arbiter.Ask(1, 0, Request::kStep, At(2s));
  EXPECT_EQ(*arbiter.Deadline(), At(12s));
  auto effects = arbiter.Expire(At(12s));
  ASSERT_FALSE(effects.empty());
  EXPECT_EQ(effects[0].kind, Effect::Kind::kTimedOut);
  EXPECT_EQ(effects[0].side, 0);
  EXPECT_EQ(Gos(effects), (Gos_t{{1, 2}}));
}

TEST_F(TurnArbiterTest, TheWarmUpTurnHasNoTurnTimeoutCompilingMayTakeMinutes) {
  TurnArbiter arbiter(2, 10s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kWarmup, At(0ms));
  EXPECT_FALSE(arbiter.Deadline().has_value());
  EXPECT_TRUE(arbiter.Expire(At(1h)).empty());
  EXPECT_EQ(arbiter.holder(), 0);
}

TEST_F(TurnArbiterTest, ARankReportingMoreMeasuredStepsThanTurnsLeavesTheRotation) {
  TurnArbiter arbiter(2, 60s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  // Side 1 never asks (a script that bypasses the library) but reports a measured step.
  arbiter.Ask(0, 0, Request::kStep, At(0ms));
  auto effects = arbiter.StepReported(1, 0, At(1ms));
  ASSERT_FALSE(effects.empty());
  EXPECT_EQ(effects[0].kind, Effect::Kind::kLeftRotation);
  EXPECT_EQ(Gos(effects), (Gos_t{{0, 0}}));
  // A rank that takes turns reports its step after its turn: never more steps than turns.
  arbiter.Done(0, 0, At(2ms));
  EXPECT_TRUE(arbiter.StepReported(0, 0, At(3ms)).empty());
  // A rank of a side that left still never waits forever.
  auto late = arbiter.Ask(1, 0, Request::kStep, At(4ms));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].turn, -1);
}

TEST_F(TurnArbiterTest, ASideThatNeverJoinsIsAbsentAfterTheTurnTimeout) {
  TurnArbiter arbiter(2, 10s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kWarmup, At(0ms));
  auto go = arbiter.Ask(0, 0, Request::kWarmup, At(0ms));
  EXPECT_EQ(arbiter.holder(), 0);  // side 0 warms up; side 1 has not joined
  arbiter.Done(0, 0, At(1s));
  EXPECT_TRUE(arbiter.Ask(0, 0, Request::kStep, At(1s)).empty());  // waits for side 1's warm-up
  EXPECT_EQ(*arbiter.Deadline(), At(10s));
  EXPECT_EQ(Gos(arbiter.Expire(At(10s))), (Gos_t{{0, 1}}));
}

TEST_F(TurnArbiterTest, MeasuredTurnsRotateOverThreeSidesInSideOrder) {
  TurnArbiter arbiter(3, 60s);
  for (int s = 0; s < 3; ++s) arbiter.Join(s, 1, At(0ms));
  std::vector<int> order;
  for (int s = 2; s >= 0; --s) {
    for (const auto& [side, turn] : Gos(arbiter.Ask(s, 0, Request::kStep, At(0ms)))) order.push_back(side);
  }
  for (int round = 0; round < 6; ++round) {
    const int holder = *arbiter.holder();
    for (const auto& [side, turn] : Gos(arbiter.Done(holder, 0, At(1ms)))) order.push_back(side);
    arbiter.Ask(holder, 0, Request::kStep, At(1ms));
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
}

}  // namespace
}  // namespace bakeoff::worker
