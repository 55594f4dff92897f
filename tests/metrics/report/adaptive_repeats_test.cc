// WalkComparisons: adaptive repeats' decisions from trial outcomes, the one walk the
// coordinator (cancelling queued trials) and the report (what stopped) both run.
#include "metrics/report/adaptive_repeats.h"

#include <gtest/gtest.h>

namespace bakeoff::metrics {
namespace {

spec::AnswerComparison Comparison(const std::string& variant, const std::string& counterpart) {
  spec::AnswerComparison c;
  c.variant_key = variant;
  c.counterpart_key = counterpart;
  return c;
}

// `tokens` per repeat of one variant; nullopt: unfinished.
void AddTrials(std::vector<RepeatTrial>& trials, const std::string& key,
               const std::vector<std::optional<double>>& tokens) {
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    trials.push_back({key, static_cast<int64_t>(r), tokens[r].has_value(), tokens[r]});
  }
}

TEST(AdaptiveRepeatsTest, AComparisonStopsWhenItsPairsExcludeOneAndBothSidesGetItsDecision) {
  SequentialDesign design{3, 6, 0.001, 0.95};
  std::vector<RepeatTrial> trials;
  AddTrials(trials, "fast", {150.0, 151.0, 149.0});
  AddTrials(trials, "base", {100.0, 100.5, 99.5});
  AdaptiveWalk walk = WalkComparisons({Comparison("fast", "base")}, trials, design);
  EXPECT_EQ(walk.answered, 1);
  ASSERT_EQ(walk.decisions["fast"].size(), 1u);
  ASSERT_EQ(walk.decisions["base"].size(), 1u);
  EXPECT_EQ(walk.decisions["fast"][0].stop, SequentialStop::kExcludesOne);
  EXPECT_EQ(walk.decisions["fast"][0].pairs, 3);
  EXPECT_EQ(walk.decisions["base"][0].pairs, 3);
}

TEST(AdaptiveRepeatsTest, AnUnfinishedRepeatHoldsTheWalkAndAFailedOneMakesNoPair) {
  SequentialDesign design{3, 6, 0.001, 0.95};
  std::vector<RepeatTrial> trials;
  AddTrials(trials, "fast", {150.0, 151.0, std::nullopt, 149.0});
  AddTrials(trials, "base", {100.0, 100.5, 99.5, 100.2});
  AdaptiveWalk walk = WalkComparisons({Comparison("fast", "base")}, trials, design);
  EXPECT_EQ(walk.answered, 0) << "repeat 2 of fast still runs: repeat 3 is not looked at";
  EXPECT_EQ(walk.decisions["fast"][0].stop, SequentialStop::kContinue);
  EXPECT_EQ(walk.decisions["fast"][0].pairs, 2);

  trials[2].finished = true;  // repeat 2 failed: finished, no figure
  walk = WalkComparisons({Comparison("fast", "base")}, trials, design);
  EXPECT_EQ(walk.answered, 1);
  EXPECT_EQ(walk.decisions["fast"][0].pairs, 3) << "repeats 0, 1 and 3 make the pairs";
}

TEST(AdaptiveRepeatsTest, ABaselineInTwoComparisonsGetsBothDecisionsAndRepeatsPastMaxAreIgnored) {
  SequentialDesign design{2, 3, 0.001, 0.95};
  std::vector<RepeatTrial> trials;
  AddTrials(trials, "a", {150.0, 151.0});
  AddTrials(trials, "b", {std::nullopt, std::nullopt});
  AddTrials(trials, "base", {100.0, 100.5, 99.5, 1e9});  // repeat 3 is past max_pairs
  AdaptiveWalk walk = WalkComparisons({Comparison("a", "base"), Comparison("b", "base")}, trials, design);
  EXPECT_EQ(walk.answered, 1);
  ASSERT_EQ(walk.decisions["base"].size(), 2u);
  EXPECT_TRUE(walk.decisions["base"][0].stopped());
  EXPECT_FALSE(walk.decisions["base"][1].stopped());
  EXPECT_FALSE(VariantDecision(walk.decisions["base"]).stopped()) << "the baseline runs on for b";
  // A comparison naming a variant with no trials walks no pairs.
  walk = WalkComparisons({Comparison("ghost", "base")}, trials, design);
  EXPECT_EQ(walk.decisions["ghost"][0].pairs, 0);
}

}  // namespace
}  // namespace bakeoff::metrics
