#include "coordinator/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "protocol/messages.h"

namespace bakeoff::coordinator {
namespace {

SchedulerTrial T(std::int64_t id, const std::string& variant, int world = 1) {
  return SchedulerTrial{id, variant, world, false};
}

SchedulerWorker W(const std::string& id, int slots) { return SchedulerWorker{id, slots, {}}; }

TEST(SchedulerTest, CommandTrialGoesOnlyToWorkersOfferingItsTemplate) {
  Scheduler scheduler;
  SchedulerTrial trial = T(10, "a", 2);
  trial.executor = "torch-reference";
  SchedulerWorker plain = W("w1", 4);
  SchedulerWorker offers = W("w2", 1);
  offers.executors = {"hf-peft", "torch-reference"};
  SchedulerWorker also = W("w3", 1);
  also.executors = {"torch-reference"};
  auto placed = scheduler.Schedule({{1, {trial}}}, {plain, offers, also}, nullptr);
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_EQ(placed[0].ranks.size(), 2u);
  for (const auto& r : placed[0].ranks) EXPECT_NE(r.worker_id, "w1");
  // No worker offers it: the trial waits, even with free slots everywhere.
  Scheduler again;
  trial.executor = "unknown";
  EXPECT_TRUE(again.Schedule({{1, {trial}}}, {plain, offers, also}, nullptr).empty());
}

// Security review 2026-12-07, A2 (its first half): a variant's history was fixed for a
// whole scheduling pass, so the worker offering the most slots took every trial of a
// variant at once. The history counts each placement as it is made: the second trial
// of the variant goes to the worker that has run it less, large or not; a third, with
// both having run it once, to the larger again.
TEST(SchedulerTest, TheHistoryCountsEachPlacementWithinAPass) {
  Scheduler scheduler;
  auto placed = scheduler.Schedule({{1, {T(10, "a"), T(11, "a"), T(12, "a")}}}, {W("big", 256), W("small", 1)}, nullptr);
  ASSERT_EQ(placed.size(), 3u);
  std::map<std::int64_t, std::string> on;
  for (const auto& p : placed) on[p.trial_id] = p.ranks.front().worker_id;
  EXPECT_EQ(on[10], "big");
  EXPECT_EQ(on[11], "small") << "the big worker had run the variant once already in this pass";
  EXPECT_EQ(on[12], "big");
  // From the other direction: a history given from outside still counts as before.
  Scheduler told;
  auto history = [](std::int64_t, const std::string&, const std::string& worker) { return worker == "big" ? 5 : 0; };
  auto first = told.Schedule({{1, {T(20, "a")}}}, {W("big", 256), W("small", 1)}, history);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].ranks.front().worker_id, "small");
}

TEST(SchedulerTest, APinnedTrialGoesWholeOntoItsPairsWorkerOnly) {
  Scheduler scheduler;
  SchedulerTrial trial = T(10, "b", 2);
  trial.pinned_worker = "w2";
  auto placed = scheduler.Schedule({{1, {trial}}}, {W("w1", 4), W("w2", 2)}, nullptr);
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_EQ(placed[0].ranks.size(), 2u);
  for (const auto& r : placed[0].ranks) EXPECT_EQ(r.worker_id, "w2") << "never split, never elsewhere";
}

TEST(SchedulerTest, APinnedTrialWithoutRoomWaitsAndTheSweepGoesOn) {
  Scheduler scheduler;
  SchedulerTrial waits = T(10, "b", 2);
  waits.pinned_worker = "w2";  // one slot free there: not enough
  auto placed = scheduler.Schedule({{1, {waits, T(11, "a")}}}, {W("w1", 1), W("w2", 1)}, nullptr);
  ASSERT_EQ(placed.size(), 1u) << "the pinned trial waits; the next one is placed";
  EXPECT_EQ(placed[0].trial_id, 11);
  // An unpinned head that fits nowhere still holds its sweep back (strict order).
  Scheduler strict;
  EXPECT_TRUE(strict.Schedule({{1, {T(10, "b", 3), T(11, "a")}}}, {W("w1", 1), W("w2", 1)}, nullptr).empty());
}

SchedulerTrial Lockstep(std::int64_t id, const std::string& variant, const std::string& group, int world = 2) {
  SchedulerTrial t = T(id, variant, world);
  t.pair_group = group;
  t.lockstep = true;
  return t;
}

TEST(SchedulerTest, ALockstepGroupIsPlacedTogetherOnTheSameRanksAndTakesTheUnitsOnce) {
  Scheduler scheduler;
  // Two groups of two sides (repeat 0 and 1), each two ranks wide; two 2-slot workers.
  auto placed = scheduler.Schedule({{1,
                                     {Lockstep(10, "base", "g#0"), Lockstep(11, "var", "g#0"),
                                      Lockstep(12, "var", "g#1"), Lockstep(13, "base", "g#1")}}},
                                   {W("w1", 2), W("w2", 2)}, nullptr);
  ASSERT_EQ(placed.size(), 4u) << "each group takes one worker's two slots once";
  std::map<std::int64_t, const TrialPlacement*> by_id;
  for (const auto& p : placed) by_id[p.trial_id] = &p;
  for (auto [first, mate] : {std::pair{10, 11}, std::pair{12, 13}}) {
    const TrialPlacement& a = *by_id.at(first);
    const TrialPlacement& b = *by_id.at(mate);
    ASSERT_TRUE(a.lockstep && b.lockstep);
    EXPECT_EQ(a.lockstep->group, b.lockstep->group);
    EXPECT_EQ(a.lockstep->side, 0) << "queue order is turn order";
    EXPECT_EQ(b.lockstep->side, 1);
    EXPECT_EQ(a.lockstep->sides, 2);
    ASSERT_EQ(a.ranks.size(), b.ranks.size());
    for (std::size_t r = 0; r < a.ranks.size(); ++r) {
      EXPECT_EQ(a.ranks[r].worker_id, b.ranks[r].worker_id);
      EXPECT_EQ(a.ranks[r].local_rank, b.ranks[r].local_rank);
    }
  }
  EXPECT_NE(by_id.at(10)->lockstep->group, by_id.at(12)->lockstep->group);
  EXPECT_NE(by_id.at(10)->ranks[0].worker_id, by_id.at(12)->ranks[0].worker_id);
}

TEST(SchedulerTest, ALockstepTrialSpreadOverWorkersOrOfAnotherWidthRunsAlone) {
  Scheduler scheduler;
  // Two ranks but only one-slot workers: spread, so no group; a mate of another width
  // is never put on ranks that are not its own.
  auto spread = scheduler.Schedule({{1, {Lockstep(10, "base", "g#0"), Lockstep(11, "var", "g#0")}}},
                                   {W("w1", 1), W("w2", 1)}, nullptr);
  ASSERT_EQ(spread.size(), 1u);
  EXPECT_FALSE(spread[0].lockstep);
  Scheduler widths;
  auto placed = widths.Schedule({{1, {Lockstep(10, "base", "g#0", 1), Lockstep(11, "var", "g#0", 2)}}},
                                {W("w1", 4)}, nullptr);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].lockstep->sides, 1) << "alone in its group";
  EXPECT_FALSE(placed[1].lockstep.has_value() && placed[1].lockstep->sides > 1);
}

TEST(SchedulerTest, GangTrialFitsOnOneWorkerWhenItCan) {
  Scheduler scheduler;
  auto placed = scheduler.Schedule({{1, {T(10, "a", 2)}}}, {W("w1", 1), W("w2", 2)}, nullptr);
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_EQ(placed[0].ranks.size(), 2u);
  EXPECT_EQ(placed[0].ranks[0].worker_id, "w2");
  EXPECT_EQ(placed[0].ranks[1].worker_id, "w2");
  EXPECT_EQ(placed[0].ranks[1].local_rank, 1);
}

TEST(SchedulerTest, GangTrialSpreadsOverSeveralOneSlotWorkers) {
  Scheduler scheduler;
  auto placed = scheduler.Schedule({{1, {T(10, "a", 2)}}}, {W("w1", 1), W("w2", 1)}, nullptr);
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_EQ(placed[0].ranks.size(), 2u);
  EXPECT_NE(placed[0].ranks[0].worker_id, placed[0].ranks[1].worker_id);
  EXPECT_EQ(placed[0].ranks[0].rank, 0);
  EXPECT_EQ(placed[0].ranks[0].local_rank, 0);
  EXPECT_EQ(placed[0].ranks[1].local_rank, 0);
}

TEST(SchedulerTest, GangTrialWaitsForAllRanks) {
  Scheduler scheduler;
  auto placed = scheduler.Schedule({{1, {T(10, "a", 3), T(11, "b", 1)}}}, {W("w1", 1), W("w2", 1)}, nullptr);
  EXPECT_TRUE(placed.empty()) << "no partial gang, and the sweep's order is kept";
}

TEST(SchedulerTest, KeepsTheSweepOrder) {
  Scheduler scheduler;
  auto placed = scheduler.Schedule({{1, {T(1, "a"), T(2, "b"), T(3, "a"), T(4, "b")}}}, {W("w1", 3)}, nullptr);
  ASSERT_EQ(placed.size(), 3u);
  EXPECT_EQ(placed[0].trial_id, 1);
  EXPECT_EQ(placed[1].trial_id, 2);
  EXPECT_EQ(placed[2].trial_id, 3);
}

TEST(SchedulerTest, ConcurrentSweepsTakeTurns) {
  Scheduler scheduler;
  std::vector<SchedulerSweep> sweeps = {{1, {T(1, "a"), T(2, "a"), T(3, "a")}},
                                        {2, {T(4, "x"), T(5, "x"), T(6, "x")}}};
  auto placed = scheduler.Schedule(sweeps, {W("w1", 4)}, nullptr);
  ASSERT_EQ(placed.size(), 4u);
  EXPECT_EQ(placed[0].sweep_id, 1);
  EXPECT_EQ(placed[1].sweep_id, 2);
  EXPECT_EQ(placed[2].sweep_id, 1);
  EXPECT_EQ(placed[3].sweep_id, 2);
}

TEST(SchedulerTest, RoundRobinResumesAcrossCalls) {
  Scheduler scheduler;
  std::vector<SchedulerSweep> sweeps = {{1, {T(1, "a")}}, {2, {T(4, "x")}}};
  auto first = scheduler.Schedule(sweeps, {W("w1", 1)}, nullptr);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].sweep_id, 1);
  std::vector<SchedulerSweep> rest = {{1, {T(2, "a")}}, {2, {T(4, "x")}}};
  auto second = scheduler.Schedule(rest, {W("w1", 1)}, nullptr);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].sweep_id, 2) << "the other sweep's turn";
}

TEST(SchedulerTest, BlockedSweepDoesNotBlockOthers) {
  Scheduler scheduler;
  std::vector<SchedulerSweep> sweeps = {{1, {T(1, "wide", 8)}}, {2, {T(2, "x")}}};
  auto placed = scheduler.Schedule(sweeps, {W("w1", 2)}, nullptr);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].trial_id, 2);
}

TEST(SchedulerTest, RepeatsSpreadAcrossWorkers) {
  Scheduler scheduler;
  std::map<std::string, int> runs = {{"w1", 1}, {"w2", 0}};
  auto history = [&](std::int64_t, const std::string& variant, const std::string& worker) {
    return variant == "a" ? runs[worker] : 0;
  };
  auto placed = scheduler.Schedule({{1, {T(7, "a")}}}, {W("w1", 4), W("w2", 1)}, history);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].ranks[0].worker_id, "w2") << "w1 already ran variant a";
}

// Equal history and room: the worker with the smaller id, whatever order they come in.
TEST(SchedulerTest, TiesGoToTheSmallestWorkerIdInAnyInputOrder) {
  Scheduler scheduler;
  auto placed = scheduler.Schedule({{1, {T(1, "a"), T(2, "a")}}}, {W("w3", 1), W("w1", 1), W("w2", 1)}, nullptr);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].ranks[0].worker_id, "w1");
  EXPECT_EQ(placed[1].ranks[0].worker_id, "w2");
}

// A thousand free workers and a thousand queued trials: each variant's history is read
// once per worker, not once per comparison (that was two million lookups a call).
TEST(SchedulerTest, HistoryIsReadOncePerVariantAndWorkerInACall) {
  Scheduler scheduler;
  std::vector<SchedulerWorker> workers;
  for (int i = 0; i < 1000; ++i) workers.push_back(W("w" + std::to_string(1000 + i), 1));
  SchedulerSweep sweep{1, {}};
  for (int i = 0; i < 1000; ++i) sweep.queue.push_back(T(i + 1, i % 2 == 0 ? "a" : "b"));
  int lookups = 0;
  auto history = [&](std::int64_t, const std::string&, const std::string&) {
    ++lookups;
    return 0;
  };
  auto placed = scheduler.Schedule({sweep}, workers, history);
  EXPECT_EQ(placed.size(), 1000u);
  EXPECT_EQ(lookups, 2 * 1000);
}

TEST(SchedulerTest, CudaTrialsTakeDistinctDevices) {
  Scheduler scheduler;
  SchedulerWorker gpu{"g", 0, {0, 1, 2}};
  SchedulerTrial t{1, "a", 2, true};
  auto placed = scheduler.Schedule({{1, {t, SchedulerTrial{2, "b", 2, true}}}}, {gpu}, nullptr);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].ranks[0].cuda_device, 0);
  EXPECT_EQ(placed[0].ranks[1].cuda_device, 1);
}

TEST(SchedulerTest, ATrialNamingAGpuTypeGoesOnlyToWorkersOfThatModel) {
  Scheduler scheduler;
  SchedulerWorker h100{"a", 0, {0, 1}, {}, "NVIDIA H100 80GB HBM3"};
  SchedulerWorker a100{"b", 0, {0, 1}, {}, "NVIDIA A100-SXM4-80GB"};
  SchedulerWorker unknown{"c", 0, {0, 1}, {}, ""};
  SchedulerTrial t{1, "a", 2, true, "a100"};  // ignoring case
  auto placed = scheduler.Schedule({{1, {t}}}, {h100, a100, unknown}, nullptr);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].ranks[0].worker_id, "b");
  EXPECT_EQ(placed[0].ranks[1].worker_id, "b");
  // No worker of the model: the trial waits, even with free devices elsewhere.
  SchedulerTrial v100{2, "a", 1, true, "V100"};
  EXPECT_TRUE(scheduler.Schedule({{1, {v100}}}, {h100, unknown}, nullptr).empty());
  // Without a type any CUDA worker serves.
  EXPECT_EQ(scheduler.Schedule({{1, {SchedulerTrial{3, "a", 1, true}}}}, {unknown}, nullptr).size(), 1u);
}

TEST(SchedulerTest, GpuTypeMatchingIgnoresCaseAndNeverMatchesAnUnknownModel) {
  EXPECT_TRUE(protocol::GpuTypeMatches("NVIDIA H200", "h200"));
  EXPECT_TRUE(protocol::GpuTypeMatches("", ""));
  EXPECT_FALSE(protocol::GpuTypeMatches("", "H100"));
  EXPECT_FALSE(protocol::GpuTypeMatches("NVIDIA H100 80GB HBM3", "A100"));
}

}  // namespace
}  // namespace bakeoff::coordinator
