#include "worker/turn_arbiter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

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

TEST_F(TurnArbiterTest, WarmUpsRunOneSideAtATimeThenEachRoundGivesEverySideOneTurn) {
  TurnArbiter arbiter(2, 60s);
  EXPECT_TRUE(arbiter.Join(0, 1, At(0ms)).empty());
  EXPECT_TRUE(arbiter.Join(1, 1, At(0ms)).empty());
  // Side 1 asks first, but warm-ups go in side order.
  EXPECT_TRUE(arbiter.Ask(1, 0, Request::kWarmup, At(1ms)).empty());
  EXPECT_EQ(Gos(arbiter.Ask(0, 0, Request::kWarmup, At(2ms))), (Gos_t{{0, 0}}));
  // Side 0 finishes its warm-up and asks for its first measured step: side 1 warms up.
  EXPECT_EQ(Gos(arbiter.Done(0, 0, At(3ms))), (Gos_t{{1, 1}}));
  EXPECT_TRUE(arbiter.Ask(0, 0, Request::kStep, At(4ms)).empty());
  // Side 1's warm-up ends (`done`, then its first `step`): measured rounds begin, both
  // sides once per round.
  auto first = Gos(arbiter.Done(1, 0, At(5ms)));
  auto asked = Gos(arbiter.Ask(1, 0, Request::kStep, At(5ms)));
  first.insert(first.end(), asked.begin(), asked.end());
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].second, 2);
  std::vector<int> order = {first[0].first};
  for (std::int64_t turn = 3; turn < 40; ++turn) {
    const int holder = *arbiter.holder();
    auto next = Gos(arbiter.Done(holder, 0, At(std::chrono::milliseconds(turn))));
    if (next.empty()) {  // the same side goes again (a new round that it starts): it must ask first
      next = Gos(arbiter.Ask(holder, 0, Request::kStep, At(std::chrono::milliseconds(turn))));
    } else {
      arbiter.Ask(holder, 0, Request::kStep, At(std::chrono::milliseconds(turn)));
    }
    ASSERT_EQ(next.size(), 1u) << "turn " << turn;
    EXPECT_EQ(next[0].second, turn);
    order.push_back(next[0].first);
  }
  // Rounds of two: each side once per round, and both orders occur.
  int ab = 0, ba = 0;
  for (std::size_t r = 0; r + 1 < order.size(); r += 2) {
    EXPECT_NE(order[r], order[r + 1]) << "round " << r / 2;
    (order[r] == 0 ? ab : ba) += 1;
  }
  EXPECT_GT(ab, 0);
  EXPECT_GT(ba, 0);
}

TEST_F(TurnArbiterTest, ATurnBeginsOnlyWhenEveryRankOfTheSideAskedAndEndsWhenEveryRankIsDone) {
  TurnArbiter arbiter(2, 60s);
  arbiter.Join(0, 2, At(0ms));
  arbiter.Join(1, 2, At(0ms));
  arbiter.Ask(0, 0, Request::kStep, At(1ms));
  arbiter.Ask(1, 0, Request::kStep, At(1ms));
  arbiter.Ask(1, 1, Request::kStep, At(1ms));
  EXPECT_FALSE(arbiter.holder().has_value()) << "side 0's rank 1 has not asked";
  auto go = arbiter.Ask(0, 1, Request::kStep, At(2ms));
  ASSERT_EQ(go.size(), 1u);
  EXPECT_EQ(go[0].ranks, (std::vector<int>{0, 1}));  // both ranks of a side together
  const int first = go[0].side;
  ASSERT_EQ(arbiter.holder(), first);
  EXPECT_TRUE(arbiter.Done(first, 0, At(3ms)).empty());  // its rank 1 still computing
  EXPECT_EQ(arbiter.holder(), first);
  auto next = arbiter.Done(first, 1, At(4ms));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].side, 1 - first);
  EXPECT_EQ(next[0].ranks, (std::vector<int>{0, 1}));
}

TEST_F(TurnArbiterTest, ASideWithoutWarmUpStepsJoinsTheRoundsAtOnce) {
  TurnArbiter arbiter(2, 60s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  EXPECT_TRUE(arbiter.Ask(0, 0, Request::kStep, At(1ms)).empty());  // side 1 has not warmed up yet
  EXPECT_EQ(arbiter.Ask(1, 0, Request::kStep, At(2ms)).size(), 1u);
}

TEST_F(TurnArbiterTest, WhenOneSideEndsTheSurvivorGoesOnAlone) {
  TurnArbiter arbiter(2, 60s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kStep, At(1ms));
  arbiter.Ask(1, 0, Request::kStep, At(1ms));
  const int crashed = *arbiter.holder();
  const int survivor = 1 - crashed;
  // The side holding the turn crashes: the survivor goes, and then goes on alone.
  EXPECT_EQ(Gos(arbiter.EndRank(crashed, 0, At(2ms))), (Gos_t{{survivor, 1}}));
  arbiter.Done(survivor, 0, At(3ms));
  EXPECT_EQ(Gos(arbiter.Ask(survivor, 0, Request::kStep, At(4ms))), (Gos_t{{survivor, 2}}));
  EXPECT_FALSE(arbiter.finished());
  arbiter.EndSide(survivor, At(5ms));
  EXPECT_TRUE(arbiter.finished());
}

TEST_F(TurnArbiterTest, ASideHoldingAMeasuredTurnPastTheTimeoutIsTimedOutAndTheOtherGoesOn) {
  TurnArbiter arbiter(2, 10s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kStep, At(0ms));
  arbiter.Ask(1, 0, Request::kStep, At(0ms));
  const int hung = *arbiter.holder();  // it goes, then hangs
  ASSERT_TRUE(arbiter.Deadline().has_value());
  EXPECT_EQ(*arbiter.Deadline(), At(10s));
  EXPECT_TRUE(arbiter.Expire(At(9s)).empty());
  auto effects = arbiter.Expire(At(10s));
  ASSERT_EQ(effects.size(), 2u);
  EXPECT_EQ(effects[0].kind, Effect::Kind::kTimedOut);
  EXPECT_EQ(effects[0].side, hung);
  EXPECT_NE(effects[0].reason.find("held its lockstep turn for more than 10 s"), std::string::npos);
  EXPECT_EQ(Gos(effects), (Gos_t{{1 - hung, 1}}));
}

TEST_F(TurnArbiterTest, ASideThatKeepsTheOthersWaitingForItsNextTurnIsTimedOut) {
  TurnArbiter arbiter(2, 10s);
  arbiter.Join(0, 1, At(0ms));
  arbiter.Join(1, 1, At(0ms));
  arbiter.Ask(0, 0, Request::kStep, At(0ms));
  arbiter.Ask(1, 0, Request::kStep, At(0ms));
  const int first = *arbiter.holder();
  const int second = 1 - first;
  arbiter.Done(first, 0, At(1s));  // the second side goes; the first never asks again
  arbiter.Done(second, 0, At(2s));
  arbiter.Ask(second, 0, Request::kStep, At(2s));
  if (arbiter.holder() == second) {  // the next round drew the second side first: let it go
    arbiter.Done(second, 0, At(2s));
    arbiter.Ask(second, 0, Request::kStep, At(2s));
  }
  ASSERT_FALSE(arbiter.holder().has_value()) << "waiting for the first side";
  EXPECT_EQ(*arbiter.Deadline(), At(12s));
  auto effects = arbiter.Expire(At(12s));
  ASSERT_FALSE(effects.empty());
  EXPECT_EQ(effects[0].kind, Effect::Kind::kTimedOut);
  EXPECT_EQ(effects[0].side, first);
  ASSERT_EQ(Gos(effects).size(), 1u);
  EXPECT_EQ(Gos(effects)[0].first, second);
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

TEST_F(TurnArbiterTest, ThreeSidesEachTakeOneTurnPerRoundInOrdersThatVary) {
  TurnArbiter arbiter(3, 60s, /*seed=*/42);
  for (int s = 0; s < 3; ++s) arbiter.Join(s, 1, At(0ms));
  std::vector<int> order;
  for (int s = 2; s >= 0; --s) {
    for (const auto& [side, turn] : Gos(arbiter.Ask(s, 0, Request::kStep, At(0ms)))) order.push_back(side);
  }
  for (int step = 0; step < 3 * 20 - 1; ++step) {
    const int holder = *arbiter.holder();
    auto next = Gos(arbiter.Done(holder, 0, At(1ms)));
    auto again = Gos(arbiter.Ask(holder, 0, Request::kStep, At(1ms)));
    next.insert(next.end(), again.begin(), again.end());
    ASSERT_EQ(next.size(), 1u);
    order.push_back(next[0].first);
  }
  std::set<std::vector<int>> orders;
  for (std::size_t r = 0; r < order.size(); r += 3) {
    std::vector<int> round(order.begin() + r, order.begin() + r + 3);
    orders.insert(round);
    std::sort(round.begin(), round.end());
    EXPECT_EQ(round, (std::vector<int>{0, 1, 2})) << "round " << r / 3;
  }
  EXPECT_GE(orders.size(), 3u) << "the order is drawn anew each round";
}

}  // namespace
}  // namespace bakeoff::worker
