// Tests of WorkerQuarantine: the state machine that keeps a worker whose attempts end
// within seconds of starting from new placements (A2), with the time given in.

#include "coordinator/worker_quarantine.h"

#include <gtest/gtest.h>

#include <chrono>

namespace bakeoff::coordinator {
namespace {

using namespace std::chrono_literals;
using protocol::Outcome;

class WorkerQuarantineTest : public ::testing::Test {
 protected:
  // The default policy: 3 endings within 10 s, 5 min doubling up to 1 h.
  WorkerQuarantine quarantine_;
  Clock::TimePoint now_ = Clock::TimePoint{} + 1000h;

  std::optional<Clock::TimePoint> End(const std::string& worker, Outcome outcome, std::chrono::milliseconds ran) {
    now_ += ran;
    return quarantine_.OnAttemptEnded(worker, outcome, ran, now_);
  }
};

TEST_F(WorkerQuarantineTest, ThreeQuickFailuresInARowQuarantineForTheDocumentedPeriod) {
  EXPECT_FALSE(End("rogue", Outcome::kOom, 2s));
  EXPECT_FALSE(End("rogue", Outcome::kFailed, 9999ms));
  EXPECT_FALSE(quarantine_.Quarantined("rogue", now_));
  auto until = End("rogue", Outcome::kUnsupported, 1s);
  ASSERT_TRUE(until);
  EXPECT_EQ(*until, now_ + 5min);
  EXPECT_TRUE(quarantine_.Quarantined("rogue", now_));
  EXPECT_TRUE(quarantine_.Quarantined("rogue", now_ + 5min - 1ms));
  EXPECT_FALSE(quarantine_.Quarantined("rogue", now_ + 5min)) << "it takes placements again after the period";
  EXPECT_FALSE(quarantine_.Quarantined("honest", now_));
}

// The boundary from the other side: at the window an attempt is not quick, and a
// success or a long attempt between quick failures ends the streak.
TEST_F(WorkerQuarantineTest, ASuccessOrALongAttemptEndsTheStreak) {
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kSucceeded, 1s);
  EXPECT_EQ(quarantine_.Streak("w"), 0u);
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kOom, 1s);
  EXPECT_FALSE(End("w", Outcome::kFailed, 10s)) << "10 s is the window: not quick";
  EXPECT_EQ(quarantine_.Streak("w"), 0u);
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kOom, 1s);
  EXPECT_TRUE(End("w", Outcome::kOom, 1s));
}

// A quarantined worker that succeeds (it ran trials because every live worker was
// quarantined, or the attempt was placed before) takes placements again at once; a long
// failure ends the streak but not the quarantine.
TEST_F(WorkerQuarantineTest, ASuccessDuringAQuarantineLiftsIt) {
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kOom, 1s);
  ASSERT_TRUE(End("w", Outcome::kOom, 1s));
  End("w", Outcome::kFailed, 30s);
  EXPECT_TRUE(quarantine_.Quarantined("w", now_)) << "a long failure is no proof of work";
  End("w", Outcome::kSucceeded, 40s);
  EXPECT_FALSE(quarantine_.Quarantined("w", now_));
  EXPECT_FALSE(quarantine_.QuarantinedUntil("w", now_));
  // And the back-off starts again from the first period.
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kOom, 1s);
  auto until = End("w", Outcome::kOom, 1s);
  ASSERT_TRUE(until);
  EXPECT_EQ(*until, now_ + 5min);
}

// Cancelled attempts (the user's or the coordinator's doing) neither count nor end the
// streak; an attempt of unknown length (recovered after a restart) is never quick.
TEST_F(WorkerQuarantineTest, CancelledAndUnknownLengthAttemptsAreNotQuickFailures) {
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kCancelled, 1s);
  End("w", Outcome::kCancelled, 1s);
  EXPECT_EQ(quarantine_.Streak("w"), 1u);
  EXPECT_FALSE(quarantine_.OnAttemptEnded("w", Outcome::kLost, std::nullopt, now_));
  EXPECT_EQ(quarantine_.Streak("w"), 0u);
}

TEST_F(WorkerQuarantineTest, EachQuarantineSinceTheLastGoodAttemptDoublesUpToTheCap) {
  std::chrono::minutes expected[] = {5min, 10min, 20min, 40min, 60min, 60min};
  for (auto length : expected) {
    End("w", Outcome::kOom, 1s);
    End("w", Outcome::kOom, 1s);
    auto until = End("w", Outcome::kOom, 1s);
    ASSERT_TRUE(until);
    EXPECT_EQ(*until - now_, length);
    // An attempt placed before the quarantine that ends during it adds nothing.
    EXPECT_FALSE(End("w", Outcome::kOom, 1s));
    now_ = *until;
  }
  End("w", Outcome::kSucceeded, 30s);
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kOom, 1s);
  auto until = End("w", Outcome::kOom, 1s);
  ASSERT_TRUE(until);
  EXPECT_EQ(*until - now_, 5min) << "a success resets the back-off";
}

TEST_F(WorkerQuarantineTest, ZeroAttemptsNeverQuarantines) {
  WorkerQuarantine off(QuarantinePolicy{0, 10s, 5min, 1h});
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(off.OnAttemptEnded("w", Outcome::kOom, 1ms, now_));
  EXPECT_FALSE(off.Quarantined("w", now_));
}

TEST_F(WorkerQuarantineTest, AForgottenWorkerStartsAfresh) {
  End("w", Outcome::kOom, 1s);
  End("w", Outcome::kOom, 1s);
  ASSERT_TRUE(End("w", Outcome::kOom, 1s));
  quarantine_.Forget("w");
  EXPECT_FALSE(quarantine_.Quarantined("w", now_));
  EXPECT_EQ(quarantine_.Streak("w"), 0u);
}

}  // namespace
}  // namespace bakeoff::coordinator
