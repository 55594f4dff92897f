#include "coordinator/event_rate_limiter.h"

#include <gtest/gtest.h>

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;

const EventRateLimiter::Clock::time_point kStart = EventRateLimiter::Clock::time_point{} + 1h;

TEST(EventRateLimiterTest, ABurstUpToTheRatePassesAtOnce) {
  EventRateLimiter limiter(1000);
  EXPECT_EQ(limiter.Take(600, kStart), 0ms);
  EXPECT_EQ(limiter.Take(400, kStart), 0ms);
}

TEST(EventRateLimiterTest, OverTheRateWaitsForTheDebtToBeRepaid) {
  EventRateLimiter limiter(1000);
  EXPECT_EQ(limiter.Take(1000, kStart), 0ms);
  EXPECT_EQ(limiter.Take(500, kStart), 500ms);  // 500 events owed at 1000/s
  // Half a second later the debt is repaid; the next 250 events owe 250 ms.
  EXPECT_EQ(limiter.Take(250, kStart + 500ms), 250ms);
}

TEST(EventRateLimiterTest, SustainedSendingIsHeldToTheRate) {
  EventRateLimiter limiter(2000);
  auto now = kStart;
  std::chrono::milliseconds waited{0};
  // 20000 events in frames of 500, each read after the wait the limiter asked for.
  for (int frame = 0; frame < 40; ++frame) {
    auto wait = limiter.Take(500, now);
    waited += wait;
    now += wait;
  }
  // The first second's burst (2000) is free; the other 18000 take 9 s at 2000/s.
  EXPECT_NEAR(static_cast<double>(waited.count()), 9000.0, 5.0);
}

TEST(EventRateLimiterTest, IdleTimeRefillsOnlyUpToOneSecondsWorth) {
  EventRateLimiter limiter(100);
  EXPECT_EQ(limiter.Take(100, kStart), 0ms);
  EXPECT_EQ(limiter.Take(100, kStart + 1h), 0ms);
  EXPECT_EQ(limiter.Take(100, kStart + 1h), 1000ms);
}

TEST(EventRateLimiterTest, ZeroMeansNoLimit) {
  EventRateLimiter limiter(0);
  EXPECT_EQ(limiter.Take(1000000, kStart), 0ms);
}

}  // namespace
}  // namespace bakeoff::coordinator
