// Seeded simulated sweeps whose truth is known, for the coverage and false-verdict tests
// of the report's intervals (docs/statistics.md, "Checked by simulation"). A sweep is
// written as the loader would fill it (ReportInput: trials with one rank's summary and
// their measured steps, tokens/s = tokens per step / median step time, as the trainer
// computes it) and read back through the real BuildReport / CompareSweeps.
//
// Noise models (all multiplicative, on the log scale):
//   kPairDrift : drift shared by the two trials of an interleaved pair (consecutive
//                positions in the run order), sd 5%, plus independent run noise 3%.
//   kArDrift   : AR(1) drift over the run order (phi 0.9, stationary sd 5%), run noise 3%.
//   kHeavyTail : Student t(3) run noise scaled to 3% and step times with t(3) noise and
//                5% of steps 3x slower (spikes).
//   kIndependent: independent run noise 5.8% only.
// Every model adds step-to-step noise 3% (20 measured steps).
//
// Test-only header; not thread-safe (one generator per simulation).
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_compare.h"
#include "metrics/report/report_model.h"
#include "metrics/report/statistics.h"

namespace bakeoff::metrics::testing {

enum class Noise { kPairDrift, kArDrift, kHeavyTail, kIndependent };

inline const char* NoiseName(Noise noise) {
  switch (noise) {
    case Noise::kPairDrift: return "pair drift";
    case Noise::kArDrift: return "AR drift";
    case Noise::kHeavyTail: return "heavy tails";
    case Noise::kIndependent: return "independent";
  }
  return "?";
}

struct SimCase {
  int variant_repeats = 5;
  int counterpart_repeats = 5;
  std::string order = "interleaved";  // interleaved | sequential | random
  double true_ratio = 1.0;            // variant tokens/s over counterpart tokens/s
  Noise noise = Noise::kPairDrift;
  int steps = 20;
};

// Draws the run-level and step-level noise of a simulated sweep.
class SweepNoise {
 public:
  SweepNoise(Noise noise, std::mt19937_64& rng) : noise_(noise), rng_(rng) {}

  // Log multipliers of the trial levels, one per position of the run order.
  std::vector<double> RunLevels(int positions) {
    std::vector<double> levels(static_cast<std::size_t>(positions));
    double ar = Normal(0.05);  // stationary start
    double shared = 0;
    for (int i = 0; i < positions; ++i) {
      double run = 0;
      switch (noise_) {
        case Noise::kPairDrift:
          if (i % 2 == 0) shared = Normal(0.05);
          run = shared + Normal(0.03);
          break;
        case Noise::kArDrift:
          if (i > 0) ar = 0.9 * ar + Normal(0.05 * std::sqrt(1 - 0.81));
          run = ar + Normal(0.03);
          break;
        case Noise::kHeavyTail: run = 0.03 * StudentT3() / std::sqrt(3.0); break;
        case Noise::kIndependent: run = Normal(0.058); break;
      }
      levels[static_cast<std::size_t>(i)] = run;
    }
    return levels;
  }

  // Step times of a trial whose typical step takes `level_s`.
  std::vector<double> Steps(double level_s, int count) {
    std::vector<double> steps;
    for (int i = 0; i < count; ++i) {
      double s = level_s;
      if (noise_ == Noise::kHeavyTail) {
        s *= std::exp(0.03 * StudentT3() / std::sqrt(3.0));
        if (Uniform() < 0.05) s *= 3;
      } else {
        s *= std::exp(Normal(0.03));
      }
      steps.push_back(s);
    }
    return steps;
  }

 private:
  double Normal(double sd) { return std::normal_distribution<double>(0, sd)(rng_); }
  double Uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  double StudentT3() { return std::student_t_distribution<double>(3)(rng_); }

  Noise noise_;
  std::mt19937_64& rng_;
};

constexpr double kTokensPerStep = 4096;
constexpr double kBaseStepS = 0.5;

// A succeeded trial as the loader fills it: one rank, tokens/s from the median step.
inline TrialInput SimTrial(std::int64_t id, const std::string& variant, int repeat, int order_index,
                           std::vector<double> steps) {
  TrialInput t;
  t.id = id;
  t.variant_key = variant;
  t.repeat = repeat;
  t.order_index = order_index;
  t.worker = "w1";
  t.outcome = TrialStanding::FromText("succeeded");
  RankSummary r;
  r.figures.step_s_median = Median(steps);
  r.figures.tokens_per_s = kTokensPerStep / *r.figures.step_s_median;
  r.figures.first_step_s = 1;
  r.figures.warmup_s = 1;
  r.figures.peak_mem_bytes = 1'000'000;
  t.ranks.push_back(r);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    t.steps.push_back(StepSample{static_cast<std::int64_t>(i), steps[i], 2.0});
  }
  return t;
}

// The run order of `counts[v]` repeats of each variant: interleaved (repeat r of every
// variant, then r + 1; variants that ran out of repeats drop out), sequential, or random.
inline std::vector<std::pair<int, int>> RunOrder(const std::vector<int>& counts, const std::string& order,
                                                 std::mt19937_64& rng) {
  std::vector<std::pair<int, int>> slots;  // (variant, repeat)
  int most = *std::max_element(counts.begin(), counts.end());
  if (order == "sequential") {
    for (int v = 0; v < static_cast<int>(counts.size()); ++v) {
      for (int r = 0; r < counts[v]; ++r) slots.emplace_back(v, r);
    }
    return slots;
  }
  for (int r = 0; r < most; ++r) {
    for (int v = 0; v < static_cast<int>(counts.size()); ++v) {
      if (r < counts[v]) slots.emplace_back(v, r);
    }
  }
  if (order == "random") std::shuffle(slots.begin(), slots.end(), rng);
  return slots;
}

// Variants given as (key, params, counterpart key, log tokens/s offset); trials drawn per
// `c`: variant v has c.variant_repeats repeats unless it is a baseline
// (c.counterpart_repeats).
struct SimVariant {
  std::string key;
  std::map<std::string, std::string> params;
  std::string counterpart;
  double log_offset = 0;
};

inline ReportInput SimSweep(const std::vector<SimVariant>& variants, const std::vector<AxisInput>& axes,
                            const std::map<std::string, std::string>& baseline, const SimCase& c,
                            std::mt19937_64& rng) {
  ReportInput input;
  input.sweep_id = "sim";
  input.sweep_name = "simulated";
  input.order = c.order;
  input.baseline = baseline;
  input.axes = axes;
  std::vector<int> counts;
  for (const SimVariant& v : variants) {
    bool is_baseline = v.key == v.counterpart;
    input.variants.push_back(VariantInput{v.key, v.params, v.counterpart, is_baseline, false, false});
    counts.push_back(is_baseline ? c.counterpart_repeats : c.variant_repeats);
  }
  SweepNoise noise(c.noise, rng);
  std::vector<std::pair<int, int>> order = RunOrder(counts, c.order, rng);
  std::vector<double> levels = noise.RunLevels(static_cast<int>(order.size()));
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto [v, repeat] = order[i];
    double level_s = kBaseStepS * std::exp(-variants[static_cast<std::size_t>(v)].log_offset + levels[i]);
    input.trials.push_back(SimTrial(static_cast<std::int64_t>(i + 1), variants[static_cast<std::size_t>(v)].key,
                                    repeat, static_cast<int>(i), noise.Steps(level_s, c.steps)));
  }
  return input;
}

// compile_mode eager (baseline) vs jit, jit true_ratio times faster.
inline ReportInput SimPairSweep(const SimCase& c, std::mt19937_64& rng) {
  std::vector<SimVariant> variants = {
      {"compile_mode=eager", {{"compile_mode", "eager"}}, "compile_mode=eager", 0},
      {"compile_mode=jit", {{"compile_mode", "jit"}}, "compile_mode=eager", std::log(c.true_ratio)}};
  return SimSweep(variants, {{"compile_mode", {"eager", "jit"}}}, {{"compile_mode", "eager"}}, c, rng);
}

// compile_mode [eager, jit] x micro_batch [1, 4]: jit true_ratio times faster at both
// micro-batches (so its marginal effect is true_ratio), micro-batch 4 2.5x faster.
inline ReportInput SimGridSweep(const SimCase& c, std::mt19937_64& rng) {
  std::vector<SimVariant> variants;
  for (const std::string mb : {"1", "4"}) {
    for (const std::string mode : {"eager", "jit"}) {
      std::string key = "compile_mode=" + mode + ",micro_batch=" + mb;
      double offset = (mode == "jit" ? std::log(c.true_ratio) : 0) + (mb == "4" ? std::log(2.5) : 0);
      variants.push_back({key, {{"compile_mode", mode}, {"micro_batch", mb}},
                          "compile_mode=eager,micro_batch=" + mb, offset});
    }
  }
  return SimSweep(variants, {{"compile_mode", {"eager", "jit"}}, {"micro_batch", {"1", "4"}}},
                  {{"compile_mode", "eager"}}, c, rng);
}

// What a batch of simulated sweeps gave.
struct SimTally {
  int sweeps = 0;
  int covered = 0;      // the interval contains the truth
  int verdicts = 0;     // faster or slower
  int right_verdicts = 0;  // faster/slower in the true direction
  int unclear = 0;
  double CoverageRate() const { return static_cast<double>(covered) / sweeps; }
  double VerdictRate() const { return static_cast<double>(verdicts) / sweeps; }
  double PowerRate() const { return static_cast<double>(right_verdicts) / sweeps; }
};

inline void Count(SimTally& tally, const RatioFigure& figure, Verdict verdict, double truth) {
  ++tally.sweeps;
  tally.covered += figure.Contains(truth) ? 1 : 0;
  bool decided = verdict == Verdict::kFaster || verdict == Verdict::kSlower;
  tally.verdicts += decided ? 1 : 0;
  tally.unclear += verdict == Verdict::kUnclear ? 1 : 0;
  if (decided && truth != 1.0 && (verdict == Verdict::kFaster) == (truth > 1.0)) ++tally.right_verdicts;
}

inline ReportOptions SimOptions() {
  ReportOptions options;
  options.bootstrap_resamples = 400;  // the within-run bootstrap only (one repeat)
  return options;
}

// Runs `sweeps` simulated sweeps from one seed: one(rng, options, tally) draws a sweep,
// reads its figure and counts it.
template <typename One>
SimTally Simulate(int sweeps, std::uint64_t seed, One one) {
  std::mt19937_64 rng(seed);
  SimTally tally;
  const ReportOptions options = SimOptions();
  for (int i = 0; i < sweeps; ++i) one(rng, options, tally);
  return tally;
}

// The variant's speedup over its counterpart, through BuildReport.
inline SimTally SimulateSpeedup(const SimCase& c, int sweeps, std::uint64_t seed) {
  return Simulate(sweeps, seed, [&](std::mt19937_64& rng, const ReportOptions& options, SimTally& tally) {
    Report report = BuildReport(SimPairSweep(c, rng), options);
    const Comparison& cmp = report.FindVariant("compile_mode=jit")->comparison;
    Count(tally, cmp.speedup, cmp.verdict, c.true_ratio);
  });
}

// The marginal effect of compile_mode=jit over a 2x2 grid, through BuildReport.
inline SimTally SimulateMarginal(const SimCase& c, int sweeps, std::uint64_t seed) {
  return Simulate(sweeps, seed, [&](std::mt19937_64& rng, const ReportOptions& options, SimTally& tally) {
    Report report = BuildReport(SimGridSweep(c, rng), options);
    const MarginalEffect* jit = nullptr;
    for (const MarginalEffect& m : report.marginals) {
      if (m.axis == "compile_mode") jit = &m;
    }
    Count(tally, jit->speedup, jit->verdict, c.true_ratio);
  });
}

// `bakeoff compare`: sweep A and sweep B of the same pair sweep, B's jit true_ratio
// times A's (each sweep drawn with its own noise; c.variant_repeats in B,
// c.counterpart_repeats in A); the change of compile_mode=jit, through CompareSweeps.
inline SimTally SimulateCompare(const SimCase& c, int sweeps, std::uint64_t seed) {
  return Simulate(sweeps, seed, [&](std::mt19937_64& rng, const ReportOptions& options, SimTally& tally) {
    SimCase a = c, b = c;
    a.true_ratio = 1.0;
    a.variant_repeats = a.counterpart_repeats = c.counterpart_repeats;
    b.variant_repeats = b.counterpart_repeats = c.variant_repeats;
    ReportInput in_a = SimPairSweep(a, rng), in_b = SimPairSweep(b, rng);
    in_b.sweep_id = "sim-b";
    SweepComparison cmp = CompareSweeps(in_a, in_b, options);
    for (const CompareRow& row : cmp.rows) {
      if (row.key != "compile_mode=jit") continue;
      using V = CompareRow::Verdict;
      Verdict v = row.verdict == V::kImprovement  ? Verdict::kFaster
                  : row.verdict == V::kRegression ? Verdict::kSlower
                  : row.verdict == V::kNoChange   ? Verdict::kNoMeasurableDifference
                                                  : Verdict::kUnclear;
      Count(tally, row.change, v, c.true_ratio);
    }
  });
}

// Binomial slack: z * sd of a rate p estimated from n sweeps (z = 2.58: two-sided 1%).
inline double Slack(double p, int n) { return 2.58 * std::sqrt(p * (1 - p) / n); }

}  // namespace bakeoff::metrics::testing
