// Placement's pure part: pair groups pin a trial to their worker while it can take it,
// and a placement becomes the stored attempt and one part per worker.
#include "coordinator/placement.h"

#include <gtest/gtest.h>

#include "coordinator/trial_table.h"
#include "tests/coordinator/coordinator_test_util.h"

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;

protocol::RegisterMessage Reg(const std::string& name, int slots) {
  return testing::Registration(name, slots, name + ".host");
}

TEST(PlacementTest, APairGroupPinsItsTrialToItsWorkerUntilThatWorkerCannotTakeIt) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("a", 1));
  Connected connected = [](const std::string&) { return true; };
  SweepEntry sweep;
  VariantInfo variant;
  variant.counterpart_key = "base";
  TrialEntry trial;
  trial.variant_key = "v";
  trial.repeat = 3;
  std::string pinned;
  EXPECT_EQ(PairWorker(sweep, trial, variant, registry, connected, pinned), PairPlacement::kFree) << "no group worker yet";

  sweep.pair_workers[PairGroup("v", variant, 3)] = "a";
  EXPECT_EQ(PairWorker(sweep, trial, variant, registry, connected, pinned), PairPlacement::kPinned);
  EXPECT_EQ(pinned, "a");
  registry.Reserve("a", {1, 1}, 1, {});
  EXPECT_EQ(PairWorker(sweep, trial, variant, registry, connected, pinned), PairPlacement::kBusy) << "it waits for a";
  connected = [](const std::string&) { return false; };
  EXPECT_EQ(PairWorker(sweep, trial, variant, registry, connected, pinned), PairPlacement::kFree)
      << "a worker without a connection splits the pair";
  variant.world_size = 2;
  connected = [](const std::string&) { return true; };
  EXPECT_EQ(PairWorker(sweep, trial, variant, registry, connected, pinned), PairPlacement::kFree)
      << "a worker too small for the trial splits the pair";
}

TEST(PlacementTest, ALockstepGroupComesWholeIntoARoundEvenPastTheFreeUnits) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("a", 1));  // one free unit: the first worker to register
  Connected connected = [](const std::string&) { return true; };
  SweepEntry sweep;
  sweep.id = 1;
  sweep.lockstep = true;
  sweep.variants["base"].is_baseline = true;
  sweep.variants["var"].counterpart_key = "base";
  std::vector<metrics::NewTrial> trials = {{"base", 0, 0}, {"var", 0, 1}, {"var", 1, 2}, {"base", 1, 3}};
  TrialTable table;
  table.AddSubmitted(sweep, {11, 12, 13, 14}, trials, 1, clock.Now());
  SchedulingRound round = CollectQueued(table, registry, connected);
  ASSERT_EQ(round.sweeps.size(), 1u);
  std::vector<std::int64_t> queued;
  for (const auto& t : round.sweeps[0].queue) queued.push_back(t.trial_id);
  EXPECT_EQ(queued, (std::vector<std::int64_t>{11, 12})) << "repeat 0's group whole, repeat 1's not yet";
  EXPECT_TRUE(round.sweeps[0].queue[0].lockstep);
  EXPECT_EQ(round.sweeps[0].queue[0].pair_group, round.sweeps[0].queue[1].pair_group);
}

TEST(PlacementTest, APlacementBecomesOnePartPerWorkerAndTheStoredAttempt) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("a", 2));
  registry.Register(Reg("b", 1));
  TrialPlacement placement;
  placement.trial_id = 9;
  placement.ranks = {RankAssignment{0, "b", 0, -1}, RankAssignment{1, "a", 0, -1}, RankAssignment{2, "a", 1, -1}};
  std::vector<TrialPart> parts = PartsOf(placement);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].worker_id, "b") << "workers in the order they first appear";
  EXPECT_EQ(parts[1].ranks.size(), 2u);
  EXPECT_EQ(parts[1].ranks[1].rank, 2);
  EXPECT_FALSE(parts[1].cuda);

  metrics::AttemptRecord record = AttemptRecordOf(9, placement, registry);
  EXPECT_EQ(record.trial_id, 9);
  EXPECT_EQ(record.worker_id, "b");
  EXPECT_EQ(record.host, "b.host");
  ASSERT_EQ(record.ranks.size(), 3u);
  EXPECT_EQ(record.ranks[2].host, "a.host");
  EXPECT_EQ(record.ranks[2].device, "cpu");
  EXPECT_FALSE(record.simulated);
}

TEST(PlacementTest, AReleasedPartGivesBackWhatItsReservationHeldAndTheAssignFrameCarriesThePart) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("a", 2));
  const TrialPart part{"a", {protocol::RankSlot{0, 0, {}}, protocol::RankSlot{1, 1, {}}}};
  const protocol::AttemptRef ref{5, 2};
  ReservePart(registry, part, ref);
  EXPECT_EQ(registry.Find("a")->free_cpu_slots(), 0);
  ReleasePart(registry, part, ref);
  EXPECT_EQ(registry.Find("a")->free_cpu_slots(), 2);
  EXPECT_TRUE(registry.Find("a")->attempts.empty());

  SweepEntry sweep;
  sweep.timeout_ms = 60000;
  VariantInfo variant;
  variant.world_size = 2;
  sweep.variants["v"] = variant;
  TrialEntry trial;
  trial.sweep_id = 3;
  trial.variant_key = "v";
  protocol::AssignMessage assign = AssignMessageOf(trial, sweep, part, ref, "a.host:29500");
  EXPECT_EQ(assign.attempt, ref);
  EXPECT_EQ(assign.sweep_id, "3");
  EXPECT_EQ(assign.world_size, 2);
  EXPECT_EQ(assign.ranks.size(), 2u);
  EXPECT_EQ(assign.store_address, "a.host:29500");
  EXPECT_EQ(assign.timeout_ms, 60000);
}

TEST(PlacementTest, ThePlacementHistoryCountsPerSweepVariantAndWorkerAndForgetsOneSweepWhole) {
  PlacementHistory history;
  history.Add(1, "v", "a");
  history.Add(1, "v", "a");
  history.Add(1, "w", "a");
  history.Add(2, "v", "a");
  EXPECT_EQ(history.Count(1, "v", "a"), 2);
  EXPECT_EQ(history.Count(1, "v", "b"), 0);
  history.ForgetSweep(1);
  EXPECT_EQ(history.Count(1, "v", "a"), 0);
  EXPECT_EQ(history.Count(1, "w", "a"), 0);
  EXPECT_EQ(history.Count(2, "v", "a"), 1) << "other sweeps keep theirs";
  history.Clear();
  EXPECT_EQ(history.Count(2, "v", "a"), 0);
}

}  // namespace
}  // namespace bakeoff::coordinator
