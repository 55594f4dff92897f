// Lockstep pairs (docs/statistics.md, "Lockstep pairs"): a pair of an `order: lockstep`
// sweep is estimated from its steps (the median of the per-step log ratios of steps whose
// turns were adjacent), the interval is the t interval over pairs, a pair whose steps did
// not pair stands on its whole trials and a pair whose partner failed is unpaired; each
// says so in every format.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_renderer.h"
#include "metrics/report/statistics.h"
#include "tests/metrics/report/report_test_fixtures.h"

namespace bakeoff::metrics {
namespace {

using testing::ExpectContains;
using testing::Unsuccessful;

const std::string kEager = "compile_mode=eager";
const std::string kJit = "compile_mode=jit";
constexpr double kTokensPerStep = 512;

// eager (the baseline) against jit, order lockstep, no trials yet.
ReportInput LockstepSweep() {
  ReportInput input;
  input.sweep_id = "9";
  input.sweep_name = "lockstep";
  input.order = "lockstep";
  input.baseline = {{"compile_mode", "eager"}};
  input.axes = {{"compile_mode", {"eager", "jit"}}};
  for (const std::string mode : {"eager", "jit"}) {
    VariantInput v;
    v.key = "compile_mode=" + mode;
    v.params = {{"compile_mode", mode}};
    v.counterpart_key = kEager;
    v.is_baseline = mode == "eager";
    input.variants.push_back(v);
  }
  return input;
}

// A succeeded trial of one rank with these measured steps (seconds and turns) and the
// summary's tokens/s as given (the whole-trial figure).
TrialInput Trial(const std::string& key, int repeat, const std::vector<double>& steps_s,
                 const std::vector<std::optional<std::int64_t>>& turns, double tokens_per_s) {
  static std::int64_t next_id = 1;
  TrialInput t;
  t.id = next_id++;
  t.variant_key = key;
  t.repeat = repeat;
  t.order_index = static_cast<int>(t.id);
  t.worker = "w1";
  t.outcome = TrialStanding::FromText("succeeded");
  RankSummary r;
  r.figures.tokens_per_s = tokens_per_s;
  r.figures.step_s_median = kTokensPerStep / tokens_per_s;
  r.figures.tokens_per_step = kTokensPerStep;
  r.figures.first_step_s = 1;
  r.figures.warmup_s = 1;
  r.figures.peak_mem_bytes = 1000;
  t.ranks.push_back(r);
  for (std::size_t i = 0; i < steps_s.size(); ++i) {
    t.steps.push_back(StepSample{static_cast<std::int64_t>(i), steps_s[i], 2.0, std::nullopt, turns[i]});
  }
  t.applied = {{"compile_mode", key == kJit ? "jit" : "eager"}};
  return t;
}

// The turns of a side's 10 measured steps in a two-sided group, after 2 warm-up turns:
// the side that goes first takes the even turns.
std::vector<std::optional<std::int64_t>> Turns(bool first) {
  std::vector<std::optional<std::int64_t>> turns;
  for (int i = 0; i < 10; ++i) turns.push_back(2 + 2 * i + (first ? 0 : 1));
  return turns;
}

// Repeat r of both sides, in lockstep: the counterpart's steps with a slowdown of 30% over
// steps 3-5 that hits both sides (they took turns), the variant `ratio` times faster per
// step with a +-1% wobble and one step 2x slower (step 7). Its per-step log ratios are
// ln ratio + {0.01 x4, 0 x2, -0.01 x3} and one far below: median ln ratio, IQR 0.02. The
// summaries' tokens/s say the two are equal: only the steps carry the ratio.
void AddLockstepPair(ReportInput& input, int repeat, double ratio) {
  std::vector<double> c, v;
  for (int i = 0; i < 10; ++i) {
    const double slow = i >= 3 && i <= 5 ? 1.3 : 1.0;
    c.push_back(0.5 * slow);
    v.push_back(0.5 * slow / ratio * std::exp(0.01 * ((i % 3) - 1)) * (i == 7 ? 2.0 : 1.0));
  }
  const bool baseline_first = repeat % 2 == 0;
  input.trials.push_back(Trial(kEager, repeat, c, Turns(baseline_first), 1000));
  input.trials.push_back(Trial(kJit, repeat, v, Turns(!baseline_first), 1000));
}

const Comparison& JitComparison(const Report& report) { return report.FindVariant(kJit)->comparison; }

TEST(LockstepPairsTest, APairIsTheMedianOfItsPerStepRatiosAndTheIntervalIsOverPairs) {
  ReportInput input = LockstepSweep();
  const std::vector<double> ratios = {1.10, 1.12, 1.08};
  for (int r = 0; r < 3; ++r) AddLockstepPair(input, r, ratios[static_cast<std::size_t>(r)]);
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = JitComparison(report);
  ASSERT_EQ(c.status, Comparison::Status::kCompared);
  EXPECT_EQ(c.method, IntervalMethod::kLockstepPairs);
  EXPECT_EQ(c.pairs, 3);
  EXPECT_EQ(c.pairs_in_lockstep, 3);
  std::vector<double> logs;
  for (double q : ratios) logs.push_back(std::log(q));
  EXPECT_NEAR(c.speedup.value, std::exp(Mean(logs)), 1e-9) << "the steps' ratio, not the summaries' 1.0";
  ASSERT_TRUE(c.speedup.low && c.speedup.high && c.df);
  const double half = StudentTQuantile(0.975, 2) * SampleStdDev(logs) / std::sqrt(3.0);
  EXPECT_NEAR(*c.speedup.low, std::exp(Mean(logs) - half), 1e-9);
  EXPECT_NEAR(*c.speedup.high, std::exp(Mean(logs) + half), 1e-9);
  EXPECT_DOUBLE_EQ(*c.df, 2.0);
  EXPECT_EQ(c.verdict, Verdict::kFaster);
  ASSERT_TRUE(c.sd_log_ratio);
  EXPECT_NEAR(*c.sd_log_ratio, SampleStdDev(logs), 1e-12);
  ASSERT_TRUE(c.within_pair_iqr);
  EXPECT_NEAR(*c.within_pair_iqr, 0.02, 1e-9);
  ASSERT_EQ(c.lockstep_pairs.size(), 3u);
  for (std::size_t r = 0; r < 3; ++r) {
    const LockstepPair& p = c.lockstep_pairs[r];
    EXPECT_EQ(p.repeat, static_cast<int>(r));
    EXPECT_EQ(p.basis, LockstepPair::Basis::kLockstep);
    EXPECT_NEAR(*p.ratio, ratios[r], 1e-9);
    EXPECT_EQ(p.paired_steps, 10);
    EXPECT_EQ(p.unpaired_steps, 0);
  }

  const nlohmann::json json = nlohmann::json::parse(RenderReport(report, ReportFormat::kJson));
  const nlohmann::json& cmp = json["variants"][1]["comparison"];
  EXPECT_EQ(cmp["interval_method"], "lockstep pairs");
  EXPECT_EQ(cmp["lockstep"]["pairs_in_lockstep"], 3);
  EXPECT_NEAR(cmp["lockstep"]["within_pair_iqr"].get<double>(), 0.02, 1e-9);
  EXPECT_EQ(cmp["lockstep"]["pairs"][1]["basis"], "lockstep");
  EXPECT_EQ(cmp["lockstep"]["pairs"][1]["paired_steps"], 10);
  const std::string table = RenderReport(report, ReportFormat::kTable);
  ExpectContains(table, {"3 vs 3 (3 lockstep pairs)", "lockstep pairs", "within-pair IQR", "Lockstep pairs",
                         "10 of 10"});
  // The shared 30% slowdown and the one slow step make every trial noisy by its CV; the
  // call-out says why the intervals stay narrow anyway.
  std::string noisy;
  for (const std::string& c : report.callouts) {
    if (c.find("noisy trial(s)") != std::string::npos) noisy = c;
  }
  ExpectContains(noisy, {"6 noisy trial(s)", "lockstep pairs take each step's ratio to its partner's"});
}

// The other outcomes of a pair: its steps carry no turn on one side (that side did not
// take turns), or its partner did not succeed.
TEST(LockstepPairsTest, APairWithoutTurnsStandsOnItsWholeTrialsAndAFailedPartnerLeavesItUnpaired) {
  ReportInput input = LockstepSweep();
  AddLockstepPair(input, 0, 1.10);
  AddLockstepPair(input, 1, 1.12);
  // Repeat 2: the counterpart's steps have no turn; the whole trials say 1.09.
  std::vector<double> steps(10, 0.5);
  input.trials.push_back(Trial(kEager, 2, steps, std::vector<std::optional<std::int64_t>>(10), 1000));
  input.trials.push_back(Trial(kJit, 2, steps, Turns(true), 1090));
  // Repeat 3: jit ran out of memory.
  AddLockstepPair(input, 3, 1.5);
  std::erase_if(input.trials, [](const TrialInput& t) { return t.variant_key == kJit && t.repeat == 3; });
  input.trials.push_back(Unsuccessful(kJit, 3, "oom", "CUDA out of memory"));
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = JitComparison(report);
  ASSERT_EQ(c.method, IntervalMethod::kLockstepPairs);
  EXPECT_EQ(c.pairs, 3) << "repeat 3 has no pair";
  EXPECT_EQ(c.pairs_in_lockstep, 2);
  EXPECT_NEAR(c.speedup.value, std::cbrt(1.10 * 1.12 * 1.09), 1e-9);
  ASSERT_EQ(c.lockstep_pairs.size(), 4u);
  const LockstepPair& whole = c.lockstep_pairs[2];
  EXPECT_EQ(whole.basis, LockstepPair::Basis::kWholeTrial);
  EXPECT_NEAR(*whole.ratio, 1.09, 1e-9);
  EXPECT_EQ(whole.paired_steps, 0);
  EXPECT_EQ(whole.note, "the counterpart's steps carry no turn (it did not take turns)");
  const LockstepPair& unpaired = c.lockstep_pairs[3];
  EXPECT_EQ(unpaired.basis, LockstepPair::Basis::kUnpaired);
  EXPECT_FALSE(unpaired.ratio.has_value());
  EXPECT_EQ(unpaired.note, "variant oom (CUDA out of memory)");
  const std::string table = RenderReport(report, ReportFormat::kTable);
  ExpectContains(table, {"3 vs 4 (3 lockstep pairs, 1 on whole trials)", "whole trial",
                         "the counterpart's steps carry no turn", "variant oom (CUDA out of memory)"});
  const nlohmann::json json = nlohmann::json::parse(RenderReport(report, ReportFormat::kJson));
  EXPECT_EQ(json["variants"][1]["comparison"]["lockstep"]["pairs"][3]["basis"], "unpaired");
}

// Steps pair by index; a step pair whose turns are a rotation or more apart did not run
// next to each other (a side fell behind) and is left out; so is a step without a turn.
TEST(LockstepPairsTest, OnlyStepsWhoseTurnsAreAdjacentPair) {
  std::vector<TurnStep> v, c;
  for (std::int64_t i = 0; i < 6; ++i) {
    v.push_back(TurnStep{0.5, std::nullopt, 2 * i});
    c.push_back(TurnStep{0.55, 1024.0, 2 * i + 1});
  }
  c[2].turn = 9;             // |4 - 9| >= 2 sides: not adjacent
  v[4].turn = std::nullopt;  // no turn
  v.push_back(TurnStep{0.5, std::nullopt, 12});  // a step the counterpart never matched
  StepPairing p = PairSteps(v, 512.0, c, std::nullopt, 2);
  EXPECT_EQ(p.paired_steps, 4);
  EXPECT_EQ(p.unpaired_steps, 3);
  EXPECT_EQ(p.with_turn_variant, 6);
  EXPECT_EQ(p.with_turn_counterpart, 6);
  ASSERT_TRUE(p.log_ratio);
  // The variant's tokens are its trial's 512, the counterpart's its steps' own 1024.
  EXPECT_NEAR(*p.log_ratio, std::log((512 / 0.5) / (1024 / 0.55)), 1e-12);
  ASSERT_TRUE(p.iqr);
  EXPECT_NEAR(*p.iqr, 0.0, 1e-12);
  // With three sides the same turns are one rotation apart: |4 - 9| >= 3 still.
  EXPECT_EQ(PairSteps(v, 512.0, c, std::nullopt, 3).paired_steps, 4);
  // Without tokens on a side no step pairs.
  EXPECT_EQ(PairSteps(v, std::nullopt, c, std::nullopt, 2).paired_steps, 0);
}

// A pair whose steps mostly did not pair did not run in lockstep: it stands on its whole
// trials (EstimatePair), as the adaptive walk's pairs do.
TEST(LockstepPairsTest, APairWhoseStepsMostlyDidNotPairUsesItsWholeTrials) {
  RepeatOutcome v{true, 1100.0, 2, {}, 512.0}, c{true, 1000.0, 2, {}, 512.0};
  for (std::int64_t i = 0; i < 10; ++i) {
    v.steps.push_back(TurnStep{0.4, std::nullopt, 2 * i});
    c.steps.push_back(TurnStep{0.5, std::nullopt, i < 4 ? std::optional<std::int64_t>(2 * i + 1) : std::nullopt});
  }
  PairEstimate few = EstimatePair(v, c);
  EXPECT_EQ(few.basis, PairBasis::kWholeTrial) << "4 of 10 steps paired";
  EXPECT_NEAR(few.log_ratio, std::log(1.1), 1e-12);
  c.steps[4].turn = 9;
  PairEstimate half = EstimatePair(v, c);
  EXPECT_EQ(half.basis, PairBasis::kLockstep) << "5 of 10 steps paired";
  EXPECT_NEAR(half.log_ratio, std::log(0.5 / 0.4), 1e-12);
  v.lockstep_sides = 0;  // not a lockstep sweep
  EXPECT_EQ(EstimatePair(v, c).basis, PairBasis::kWholeTrial);
}

}  // namespace
}  // namespace bakeoff::metrics
