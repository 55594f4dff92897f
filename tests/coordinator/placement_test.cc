// Placement's pure part: pair groups pin a trial to their worker while it can take it,
// and a placement becomes the stored attempt and one part per worker.
#include "coordinator/placement.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bakeoff::coordinator
