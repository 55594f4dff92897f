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

TEST(AdaptiveRepeatsTest, StoredTrialsCountTheSlowestRankOfASucceededTrialOnly) {
  std::vector<TrialResult> stored(3);
  stored[0].trial.variant_key = "a";
  stored[0].trial.repeat = 0;
  stored[0].trial.state = TrialState::kFinished;
  stored[0].trial.outcome = Outcome::kSucceeded;
  for (double tps : {120.0, 100.0, -1.0}) {
    SummaryRecord s;
    s.figures.tokens_per_s = tps;
    stored[0].summaries.push_back(s);
  }
  stored[1] = stored[0];
  stored[1].trial.repeat = 1;
  stored[1].trial.outcome = Outcome::kOom;  // finished, no figure
  stored[2].trial.variant_key = "a";
  stored[2].trial.repeat = 2;
  stored[2].trial.state = TrialState::kRunning;
  std::vector<RepeatTrial> trials = RepeatTrials(stored);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_TRUE(trials[0].finished);
  EXPECT_EQ(trials[0].tokens_per_s, 100.0) << "the slowest positive rank";
  EXPECT_TRUE(trials[1].finished);
  EXPECT_FALSE(trials[1].tokens_per_s.has_value());
  EXPECT_FALSE(trials[2].finished);
}

TEST(AdaptiveRepeatsTest, AStoppedVariantComparedOnceSaysStoppedAndABaselineSaysEveryComparison) {
  SequentialDesign design{3, 6, 0.001, 0.95};
  std::vector<RepeatTrial> trials;
  AddTrials(trials, "fast", {150.0, 151.0, 149.0});
  AddTrials(trials, "base", {100.0, 100.5, 99.5});
  const std::vector<spec::AnswerComparison> comparisons = {Comparison("fast", "base")};
  AdaptiveWalk walk = WalkComparisons(comparisons, trials, design);
  std::vector<VariantStop> stops =
      StoppedVariants(walk, comparisons, {{"fast", "base"}, {"base", "base"}}, design);
  ASSERT_EQ(stops.size(), 2u);
  EXPECT_EQ(stops[0].variant_key, "base");
  EXPECT_EQ(stops[0].reason,
            "adaptive repeats: every comparison with this variant stopped after 3 of 6 pairs (interval excludes 1)");
  EXPECT_EQ(stops[1].variant_key, "fast");
  EXPECT_EQ(stops[1].reason, "adaptive repeats: stopped after 3 of 6 pairs (interval excludes 1)");
  EXPECT_EQ(stops[1].reason.rfind(kAdaptiveRepeatsReason, 0), 0u) << "the report finds them by this prefix";
  // A variant the sweep does not hold is left alone.
  EXPECT_EQ(StoppedVariants(walk, comparisons, {{"fast", "base"}}, design).size(), 1u);
}

// A lockstep sweep's walk pairs each repeat by its steps, as the report does: the stored
// whole trials say the two sides are equal, their steps (taken in turns) that "fast" is
// 1.25x as fast, and the walk sees 1.25.
TEST(AdaptiveRepeatsTest, ALockstepSweepsWalkUsesEachPairsStepEstimate) {
  EXPECT_EQ(LockstepSides({{"fast", "base"}, {"slow", "base"}, {"base", "base"}, {"other", "other"}, {"lone", ""}}),
            (std::map<std::string, int>{{"base", 3}, {"fast", 3}, {"slow", 3}, {"other", 1}, {"lone", 1}}));
  std::vector<TrialResult> stored;
  std::vector<MeasuredStep> steps;
  for (int64_t repeat = 0; repeat < 3; ++repeat) {
    for (const std::string key : {"base", "fast"}) {
      TrialResult& t = stored.emplace_back();
      t.trial.id = static_cast<int64_t>(stored.size());
      t.trial.variant_key = key;
      t.trial.repeat = repeat;
      t.trial.state = TrialState::kFinished;
      t.trial.outcome = Outcome::kSucceeded;
      SummaryRecord s;
      s.figures.tokens_per_s = 100.0;
      s.figures.step_s_median = 5.12;  // no tokens_per_step: 100 x 5.12 = 512 tokens a step
      t.summaries.push_back(s);
      const bool fast = key == "fast";
      for (int64_t i = 0; i < 4; ++i) {
        steps.push_back(MeasuredStep{t.trial.id, i, fast ? 4.0 : 5.0, std::nullopt, std::nullopt, 2 * i + (fast ? 1 : 0)});
      }
    }
  }
  std::vector<RepeatTrial> trials = LockstepRepeatTrials(stored, steps, {{"fast", "base"}, {"base", "base"}});
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[1].lockstep_sides, 2);
  ASSERT_EQ(trials[1].steps.size(), 4u);
  EXPECT_EQ(trials[1].steps[3].turn, 7);
  ASSERT_TRUE(trials[1].tokens_per_step);
  EXPECT_NEAR(*trials[1].tokens_per_step, 512.0, 1e-9);
  SequentialDesign design{2, 3, 0.001, 0.95};
  AdaptiveWalk walk = WalkComparisons({Comparison("fast", "base")}, trials, design);
  ASSERT_EQ(walk.decisions["fast"].size(), 1u);
  EXPECT_EQ(walk.decisions["fast"][0].pairs, 2);
  EXPECT_NEAR(walk.decisions["fast"][0].ratio, 1.25, 1e-9) << "the steps' ratio, not the whole trials' 1.0";
  // The same trials outside lockstep: the whole trials' ratio.
  walk = WalkComparisons({Comparison("fast", "base")}, RepeatTrials(stored), design);
  EXPECT_NEAR(walk.decisions["fast"][0].ratio, 1.0, 1e-12);
}

}  // namespace
}  // namespace bakeoff::metrics
