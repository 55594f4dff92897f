// Statistics behind the report's verdicts: order statistics, geometric means, the
// seeded percentile bootstrap (with Hesterberg's small-sample expansion), break-even
// steps, loss parity and the number of repeats needed to resolve a difference. Every
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

// Standard normal CDF and its inverse (p in (0, 1)).
double NormalCdf(double x);
double NormalQuantile(double p);
// Quantile of Student's t with `df` degrees of freedom (df >= 1), p in (0, 1).
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

// The tail probability used for a percentile interval at `confidence` built from a
// sample of `n` independent units. For n >= 2 it is Hesterberg's "expanded percentile"
// level, alpha'/2 = Phi(-sqrt(n / (n - 1)) * t_{1 - alpha/2, n - 1}), which corrects the
// plain percentile interval's narrowness for small samples; n <= 1 (or 0, "do not
// expand") gives the plain alpha/2.
double ExpandedTailProbability(double confidence, int n);

// Percentile interval of `replicates` with tail probability `tail` on each side.
Interval PercentileInterval(std::vector<double> replicates, double tail);

// Generic bootstrap: calls `replicate(rng)` options.resamples times (each call draws
// one resample and returns the statistic) and returns the expanded percentile interval
// for `n_units` independent units (0: plain percentile).
Interval Bootstrap(const std::function<double(std::mt19937_64&)>& replicate, int n_units,
                   const BootstrapOptions& options);

// Ratio of paired samples: the geometric mean of numerator[i] / denominator[i], with a
// bootstrap interval over the pairs. REQUIRES: equal sizes >= 1, all values > 0.
struct RatioEstimate {
  double ratio = 0;
  std::optional<Interval> interval;  // absent when it cannot be estimated (one unit)
};
RatioEstimate PairedRatio(const std::vector<double>& numerator,
                          const std::vector<double>& denominator,
                          const BootstrapOptions& options);
// Independent samples: GeometricMean(numerator) / GeometricMean(denominator), each
// resampled on its own. REQUIRES: sizes >= 1, all values > 0. The interval needs >= 2
// values on each side.
RatioEstimate UnpairedRatio(const std::vector<double>& numerator,
                            const std::vector<double>& denominator,
                            const BootstrapOptions& options);
// One trial each, resampled over its measured steps: the ratio of throughputs
// (numerator_rate / denominator_rate), where each rate is rescaled in a replicate by
// median(steps) / median(resampled steps). The interval is the plain percentile one:
// a bootstrapped median is already conservative (it takes few distinct values), and
// simulation shows ~96% coverage at 10-50 steps without expansion.
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
LossParity ComputeLossParity(const std::vector<std::pair<std::int64_t, double>>& variant,
                             const std::vector<std::pair<std::int64_t, double>>& counterpart);

// Repeats per variant needed to detect a relative difference `difference` (0.05 for 5%)
// with a two-sided 5% test at 80% power, when one repeat's log-throughput ratio has
// standard deviation `sd_log_ratio`: ceil(((z_0.975 + z_0.80) * sd / ln(1 + d))^2), at
// least 2.
int RepeatsToResolve(double sd_log_ratio, double difference);

}  // namespace bakeoff::metrics
