#include "metrics/report/statistics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

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

double NormalCdf(double x) { return boost::math::cdf(boost::math::normal_distribution<>(), x); }

double NormalQuantile(double p) {
  assert(p > 0 && p < 1);
  return boost::math::quantile(boost::math::normal_distribution<>(), p);
}

double StudentTQuantile(double p, double df) {
  assert(p > 0 && p < 1 && df > 0);
  return boost::math::quantile(boost::math::students_t_distribution<>(df), p);
}

std::size_t DrawIndex(std::mt19937_64& rng, std::size_t n) {
  assert(n > 0);
  // Multiply-shift on the top 32 bits: unbiased enough (n << 2^32) and portable.
  return static_cast<std::size_t>(((rng() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
}

Interval PercentileInterval(std::vector<double> replicates, double tail) {
  assert(!replicates.empty());
  return Interval{Percentile(replicates, 100 * tail), Percentile(replicates, 100 * (1 - tail))};
}

Interval Bootstrap(const std::function<double(std::mt19937_64&)>& replicate,
                   const BootstrapOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::vector<double> replicates;
  replicates.reserve(static_cast<std::size_t>(std::max(options.resamples, 1)));
  for (int i = 0; i < std::max(options.resamples, 1); ++i) replicates.push_back(replicate(rng));
  return PercentileInterval(std::move(replicates), (1 - options.confidence) / 2);
}

TEstimate WelchContrast(const std::vector<ContrastGroup>& groups, double confidence) {
  assert(!groups.empty());
  TEstimate t;
  double variance = 0, df_denominator = 0;
  for (const ContrastGroup& g : groups) {
    assert(g.values.size() >= 2);
    double n = static_cast<double>(g.values.size());
    double s = SampleStdDev(g.values);
    double term = g.coefficient * g.coefficient * s * s / n;
    t.estimate += g.coefficient * Mean(g.values);
    variance += term;
    df_denominator += term * term / (n - 1);
  }
  t.se = std::sqrt(variance);
  t.interval = Interval{t.estimate, t.estimate};
  if (!(t.se > 0) || !(df_denominator > 0)) return t;
  t.df = variance * variance / df_denominator;
  double q = StudentTQuantile(1 - (1 - confidence) / 2, t.df);
  t.interval = Interval{t.estimate - q * t.se, t.estimate + q * t.se};
  return t;
}

namespace {

std::vector<double> Logs(const std::vector<double>& values) {
  std::vector<double> logs;
  logs.reserve(values.size());
  for (double v : values) logs.push_back(std::log(v));
  return logs;
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

namespace {

RatioEstimate FromLog(const TEstimate& t) {
  return RatioEstimate{std::exp(t.estimate), Interval{std::exp(t.interval.low), std::exp(t.interval.high)},
                       t.df};
}

}  // namespace

RatioEstimate PairedRatio(const std::vector<double>& numerator,
                          const std::vector<double>& denominator, double confidence) {
  assert(numerator.size() == denominator.size() && !numerator.empty());
  std::vector<double> log_ratios;
  for (std::size_t i = 0; i < numerator.size(); ++i) {
    log_ratios.push_back(std::log(numerator[i] / denominator[i]));
  }
  if (log_ratios.size() < 2) return RatioEstimate{std::exp(log_ratios.front()), std::nullopt, std::nullopt};
  return FromLog(WelchContrast({{log_ratios, 1.0}}, confidence));
}

RatioEstimate PairedLogRatios(const std::vector<double>& log_ratios, double confidence) {
  assert(!log_ratios.empty());
  if (log_ratios.size() < 2) return RatioEstimate{std::exp(log_ratios.front()), std::nullopt, std::nullopt};
  return FromLog(WelchContrast({{log_ratios, 1.0}}, confidence));
}

RatioEstimate UnpairedRatio(const std::vector<double>& numerator,
                            const std::vector<double>& denominator, double confidence) {
  assert(!numerator.empty() && !denominator.empty());
  std::vector<double> log_num = Logs(numerator), log_den = Logs(denominator);
  if (log_num.size() < 2 || log_den.size() < 2) {
    return RatioEstimate{std::exp(Mean(log_num) - Mean(log_den)), std::nullopt, std::nullopt};
  }
  return FromLog(WelchContrast({{log_num, 1.0}, {log_den, -1.0}}, confidence));
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
      options);
  return RatioEstimate{ratio, interval, std::nullopt};
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

std::vector<std::pair<std::int64_t, double>> SmoothLossCurve(
    const std::vector<std::pair<std::int64_t, double>>& curve, int window) {
  if (window <= 1) return curve;
  const std::ptrdiff_t half = window / 2, n = static_cast<std::ptrdiff_t>(curve.size());
  std::vector<std::pair<std::int64_t, double>> smooth;
  smooth.reserve(curve.size());
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    double sum = 0;
    int count = 0;
    for (std::ptrdiff_t j = std::max<std::ptrdiff_t>(0, i - half); j <= std::min(n - 1, i + half); ++j) {
      sum += curve[static_cast<std::size_t>(j)].second;
      ++count;
    }
    smooth.emplace_back(curve[static_cast<std::size_t>(i)].first, sum / count);
  }
  return smooth;
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

int RepeatsToResolve(double sd_log_ratio, double difference, double confidence) {
  constexpr int kCap = 1000;
  double effect = std::fabs(std::log1p(difference));
  if (!(effect > 0)) return kCap;
  if (!(sd_log_ratio > 0)) return 2;
  for (int n = 2; n < kCap; ++n) {
    double df = n - 1;
    double t = StudentTQuantile(1 - (1 - confidence) / 2, df) + StudentTQuantile(0.80, df);
    double needed = std::pow(t * sd_log_ratio / effect, 2);
    if (static_cast<double>(n) >= needed) return n;
  }
  return kCap;
}

StepPairing PairSteps(const std::vector<TurnStep>& variant, std::optional<double> variant_tokens_per_step,
                      const std::vector<TurnStep>& counterpart, std::optional<double> counterpart_tokens_per_step,
                      int sides) {
  assert(sides >= 2);
  StepPairing pairing;
  for (const TurnStep& s : variant) pairing.with_turn_variant += s.turn ? 1 : 0;
  for (const TurnStep& s : counterpart) pairing.with_turn_counterpart += s.turn ? 1 : 0;
  auto rate = [](const TurnStep& s, const std::optional<double>& trial_tokens) -> std::optional<double> {
    const std::optional<double> tokens = s.tokens ? s.tokens : trial_tokens;
    if (!tokens || !(*tokens > 0) || !(s.step_s > 0)) return std::nullopt;
    return *tokens / s.step_s;
  };
  std::vector<double> log_ratios;
  const std::size_t common = std::min(variant.size(), counterpart.size());
  for (std::size_t i = 0; i < common; ++i) {
    const TurnStep& v = variant[i];
    const TurnStep& c = counterpart[i];
    if (!v.turn || !c.turn || std::llabs(*v.turn - *c.turn) >= sides) continue;
    const std::optional<double> rv = rate(v, variant_tokens_per_step), rc = rate(c, counterpart_tokens_per_step);
    if (!rv || !rc) continue;
    log_ratios.push_back(std::log(*rv / *rc));
  }
  pairing.paired_steps = static_cast<int>(log_ratios.size());
  pairing.unpaired_steps = static_cast<int>(std::max(variant.size(), counterpart.size())) - pairing.paired_steps;
  if (!log_ratios.empty()) pairing.log_ratio = Median(log_ratios);
  if (log_ratios.size() >= 2) pairing.iqr = Percentile(log_ratios, 75) - Percentile(log_ratios, 25);
  return pairing;
}

PairEstimate EstimatePair(const RepeatOutcome& variant, const RepeatOutcome& counterpart) {
  assert(variant.tokens_per_s && counterpart.tokens_per_s);
  PairEstimate estimate;
  estimate.log_ratio = std::log(*variant.tokens_per_s / *counterpart.tokens_per_s);
  if (variant.lockstep_sides < 2 || counterpart.lockstep_sides < 2) return estimate;
  estimate.steps = PairSteps(variant.steps, variant.tokens_per_step, counterpart.steps, counterpart.tokens_per_step,
                             std::max(variant.lockstep_sides, counterpart.lockstep_sides));
  // Most of the shorter side's steps must pair: a pair whose steps mostly did not take
  // turns together did not run in lockstep, and a handful of step ratios would stand for it.
  const auto shorter = static_cast<int>(std::min(variant.steps.size(), counterpart.steps.size()));
  if (estimate.steps.log_ratio && 2 * estimate.steps.paired_steps >= shorter) {
    estimate.log_ratio = *estimate.steps.log_ratio;
    estimate.basis = PairBasis::kLockstep;
  }
  return estimate;
}

int SequentialLooks(const SequentialDesign& design) {
  return std::max(1, design.max_pairs - design.min_pairs + 1);
}

double SequentialLookConfidence(const SequentialDesign& design) {
  return 1.0 - (1.0 - design.confidence) / SequentialLooks(design);
}

const char* SequentialStopName(SequentialStop stop) {
  switch (stop) {
    case SequentialStop::kContinue: return "continue";
    case SequentialStop::kExcludesOne: return "interval excludes 1";
    case SequentialStop::kNarrow: return "interval narrow enough";
    case SequentialStop::kMaxPairs: return "max pairs reached";
    case SequentialStop::kAllRan: return "every repeat ran";
  }
  return "continue";
}

SequentialDecision SequentialLook(const std::vector<double>& log_ratios, const SequentialDesign& design) {
  SequentialDecision decision;
  decision.pairs = static_cast<int>(log_ratios.size());
  if (log_ratios.empty()) return decision;
  decision.ratio = std::exp(Mean(log_ratios));
  if (log_ratios.size() >= 2) {
    TEstimate t = WelchContrast({{log_ratios, 1.0}}, SequentialLookConfidence(design));
    decision.interval = Interval{std::exp(t.interval.low), std::exp(t.interval.high)};
  }
  if (decision.pairs < design.min_pairs || !decision.interval) return decision;
  const Interval& i = *decision.interval;
  if (!i.Contains(1.0)) {
    decision.stop = SequentialStop::kExcludesOne;
  } else if ((i.high - i.low) / 2 <= design.ci_half_width) {
    decision.stop = SequentialStop::kNarrow;
  } else if (decision.pairs >= design.max_pairs) {
    decision.stop = SequentialStop::kMaxPairs;
  }
  return decision;
}

SequentialDecision SequentialWalk(const std::vector<RepeatPair>& repeats, const SequentialDesign& design) {
  std::vector<double> log_ratios;
  SequentialDecision last = SequentialLook(log_ratios, design);
  std::size_t finished = 0;
  for (const RepeatPair& r : repeats) {
    if (!r.finished) break;
    ++finished;
    if (!r.log_ratio) continue;
    log_ratios.push_back(*r.log_ratio);
    last = SequentialLook(log_ratios, design);
    if (last.stopped()) return last;
  }
  if (finished == repeats.size() && !repeats.empty()) last.stop = SequentialStop::kAllRan;
  return last;
}

std::vector<RepeatPair> RepeatPairs(const std::vector<RepeatOutcome>& variant,
                                    const std::vector<RepeatOutcome>& counterpart) {
  std::vector<RepeatPair> pairs(std::min(variant.size(), counterpart.size()));
  for (std::size_t r = 0; r < pairs.size(); ++r) {
    const RepeatOutcome& v = variant[r];
    const RepeatOutcome& c = counterpart[r];
    pairs[r].finished = v.finished && c.finished;
    if (v.tokens_per_s && c.tokens_per_s) pairs[r].log_ratio = EstimatePair(v, c).log_ratio;
  }
  return pairs;
}

SequentialDecision VariantDecision(const std::vector<SequentialDecision>& decisions) {
  const SequentialDecision* most = &decisions.front();
  for (const SequentialDecision& d : decisions) {
    if (!d.stopped()) return d;
    if (d.pairs > most->pairs) most = &d;
  }
  return *most;
}

}  // namespace bakeoff::metrics
