#include "worker/exit_classifier.h"

#include <gtest/gtest.h>

#include <csignal>

namespace bakeoff::worker {
namespace {
using protocol::Outcome;

RankEnd Exited(int rank, int code, int order = 1) {
  RankEnd r;
  r.rank = rank;
  r.exit_code = code;
  r.end_order = order;
  r.summary_seen = code == 0;
  return r;
}

RankEnd Signalled(int rank, int sig, int order = 1) {
  RankEnd r;
  r.rank = rank;
  r.signal = sig;
  r.end_order = order;
  return r;
}

TEST(ExitClassifierTest, AllZeroWithSummaryIsSucceeded) {
  EXPECT_EQ(ClassifyAttempt({Exited(0, 0), Exited(1, 0)}, false, false).outcome, Outcome::kSucceeded);
}

TEST(ExitClassifierTest, ErrorEventKindWinsOverExitCode) {
  RankEnd r = Exited(0, 1);
  r.error_kind = "oom";
  r.error_message = "CUDA out of memory";
  auto c = ClassifyAttempt({r}, false, false);
  EXPECT_EQ(c.outcome, Outcome::kOom);
  EXPECT_NE(c.reason.find("CUDA out of memory"), std::string::npos);
}

TEST(ExitClassifierTest, AStorePortTakenIsTheMachinerysLossNotTheVariantsFailure) {
  RankEnd r = Exited(0, 1);
  r.error_kind = "infrastructure";
  r.error_message = "rank 0 of 2 hosting the store at 127.0.0.1:29500: the port is in use";
  auto c = ClassifyAttempt({r, Exited(1, 1, 2)}, false, false);
  EXPECT_EQ(c.outcome, Outcome::kLost);
  EXPECT_TRUE(c.infrastructure);
  EXPECT_EQ(c.reason.rfind("infrastructure: rank 0: ", 0), 0u) << c.reason;
  // Every other kind is the variant's: never infrastructure.
  r.error_kind = "failed";
  EXPECT_FALSE(ClassifyAttempt({r}, false, false).infrastructure);
}

TEST(ExitClassifierTest, ACancelledAttemptWhoseRanksFinishedCleanlyIsStillCancelled) {
  // The ranks wrote their summary and exited 0, but the cancel came first: the sweep's
  // cancel decides, not the ranks' clean exit.
  auto c = ClassifyAttempt({Exited(0, 0), Exited(1, 0)}, false, true, "cancelled by the user");
  EXPECT_EQ(c.outcome, Outcome::kCancelled);
  EXPECT_EQ(c.reason, "cancelled by the user");
}

TEST(ExitClassifierTest, ReasonKeepsTheCauseWithoutTheBacktraceAndNamesTheLog) {
  RankEnd r = Exited(1, 1);
  r.error_kind = "failed";
  r.error_message =
      "unavailable: gloo process group failed: Cannot resolve 10.231.193.2 to a (local) address\n"
      "Exception raised from createDeviceForHostname at ProcessGroupGloo.cpp:667 (most recent call first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9e\n";
  r.log_path = "/work/trial-3-attempt-1/rank-1.log";
  auto c = ClassifyAttempt({r}, false, false);
  EXPECT_EQ(c.reason,
            "rank 1: unavailable: gloo process group failed: Cannot resolve 10.231.193.2 to a (local) address "
            "(full text in /work/trial-3-attempt-1/rank-1.log)");
}

TEST(ExitClassifierTest, ExitWithoutAnEventAlsoNamesTheLog) {
  RankEnd r = Exited(0, 1);
  r.log_path = "/w/rank-0.log";
  EXPECT_EQ(ClassifyAttempt({r}, false, false).reason,
            "rank 0 exited with code 1 without an error event (full text in /w/rank-0.log)");
}

TEST(ExitClassifierTest, ACrashWithoutAnEventQuotesItsLastStderrLines) {
  RankEnd r = Exited(0, 1);
  r.log_path = "/w/rank-0.log";
  r.stderr_tail = "  File \"train.py\", line 9, in <module> | ZeroDivisionError: division by zero";
  EXPECT_EQ(ClassifyAttempt({r}, false, false).reason,
            "rank 0 exited with code 1 without an error event; its last stderr lines:   File \"train.py\", line 9, "
            "in <module> | ZeroDivisionError: division by zero (full text in /w/rank-0.log)");
  RankEnd killed = Signalled(0, SIGSEGV);
  killed.stderr_tail = "Fatal Python error: Segmentation fault";
  EXPECT_NE(ClassifyAttempt({killed}, false, false).reason.find("its last stderr lines: Fatal Python error"),
            std::string::npos);
  // A silent script (exit 0, no summary) is told what it lacks and where its log is.
  RankEnd silent = Exited(0, 0);
  silent.summary_seen = false;
  silent.log_path = "/w/rank-0.log";
  const std::string reason = ClassifyAttempt({silent}, false, false).reason;
  EXPECT_NE(reason.find("run.summary()"), std::string::npos) << reason;
  EXPECT_NE(reason.find("(full text in /w/rank-0.log)"), std::string::npos) << reason;
}

TEST(ExitClassifierTest, EarliestErrorEventDecides) {
  RankEnd first = Exited(1, 4, 1);
  first.error_kind = "unsupported";
  RankEnd later = Exited(0, 1, 2);
  later.error_kind = "failed";
  EXPECT_EQ(ClassifyAttempt({later, first}, false, false).outcome, Outcome::kUnsupported);
}

TEST(ExitClassifierTest, SigkillWithoutEventIsOom) {
  auto c = ClassifyAttempt({Signalled(0, SIGKILL)}, false, false);
  EXPECT_EQ(c.outcome, Outcome::kOom);
  EXPECT_NE(c.reason.find("signal 9"), std::string::npos);
}

TEST(ExitClassifierTest, SigkillSentByTheSupervisorIsNotOom) {
  RankEnd killed = Signalled(0, SIGKILL, 2);
  killed.killed_by_supervisor = true;
  RankEnd failed = Exited(1, 1, 1);
  EXPECT_EQ(ClassifyAttempt({killed, failed}, false, false).outcome, Outcome::kFailed);
}

TEST(ExitClassifierTest, ExitCodesWithoutEventMapPerTrainerContract) {
  EXPECT_EQ(ClassifyAttempt({Exited(0, 3)}, false, false).outcome, Outcome::kOom);
  EXPECT_EQ(ClassifyAttempt({Exited(0, 4)}, false, false).outcome, Outcome::kUnsupported);
  EXPECT_EQ(ClassifyAttempt({Exited(0, 5)}, false, false).outcome, Outcome::kDiverged);
  EXPECT_EQ(ClassifyAttempt({Exited(0, 2)}, false, false).outcome, Outcome::kFailed);
  EXPECT_EQ(ClassifyAttempt({Exited(0, 77)}, false, false).outcome, Outcome::kFailed);
}

TEST(ExitClassifierTest, OtherSignalIsFailed) {
  EXPECT_EQ(ClassifyAttempt({Signalled(0, SIGSEGV)}, false, false).outcome, Outcome::kFailed);
}

TEST(ExitClassifierTest, TimeoutWinsOverRankErrors) {
  RankEnd r = Signalled(0, SIGKILL);
  r.killed_by_supervisor = true;
  r.error_kind = "failed";
  EXPECT_EQ(ClassifyAttempt({r}, true, false).outcome, Outcome::kTimeout);
}

TEST(ExitClassifierTest, CancelKeepsItsReason) {
  auto c = ClassifyAttempt({Signalled(0, SIGKILL)}, false, true, "sweep cancelled");
  EXPECT_EQ(c.outcome, Outcome::kCancelled);
  EXPECT_EQ(c.reason, "sweep cancelled");
}

TEST(ExitClassifierTest, Rank0ExitZeroWithoutSummaryIsFailed) {
  RankEnd r = Exited(0, 0);
  r.summary_seen = false;
  EXPECT_EQ(ClassifyAttempt({r}, false, false).outcome, Outcome::kFailed);
}

}  // namespace
}  // namespace bakeoff::worker
