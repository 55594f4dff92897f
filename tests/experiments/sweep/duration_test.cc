#include "experiments/sweep/duration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bakeoff::spec {
namespace {

TEST(DurationTest, ParsesUnitsAndSums) {
  EXPECT_EQ(ParseDuration("90")->count(), 90);
  EXPECT_EQ(ParseDuration("90s")->count(), 90);
  EXPECT_EQ(ParseDuration("10m")->count(), 600);
  EXPECT_EQ(ParseDuration("2h")->count(), 7200);
  EXPECT_EQ(ParseDuration("1h30m")->count(), 5400);
  EXPECT_EQ(ParseDuration("1d")->count(), 86400);
  EXPECT_EQ(ParseDuration("1500ms")->count(), 2);  // rounded up
}

TEST(DurationTest, MillisecondsAreKeptWhereAFlagAsksForThem) {
  EXPECT_EQ(ParseDurationMs("5ms")->count(), 5);
  EXPECT_EQ(ParseDurationMs("1s500ms")->count(), 1500);
  EXPECT_EQ(ParseDurationMs("2")->count(), 2000);  // a bare number is seconds
  EXPECT_FALSE(ParseDurationMs("0ms").ok());
}

TEST(DurationTest, RejectsWhatIsNotADuration) {
  for (const char* bad : {"", "10 m", "m", "10x", "-5s", "1h30", "0s", "31d"}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
  }
  EXPECT_THAT(ParseDuration("ten").status().message(),
              ::testing::HasSubstr("'ten' is not a duration; write seconds (90, 90s), minutes (10m)"));
}

TEST(DurationTest, FormatsForPeople) {
  EXPECT_EQ(FormatDuration(std::chrono::seconds(5400)), "1h30m");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(600)), "10m");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(45)), "45s");
}

}  // namespace
}  // namespace bakeoff::spec
