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

}  // namespace
}  // namespace bakeoff::coordinator
