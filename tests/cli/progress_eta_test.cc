// Issue 29: the progress line's "remaining" never grows while nothing finishes.
#include "cli/progress_eta.h"

#include <gtest/gtest.h>

namespace bakeoff::cli {
namespace {

TEST(ProgressEtaTest, UnknownUntilATrialFinishes) {
  ProgressEta eta;
  EXPECT_EQ(eta.Update(0, 12, 0), -1);
  EXPECT_EQ(eta.Update(0, 12, 50), -1);
}

TEST(ProgressEtaTest, CountsDownWhileNothingFinishesAndNeverGrows) {
  ProgressEta eta;
  // 2 of 12 in 20 s: 10 s a trial, 100 s left.
  EXPECT_DOUBLE_EQ(eta.Update(2, 12, 20), 100);
  double last = 100;
  for (double t = 21; t <= 200; t += 1) {
    const double remaining = eta.Update(2, 12, t);
    EXPECT_LE(remaining, last) << "at " << t << " s";
    EXPECT_GE(remaining, 0);
    last = remaining;
  }
  EXPECT_DOUBLE_EQ(eta.Update(2, 12, 70), 50);  // the estimate of 20 s, 50 s later
}

TEST(ProgressEtaTest, AFinishGivesANewEstimateFromTheWholeElapsedTime) {
  ProgressEta eta;
  eta.Update(2, 12, 20);
  // The third trial finishes at 150 s: 50 s a trial, 9 left.
  EXPECT_DOUBLE_EQ(eta.Update(3, 12, 150), 450);
  EXPECT_DOUBLE_EQ(eta.Update(3, 12, 160), 440);
  EXPECT_DOUBLE_EQ(eta.Update(12, 12, 500), 0);
}

}  // namespace
}  // namespace bakeoff::cli
