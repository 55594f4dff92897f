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
  EXPECT_EQ(limiter.Admit(start), 0u);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Admit(start + 9999ms).has_value()) << i;
}

TEST(LogLimiterTest, TheNextLineAfterTheIntervalSaysHowManyWereLeftOut) {
  LogLimiter limiter;
  const Time start{1000s};
  ASSERT_TRUE(limiter.Admit(start).has_value());
  for (int i = 0; i < 146; ++i) ASSERT_FALSE(limiter.Admit(start + 1s).has_value());
  EXPECT_EQ(limiter.Admit(start + 10s), 146u);
  // The count starts again: a quiet interval writes a line with none left out.
  EXPECT_EQ(limiter.Admit(start + 20s), 0u);
  EXPECT_FALSE(limiter.Admit(start + 29s).has_value());
  EXPECT_EQ(limiter.Admit(start + 31s), 1u);
}

// The other side: lines spaced at the interval are all written, none counted.
TEST(LogLimiterTest, LinesAtTheIntervalAreAllWritten) {
  LogLimiter limiter(2s);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(limiter.Admit(Time{100s + i * 2s}), 0u) << i;
}

}  // namespace
}  // namespace bakeoff::logging
