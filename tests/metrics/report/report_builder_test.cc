#include "metrics/report/report_builder.h"

#include <gtest/gtest.h>

#include <random>

#include "metrics/report/report_renderer.h"
#include "metrics/report/statistics.h"

#include "tests/metrics/report/report_test_fixtures.h"

namespace bakeoff::metrics {
namespace {

using testing::AddTrials;
using testing::KeyOf;
using testing::OnlyUnsuccessful;
using testing::Succeeded;
using testing::TrialSpec;
using testing::TwoByTwoSweep;
using testing::Unsuccessful;

const std::string kJit1 = KeyOf("jit", "1");
const std::string kEager1 = KeyOf("eager", "1");
const std::string kJit4 = KeyOf("jit", "4");
const std::string kEager4 = KeyOf("eager", "4");

const Comparison& ComparisonOf(const Report& report, const std::string& key) {
  const VariantReport* v = report.FindVariant(key);
  EXPECT_NE(v, nullptr) << key;
  return v->comparison;
}

// The report of TwoByTwoSweep with `repeats` trials a variant
// (AddTrials: jit `speedup` times as fast as eager), under the default options.
Report TwoByTwoReport(int repeats, double speedup) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, repeats, speedup);
  return BuildReport(input, ReportOptions{});
}

TEST(ReportBuilderTest, FasterVariantGetsPairedSpeedupWithInterval) {
  Report report = TwoByTwoReport(4, 1.10);
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(c.status, Comparison::Status::kCompared);
  EXPECT_EQ(c.method, IntervalMethod::kPairedRepeats);
  EXPECT_EQ(c.pairs, 4);
  EXPECT_EQ(c.variant_trials, 4);
  EXPECT_EQ(c.counterpart_trials, 4);
  EXPECT_NEAR(c.speedup.value, 1.10, 0.005);
  ASSERT_TRUE(c.speedup.low && c.speedup.high);
  EXPECT_LT(*c.speedup.low, 1.10);
  EXPECT_GT(*c.speedup.high, 1.09);
  EXPECT_GT(*c.speedup.low, 1.05);
  EXPECT_EQ(c.verdict, Verdict::kFaster);
  EXPECT_EQ(c.no_measurable_difference, std::optional<bool>(false));
  ASSERT_TRUE(c.df);
  EXPECT_DOUBLE_EQ(*c.df, 3.0);  // t on 4 pairs
  EXPECT_EQ(ComparisonOf(report, kEager1).status, Comparison::Status::kIsBaseline);
}

TEST(ReportBuilderTest, ATrialFarBelowItsVariantsMedianIsNamedAsASlowOutlierAndKept) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.10);
  auto has_outlier_callout = [](const Report& r) {
    for (const std::string& c : r.callouts) {
      if (c.find("of their variant's median tokens/s") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_FALSE(has_outlier_callout(BuildReport(input, ReportOptions{}))) << "the +-2% drift is no outlier";
  std::int64_t slowed = 0;
  for (TrialInput& t : input.trials) {
    if (t.variant_key != kJit1 || t.repeat != 2) continue;
    slowed = t.id;
    for (RankSummary& r : t.ranks) {
      *r.figures.tokens_per_s *= 0.7;
      *r.figures.step_s_median /= 0.7;
    }
  }
  Report report = BuildReport(input, ReportOptions{});
  ASSERT_TRUE(has_outlier_callout(report));
  std::string callout;
  for (const std::string& c : report.callouts) {
    if (c.find("of their variant's median") != std::string::npos) callout = c;
  }
  testing::ExpectContains(callout, {"1 trial(s) ran below 85.0%",
                           "trial " + std::to_string(slowed) + " (" + kJit1 + ", repeat 2) at 0.7"});
  EXPECT_EQ(ComparisonOf(report, kJit1).pairs, 4) << "kept, not dropped";
}

TEST(ReportBuilderTest, SameInputGivesTheSameIntervalEveryTime) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.10);
  Report a = BuildReport(input, ReportOptions{});
  Report b = BuildReport(input, ReportOptions{});
  EXPECT_EQ(*ComparisonOf(a, kJit1).speedup.low, *ComparisonOf(b, kJit1).speedup.low);
  EXPECT_EQ(*ComparisonOf(a, kJit1).speedup.high, *ComparisonOf(b, kJit1).speedup.high);
}

TEST(ReportBuilderTest, BreakEvenIsWarmupDeltaOverPerStepSaving) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.25);
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  // warm-up 13 s vs 3 s; eager step 512/1000 s, saving = 0.512 * (1 - 1/1.25) ~ 0.1024 s.
  ASSERT_TRUE(c.warmup_delta_s && c.step_saving_s && c.break_even_steps);
  EXPECT_NEAR(*c.warmup_delta_s, 10.0, 1e-9);
  EXPECT_NEAR(*c.first_step_delta_s, 10.0, 1e-9);
  double eager_step_s = *report.FindVariant(kEager1)->step_s_median;  // ~0.512 with drift
  EXPECT_NEAR(eager_step_s, 0.512, 0.001);
  EXPECT_NEAR(*c.step_saving_s, eager_step_s * (1 - 1 / c.speedup.value), 1e-9);
  EXPECT_NEAR(*c.break_even_steps, 10.0 / *c.step_saving_s, 1e-6);
  EXPECT_NEAR(*c.break_even_steps, 97.7, 1.5);
  EXPECT_EQ(*c.break_even, std::to_string(static_cast<int>(std::ceil(*c.break_even_steps))) + " steps");
}

// Marks the jit trials of repeat 0 as having compiled cold (warm-up 33 s) and the rest as
// having found Inductor's cache warm (13 s): what a shared cache gives a sweep.
void MakeFirstRepeatCold(ReportInput& input) {
  for (TrialInput& t : input.trials) {
    if (t.variant_key.find("jit") == std::string::npos) continue;
    const bool cold = t.repeat == 0;
    t.applied["compile_cache_state"] = cold ? "cold" : "warm";
    for (RankSummary& r : t.ranks) r.figures.warmup_s = cold ? 33.0 : 13.0;
  }
}

TEST(ReportBuilderTest, ColdAndWarmCompilesAreSeparateCostsEachWithItsBreakEven) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.25);
  MakeFirstRepeatCold(input);
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  ASSERT_EQ(c.compile_costs.size(), 2u);
  const CompileCost& cold = c.compile_costs[0];
  const CompileCost& warm = c.compile_costs[1];
  EXPECT_EQ(cold.cache, "cold");
  EXPECT_EQ(cold.trials, 1);
  EXPECT_EQ(warm.cache, "warm");
  EXPECT_EQ(warm.trials, 3);
  // Eager's warm-up is 3 s: cold 33 - 3, warm 13 - 3; never their average (15 s).
  ASSERT_TRUE(cold.warmup_delta_s && warm.warmup_delta_s && c.step_saving_s);
  EXPECT_NEAR(*cold.warmup_delta_s, 30.0, 1e-9);
  EXPECT_NEAR(*warm.warmup_delta_s, 10.0, 1e-9);
  ASSERT_TRUE(cold.break_even_steps && warm.break_even_steps);
  EXPECT_NEAR(*cold.break_even_steps, 30.0 / *c.step_saving_s, 1e-6);
  EXPECT_NEAR(*warm.break_even_steps, 10.0 / *c.step_saving_s, 1e-6);
  // The trial views say which trials paid which.
  int cold_trials = 0;
  for (const TrialView& t : report.trials) cold_trials += t.compile_cache == "cold" ? 1 : 0;
  EXPECT_EQ(cold_trials, 2);  // repeat 0 of jit at micro-batch 1 and 4
  // The answer names both costs and the cells never show one averaged figure.
  std::string answer = RenderReport(report, ReportFormat::kTable);
  EXPECT_NE(answer.find("30.0 s more in warm-up compiling cold (1 trial, paid back after"), std::string::npos)
      << answer;
  EXPECT_NE(answer.find("10.0 s more in warm-up with a warm compile cache (3 trials"), std::string::npos)
      << answer;
  EXPECT_NE(answer.find("cold +30.0 s, warm +10.0 s"), std::string::npos) << answer;
}

// Both sides compile (issue 50): a compiled variant's cold trials are set against its
// counterpart's cold trials and its warm ones against the warm ones, never against the
// mean over the counterpart's cold and warm trials; a state the counterpart has no trial
// in says so.
TEST(ReportBuilderTest, WhenBothSidesCompileColdIsComparedWithColdAndWarmWithWarm) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.25);
  for (TrialInput& t : input.trials) {
    const bool jit = t.variant_key.find("jit") != std::string::npos;
    // Repeat 0 cold on both sides, 1 and 2 warm; repeat 3 partly warm on jit only.
    const std::string state = t.repeat == 0 ? "cold" : (t.repeat == 3 && jit ? "mixed" : "warm");
    t.applied["compile_cache_state"] = state;
    const double warmup = jit ? (state == "cold" ? 33.0 : state == "mixed" ? 20.0 : 13.0)
                              : (state == "cold" ? 20.0 : 5.0);
    for (RankSummary& r : t.ranks) r.figures.warmup_s = warmup;
  }
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  ASSERT_EQ(c.compile_costs.size(), 3u);
  const CompileCost& cold = c.compile_costs[0];
  const CompileCost& warm = c.compile_costs[1];
  const CompileCost& mixed = c.compile_costs[2];
  ASSERT_EQ(cold.cache, "cold");
  ASSERT_EQ(warm.cache, "warm");
  ASSERT_EQ(mixed.cache, "mixed");
  // Eager's warm-ups: cold 20 s (1 trial), warm 5 s (3 trials); their mean, 8.75 s, is
  // what the old rule subtracted from both (24.25 s and 4.25 s).
  ASSERT_TRUE(cold.warmup_delta_s && warm.warmup_delta_s);
  EXPECT_NEAR(*cold.warmup_delta_s, 33.0 - 20.0, 1e-9);
  EXPECT_NEAR(*warm.warmup_delta_s, 13.0 - 5.0, 1e-9);
  EXPECT_EQ(cold.counterpart_trials, 1);
  EXPECT_EQ(warm.counterpart_trials, 3);
  EXPECT_FALSE(mixed.warmup_delta_s.has_value()) << "eager has no partly warm trial";
  EXPECT_FALSE(mixed.break_even.has_value());
  EXPECT_EQ(mixed.counterpart_trials, 0);
  EXPECT_EQ(mixed.note, "counterpart has no mixed trial to compare with");
  ASSERT_TRUE(cold.break_even_steps && c.step_saving_s);
  EXPECT_NEAR(*cold.break_even_steps, 13.0 / *c.step_saving_s, 1e-6);
  std::string text = RenderReport(report, ReportFormat::kTable);
  EXPECT_NE(text.find("cold +13.0 s, warm +8.0 s, mixed - (counterpart: no mixed trial)"), std::string::npos) << text;
  EXPECT_NE(text.find("13.0 s more in warm-up compiling cold (1 trial"), std::string::npos) << text;
  EXPECT_NE(text.find("its mixed compile is not compared (the counterpart has no mixed trial)"), std::string::npos)
      << text;
  nlohmann::json json = nlohmann::json::parse(RenderReport(report, ReportFormat::kJson));
  const nlohmann::json& costs = json["variants"][1]["comparison"]["warmup"]["by_compile_cache"];
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[0]["counterpart_trials"], 1);
  EXPECT_TRUE(costs[2]["warmup_delta_s"].is_null());
  EXPECT_EQ(costs[2]["note"], "counterpart has no mixed trial to compare with");
}

TEST(ReportBuilderTest, AWarmOnlySweepSaysItDidNotMeasureTheColdCompile) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.25);
  for (TrialInput& t : input.trials) {
    if (t.variant_key.find("jit") != std::string::npos) t.applied["compile_cache_state"] = "warm";
  }
  Report report = BuildReport(input, ReportOptions{});
  ASSERT_EQ(ComparisonOf(report, kJit1).compile_costs.size(), 1u);
  std::string answer = RenderReport(report, ReportFormat::kTable);
  EXPECT_NE(answer.find("a cold compile was not measured"), std::string::npos) << answer;
}

TEST(ReportBuilderTest, SlowerVariantNeverBreaksEven) {
  Report report = TwoByTwoReport(3, 0.8);
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_LT(c.speedup.value, 0.85);
  EXPECT_LT(*c.speedup.high, 1.0);
  EXPECT_EQ(*c.break_even, "never");
  EXPECT_FALSE(c.break_even_steps);
}

TEST(ReportBuilderTest, EqualWarmupBreaksEvenImmediately) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.2);
  for (TrialInput& t : input.trials) {
    for (RankSummary& r : t.ranks) r.figures.warmup_s = 3.0;
  }
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_NEAR(*c.warmup_delta_s, 0.0, 1e-12);
  EXPECT_EQ(*c.break_even, "immediately");
}

TEST(ReportBuilderTest, IntervalContainingOneSaysNoMeasurableDifference) {
  Report report = TwoByTwoReport(5, 1.0);
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_TRUE(c.speedup.Contains(1.0));
  EXPECT_EQ(c.verdict, Verdict::kNoMeasurableDifference);
  EXPECT_EQ(c.no_measurable_difference, std::optional<bool>(true));
}

// Issue 33 item 4: a speedup the interval does not back gets no break-even step count,
// and "Fastest" is not said of a variant no verdict backs.
TEST(ReportBuilderTest, WithoutAVerdictThereIsNoBreakEvenAndNoFastest) {
  Report report = TwoByTwoReport(5, 1.0);
  const Comparison& c = ComparisonOf(report, kJit1);
  ASSERT_EQ(c.verdict, Verdict::kNoMeasurableDifference);
  ASSERT_TRUE(c.warmup_delta_s);
  EXPECT_EQ(c.break_even, std::optional<std::string>("not significant"));
  EXPECT_FALSE(c.break_even_steps);
  EXPECT_FALSE(report.fastest_key) << *report.fastest_key;
  EXPECT_TRUE(report.fastest_unbacked_key);
  // A backed speedup names its variant.
  ReportInput faster = TwoByTwoSweep();
  AddTrials(faster, 3, 1.25);
  Report backed = BuildReport(faster, ReportOptions{});
  ASSERT_TRUE(backed.fastest_key);
  EXPECT_EQ(backed.FindVariant(*backed.fastest_key)->comparison.verdict, Verdict::kFaster);
  EXPECT_FALSE(backed.fastest_unbacked_key);
}

// One repeat sees only the noise within the two runs: the interval is shown, labelled
// within-run only, and gives no verdict however narrow it is.
TEST(ReportBuilderTest, OneRepeatIsWithinRunOnlyAndNotAVerdict) {
  Report report = TwoByTwoReport(1, 1.3);
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(c.method, IntervalMethod::kMeasuredSteps);
  EXPECT_EQ(c.variant_trials, 1);
  EXPECT_NEAR(c.speedup.value, 1.3 * (1 - 0.008), 1e-6);
  ASSERT_TRUE(c.speedup.low && c.speedup.high);
  EXPECT_LE(*c.speedup.low, c.speedup.value);
  EXPECT_GE(*c.speedup.high, c.speedup.value);
  EXPECT_GT(*c.speedup.low, 1.2);  // a narrow within-run interval far from 1 ...
  EXPECT_EQ(c.verdict, Verdict::kUnclear);  // ... is still not a verdict
  EXPECT_FALSE(c.no_measurable_difference);
  // Between-trial noise is unknown with one repeat: planned with the assumed 3%.
  EXPECT_TRUE(c.repeats_needed_assumed);
  EXPECT_EQ(c.repeats_needed.value_or(0), RepeatsToResolve(0.03, 0.05));
  EXPECT_TRUE(c.needs_more_repeats);
}

TEST(ReportBuilderTest, SequentialOrderIsNotPaired) {
  ReportInput input = TwoByTwoSweep();
  input.order = "sequential";
  AddTrials(input, 3, 1.1);
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_EQ(ComparisonOf(report, kJit1).method, IntervalMethod::kUnpairedRepeats);
}

TEST(ReportBuilderTest, LossParityOverCommonStepsWithMissingSteps) {
  ReportInput input = TwoByTwoSweep();
  ReportOptions unsmoothed;
  unsmoothed.loss_smoothing_window = 1;  // this test reads one step's deviation exactly
  AddTrials(input, 2, 1.1);
  for (TrialInput& t : input.trials) {
    if (t.variant_key != kJit1) continue;
    t.steps.erase(t.steps.begin() + 7, t.steps.end());  // steps 7..9 missing
    t.steps[3].loss = *t.steps[3].loss * 1.03;           // 3% off at step 3
  }
  Report report = BuildReport(input, unsmoothed);
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(c.loss_common_steps, 7u);
  ASSERT_TRUE(c.loss_max_deviation);
  EXPECT_NEAR(*c.loss_max_deviation, 0.03, 1e-9);
  EXPECT_EQ(c.loss_at_step, 3);
  EXPECT_TRUE(c.loss_flagged);
  ReportOptions lenient = unsmoothed;
  lenient.loss_parity_threshold = 0.05;
  EXPECT_FALSE(ComparisonOf(BuildReport(input, lenient), kJit1).loss_flagged);
  EXPECT_FALSE(ComparisonOf(report, kJit4).loss_flagged);
  EXPECT_NEAR(*ComparisonOf(report, kJit4).loss_max_deviation, 0.0, 1e-12);
}

// A sweep over `axis` (baseline `base`, variant `other`) whose variant's loss runs 10%
// above its counterpart's.
Report DeviatingLossReport(const std::string& axis, const std::string& base, const std::string& other,
                           std::map<std::string, std::string> extra_variant = {},
                           std::map<std::string, std::string> extra_base = {}) {
  ReportInput input;
  input.order = "interleaved";
  input.baseline = {{axis, base}};
  input.axes = {{axis, {base, other}}};
  std::map<std::string, std::string> pv = {{axis, other}}, pb = {{axis, base}};
  for (auto& [k, v] : extra_variant) pv[k] = v;
  for (auto& [k, v] : extra_base) pb[k] = v;
  input.variants = {{"base", pb, "base", true}, {"variant", pv, "base", false}};
  for (int r = 0; r < 3; ++r) {
    TrialInput b = Succeeded("base", r, TrialSpec{}, 2 * r);
    b.applied = nullptr;
    input.trials.push_back(b);
    TrialInput t = Succeeded("variant", r, TrialSpec{}, 2 * r + 1);
    for (StepSample& s : t.steps) *s.loss *= 1.10;
    t.applied = nullptr;
    input.trials.push_back(t);
  }
  return BuildReport(input, ReportOptions{});
}

TEST(ReportBuilderTest, LossParityIsFlaggedOnlyWhereTheMathIsKept) {
  for (const char* axis : {"compile_mode", "compile_scope", "zero_stage", "offload", "grad_checkpointing",
                           "executor", "jit_executor", "host_allocator", "bf16_matmul"}) {
    Report report = DeviatingLossReport(axis, "a", "b");
    const Comparison& c = ComparisonOf(report, "variant");
    EXPECT_TRUE(c.loss_parity_expected) << axis;
    EXPECT_TRUE(c.loss_flagged) << axis;
  }
  for (const char* axis : {"micro_batch", "lora_rank", "lr", "lora_targets", "precision", "seq_len"}) {
    Report report = DeviatingLossReport(axis, "1", "2");
    const Comparison& c = ComparisonOf(report, "variant");
    EXPECT_FALSE(c.loss_parity_expected) << axis;
    EXPECT_FALSE(c.loss_flagged) << axis;
    EXPECT_NEAR(*c.loss_max_deviation, 0.10, 1e-9) << axis;  // shown
    EXPECT_NE(c.loss_parity_note.find(axis), std::string::npos) << c.loss_parity_note;
    for (const std::string& callout : report.callouts) EXPECT_EQ(callout.find("loss curve"), std::string::npos);
  }
  // World size at the same global batch keeps the math; at a larger one it does not.
  Report same_batch =
      DeviatingLossReport("world_size", "1", "2", {{"micro_batch", "2"}}, {{"micro_batch", "4"}});
  const Comparison& same = ComparisonOf(same_batch, "variant");
  EXPECT_TRUE(same.loss_parity_expected);
  EXPECT_TRUE(same.loss_flagged);
  Report larger_batch = DeviatingLossReport("world_size", "1", "2");
  const Comparison& larger = ComparisonOf(larger_batch, "variant");
  EXPECT_FALSE(larger.loss_parity_expected);
  EXPECT_FALSE(larger.loss_flagged);
}

TEST(ReportBuilderTest, LossParityComparesSmoothedCurves) {
  // Step-to-step noise of +-3% around identical curves: raw, the largest deviation is
  // ~6%; smoothed over 5 steps it is well under the 2% threshold.
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.1);
  for (TrialInput& t : input.trials) {
    if (t.variant_key != kJit1) continue;
    for (StepSample& s : t.steps) *s.loss *= 1 + 0.03 * ((s.step % 2) ? 1 : -1);
  }
  Report smoothed_report = BuildReport(input, ReportOptions{});
  const Comparison& smoothed = ComparisonOf(smoothed_report, kJit1);
  EXPECT_FALSE(smoothed.loss_flagged);
  EXPECT_LT(*smoothed.loss_max_deviation, 0.02);
  ReportOptions raw;
  raw.loss_smoothing_window = 1;
  EXPECT_TRUE(ComparisonOf(BuildReport(input, raw), kJit1).loss_flagged);
}

TEST(ReportBuilderTest, VariantAndCounterpartOnDifferentMachinesAreCalledOut) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.1);
  for (TrialInput& t : input.trials) {
    bool jit = t.variant_key.find("jit") != std::string::npos;
    t.environment = {{"host", jit ? "gpu-2" : "gpu-1"}, {"cpu_model", "Xeon 8480"},
                     {"gpu_model", jit ? "H100 80GB" : "A100 80GB"}, {"torch_version", nullptr}};
  }
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(c.environment_difference, "gpu_model A100 80GB vs H100 80GB; hosts gpu-2 vs gpu-1");
  int called_out = 0;
  for (const std::string& callout : report.callouts) {
    called_out += callout.find("ran in different environments") != std::string::npos;
  }
  EXPECT_EQ(called_out, 2);  // jit at both micro-batches
}

TEST(ReportBuilderTest, MemoryFiguresUseTheLargestRank) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.1);
  for (TrialInput& t : input.trials) {
    if (t.variant_key == kJit1) t.ranks[1].figures.peak_mem_bytes = 1'250'000'000;  // rank 1 largest
  }
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(*c.variant_peak_bytes, 1'250'000'000);
  EXPECT_EQ(*c.counterpart_peak_bytes, 1'000'000'000);
  EXPECT_NEAR(*c.memory_relative, 0.25, 1e-12);
  EXPECT_NEAR(*c.compression_ratio, 0.8, 1e-12);
  const VariantReport* v = report.FindVariant(kJit1);
  EXPECT_EQ(*v->frozen_bytes, 500'000'000);
  EXPECT_EQ(*v->optimizer_bytes, 20'000'000);
}

TEST(ReportBuilderTest, EveryTrialOutOfMemoryComparesNothing) {
  ReportInput input = TwoByTwoSweep();
  for (const VariantInput& v : input.variants) {
    for (int r = 0; r < 2; ++r) {
      input.trials.push_back(Unsuccessful(v.key, r, "oom", "CUDA out of memory"));
    }
  }
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_EQ(ComparisonOf(report, kJit1).status, Comparison::Status::kBothFailed);
  EXPECT_FALSE(report.fastest_key);
  EXPECT_TRUE(report.marginals.empty());
  const VariantReport* v = report.FindVariant(kJit1);
  EXPECT_EQ(v->outcome_counts.at("oom"), 2);
  EXPECT_EQ(v->reasons, std::vector<std::string>{"CUDA out of memory"});
  EXPECT_EQ(report.trials_finished, 8);
}

TEST(ReportBuilderTest, OutcomeMismatchIsCalledOutFirst) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.1);
  OnlyUnsuccessful(input, kJit4, "oom", "out of memory at step 0");
  input.trials.push_back(Unsuccessful(kJit4, 1, "oom", "out of memory at step 0"));
  for (TrialInput& t : input.trials) {
    if (t.variant_key == kJit1) t.steps[2].loss = *t.steps[2].loss * 1.5;  // also a warning
  }
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit4);
  EXPECT_EQ(c.status, Comparison::Status::kVariantFailed);
  ASSERT_GE(report.callouts.size(), 2u);
  EXPECT_NE(report.callouts[0].find(kJit4), std::string::npos);
  EXPECT_NE(report.callouts[0].find("fails where its counterpart succeeds"), std::string::npos);
  EXPECT_NE(report.callouts[0].find("oom x2"), std::string::npos);
}

TEST(ReportBuilderTest, CounterpartFailedOrExcludedIsNotCompared) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.1);
  OnlyUnsuccessful(input, kEager4, "failed", "trainer exited 1");
  input.variants[0].counterpart_excluded = true;  // pretend eager,1 was excluded for jit,1
  input.variants[1].counterpart_excluded = true;
  input.variants[1].is_baseline = false;
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_EQ(ComparisonOf(report, kJit4).status, Comparison::Status::kCounterpartFailed);
  EXPECT_EQ(ComparisonOf(report, kJit1).status, Comparison::Status::kCounterpartExcluded);
  EXPECT_NE(report.callouts[0].find("succeeds where its counterpart fails"), std::string::npos);
}

TEST(ReportBuilderTest, UnfinishedTrialsArePendingAndReported) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 1, 1.1);
  OnlyUnsuccessful(input, kJit4, "queued", "");
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_EQ(ComparisonOf(report, kJit4).status, Comparison::Status::kPending);
  EXPECT_EQ(report.trials_finished, 3);
  EXPECT_NE(report.callouts.back().find("not finished"), std::string::npos);
}

TEST(ReportBuilderTest, FallbackIsFlaggedAndNotCompared) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.1);
  for (TrialInput& t : input.trials) {
    if (t.variant_key == kJit1) t.applied = {{"compile_mode", "eager"}, {"graphs", 0}};
  }
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(c.status, Comparison::Status::kFellBack);
  EXPECT_NE(c.note.find("requested compile_mode=jit but applied compile_mode=eager"),
            std::string::npos);
  EXPECT_TRUE(report.FindVariant(kJit1)->fell_back);
  EXPECT_EQ(ComparisonOf(report, kJit4).status, Comparison::Status::kCompared);
}

TEST(ReportBuilderTest, FallbackReasonReadsFlagsAndMismatches) {
  std::map<std::string, std::string> params = {{"zero_stage", "2"}, {"compile_mode", "jit"}};
  EXPECT_EQ(FallbackReason(params, nullptr), "");
  EXPECT_EQ(FallbackReason(params, {{"zero_stage", 2}, {"compile_mode", "jit"}}), "");
  EXPECT_EQ(FallbackReason(params, {{"zero_stage", 2.0}}), "");
  EXPECT_EQ(FallbackReason(params, {{"zero_stage", 0}}),
            "requested zero_stage=2 but applied zero_stage=0");
  EXPECT_EQ(FallbackReason(params, {{"fell_back", true}, {"fallback_reason", "no fuser"}}),
            "no fuser");
  EXPECT_EQ(FallbackReason(params, {{"fallback", "bf16 op unsupported"}}), "bf16 op unsupported");
}

// A trainer that honestly says it did not fall back must not be excluded.
TEST(ReportBuilderTest, FalseFallbackFlagsAreNotAFallback) {
  std::map<std::string, std::string> params = {{"compile_mode", "jit"}};
  EXPECT_EQ(FallbackReason(params, {{"fell_back", false}}), "");
  EXPECT_EQ(FallbackReason(params, {{"fallback", ""}}), "");
  EXPECT_EQ(FallbackReason(params, {{"fell_back", false}, {"fallback", ""}, {"compile_mode", "jit"}}),
            "");
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.1);
  for (TrialInput& t : input.trials) {
    t.applied["fell_back"] = false;
    t.applied["fallback"] = "";
  }
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_EQ(ComparisonOf(report, kJit1).status, Comparison::Status::kCompared);
  EXPECT_FALSE(report.FindVariant(kJit1)->fell_back);
}

// bf16_matmul: auto -> the trainer records what it chose ("native" or "fp32").
TEST(ReportBuilderTest, AutoMatchesWhateverTheTrainerChose) {
  std::map<std::string, std::string> params = {{"bf16_matmul", "auto"}, {"zero_stage", "2"}};
  EXPECT_EQ(FallbackReason(params, {{"bf16_matmul", "native"}, {"zero_stage", 2}}), "");
  EXPECT_EQ(FallbackReason(params, {{"bf16_matmul", "fp32"}}), "");
  // Only the auto axis is exempt: an explicit request still has to be honoured.
  EXPECT_EQ(FallbackReason({{"bf16_matmul", "native"}}, {{"bf16_matmul", "fp32"}}),
            "requested bf16_matmul=native but applied bf16_matmul=fp32");
  EXPECT_EQ(FallbackReason(params, {{"bf16_matmul", "fp32"}, {"zero_stage", 0}}),
            "requested zero_stage=2 but applied zero_stage=0");
}

// Interleaved pairs are matched by repeat number: the counterpart lost repeat 1 to an
// oom, so its repeats 0, 2, 3 pair with the variant's 0, 2, 3 (zipping the lists would
// pair 1 with 2 and 2 with 3, and the +-2% repeat drift would no longer cancel).
TEST(ReportBuilderTest, InterleavedPairsMatchByRepeatNotByPosition) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.10);
  std::erase_if(input.trials, [](const TrialInput& t) { return t.variant_key == kEager1 && t.repeat == 1; });
  input.trials.push_back(Unsuccessful(kEager1, 1, "oom", "out of memory"));
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(c.method, IntervalMethod::kPairedRepeats);
  EXPECT_EQ(c.pairs, 3);
  EXPECT_EQ(c.variant_trials, 4);
  EXPECT_EQ(c.counterpart_trials, 3);
  // Pairs (0, 2, 3): jit's own noise -0.8%, +0.8%, -0.4%.
  EXPECT_NEAR(c.speedup.value, 1.10 * std::cbrt(0.992 * 1.008 * 0.996), 1e-9);
  EXPECT_NEAR(c.speedup.value, 1.10, 0.005);
}

// Ranks step together: the slowest rank's tokens/s is the trial's.
TEST(ReportBuilderTest, TrialThroughputIsTheSlowestRanks) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.10);
  for (TrialInput& t : input.trials) {
    if (t.variant_key == kJit1) t.ranks[1].figures.tokens_per_s = *t.ranks[0].figures.tokens_per_s * 0.8;
  }
  Report report = BuildReport(input, ReportOptions{});
  for (const TrialView& t : report.trials) {
    if (t.variant_key != kJit1) continue;
    const TrialInput& raw = *std::find_if(input.trials.begin(), input.trials.end(),
                                          [&](const TrialInput& x) { return x.id == t.id; });
    EXPECT_DOUBLE_EQ(*t.tokens_per_s, *raw.ranks[1].figures.tokens_per_s);
  }
  EXPECT_NEAR(ComparisonOf(report, kJit1).speedup.value, 1.10 * 0.8, 0.01);
  EXPECT_NEAR(ComparisonOf(report, kJit4).speedup.value, 1.10, 0.01);
}

TEST(ReportBuilderTest, MarginalEffectIsGeometricMeanOverPairs) {
  Report report = TwoByTwoReport(3, 1.2);
  ASSERT_EQ(report.marginals.size(), 2u);
  const MarginalEffect& jit = report.marginals[0];
  EXPECT_EQ(jit.axis, "compile_mode");
  EXPECT_EQ(jit.value, "jit");
  EXPECT_EQ(jit.reference, "eager");
  EXPECT_EQ(jit.pairs, 2);
  EXPECT_NEAR(jit.speedup.value, 1.2, 0.01);
  ASSERT_TRUE(jit.speedup.low && jit.speedup.high);
  EXPECT_LE(*jit.speedup.low, jit.speedup.value);
  EXPECT_GE(*jit.speedup.high, jit.speedup.value);
  const MarginalEffect& mb = report.marginals[1];
  EXPECT_EQ(mb.axis, "micro_batch");
  EXPECT_EQ(mb.value, "4");
  EXPECT_EQ(mb.reference, "1");  // not a baseline axis: its first value
  EXPECT_NEAR(mb.speedup.value, 3.0, 0.01);
}

TEST(ReportBuilderTest, MarginalIntervalKeepsThePairingOfRepeats) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.1);  // +-2% drift shared by a repeat, +-0.8% jit noise
  const MarginalEffect paired = BuildReport(input, ReportOptions{}).marginals[0];
  input.order = "sequential";
  const MarginalEffect unpaired = BuildReport(input, ReportOptions{}).marginals[0];
  ASSERT_TRUE(paired.speedup.low && unpaired.speedup.low);
  EXPECT_TRUE(paired.speedup.Contains(1.1));
  EXPECT_LT(*paired.speedup.high - *paired.speedup.low, 0.03);
  EXPECT_GT(*unpaired.speedup.high - *unpaired.speedup.low,
            *paired.speedup.high - *paired.speedup.low);
}

TEST(ReportBuilderTest, JitWithoutFusionIsCalledOut) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.0);
  for (TrialInput& t : input.trials) {
    if (t.variant_key == kJit1) {
      t.applied = {{"compile_mode", "jit"}, {"fuser", "none (no LLVM)"}, {"fusion_groups", 0}};
    }
  }
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_EQ(ComparisonOf(report, kJit1).status, Comparison::Status::kCompared);  // not a fallback
  bool called_out = false;
  for (const std::string& c : report.callouts) {
    called_out |= c.find(kJit1 + " ran TorchScript without fusion") == 0 &&
                  c.find("fuser=none (no LLVM)") != std::string::npos;
  }
  EXPECT_TRUE(called_out);
}

TEST(ReportBuilderTest, BestConfigurationsHonourTheMemoryBudget) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.2);
  for (TrialInput& t : input.trials) {
    if (t.variant_key.find("micro_batch=4") != std::string::npos) {
      for (RankSummary& r : t.ranks) r.figures.peak_mem_bytes = 6'000'000'000;
    }
  }
  ReportOptions options;
  options.memory_budget_bytes = 4'000'000'000;
  Report report = BuildReport(input, options);
  EXPECT_EQ(*report.fastest_key, kJit4);
  EXPECT_EQ(*report.fastest_within_budget_key, kJit1);
}

TEST(ReportBuilderTest, IsoMemoryComparesEachSettingAtItsLargestMicroBatch) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.2);
  OnlyUnsuccessful(input, kEager4, "oom", "out of memory");
  Report report = BuildReport(input, ReportOptions{});
  ASSERT_TRUE(report.iso_memory_applicable);
  ASSERT_EQ(report.iso_memory.size(), 2u);
  const IsoMemoryRow& jit = report.iso_memory[1];
  EXPECT_EQ(jit.setting, "compile_mode=jit");
  EXPECT_EQ(jit.micro_batch, "4");
  EXPECT_EQ(jit.counterpart_setting, "compile_mode=eager");
  EXPECT_EQ(jit.counterpart_micro_batch, "1");
  ASSERT_TRUE(jit.speedup);
  EXPECT_NEAR(jit.speedup->value, 3.6, 0.05);  // 3x from the batch, 1.2x from jit
}

TEST(ReportBuilderTest, NoisyTrialsAndRepeatsNeeded) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.1);
  for (TrialInput& t : input.trials) {
    if (t.variant_key != kJit1) continue;
    for (std::size_t i = 0; i < t.steps.size(); ++i) t.steps[i].step_s *= (i % 2 ? 1.3 : 0.7);
    // Large repeat-to-repeat noise: +-10%.
    for (RankSummary& r : t.ranks) *r.figures.tokens_per_s *= 1 + 0.1 * ((t.repeat % 3) - 1);
  }
  Report report = BuildReport(input, ReportOptions{});
  const VariantReport* v = report.FindVariant(kJit1);
  EXPECT_EQ(v->noisy_trials, 3);
  ASSERT_FALSE(report.callouts.empty());
  std::string noisy;
  for (const std::string& c : report.callouts) {
    if (c.find("noisy trial(s)") != std::string::npos) noisy = c;
  }
  EXPECT_EQ(noisy, "3 noisy trial(s): step-time CV above 10.0%") << "interleaved pairs: nothing about lockstep";
  for (const TrialView& t : report.trials) {
    if (t.variant_key == kJit1) {
      EXPECT_TRUE(t.noisy);
      EXPECT_GT(*t.step_cv, 0.25);
    } else {
      EXPECT_FALSE(t.noisy);
    }
  }
  const Comparison& c = ComparisonOf(report, kJit1);
  ASSERT_TRUE(c.repeats_needed);
  EXPECT_GT(*c.repeats_needed, 3);
  EXPECT_TRUE(c.needs_more_repeats);
  EXPECT_EQ(ComparisonOf(report, kJit4).repeats_needed.value_or(0), 3);
  EXPECT_FALSE(ComparisonOf(report, kJit4).needs_more_repeats);
}

TEST(ReportBuilderTest, EffectsAreStratifiedByWorkerWhenTrialsSpread) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.1);
  for (TrialInput& t : input.trials) t.worker = t.repeat % 2 ? "node-b" : "node-a";
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_TRUE(report.spread_across_workers);
  const Comparison& c = ComparisonOf(report, kJit1);
  ASSERT_EQ(c.by_worker.size(), 2u);
  EXPECT_EQ(c.by_worker[0].worker, "node-a");
  EXPECT_EQ(c.by_worker[0].variant_trials, 2);
  EXPECT_NEAR(c.by_worker[0].speedup, 1.1, 0.02);
  ReportInput one = TwoByTwoSweep();
  AddTrials(one, 2, 1.1);
  EXPECT_TRUE(ComparisonOf(BuildReport(one, ReportOptions{}), kJit1).by_worker.empty());
}

// Issue 33: every eager trial on one worker and every jit trial on another is
// confounded with the workers: figures, but no verdict, and a call-out. The same trials
// with each pair on one worker (as balanced placement runs them) keep their verdict.
TEST(ReportBuilderTest, AComparisonConfoundedWithItsWorkersGetsNoVerdict) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.3);
  for (TrialInput& t : input.trials) t.worker = t.variant_key.find("jit") != std::string::npos ? "node-b" : "node-a";
  Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = ComparisonOf(report, kJit1);
  EXPECT_EQ(c.verdict, Verdict::kUnclear);
  EXPECT_FALSE(c.no_measurable_difference.has_value());
  EXPECT_EQ(c.worker_confound, "variant on node-b x4; counterpart on node-a x4");
  EXPECT_GT(c.speedup.value, 1.2) << "the figures stay";
  bool called_out = false;
  for (const std::string& line : report.callouts) called_out = called_out || line.find("confounded") != std::string::npos;
  EXPECT_TRUE(called_out);

  // The axis's marginal effect pools the same pairs: no verdict either (a real-process
  // run found it said "faster" beside the confounded comparison).
  bool marginal_seen = false;
  for (const MarginalEffect& m : report.marginals) {
    if (m.axis != "compile_mode") continue;
    marginal_seen = true;
    EXPECT_EQ(m.verdict, Verdict::kUnclear);
    EXPECT_NE(m.worker_confound.find("node-b"), std::string::npos) << m.worker_confound;
  }
  EXPECT_TRUE(marginal_seen);

  ReportInput balanced = TwoByTwoSweep();
  AddTrials(balanced, 4, 1.3);
  for (TrialInput& t : balanced.trials) t.worker = t.repeat % 2 ? "node-b" : "node-a";
  const Report balanced_report = BuildReport(balanced, ReportOptions{});
  const Comparison& b = ComparisonOf(balanced_report, kJit1);
  EXPECT_TRUE(b.worker_confound.empty()) << b.worker_confound;
  EXPECT_EQ(b.verdict, Verdict::kFaster);
  for (const MarginalEffect& m : balanced_report.marginals) {
    if (m.axis == "compile_mode") {
      EXPECT_TRUE(m.worker_confound.empty()) << m.worker_confound;
    }
  }
}

// Issue 33: a baseline over two axes compares each axis on its own, the other held:
// jit within each micro-batch (not jit at 4 against eager at 1, which mixes both
// effects), and micro-batch 4 within each compile mode.
TEST(ReportBuilderTest, ABaselineOverTwoAxesComparesEachAxisWithTheOtherHeld) {
  ReportInput input = TwoByTwoSweep();
  input.baseline = {{"compile_mode", "eager"}, {"micro_batch", "1"}};
  for (VariantInput& v : input.variants) {
    v.counterpart_key = kEager1;
    v.is_baseline = v.key == kEager1;
  }
  AddTrials(input, 4, 1.25);
  Report report = BuildReport(input, ReportOptions{});
  EXPECT_NEAR(ComparisonOf(report, kJit4).speedup.value, 3 * 1.25, 0.05) << "the joint comparison stays";
  ASSERT_EQ(report.axis_comparisons.size(), 4u);
  std::map<std::string, const AxisComparison*> by_name;
  for (const AxisComparison& a : report.axis_comparisons) {
    by_name[a.axis + "=" + a.value + " with " + a.held] = &a;
    EXPECT_EQ(a.comparison.status, Comparison::Status::kCompared) << a.variant_key;
    EXPECT_EQ(a.comparison.verdict, Verdict::kFaster) << a.variant_key;
  }
  const AxisComparison* jit4 = by_name["compile_mode=jit with micro_batch=4"];
  ASSERT_NE(jit4, nullptr);
  EXPECT_EQ(jit4->variant_key, kJit4);
  EXPECT_EQ(jit4->counterpart_key, kEager4);
  EXPECT_NEAR(jit4->comparison.speedup.value, 1.25, 0.01);
  EXPECT_TRUE(jit4->comparison.break_even_steps) << "a significant speedup has a break-even";
  const AxisComparison* mb_jit = by_name["micro_batch=4 with compile_mode=jit"];
  ASSERT_NE(mb_jit, nullptr);
  EXPECT_EQ(mb_jit->counterpart_key, kJit1);
  EXPECT_NEAR(mb_jit->comparison.speedup.value, 3.0, 0.03);
  ASSERT_NE(by_name["compile_mode=jit with micro_batch=1"], nullptr);
  ASSERT_NE(by_name["micro_batch=4 with compile_mode=eager"], nullptr);

  // One baseline axis: the counterpart comparisons already hold the rest.
  ReportInput one_axis = TwoByTwoSweep();
  AddTrials(one_axis, 4, 1.25);
  EXPECT_TRUE(BuildReport(one_axis, ReportOptions{}).axis_comparisons.empty());
}

// 1,000 simulated sweeps with a known true speedup, drift between repeats and noise:
// the report's 95% interval must contain the truth 92-98% of the time.
TEST(ReportBuilderCoverageTest, SpeedupIntervalCoversTheTruth) {
  const double kTrue = 1.08;
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> noise(0, 0.03), drift(0, 0.05);
  ReportOptions options;
  options.bootstrap_resamples = 1000;
  int covered = 0;
  for (int sweep = 0; sweep < 1000; ++sweep) {
    ReportInput input;
    input.order = "interleaved";
    input.baseline = {{"compile_mode", "eager"}};
    input.axes = {{"compile_mode", {"eager", "jit"}}};
    input.variants = {{"compile_mode=eager", {{"compile_mode", "eager"}}, "compile_mode=eager", true},
                      {"compile_mode=jit", {{"compile_mode", "jit"}}, "compile_mode=eager", false}};
    for (int r = 0; r < 10; ++r) {
      double shared = std::exp(drift(rng));
      TrialSpec eager, jit;
      eager.steps = jit.steps = 0;
      eager.tokens_per_s = 1000 * shared * std::exp(noise(rng));
      jit.tokens_per_s = 1000 * kTrue * shared * std::exp(noise(rng));
      input.trials.push_back(Succeeded("compile_mode=eager", r, eager, 2 * r));
      input.trials.push_back(Succeeded("compile_mode=jit", r, jit, 2 * r + 1));
    }
    options.seed = static_cast<std::uint64_t>(sweep);
    Report report = BuildReport(input, options);
    const Comparison& c = ComparisonOf(report, "compile_mode=jit");
    ASSERT_EQ(c.method, IntervalMethod::kPairedRepeats);
    covered += c.speedup.Contains(kTrue) ? 1 : 0;
  }
  EXPECT_GE(covered, 920);
  EXPECT_LE(covered, 980);
}

// Adaptive repeats (min 3, max 6): jit is 1.5x, so both jit variants stopped after 3
// pairs and the coordinator cancelled repeats 3-5 of every variant.
ReportInput AdaptiveSweep() {
  ReportInput input = TwoByTwoSweep();
  input.adaptive = AdaptiveDesignInput{3, 6, 0.001};
  for (VariantInput& v : input.variants) v.world_size = v.params.at("compile_mode") == "jit" ? 2 : 1;
  AddTrials(input, 3, 1.5);
  for (TrialInput& t : input.trials) t.duration_s = 10.0;
  for (int r = 3; r < 6; ++r) {
    for (const VariantInput& v : input.variants) {
      input.trials.push_back(Unsuccessful(
          v.key, r, "cancelled",
          v.is_baseline ? "adaptive repeats: no variant paired with this baseline needs more pairs"
                        : "adaptive repeats: stopped after 3 of 6 pairs (interval excludes 1)"));
    }
  }
  return input;
}

TEST(ReportBuilderTest, AdaptiveSweepReportsWhereEachVariantStoppedAndWhatItSaved) {
  Report report = BuildReport(AdaptiveSweep(), ReportOptions{});
  const VariantReport* jit = report.FindVariant(kJit1);
  ASSERT_TRUE(jit->adaptive.has_value());
  EXPECT_TRUE(jit->adaptive->stopped);
  EXPECT_EQ(jit->adaptive->pairs, 3);
  EXPECT_EQ(jit->adaptive->max_pairs, 6);
  EXPECT_EQ(jit->adaptive->reason, "interval excludes 1");
  EXPECT_EQ(jit->adaptive->trials_not_run, 3);
  EXPECT_FALSE(report.FindVariant(kEager1)->adaptive.has_value()) << "a baseline is not compared";
  ASSERT_TRUE(report.adaptive.has_value());
  EXPECT_EQ(report.adaptive->trials_max, 24);
  EXPECT_EQ(report.adaptive->trials_not_run, 12);
  // jit: 2 variants x 3 trials x 10 s x 2 ranks; eager: 2 x 3 x 10 s x 1 rank.
  ASSERT_TRUE(report.adaptive->device_seconds_not_run.has_value());
  EXPECT_DOUBLE_EQ(*report.adaptive->device_seconds_not_run, 180.0);
  // The interval is the per-look one: 1 - 0.05 / 4 looks.
  EXPECT_NEAR(report.adaptive->look_confidence, 1 - 0.05 / 4, 1e-12);
  std::vector<double> num, den;
  for (const TrialView& t : report.trials) {
    if (!t.outcome.Succeeded()) continue;
    if (t.variant_key == kJit1) num.push_back(*t.tokens_per_s);
    if (t.variant_key == kEager1) den.push_back(*t.tokens_per_s);
  }
  RatioEstimate expected = PairedRatio(num, den, 1 - 0.05 / 4);
  EXPECT_NEAR(*jit->comparison.speedup.low, expected.interval->low, 1e-12);
  EXPECT_NEAR(*jit->comparison.speedup.high, expected.interval->high, 1e-12);
  EXPECT_EQ(jit->comparison.verdict, Verdict::kFaster);

  std::string text = RenderReportTable(report);
  EXPECT_NE(text.find("adaptive: stopped after 3 of 6 pairs (interval excludes 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("saved 12 of 24 trials not run, about 180 s device time"), std::string::npos) << text;
  EXPECT_NE(text.find("Adaptive repeats: 3 to 6 pairs, until an interval excludes 1 or is within +-0.1%;"),
            std::string::npos)
      << text;
  nlohmann::json json = ReportToJson(report);
  EXPECT_EQ(json["adaptive"]["trials_not_run"], 12);
  EXPECT_DOUBLE_EQ(json["adaptive"]["device_seconds_not_run"].get<double>(), 180.0);
  for (const auto& v : json["variants"]) {
    if (v["key"] == kJit1) {
      EXPECT_EQ(v["adaptive"]["pairs"], 3);
      EXPECT_EQ(v["adaptive"]["reason"], "interval excludes 1");
    }
    if (v["key"] == kEager1) {
      EXPECT_TRUE(v["adaptive"].is_null());
    }
  }
}

// A variant in two comparisons stops when the later one stops, and its row names both:
// jit at micro-batch 4 is 1.25x eager at 4 (stops after 3 pairs: the interval excludes 1)
// and the same as jit at 1 (runs to max). The row once said only "max pairs reached",
// which read as the reason for the compile verdict beside it.
TEST(ReportBuilderTest, AnAdaptiveVariantInTwoComparisonsNamesWhereEachStopped) {
  ReportInput input = TwoByTwoSweep();
  input.baseline = {{"compile_mode", "eager"}, {"micro_batch", "1"}};
  input.adaptive = AdaptiveDesignInput{3, 6, 0.001};
  for (VariantInput& v : input.variants) {
    v.counterpart_key = kEager1;
    v.is_baseline = v.key == kEager1;
  }
  int order = 0;
  for (int r = 0; r < 6; ++r) {
    const double drift = 1 + 0.02 * ((r % 3) - 1);
    const double noise_a = 1 + 0.004 * ((r * 7) % 5 - 2), noise_b = 1 + 0.01 * ((r * 3) % 5 - 2),
                 noise_c = 1 + 0.01 * ((r * 2) % 5 - 2);
    const std::map<std::string, double> tokens_per_s = {{kEager1, 1000 * drift},
                                                        {kJit1, 1250 * drift * noise_a},
                                                        {kEager4, 1000 * drift * noise_b},
                                                        {kJit4, 1250 * drift * noise_c}};
    for (const auto& [key, tps] : tokens_per_s) {
      TrialSpec spec;
      spec.tokens_per_s = tps;
      input.trials.push_back(Succeeded(key, r, spec, order++));
    }
  }
  Report report = BuildReport(input, ReportOptions{});
  const VariantReport* jit4 = report.FindVariant(kJit4);
  ASSERT_TRUE(jit4->adaptive.has_value());
  EXPECT_TRUE(jit4->adaptive->stopped);
  EXPECT_EQ(jit4->adaptive->pairs, 6);
  EXPECT_EQ(jit4->adaptive->reason, "max pairs reached");
  ASSERT_EQ(jit4->adaptive->comparisons.size(), 2u);
  const AdaptiveComparison& compile = jit4->adaptive->comparisons[0];
  EXPECT_EQ(compile.against, "compile_mode=eager");
  EXPECT_EQ(compile.held, "micro_batch=4");
  EXPECT_EQ(compile.pairs, 3);
  EXPECT_EQ(compile.reason, "interval excludes 1");
  const AdaptiveComparison& batch = jit4->adaptive->comparisons[1];
  EXPECT_EQ(batch.against, "micro_batch=1");
  EXPECT_EQ(batch.held, "compile_mode=jit");
  EXPECT_EQ(batch.pairs, 6);
  EXPECT_EQ(batch.reason, "max pairs reached");
  // Eager at 4 is the counterpart in the compile comparison: named from its own side.
  const VariantReport* eager4 = report.FindVariant(kEager4);
  ASSERT_TRUE(eager4->adaptive.has_value());
  ASSERT_EQ(eager4->adaptive->comparisons.size(), 2u);
  EXPECT_EQ(eager4->adaptive->comparisons[0].against, "compile_mode=jit");
  EXPECT_EQ(eager4->adaptive->comparisons[1].against, "micro_batch=1");

  const std::string text = RenderReportTable(report);
  testing::ExpectContains(text, {"adaptive: stopped after 6 of 6 pairs, when the last of its 2 comparisons stopped: "
                                 "against compile_mode=eager with micro_batch=4 stopped after 3 (interval excludes 1); "
                                 "against micro_batch=1 with compile_mode=jit stopped after 6 (max pairs reached)"});
  const nlohmann::json json = ReportToJson(report);
  for (const auto& v : json["variants"]) {
    if (v["key"] != kJit4) continue;
    ASSERT_EQ(v["adaptive"]["comparisons"].size(), 2u);
    EXPECT_EQ(v["adaptive"]["comparisons"][0]["against"], "compile_mode=eager");
    EXPECT_EQ(v["adaptive"]["comparisons"][0]["held"], "micro_batch=4");
    EXPECT_EQ(v["adaptive"]["comparisons"][0]["pairs"], 3);
    EXPECT_EQ(v["adaptive"]["comparisons"][1]["reason"], "max pairs reached");
  }
}

TEST(ReportBuilderTest, NonAdaptiveSweepHasNoAdaptiveFigures) {
  Report report = TwoByTwoReport(3, 1.5);
  EXPECT_FALSE(report.adaptive.has_value());
  EXPECT_TRUE(ReportToJson(report)["adaptive"].is_null());
  EXPECT_EQ(RenderReportTable(report).find("Adaptive repeats"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::metrics
