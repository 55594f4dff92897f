#include "metrics/statistics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace bakeoff::metrics {

double Mean(const std::vector<double>& values) {
  assert(!values.empty());
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double SampleStdDev(const std::vector<double>& values) {
  assert(!values.empty());
  if (values.size() < 2) return 0.0;
  double mean = Mean(values);
  double sum_sq = 0;
  for (double v : values) sum_sq += (v - mean) * (v - mean);
  return std::sqrt(sum_sq / static_cast<double>(values.size() - 1));
}

double CoefficientOfVariation(const std::vector<double>& values) {
  double mean = Mean(values);
  return mean == 0 ? 0.0 : SampleStdDev(values) / mean;
}

double Median(std::vector<double> values) { return Percentile(std::move(values), 50.0); }

double Percentile(std::vector<double> values, double p) {
  assert(!values.empty());
  std::sort(values.begin(), values.end());
  double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  std::size_t lo = static_cast<std::size_t>(std::floor(rank));
  std::size_t hi = std::min(lo + 1, values.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return values[lo] + frac * (values[hi] - values[lo]);
}

double GeometricMean(const std::vector<double>& values) {
  assert(!values.empty());
  double sum_log = 0;
  for (double v : values) {
    assert(v > 0);
    sum_log += std::log(v);
  }
  return std::exp(sum_log / static_cast<double>(values.size()));
}

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double NormalQuantile(double p) {
  // Acklam's rational approximation, refined by one Halley step (error < 1e-12).
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549732539343734e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                             2.445134137142996e+00, 3.754408661907416e+00};
  assert(p > 0 && p < 1);
  double x;
  const double p_low = 0.02425;
  if (p < p_low) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - p_low) {
    double q = p - 0.5;
    double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  double e = NormalCdf(x) - p;
  double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

namespace {

// Continued fraction for the regularized incomplete beta function (Numerical Recipes
// betacf), valid for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  const double kTiny = 1e-300;
  double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return h;
}

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                          a * std::log(x) + b * std::log(1 - x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

double StudentTCdf(double t, double df) {
  double tail = 0.5 * RegularizedIncompleteBeta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? 1 - tail : tail;
}

}  // namespace

double StudentTQuantile(double p, double df) {
  assert(p > 0 && p < 1 && df >= 1);
  if (p == 0.5) return 0;
  // The t quantile is further out than the normal one; bracket and bisect.
  double lo = -1, hi = 1;
  while (StudentTCdf(lo, df) > p) lo *= 2;
  while (StudentTCdf(hi, df) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    double mid = 0.5 * (lo + hi);
    (StudentTCdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::size_t DrawIndex(std::mt19937_64& rng, std::size_t n) {
  assert(n > 0);
  // Multiply-shift on the top 32 bits: unbiased enough (n << 2^32) and portable.
  return static_cast<std::size_t>(((rng() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
}

double ExpandedTailProbability(double confidence, int n) {
  double alpha = 1 - confidence;
  if (n <= 1) return alpha / 2;
  double t = StudentTQuantile(1 - alpha / 2, n - 1);
  double factor = std::sqrt(static_cast<double>(n) / (n - 1));
  return NormalCdf(-factor * t);
}

Interval PercentileInterval(std::vector<double> replicates, double tail) {
  assert(!replicates.empty());
  return Interval{Percentile(replicates, 100 * tail), Percentile(replicates, 100 * (1 - tail))};
}

Interval Bootstrap(const std::function<double(std::mt19937_64&)>& replicate, int n_units,
                   const BootstrapOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::vector<double> replicates;
  replicates.reserve(static_cast<std::size_t>(std::max(options.resamples, 1)));
  for (int i = 0; i < std::max(options.resamples, 1); ++i) replicates.push_back(replicate(rng));
  return PercentileInterval(std::move(replicates),
                            ExpandedTailProbability(options.confidence, n_units));
}

namespace {

std::vector<double> Logs(const std::vector<double>& values) {
  std::vector<double> logs;
  logs.reserve(values.size());
  for (double v : values) logs.push_back(std::log(v));
  return logs;
}

double ResampledMean(const std::vector<double>& values, std::mt19937_64& rng) {
  double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) sum += values[DrawIndex(rng, values.size())];
  return sum / static_cast<double>(values.size());
}

double ResampledMedian(const std::vector<double>& values, std::mt19937_64& rng,
                       std::vector<double>& scratch) {
  scratch.resize(values.size());
  for (auto& s : scratch) s = values[DrawIndex(rng, values.size())];
  std::size_t mid = scratch.size() / 2;
  std::nth_element(scratch.begin(), scratch.begin() + mid, scratch.end());
  double upper = scratch[mid];
  if (scratch.size() % 2 == 1) return upper;
  double lower = *std::max_element(scratch.begin(), scratch.begin() + mid);
  return 0.5 * (lower + upper);
}

}  // namespace

RatioEstimate PairedRatio(const std::vector<double>& numerator,
                          const std::vector<double>& denominator,
                          const BootstrapOptions& options) {
  assert(numerator.size() == denominator.size() && !numerator.empty());
  std::vector<double> log_ratios;
  for (std::size_t i = 0; i < numerator.size(); ++i) {
    log_ratios.push_back(std::log(numerator[i] / denominator[i]));
  }
  RatioEstimate estimate{std::exp(Mean(log_ratios)), std::nullopt};
  if (log_ratios.size() >= 2) {
    Interval log_interval = Bootstrap(
        [&](std::mt19937_64& rng) { return ResampledMean(log_ratios, rng); },
        static_cast<int>(log_ratios.size()), options);
    estimate.interval = Interval{std::exp(log_interval.low), std::exp(log_interval.high)};
  }
  return estimate;
}

RatioEstimate UnpairedRatio(const std::vector<double>& numerator,
                            const std::vector<double>& denominator,
                            const BootstrapOptions& options) {
  assert(!numerator.empty() && !denominator.empty());
  std::vector<double> log_num = Logs(numerator), log_den = Logs(denominator);
  RatioEstimate estimate{std::exp(Mean(log_num) - Mean(log_den)), std::nullopt};
  if (log_num.size() >= 2 && log_den.size() >= 2) {
    // The expansion uses the smaller side: its noise dominates the ratio's.
    int n = static_cast<int>(std::min(log_num.size(), log_den.size()));
    Interval log_interval = Bootstrap(
        [&](std::mt19937_64& rng) {
          return ResampledMean(log_num, rng) - ResampledMean(log_den, rng);
        },
        n, options);
    estimate.interval = Interval{std::exp(log_interval.low), std::exp(log_interval.high)};
  }
  return estimate;
}

RatioEstimate StepRatio(double numerator_rate, const std::vector<double>& numerator_steps_s,
                        double denominator_rate,
                        const std::vector<double>& denominator_steps_s,
                        const BootstrapOptions& options) {
  assert(numerator_steps_s.size() >= 2 && denominator_steps_s.size() >= 2);
  double ratio = numerator_rate / denominator_rate;
  double num_median = Median(numerator_steps_s), den_median = Median(denominator_steps_s);
  std::vector<double> scratch;
  Interval interval = Bootstrap(
      [&](std::mt19937_64& rng) {
        double num = num_median / ResampledMedian(numerator_steps_s, rng, scratch);
        double den = den_median / ResampledMedian(denominator_steps_s, rng, scratch);
        return ratio * num / den;
      },
      0, options);
  return RatioEstimate{ratio, interval};
}

std::string BreakEven::ToString() const {
  switch (kind) {
    case Kind::kNever: return "never";
    case Kind::kImmediately: return "immediately";
    case Kind::kAfterSteps: break;
  }
  return std::to_string(static_cast<long long>(std::ceil(steps))) + " steps";
}

BreakEven ComputeBreakEven(double warmup_delta_s, double step_saving_s) {
  if (!(step_saving_s > 0)) return BreakEven{BreakEven::Kind::kNever, 0};
  if (warmup_delta_s <= 0) return BreakEven{BreakEven::Kind::kImmediately, 0};
  return BreakEven{BreakEven::Kind::kAfterSteps, warmup_delta_s / step_saving_s};
}

LossParity ComputeLossParity(const std::vector<std::pair<std::int64_t, double>>& variant,
                             const std::vector<std::pair<std::int64_t, double>>& counterpart) {
  LossParity parity;
  std::size_t i = 0, j = 0;
  while (i < variant.size() && j < counterpart.size()) {
    if (variant[i].first < counterpart[j].first) {
      ++i;
    } else if (counterpart[j].first < variant[i].first) {
      ++j;
    } else {
      double reference = std::fabs(counterpart[j].second);
      double deviation = std::fabs(variant[i].second - counterpart[j].second);
      double relative = reference > 0 ? deviation / reference
                                      : (deviation > 0 ? INFINITY : 0.0);
      if (parity.common_steps == 0 || relative > parity.max_relative_deviation) {
        parity.max_relative_deviation = relative;
        parity.at_step = variant[i].first;
      }
      ++parity.common_steps;
      ++i;
      ++j;
    }
  }
  return parity;
}

int RepeatsToResolve(double sd_log_ratio, double difference) {
  double z = NormalQuantile(0.975) + NormalQuantile(0.80);
  double n = std::pow(z * sd_log_ratio / std::log1p(difference), 2);
  return std::max(2, static_cast<int>(std::ceil(n)));
}

}  // namespace bakeoff::metrics
