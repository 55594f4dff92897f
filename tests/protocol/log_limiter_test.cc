// LogLimiter: one line per interval for lines a peer can cause at will, the next one
// written saying how many were left out; approached from both sides of the interval.
#include "protocol/log_limiter.h"

#include <gtest/gtest.h>

namespace bakeoff::logging {
namespace {

using namespace std::chrono_literals;
using Time = std::chrono::steady_clock::time_point;

TEST(LogLimiterTest, TheFirstLineIsWrittenAndTheRestOfItsIntervalLeftOut) {
  LogLimiter limiter;
  const Time start{1000s};
  EXPECT_EQ(limiter.Admit("a", start), "a");
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Admit("b", start + 9999ms).has_value()) << i;
}

TEST(LogLimiterTest, TheNextLineAfterTheIntervalSaysHowManyWereLeftOut) {
  LogLimiter limiter;
  const Time start{1000s};
  ASSERT_TRUE(limiter.Admit("a", start).has_value());
  for (int i = 0; i < 146; ++i) ASSERT_FALSE(limiter.Admit("b", start + 1s).has_value());
  EXPECT_EQ(limiter.Admit("c", start + 10s), "c (146 such lines left out in the last 10 s)");
  // The count starts again: a quiet interval writes a bare line.
  EXPECT_EQ(limiter.Admit("d", start + 20s), "d");
  EXPECT_FALSE(limiter.Admit("e", start + 29s).has_value());
  EXPECT_EQ(limiter.Admit("f", start + 31s), "f (1 such lines left out in the last 10 s)");
}

// The other side: lines spaced at the interval are all written, none counted.
TEST(LogLimiterTest, LinesAtTheIntervalAreAllWritten) {
  LogLimiter limiter(2s);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(limiter.Admit("x", Time{100s + i * 2s}), "x") << i;
}

}  // namespace
}  // namespace bakeoff::logging
