// Statistics behind the report's verdicts: order statistics, geometric means, Student-t
// and Welch intervals on log throughputs, the seeded percentile bootstrap (within-run
// step intervals only), break-even steps, loss parity and the number of repeats needed
// to resolve a difference. Every
// formula is written out, with a worked example, in docs/statistics.md.
//
// Pure functions of their arguments: no I/O, no global state; a bootstrap draws only
// from the generator it is given, so the same seed gives the same interval on every
// platform (std::mt19937_64 is fully specified; indices are drawn without the
// implementation-defined std::uniform_int_distribution). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace bakeoff::metrics {

// REQUIRES for every function taking `values`: non-empty unless stated.
double Mean(const std::vector<double>& values);
// Sample standard deviation (n - 1 in the denominator); 0 for a single value.
double SampleStdDev(const std::vector<double>& values);
// Standard deviation / mean of the values (0 when the mean is 0).
double CoefficientOfVariation(const std::vector<double>& values);
// The middle value, or the mean of the two middle values.
double Median(std::vector<double> values);
// Linear interpolation between closest ranks (Hyndman-Fan type 7, the default of
// numpy and R): p in [0, 100].
double Percentile(std::vector<double> values, double p);
// exp(mean(log x)). REQUIRES: every value > 0.
double GeometricMean(const std::vector<double>& values);

// Standard normal CDF and quantiles of the normal and Student's t distributions, from
// Boost.Math (header-only). p in (0, 1); df > 0 and may be fractional (Welch).
double NormalCdf(double x);
double NormalQuantile(double p);
double StudentTQuantile(double p, double df);

struct Interval {
  double low = 0;
  double high = 0;
  bool Contains(double x) const { return low <= x && x <= high; }
};

struct BootstrapOptions {
  int resamples = 2000;         // replicates drawn
  std::uint64_t seed = 20261130;
  double confidence = 0.95;
};

// A uniform index in [0, n) from `rng`, identical on every platform. REQUIRES: n > 0.
std::size_t DrawIndex(std::mt19937_64& rng, std::size_t n);

// Percentile interval of `replicates` with tail probability `tail` on each side.
Interval PercentileInterval(std::vector<double> replicates, double tail);

// Generic seeded bootstrap: calls `replicate(rng)` options.resamples times (each call
// draws one resample and returns the statistic) and returns the plain percentile
// interval at options.confidence.
Interval Bootstrap(const std::function<double(std::mt19937_64&)>& replicate,
                   const BootstrapOptions& options);

// A t-based interval for a linear combination of group means, L = sum_i c_i mean(x_i),
// with the groups independent (Welch): se^2 = sum_i c_i^2 s_i^2 / n_i and the
// Welch-Satterthwaite degrees of freedom df = se^4 / sum_i (c_i^2 s_i^2 / n_i)^2 / (n_i - 1).
// One group with c = 1 is the one-sample t interval (df = n - 1).
struct ContrastGroup {
  std::vector<double> values;  // REQUIRES: >= 2 values
  double coefficient = 1;
};
struct TEstimate {
  double estimate = 0;  // L
  double se = 0;        // its standard error
  double df = 0;        // degrees of freedom (0 when se == 0: every group constant)
  Interval interval;    // L -+ t_{1 - alpha/2, df} * se; [L, L] when se == 0
};
TEstimate WelchContrast(const std::vector<ContrastGroup>& groups, double confidence);

// A ratio with its confidence interval (absent when it cannot be estimated).
struct RatioEstimate {
  double ratio = 0;
  std::optional<Interval> interval;
  std::optional<double> df;  // of the t interval (paired, unpaired)
};
// Paired samples: ratio = exp(mean_i ln(numerator[i] / denominator[i])) (the geometric
// mean of the pair ratios); the interval is the Student-t interval on the pair log
// ratios, df = n - 1, exponentiated. REQUIRES: equal sizes >= 1, all values > 0. The
// interval needs >= 2 pairs.
RatioEstimate PairedRatio(const std::vector<double>& numerator,
                          const std::vector<double>& denominator, double confidence);
// The same from the pairs' log ratios d_r themselves (lockstep pairs estimate each d_r
// from their steps): exp(mean d) with the t interval over the d_r. REQUIRES: >= 1 value.
RatioEstimate PairedLogRatios(const std::vector<double>& log_ratios, double confidence);
// Independent samples: ratio = GeometricMean(numerator) / GeometricMean(denominator);
// the interval is Welch's on the difference of mean logs (WelchContrast with +1, -1),
// exponentiated. REQUIRES: sizes >= 1, all values > 0. The interval needs >= 2 values
// on each side.
RatioEstimate UnpairedRatio(const std::vector<double>& numerator,
                            const std::vector<double>& denominator, double confidence);
// One trial each, resampled over its measured steps: the ratio of throughputs
// (numerator_rate / denominator_rate), where each rate is rescaled in a replicate by
// median(steps) / median(resampled steps); plain percentile interval. This sees only
// the noise within the two runs, never the run-to-run variation, so it is reported as
// "within-run only" and never gives a verdict (docs/statistics.md).
// REQUIRES: both step vectors >= 2 values > 0.
RatioEstimate StepRatio(double numerator_rate, const std::vector<double>& numerator_steps_s,
                        double denominator_rate,
                        const std::vector<double>& denominator_steps_s,
                        const BootstrapOptions& options);

// Break-even steps: after how many steps a variant with a longer warm-up but a
// shorter step has caught up with its counterpart.
struct BreakEven {
  enum class Kind { kNever, kImmediately, kAfterSteps };
  Kind kind = Kind::kNever;
  double steps = 0;  // kAfterSteps only
  std::string ToString() const;
};
// warmup_delta_s = variant warm-up - counterpart warm-up; step_saving_s = counterpart
// step time - variant step time (for the same tokens). Not faster -> kNever; faster and
// warm-up not longer -> kImmediately; else warmup_delta_s / step_saving_s steps.
BreakEven ComputeBreakEven(double warmup_delta_s, double step_saving_s);

// Loss parity between two mean loss curves given as (step, loss) points sorted by
// step: the largest |variant - counterpart| / |counterpart| over the steps both have.
struct LossParity {
  std::size_t common_steps = 0;
  double max_relative_deviation = 0;  // valid when common_steps > 0
  std::int64_t at_step = 0;
};
// A loss curve smoothed by a centred moving mean over `window` points (the points within
// window / 2 positions on either side, fewer at the ends), so that step-to-step noise of
// small models does not read as a deviation. window <= 1 returns the curve unchanged.
std::vector<std::pair<std::int64_t, double>> SmoothLossCurve(
    const std::vector<std::pair<std::int64_t, double>>& curve, int window);

LossParity ComputeLossParity(const std::vector<std::pair<std::int64_t, double>>& variant,
                             const std::vector<std::pair<std::int64_t, double>>& counterpart);

// Repeats per variant (pairs) needed to detect a relative difference `difference` (0.05
// for 5%) with the report's two-sided t interval at `confidence` and 80% power, when one
// repeat's log-throughput ratio has standard deviation `sd_log_ratio`: the smallest
// n >= 2 with n >= ((t_{1-alpha/2, n-1} + t_{0.80, n-1}) * sd / ln(1 + d))^2, capped at
// 1000. Uses t quantiles, not z: with few repeats the interval is wider than the normal
// approximation says.
int RepeatsToResolve(double sd_log_ratio, double difference, double confidence = 0.95);

// ---- Lockstep pairs (docs/statistics.md, "Lockstep pairs") ----
//
// In a lockstep group (docs/lockstep.md) the sides take turns one measured step at a
// time, so the i-th measured step of one side ran next to the i-th of the other: a
// slowdown of the machine lasting seconds falls on both. A pair's log ratio is then the
// median over its step pairs of ln((tokens_v / t_v) / (tokens_c / t_c)).

// One measured step of a trial: the slowest rank's seconds, the step's global tokens
// (when its rows reported them) and its turn number (absent when the side did not take
// turns).
struct TurnStep {
  double step_s = 0;
  std::optional<double> tokens;
  std::optional<std::int64_t> turn;
};

// What pairing the steps of one pair gave.
struct StepPairing {
  int paired_steps = 0;    // step pairs whose turns were adjacent
  int unpaired_steps = 0;  // the other steps of the longer side
  int with_turn_variant = 0;      // the variant's steps that carry a turn
  int with_turn_counterpart = 0;  // the counterpart's
  std::optional<double> log_ratio;  // median of the per-step log ratios (>= 1 paired step)
  std::optional<double> iqr;        // their interquartile range (>= 2 paired steps)
};

// Pairs the i-th step of `variant` with the i-th step of `counterpart` (each in step
// order). A step pair counts when both steps carry a turn, |T_v - T_c| < sides (the two
// turns fall in one rotation of the group), both times are > 0 and both sides' tokens
// are known (a step's own, else its trial's `*_tokens_per_step`, > 0). REQUIRES:
// sides >= 2.
StepPairing PairSteps(const std::vector<TurnStep>& variant, std::optional<double> variant_tokens_per_step,
                      const std::vector<TurnStep>& counterpart, std::optional<double> counterpart_tokens_per_step,
                      int sides);

// One repeat's trial, as far as it is known: what the adaptive walk and the report's
// pairs are computed from.
struct RepeatOutcome {
  bool finished = false;               // it has an outcome
  std::optional<double> tokens_per_s;  // when it succeeded with a positive figure
  // Lockstep sweeps only (0 otherwise): the number of sides of the trial's group (its
  // baseline and every variant paired with it), and its measured steps in step order
  // with the trial's tokens per step (the steps' own tokens stand first).
  int lockstep_sides = 0;
  std::vector<TurnStep> steps;
  std::optional<double> tokens_per_step;
};

// How one pair's log ratio was estimated.
enum class PairBasis {
  kLockstep,    // the median of its per-step log ratios
  kWholeTrial,  // ln(tokens/s ratio) of the whole trials: not a lockstep pair, or its
                // steps did not pair (no turns: the group ran interleaved, or a side did
                // not take turns)
};
struct PairEstimate {
  double log_ratio = 0;
  PairBasis basis = PairBasis::kWholeTrial;
  StepPairing steps;  // lockstep sweeps: what pairing the steps gave
};
// The log ratio of repeat r's pair, one rule for the report and the coordinator's
// adaptive walk: when both trials are of a lockstep group and at least half of the
// shorter side's measured steps pair (PairSteps, at least one), the median of the
// per-step log ratios; otherwise ln(variant tokens/s / counterpart tokens/s).
// REQUIRES: both tokens_per_s set and > 0.
PairEstimate EstimatePair(const RepeatOutcome& variant, const RepeatOutcome& counterpart);

// ---- Adaptive repeats: the sequential rule (docs/statistics.md, "Adaptive repeats") ----
//
// A variant of an adaptive sweep is looked at after each complete pair n = min..max (the
// repeat r of the variant and of its baseline counterpart both succeeded). Each look's
// interval is the paired t interval on the log ratios at the per-look confidence
// 1 - (1 - confidence) / looks, looks = max - min + 1 (Bonferroni alpha spending: the
// looks together are wrong with probability at most 1 - confidence, so the false-verdict
// rate of the whole procedure and the coverage of the interval where it stops hold
// whatever the stopping rule). A look stops the variant when its interval excludes 1,
// when the interval on the ratio is narrow enough ((high - low) / 2 <= ci_half_width),
// or at n == max.
struct SequentialDesign {
  int min_pairs = 3;           // REQUIRES: >= 2
  int max_pairs = 20;          // REQUIRES: >= min_pairs
  double ci_half_width = 0.02; // REQUIRES: in (0, 1)
  double confidence = 0.95;    // of the whole procedure
};
// max - min + 1.
int SequentialLooks(const SequentialDesign& design);
// 1 - (1 - confidence) / SequentialLooks(design): the confidence of every look's interval
// and of the interval the report shows for a variant of an adaptive sweep.
double SequentialLookConfidence(const SequentialDesign& design);

enum class SequentialStop {
  kContinue,     // fewer than min pairs, or the look says run another pair
  kExcludesOne,  // the interval excludes 1: a verdict
  kNarrow,       // the interval is within +-ci_half_width: no more pairs needed
  kMaxPairs,     // n == max
  kAllRan,       // every repeat finished with fewer than max complete pairs (failures)
};
// "continue", "interval excludes 1", "interval narrow enough", "max pairs reached",
// "every repeat ran".
const char* SequentialStopName(SequentialStop stop);

struct SequentialDecision {
  SequentialStop stop = SequentialStop::kContinue;
  int pairs = 0;                     // complete pairs behind the decision
  double ratio = 0;                  // exp(mean log ratio); valid when pairs > 0
  std::optional<Interval> interval;  // at SequentialLookConfidence; from 2 pairs
  bool stopped() const { return stop != SequentialStop::kContinue; }
};

// One look at the pairs given (n = log_ratios.size()): continue below min_pairs,
// else the rule above.
SequentialDecision SequentialLook(const std::vector<double>& log_ratios, const SequentialDesign& design);

// One repeat of a variant and its counterpart, as far as it is known.
struct RepeatPair {
  bool finished = false;              // both trials of the repeat have an outcome
  std::optional<double> log_ratio;    // EstimatePair's when both succeeded
};
// Repeat r of a variant against repeat r of the other side of a comparison (both
// max_pairs long): finished when both are; the log ratio (EstimatePair: a lockstep pair's
// from its steps) when both have a figure.
std::vector<RepeatPair> RepeatPairs(const std::vector<RepeatOutcome>& variant,
                                    const std::vector<RepeatOutcome>& counterpart);

// The looks in repeat order: walks the leading finished repeats (stops at the first
// unfinished one, so the decision does not depend on which trials happened to finish
// first), adding each complete pair and looking at every n >= min_pairs; returns the
// first look that stops. When every one of `repeats` (max_pairs entries, the trials
// expanded) has finished without a stop: kAllRan. Otherwise kContinue with the pairs so
// far. A pure function of the outcomes, so a restarted coordinator decides the same.
SequentialDecision SequentialWalk(const std::vector<RepeatPair>& repeats, const SequentialDesign& design);

// A variant's decision from the comparisons it is a side of (adaptive repeats stop a
// variant once every comparison the answer reports with it has stopped): the first that
// continues, else the one that ran the most pairs. REQUIRES: decisions not empty.
SequentialDecision VariantDecision(const std::vector<SequentialDecision>& decisions);

}  // namespace bakeoff::metrics
