#include "cli/did_you_mean.h"

#include <gtest/gtest.h>

namespace bakeoff::cli {
namespace {

TEST(DidYouMeanTest, EditDistanceCountsASwapOfNeighboursAsOneEdit) {
  EXPECT_EQ(EditDistance("local", "local"), 0u);
  EXPECT_EQ(EditDistance("loacl", "local"), 1u);  // c and a swapped
  EXPECT_EQ(EditDistance("stats", "status"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("report", "submit"), 5u);
}

TEST(DidYouMeanTest, NearestKeepsCloseNamesClosestFirst) {
  const std::vector<std::string> commands{"calibrate", "cancel", "compare", "local", "query", "report", "status",
                                          "submit", "validate", "worker", "workers"};
  EXPECT_EQ(Nearest("loacl", commands), std::vector<std::string>{"local"});
  EXPECT_EQ(Nearest("worekrs", commands), (std::vector<std::string>{"workers", "worker"}));
  EXPECT_TRUE(Nearest("frobnicate", commands).empty());
  EXPECT_TRUE(Nearest("status", commands).empty()) << "an exact name needs no suggestion";
  EXPECT_EQ(Nearest("--wrokers", {"--workers", "--slots", "--db"}), std::vector<std::string>{"--workers"});
}

TEST(DidYouMeanTest, DidYouMeanNamesAtMostTwo) {
  EXPECT_EQ(DidYouMean({}), "");
  EXPECT_EQ(DidYouMean({"local"}), " Did you mean 'local'?");
  EXPECT_EQ(DidYouMean({"workers", "worker", "cancel"}), " Did you mean 'workers' or 'worker'?");
}

}  // namespace
}  // namespace bakeoff::cli
