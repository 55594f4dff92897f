// Seeded simulated sweeps of a machine whose CPU slows down for seconds at a time, for
// the lockstep tests (docs/statistics.md, "Lockstep pairs"): the same sweep run with
// `order: lockstep` (the two sides of a pair take turns step by step, so adjacent steps
// share a slowdown) and `order: interleaved` (the two trials of a pair run one after the
// other, minutes apart, so their slowdowns are independent), read through the real
// BuildReport.
//
// The machine (one CPU per process, bench/validity/README.md): slowdown episodes start at
// random (Poisson, one per 10 s on average), last 2-6 s (uniform) and slow whatever runs
// on the CPU by 20-40% (uniform; overlapping episodes: the larger). About a third of the
// time is slowed. A step of nominal length s starting at t takes s x the slowdown at its
// middle x its own noise (3%, log-normal); each trial also has a process-level factor
// (1%, log-normal). A measured step is 0.5 s, 20 per trial; tokens/s of a trial = tokens
// per step / median step time, as the trainer computes it.
//
// Test-only header; not thread-safe (one generator per simulation).
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/metrics/report/report_simulation.h"

namespace bakeoff::metrics::testing {

// One CPU's slowdown episodes over [0, horizon_s).
class SlowdownTimeline {
 public:
  SlowdownTimeline(double horizon_s, std::mt19937_64& rng) {
    std::exponential_distribution<double> gap(kEpisodesPerSecond);
    std::uniform_real_distribution<double> length(2.0, 6.0), factor(1.2, 1.4);
    // Start early enough that an episode may already be under way at 0.
    for (double t = -6.0 + gap(rng); t < horizon_s; t += gap(rng)) {
      episodes_.push_back({t, t + length(rng), factor(rng)});
    }
  }
  // How much slower a process runs at `t` than on a quiet CPU (>= 1).
  double At(double t) const {
    double slow = 1.0;
    for (const Episode& e : episodes_) {
      if (e.start <= t && t < e.end) slow = std::max(slow, e.factor);
    }
    return slow;
  }

  static constexpr double kEpisodesPerSecond = 0.1;

 private:
  struct Episode {
    double start, end, factor;
  };
  std::vector<Episode> episodes_;
};

struct LockstepCase {
  int repeats = 5;
  std::string order = "lockstep";  // lockstep | interleaved
  double true_ratio = 1.0;         // variant tokens/s over counterpart tokens/s
};

constexpr int kLockstepSteps = 20;
constexpr double kLockstepStepS = 0.5;
constexpr double kLockstepTokens = 4096;

// A succeeded trial of one rank with these measured steps (and turns, in lockstep).
inline TrialInput LockstepSimTrial(std::int64_t id, const std::string& variant, int repeat,
                                   const std::vector<double>& steps,
                                   const std::vector<std::optional<std::int64_t>>& turns) {
  TrialInput t;
  t.id = id;
  t.variant_key = variant;
  t.repeat = repeat;
  t.order_index = static_cast<int>(id);
  t.worker = "w1";
  t.outcome = TrialStanding::FromText("succeeded");
  RankSummary r;
  r.figures.step_s_median = Median(steps);
  r.figures.tokens_per_s = kLockstepTokens / *r.figures.step_s_median;
  r.figures.tokens_per_step = kLockstepTokens;
  r.figures.first_step_s = 1;
  r.figures.warmup_s = 1;
  r.figures.peak_mem_bytes = 1'000'000;
  t.ranks.push_back(r);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    t.steps.push_back(StepSample{static_cast<std::int64_t>(i), steps[i], 2.0, std::nullopt, turns[i]});
  }
  return t;
}

// compile_mode eager (baseline) vs jit, jit true_ratio times faster, on the machine above.
inline ReportInput LockstepSimSweep(const LockstepCase& c, std::mt19937_64& rng) {
  ReportInput input;
  input.sweep_id = "sim";
  input.sweep_name = "simulated";
  input.order = c.order;
  input.baseline = {{"compile_mode", "eager"}};
  input.axes = {{"compile_mode", {"eager", "jit"}}};
  const std::string eager = "compile_mode=eager", jit = "compile_mode=jit";
  input.variants.push_back(VariantInput{eager, {{"compile_mode", "eager"}}, eager, true, false, false});
  input.variants.push_back(VariantInput{jit, {{"compile_mode", "jit"}}, eager, false, false, false});
  std::normal_distribution<double> step_noise(0, 0.03), process_noise(0, 0.01);
  const double nominal[2] = {kLockstepStepS, kLockstepStepS / c.true_ratio};  // eager, jit
  std::int64_t id = 0;
  for (int r = 0; r < c.repeats; ++r) {
    const double process[2] = {std::exp(process_noise(rng)), std::exp(process_noise(rng))};
    std::vector<double> steps[2];
    std::vector<std::optional<std::int64_t>> turns[2];
    if (c.order == "lockstep") {
      // One CPU, the sides taking turns; repeat r even: the baseline first. Two warm-up
      // turns come before the measured ones.
      SlowdownTimeline cpu(4.0 * kLockstepSteps * kLockstepStepS, rng);  // 2 sides, up to 1.4x slow
      const int first = r % 2 == 0 ? 0 : 1;
      double t = 0;
      std::int64_t turn = 2;
      for (int i = 0; i < kLockstepSteps; ++i) {
        for (int k = 0; k < 2; ++k) {
          const int side = (first + k) % 2;
          const double s = nominal[side] * process[side];
          const double took = s * cpu.At(t + s / 2) * std::exp(step_noise(rng));
          steps[side].push_back(took);
          turns[side].push_back(turn++);
          t += took;
        }
      }
    } else {
      // The two trials of the pair minutes apart: each meets its own slowdowns.
      for (int side = 0; side < 2; ++side) {
        SlowdownTimeline cpu(2.0 * kLockstepSteps * kLockstepStepS, rng);
        double t = 0;
        for (int i = 0; i < kLockstepSteps; ++i) {
          const double s = nominal[side] * process[side];
          const double took = s * cpu.At(t + s / 2) * std::exp(step_noise(rng));
          steps[side].push_back(took);
          turns[side].push_back(std::nullopt);
          t += took;
        }
      }
    }
    input.trials.push_back(LockstepSimTrial(++id, eager, r, steps[0], turns[0]));
    input.trials.push_back(LockstepSimTrial(++id, jit, r, steps[1], turns[1]));
  }
  return input;
}

// What the sweeps of one case gave: the usual tally, and per sweep the comparison's sd of
// the pair log ratios and the repeats it says a 5% difference needs.
struct LockstepTally {
  SimTally tally;
  std::vector<double> sd_log_ratio;
  std::vector<double> repeats_needed;
  int lockstep_method = 0;  // sweeps whose interval came from lockstep pairs
};

inline LockstepTally SimulateLockstep(const LockstepCase& c, int sweeps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ReportOptions options = SimOptions();
  LockstepTally out;
  for (int i = 0; i < sweeps; ++i) {
    Report report = BuildReport(LockstepSimSweep(c, rng), options);
    const Comparison& cmp = report.FindVariant("compile_mode=jit")->comparison;
    Count(out.tally, cmp.speedup, cmp.verdict, c.true_ratio);
    if (cmp.sd_log_ratio) out.sd_log_ratio.push_back(*cmp.sd_log_ratio);
    if (cmp.repeats_needed) out.repeats_needed.push_back(*cmp.repeats_needed);
    out.lockstep_method += cmp.method == IntervalMethod::kLockstepPairs ? 1 : 0;
  }
  return out;
}

}  // namespace bakeoff::metrics::testing
