// Issue 29: the progress line's "remaining" never grows while nothing finishes; `bakeoff
// local` and `submit --wait` print the same line.
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

TEST(ProgressLineTest, SaysTheCountsTheClocksAndTheAnswerSoFar) {
  ProgressFigures f;
  f.done = 3;
  f.total = 16;
  f.running = 1;
  f.queued = 12;
  f.elapsed_s = 65;
  f.remaining_s = 260.4;
  f.comparisons = ProgressFigures::Answered{1, 4};
  EXPECT_EQ(FormatProgressLine(f),
            "done 3/16 · running 1 · queued 12 · elapsed 1m05s · remaining ~4m20s · answered 1/4");
}

TEST(ProgressLineTest, AnUnknownRemainderIsAQuestionMarkAndAWaitingReasonComesLast) {
  ProgressFigures f;
  f.total = 4;
  f.queued = 4;
  f.elapsed_s = 3725;
  f.waiting = "no live worker offers template probe";
  EXPECT_EQ(FormatProgressLine(f),
            "done 0/4 · running 0 · queued 4 · elapsed 1h02m · remaining ? · waiting: no live worker offers "
            "template probe");
}

// A13: the waiting reason is the coordinator's text and names the GPU models workers
// report: a terminal escape in it is shown escaped, and a line break cannot end the line
// a terminal redraws in place.
TEST(ProgressLineTest, AWaitingReasonIsEscapedAndKeptToOneLine) {
  ProgressFigures f;
  f.total = 1;
  f.queued = 1;
  f.waiting = "they have \x1b]0;OWNED\x07 x1\r\nand \xc2\x9b more";
  EXPECT_EQ(FormatProgressLine(f),
            "done 0/1 · running 0 · queued 1 · elapsed 0m00s · remaining ? · waiting: they have \\x1b]0;OWNED\\x07 "
            "x1  and \\u009b more");
}

}  // namespace
}  // namespace bakeoff::cli
