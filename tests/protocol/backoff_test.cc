// Backoff's sequence: doubling from `initial` up to `max`, each delay jittered within
// its stated band, back to `initial` after Reset, and repeatable for a seed.
#include "protocol/backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace bakeoff {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesFromInitialUpToMaxWithEveryDelayInsideTheJitterBand) {
  Backoff backoff({milliseconds(100), milliseconds(1000), 0.2}, /*seed=*/7);
  const std::vector<long> steps = {100, 200, 400, 800, 1000, 1000, 1000};
  for (long step : steps) {
    ASSERT_EQ(backoff.step().count(), step);
    const long delay = backoff.Next().count();
    EXPECT_GE(delay, step * 8 / 10) << "step " << step;
    EXPECT_LE(delay, step * 12 / 10) << "step " << step;
  }
}

TEST(BackoffTest, ResetGoesBackToInitial) {
  Backoff backoff({milliseconds(50), milliseconds(400), 0.0}, 1);
  EXPECT_EQ(backoff.Next().count(), 50);
  EXPECT_EQ(backoff.Next().count(), 100);
  backoff.Reset();
  EXPECT_EQ(backoff.Next().count(), 50) << "no jitter: exactly the step";
}

TEST(BackoffTest, TheSameSeedGivesTheSameDelaysAndTheJitterSpreadsThem) {
  Backoff a({milliseconds(1000), milliseconds(1000), 0.5}, 42), b({milliseconds(1000), milliseconds(1000), 0.5}, 42);
  std::vector<long> delays;
  for (int i = 0; i < 50; ++i) {
    const long d = a.Next().count();
    EXPECT_EQ(d, b.Next().count());
    delays.push_back(d);
  }
  const auto [lo, hi] = std::minmax_element(delays.begin(), delays.end());
  EXPECT_LT(*lo, 700) << "jitter 0.5 reaches well below the step";
  EXPECT_GT(*hi, 1300) << "and well above it";
}

}  // namespace
}  // namespace bakeoff
