// TrialTable: the coordinator's entries of unfinished sweeps and trials, found by id and
// walked by the queries the service decides with.
#include "coordinator/trial_table.h"

#include <gtest/gtest.h>

namespace bakeoff::coordinator {
namespace {

TEST(TrialTableTest, ASubmittedSweepsTrialsAreFoundAndItsQueuedOnesListedPerVariantInRunOrder) {
  TrialTable table;
  SweepEntry sweep;
  sweep.id = 7;
  sweep.name = "s";
  std::vector<metrics::NewTrial> trials = {{"a", 0, 0, 2}, {"b", 0, 1, 2}, {"a", 1, 2, 2}, {"a", 2, 3, 2}};
  table.AddSubmitted(sweep, {70, 71, 72, 73}, trials, 2, Clock::TimePoint{});
  ASSERT_NE(table.FindSweep(7), nullptr);
  EXPECT_EQ(table.FindSweep(8), nullptr);
  ASSERT_NE(table.FindTrial(72), nullptr);
  EXPECT_EQ(table.FindTrial(72)->variant_key, "a");
  EXPECT_EQ(table.FindTrial(74), nullptr);

  table.FindTrial(72)->cancel_requested = true;  // being cancelled: not listed again
  std::vector<TrialEntry*> queued = table.QueuedTrialsOf(*table.FindSweep(7), "a");
  ASSERT_EQ(queued.size(), 2u);
  EXPECT_EQ(queued[0]->id, 70);
  EXPECT_EQ(queued[1]->id, 73);
  EXPECT_TRUE(table.QueuedTrialsOf(*table.FindSweep(7), "none").empty());

  table.Clear();
  EXPECT_EQ(table.FindSweep(7), nullptr);
  EXPECT_EQ(table.FindTrial(70), nullptr);
}

// A table of one sweep whose trials 1 and 2 run attempt 1 on worker "w" (trial 2 with a
// second part on "x").
TrialTable RunningOnW() {
  TrialTable table;
  SweepEntry sweep;
  sweep.id = 1;
  table.AddSubmitted(sweep, {1, 2, 3}, {{"a", 0, 0, 2}, {"a", 1, 1, 2}, {"a", 2, 2, 2}}, 2, Clock::TimePoint{});
  for (std::int64_t id : {1, 2}) {
    TrialEntry& trial = *table.FindTrial(id);
    EXPECT_TRUE(trial.machine.Assign().ok());
    trial.parts.push_back(TrialPart{"w", {protocol::RankSlot{0, 0, {}}}});
  }
  table.FindTrial(2)->parts.push_back(TrialPart{"x", {protocol::RankSlot{1, 0, {}}}});
  return table;
}

TEST(TrialTableTest, AReRegisteringWorkerReclaimsWhatItRunsIsToldOfStaleAttemptsAndLosesTheRest) {
  TrialTable table = RunningOnW();
  table.FindTrial(1)->parts[0].reclaimed = false;  // recovered after a restart
  // It still runs trial 1's attempt, and an attempt of trial 3 it was never given here.
  TrialTable::Reclaim reclaim = table.ReclaimWorker("w", {{1, 1}, {3, 1}}, /*held=*/{});
  ASSERT_EQ(reclaim.parts.size(), 1u);
  EXPECT_EQ(reclaim.parts[0].first.trial_id, 1);
  EXPECT_TRUE(table.FindTrial(1)->parts[0].reclaimed);
  ASSERT_EQ(reclaim.stale.size(), 1u);
  EXPECT_EQ(reclaim.stale[0].trial_id, 3);
  EXPECT_EQ(reclaim.lost, std::vector<std::int64_t>{2}) << "trial 2's part on w is not running any more";

  // Held by the registry already and reclaimed: nothing to reserve again.
  reclaim = table.ReclaimWorker("w", {{1, 1}, {2, 1}}, /*held=*/{{1, 1}});
  ASSERT_EQ(reclaim.parts.size(), 1u);
  EXPECT_EQ(reclaim.parts[0].first.trial_id, 2);
  EXPECT_TRUE(reclaim.lost.empty());
}

TEST(TrialTableTest, DeadlinesAreTakenOnceWhenTheyPassAndStaleOnesAreDropped) {
  TrialTable table = RunningOnW();
  const Clock::TimePoint t0{};
  table.SetAttemptDeadline(*table.FindTrial(1), t0 + std::chrono::seconds(10));
  table.SetAttemptDeadline(*table.FindTrial(2), t0 + std::chrono::seconds(5));
  table.SetAttemptDeadline(*table.FindTrial(2), t0 + std::chrono::seconds(20));  // the first is now stale
  EXPECT_TRUE(table.TakeOverdue(t0 + std::chrono::seconds(4)).empty());
  EXPECT_EQ(table.TakeOverdue(t0 + std::chrono::seconds(10)), std::vector<std::int64_t>{1});
  EXPECT_TRUE(table.TakeOverdue(t0 + std::chrono::seconds(10)).empty()) << "taken once";
  EXPECT_EQ(table.TakeOverdue(t0 + std::chrono::seconds(30)), std::vector<std::int64_t>{2});
}

TEST(TrialTableTest, CancellingASweepCancelsItsQueuedTrialsAndNamesThePartsOfTheRunningOnesToStop) {
  TrialTable table = RunningOnW();
  table.FindTrial(1)->parts[0].finished = true;  // trial 1's only part has ended; it still runs until reported
  TrialTable::Cancelling cancelling = table.CancelSweep(*table.FindSweep(1));
  EXPECT_TRUE(table.FindSweep(1)->cancelled);
  EXPECT_EQ(table.FindTrial(3)->machine.phase(), TrialState::kFinished) << "the queued trial is cancelled now";
  EXPECT_TRUE(table.FindTrial(1)->cancel_requested);
  EXPECT_TRUE(table.FindTrial(2)->cancel_requested);
  EXPECT_EQ(cancelling.stopping, 2);
  ASSERT_EQ(cancelling.cancels.size(), 2u) << "trial 2's two parts; trial 1's part has ended";
  EXPECT_EQ(cancelling.cancels[0].first, "w");
  EXPECT_EQ(cancelling.cancels[1].first, "x");
  EXPECT_EQ(cancelling.cancels[1].second, (protocol::AttemptRef{2, 1}));
}

TEST(TrialTableTest, TheQueueCursorSkipsTrialsNoLongerQueuedAndRunningTrialsReportTheirWaitOnce) {
  TrialTable table = RunningOnW();  // trials 1 and 2 assigned, 3 queued
  EXPECT_EQ(table.AdvanceQueueCursor(1), 2u);
  EXPECT_EQ(table.FindSweep(1)->queued_from, 2u);
  EXPECT_EQ(table.Trial(3).variant_key, "a");
  EXPECT_EQ(table.TrialCount(), 3u);

  TrialEntry& trial = *table.FindTrial(1);
  trial.queued_since = Clock::TimePoint{} + std::chrono::seconds(1);
  auto waited = table.MarkRunning(trial, Clock::TimePoint{} + std::chrono::seconds(4));
  ASSERT_TRUE(waited.has_value());
  EXPECT_EQ(*waited, std::chrono::seconds(3));
  EXPECT_EQ(trial.machine.phase(), TrialState::kRunning);
  EXPECT_FALSE(table.MarkRunning(trial, Clock::TimePoint{} + std::chrono::seconds(5)).has_value())
      << "the wait is counted once per queueing";
}

TEST(TrialTableTest, ARequeuedTrialRewindsItsSweepsCursorAndTheFirstWholePlacementNamesItsPairWorker) {
  TrialTable table = RunningOnW();
  EXPECT_EQ(table.AdvanceQueueCursor(1), 2u);
  TrialEntry& trial = *table.FindTrial(1);
  table.Requeued(trial, Clock::TimePoint{} + std::chrono::seconds(7));
  EXPECT_EQ(table.FindSweep(1)->queued_from, 0u);
  EXPECT_EQ(trial.queued_since, Clock::TimePoint{} + std::chrono::seconds(7));

  SweepEntry& sweep = *table.FindSweep(1);
  VariantInfo variant;
  variant.counterpart_key = "base";
  sweep.variants["a"] = variant;
  NamePairWorker(sweep, trial, "w");
  NamePairWorker(sweep, trial, "x");  // the group keeps its first worker
  EXPECT_EQ(sweep.pair_workers, (std::map<std::string, std::string>{{PairGroup("a", variant, 0), "w"}}));
  TrialEntry other = trial;
  other.variant_key = "unknown";
  NamePairWorker(sweep, other, "x");
  EXPECT_EQ(sweep.pair_workers.size(), 1u) << "a variant the sweep does not hold names none";
}

}  // namespace
}  // namespace bakeoff::coordinator
