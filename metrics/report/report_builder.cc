#include "metrics/report/report_builder.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <set>
#include <sstream>

#include "experiments/sweep/answer_comparisons.h"
#include "experiments/sweep/axis_rules.h"
#include "metrics/report/adaptive_repeats.h"
#include "metrics/report/statistics.h"

namespace bakeoff::metrics {
namespace {

constexpr const char* kMicroBatchAxis = "micro_batch";

std::string ScalarText(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

std::optional<double> ParseNumber(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return value;
}

bool SameValue(const std::string& requested, const std::string& applied) {
  if (requested == applied) return true;
  auto a = ParseNumber(requested), b = ParseNumber(applied);
  if (a && b) return std::fabs(*a - *b) <= 1e-9 * std::max(1.0, std::fabs(*a));
  return false;
}

// What differs between the environments of two sides' trials: for cpu_model,
// torch_version, gpu_model any two distinct reported values over all the trials, for
// cpu_flags the flags not every trial has, and the set of hosts of one side against the
// other's. Unreported (null) values are not a difference. "" when nothing differs.
std::string EnvironmentDifference(const std::vector<const TrialView*>& a,
                                  const std::vector<const TrialView*>& b) {
  std::vector<const TrialView*> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::string out;
  auto add = [&](const std::string& text) { out += (out.empty() ? "" : "; ") + text; };
  for (const char* key : {"cpu_model", "torch_version", "gpu_model"}) {
    std::set<std::string> values;
    for (const TrialView* t : all) {
      if (!t->environment.is_object()) continue;
      auto it = t->environment.find(key);
      if (it != t->environment.end() && !it->is_null()) values.insert(ScalarText(*it));
    }
    if (values.size() < 2) continue;
    std::string joined;
    for (const std::string& v : values) joined += (joined.empty() ? "" : " vs ") + v;
    add(std::string(key) + " " + joined);
  }
  std::set<std::string> every_flag, common;
  bool first = true;
  for (const TrialView* t : all) {
    if (!t->environment.is_object()) continue;
    auto it = t->environment.find("cpu_flags");
    if (it == t->environment.end() || !it->is_array()) continue;
    std::set<std::string> flags;
    for (const auto& f : *it) flags.insert(ScalarText(f));
    every_flag.insert(flags.begin(), flags.end());
    if (first) {
      common = flags;
      first = false;
    } else {
      std::set<std::string> both;
      std::set_intersection(common.begin(), common.end(), flags.begin(), flags.end(),
                            std::inserter(both, both.begin()));
      common = std::move(both);
    }
  }
  std::string partial;
  for (const std::string& f : every_flag) {
    if (!common.count(f)) partial += (partial.empty() ? "" : " ") + f;
  }
  if (!partial.empty()) add("cpu_flags not on every host: " + partial);
  auto hosts = [](const std::vector<const TrialView*>& side) {
    std::set<std::string> set;
    for (const TrialView* t : side) {
      if (!t->environment.is_object()) continue;
      auto it = t->environment.find("host");
      if (it != t->environment.end() && it->is_string()) set.insert(it->get<std::string>());
    }
    return set;
  };
  std::set<std::string> ha = hosts(a), hb = hosts(b);
  if (!ha.empty() && !hb.empty() && ha != hb) {
    auto join = [](const std::set<std::string>& set) {
      std::string text;
      for (const std::string& h : set) text += (text.empty() ? "" : ",") + h;
      return text;
    };
    add("hosts " + join(ha) + " vs " + join(hb));
  }
  return out;
}

// Everything the comparisons need about one variant's succeeded trials.
struct Side {
  const VariantReport* report = nullptr;
  std::vector<const TrialView*> trials;                // succeeded, with a throughput
  std::vector<std::vector<double>> steps;              // measured step_s per trial
  // Per trial of `trials`, what its pair's estimate is computed from (EstimatePair); with
  // the sides of the variant's lockstep group in a lockstep sweep (0 otherwise).
  std::vector<RepeatOutcome> outcomes;
  int lockstep_sides = 0;
  std::vector<const TrialView*> all;                   // every trial, whatever its outcome
};

struct RatioResult {
  RatioFigure figure;
  IntervalMethod method = IntervalMethod::kNone;
  int pairs = 0;
  std::optional<double> df;
  std::optional<double> sd_log_ratio;
  // Lockstep sweeps: each repeat's pair, those estimated from their steps, and the median
  // of their per-step IQRs.
  std::vector<LockstepPair> lockstep_pairs;
  int pairs_in_lockstep = 0;
  std::optional<double> within_pair_iqr;
};

BootstrapOptions ToBootstrap(const ReportOptions& options) {
  return BootstrapOptions{options.bootstrap_resamples, options.seed, options.confidence};
}

RatioFigure ToFigure(const RatioEstimate& estimate) {
  RatioFigure figure;
  figure.value = estimate.ratio;
  if (estimate.interval) {
    figure.low = estimate.interval->low;
    figure.high = estimate.interval->high;
  }
  return figure;
}

// Only an interval over repeats gives a verdict; it is "faster"/"slower" when it lies
// wholly above/below 1.0.
Verdict VerdictOf(const RatioFigure& figure, IntervalMethod method) {
  if (!GivesVerdict(method) || !figure.low || !figure.high) return Verdict::kUnclear;
  if (*figure.low > 1.0) return Verdict::kFaster;
  if (*figure.high < 1.0) return Verdict::kSlower;
  return Verdict::kNoMeasurableDifference;
}

std::vector<double> Throughputs(const Side& side) {
  std::vector<double> values;
  for (const TrialView* t : side.trials) values.push_back(*t->tokens_per_s);
  return values;
}

std::vector<double> PooledSteps(const Side& side) {
  std::vector<double> pooled;
  for (const auto& steps : side.steps) {
    for (double s : steps) {
      if (s > 0) pooled.push_back(s);
    }
  }
  return pooled;
}

std::vector<double> LogsOf(const std::vector<double>& values) {
  std::vector<double> logs;
  for (double v : values) logs.push_back(std::log(v));
  return logs;
}

// "counterpart oom (CUDA out of memory)": where a trial stands, for an unpaired pair.
std::string Standing(const char* side, const TrialView* t, int repeat) {
  if (t == nullptr) return std::string("no ") + side + " trial at repeat " + std::to_string(repeat);
  if (t->outcome.Succeeded()) return std::string(side) + " succeeded without a tokens/s figure";
  return std::string(side) + " " + t->outcome.Text() + (t->reason.empty() ? "" : " (" + t->reason + ")");
}

// Why a lockstep pair's steps did not pair, so that it stands on its whole trials.
std::string WholeTrialNote(const StepPairing& steps) {
  if (steps.with_turn_variant == 0 && steps.with_turn_counterpart == 0) {
    return "no turns on either side's steps (the group did not run in lockstep)";
  }
  if (steps.with_turn_variant == 0) return "the variant's steps carry no turn (it did not take turns)";
  if (steps.with_turn_counterpart == 0) return "the counterpart's steps carry no turn (it did not take turns)";
  return "only " + std::to_string(steps.paired_steps) + " of its steps had adjacent turns";
}

// Lockstep sweeps: every repeat of either side, in repeat order, with its pair's estimate
// (each pair of succeeded trials) or why it has none; fills `log_ratios` with the d_r.
std::vector<LockstepPair> LockstepPairs(const Side& variant, const Side& counterpart, std::vector<double>& log_ratios) {
  std::map<int, const TrialView*> any_v, any_c;
  for (const TrialView* t : variant.all) any_v[t->repeat] = t;
  for (const TrialView* t : counterpart.all) any_c[t->repeat] = t;
  std::map<int, std::size_t> ok_v, ok_c;
  for (std::size_t i = 0; i < variant.trials.size(); ++i) ok_v[variant.trials[i]->repeat] = i;
  for (std::size_t i = 0; i < counterpart.trials.size(); ++i) ok_c[counterpart.trials[i]->repeat] = i;
  std::set<int> repeats;
  for (const auto& [r, i] : ok_v) repeats.insert(r);
  for (const auto& [r, i] : ok_c) repeats.insert(r);
  std::vector<LockstepPair> pairs;
  for (int r : repeats) {
    LockstepPair pair;
    pair.repeat = r;
    auto v = ok_v.find(r), c = ok_c.find(r);
    if (v == ok_v.end() || c == ok_c.end()) {
      pair.basis = LockstepPair::Basis::kUnpaired;
      // The side without a succeeded trial, and where its trial stands.
      const bool variant_missing = v == ok_v.end();
      const std::map<int, const TrialView*>& side = variant_missing ? any_v : any_c;
      auto missing = side.find(r);
      pair.note = Standing(variant_missing ? "variant" : "counterpart",
                           missing == side.end() ? nullptr : missing->second, r);
      pairs.push_back(std::move(pair));
      continue;
    }
    PairEstimate e = EstimatePair(variant.outcomes[v->second], counterpart.outcomes[c->second]);
    log_ratios.push_back(e.log_ratio);
    pair.ratio = std::exp(e.log_ratio);
    pair.paired_steps = e.steps.paired_steps;
    pair.unpaired_steps = e.steps.unpaired_steps;
    pair.step_iqr = e.steps.iqr;
    if (e.basis == PairBasis::kWholeTrial) {
      pair.basis = LockstepPair::Basis::kWholeTrial;
      pair.note = WholeTrialNote(e.steps);
    }
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

// Speedup of `variant` over `counterpart` (tokens/s ratio), choosing the interval
// method as docs/statistics.md describes: `interleaved` when the order pairs trials by
// repeat (interleaved or lockstep); lockstep pairs when both sides are of a lockstep
// group. REQUIRES: both sides have >= 1 trial.
RatioResult EstimateRatio(const Side& variant, const Side& counterpart, bool interleaved,
                          const ReportOptions& options) {
  RatioResult result;
  if (interleaved && variant.lockstep_sides > 0 && counterpart.lockstep_sides > 0) {
    std::vector<double> log_ratios;
    result.lockstep_pairs = LockstepPairs(variant, counterpart, log_ratios);
    std::vector<double> iqrs;
    for (const LockstepPair& p : result.lockstep_pairs) {
      if (p.basis != LockstepPair::Basis::kLockstep) continue;
      ++result.pairs_in_lockstep;
      if (p.step_iqr) iqrs.push_back(*p.step_iqr);
    }
    if (!iqrs.empty()) result.within_pair_iqr = Median(iqrs);
    if (log_ratios.size() >= 2) {
      RatioEstimate estimate = PairedLogRatios(log_ratios, options.confidence);
      result.figure = ToFigure(estimate);
      result.df = estimate.df;
      result.method = IntervalMethod::kLockstepPairs;
      result.pairs = static_cast<int>(log_ratios.size());
      result.sd_log_ratio = SampleStdDev(log_ratios);
      return result;
    }
  }
  if (interleaved) {
    // Pairs are matched by repeat number, never by list position: a repeat that failed
    // on one side leaves its partner unpaired.
    std::map<int, double> by_repeat;
    for (const TrialView* t : counterpart.trials) by_repeat[t->repeat] = *t->tokens_per_s;
    std::vector<double> num, den;
    for (const TrialView* t : variant.trials) {
      auto it = by_repeat.find(t->repeat);
      if (it == by_repeat.end()) continue;
      num.push_back(*t->tokens_per_s);
      den.push_back(it->second);
    }
    if (num.size() >= 2) {
      RatioEstimate estimate = PairedRatio(num, den, options.confidence);
      result.figure = ToFigure(estimate);
      result.df = estimate.df;
      result.method = IntervalMethod::kPairedRepeats;
      result.pairs = static_cast<int>(num.size());
      std::vector<double> log_ratios;
      for (std::size_t i = 0; i < num.size(); ++i) log_ratios.push_back(std::log(num[i] / den[i]));
      result.sd_log_ratio = SampleStdDev(log_ratios);
      return result;
    }
  }
  std::vector<double> num = Throughputs(variant), den = Throughputs(counterpart);
  if (num.size() >= 2 && den.size() >= 2) {
    RatioEstimate estimate = UnpairedRatio(num, den, options.confidence);
    result.figure = ToFigure(estimate);
    result.df = estimate.df;
    result.method = IntervalMethod::kUnpairedRepeats;
    double sv = SampleStdDev(LogsOf(num)), sc = SampleStdDev(LogsOf(den));
    result.sd_log_ratio = std::sqrt(sv * sv + sc * sc);
    return result;
  }
  std::vector<double> num_steps = PooledSteps(variant), den_steps = PooledSteps(counterpart);
  double num_rate = GeometricMean(num), den_rate = GeometricMean(den);
  if (num_steps.size() >= 2 && den_steps.size() >= 2) {
    result.figure =
        ToFigure(StepRatio(num_rate, num_steps, den_rate, den_steps, ToBootstrap(options)));
    result.method = IntervalMethod::kMeasuredSteps;
    return result;
  }
  result.figure.value = num_rate / den_rate;
  return result;
}

TrialView MakeTrialView(const TrialInput& trial, const VariantInput* variant,
                        const ReportOptions& options) {
  TrialView view;
  view.id = trial.id;
  view.variant_key = trial.variant_key;
  view.repeat = trial.repeat;
  view.order_index = trial.order_index;
  view.worker = trial.worker;
  view.outcome = trial.outcome;
  view.reason = trial.reason;
  view.applied = trial.applied;
  if (trial.applied.is_object()) {
    auto state = trial.applied.find("compile_cache_state");
    if (state != trial.applied.end() && state->is_string()) view.compile_cache = state->get<std::string>();
  }
  view.environment = trial.environment;
  if (!trial.ranks.empty()) {
    // Ranks step together, so the slowest rank sets the pace and the largest holds the
    // peak that decides whether a configuration fits.
    double tps = INFINITY, step = 0, first = 0, warm = 0;
    std::int64_t peak = 0;
    for (const RankSummary& r : trial.ranks) {
      const protocol::SummaryEvent& f = r.figures;
      if (f.tokens_per_s.value_or(0) > 0) tps = std::min(tps, *f.tokens_per_s);
      step = std::max(step, f.step_s_median.value_or(0));
      first = std::max(first, f.first_step_s.value_or(0));
      warm = std::max(warm, f.warmup_s.value_or(0));
      peak = std::max(peak, f.peak_mem_bytes.value_or(0));
    }
    if (std::isfinite(tps)) view.tokens_per_s = tps;
    if (step > 0) view.step_s_median = step;
    view.first_step_s = first;
    view.warmup_s = warm;
    view.peak_mem_bytes = peak;
  }
  std::vector<double> steps;
  for (const StepSample& s : trial.steps) {
    if (s.step_s > 0) steps.push_back(s.step_s);
  }
  if (steps.size() >= 2) {
    view.step_cv = CoefficientOfVariation(steps);
    view.noisy = *view.step_cv > options.noisy_cv_threshold;
  }
  if (variant != nullptr && trial.outcome.Succeeded()) {
    view.fallback_reason = FallbackReason(variant->params, trial.applied);
    view.fell_back = !view.fallback_reason.empty();
  }
  return view;
}

std::string OutcomeSummary(const VariantReport& v) {
  std::ostringstream out;
  bool first = true;
  for (const auto& [outcome, count] : v.outcome_counts) {
    if (outcome == protocol::OutcomeName(protocol::Outcome::kSucceeded)) continue;
    out << (first ? "" : ", ") << outcome << " x" << count;
    first = false;
  }
  if (!v.reasons.empty()) out << " (" << v.reasons.front() << ")";
  return out.str();
}

std::string Percent(double fraction) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << fraction * 100 << "%";
  return out.str();
}

}  // namespace

std::string FallbackReason(const std::map<std::string, std::string>& params,
                           const nlohmann::json& applied) {
  if (!applied.is_object()) return "";
  for (const char* flag : {"fell_back", "fallback"}) {
    auto it = applied.find(flag);
    if (it == applied.end()) continue;
    if (it->is_boolean() && it->get<bool>()) {
      auto why = applied.find("fallback_reason");
      return why != applied.end() && why->is_string() ? why->get<std::string>()
                                                      : std::string(flag) + " reported";
    }
    if (it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
  }
  for (const auto& [name, requested] : params) {
    // "auto" asks the trainer to choose; the evidence records what it chose.
    if (requested == "auto") continue;
    auto it = applied.find(name);
    if (it == applied.end() || it->is_object() || it->is_array() || it->is_null()) continue;
    std::string got = ScalarText(*it);
    if (!SameValue(requested, got)) {
      return "requested " + name + "=" + requested + " but applied " + name + "=" + got;
    }
  }
  return "";
}

std::string SettingKey(const std::vector<AxisInput>& axes,
                       const std::map<std::string, std::string>& params,
                       const std::string& skip_axis) {
  std::vector<std::string> axis_order;
  for (const AxisInput& axis : axes) axis_order.push_back(axis.name);
  return spec::SettingKey(axis_order, params, skip_axis);
}

namespace {

// The comparisons the answer reports (spec::AnswerComparisons), on the report's variants.
std::vector<spec::AnswerComparison> AnswerComparisonsOf(const ReportInput& input, const Report& report) {
  std::vector<std::string> axis_order;
  for (const AxisInput& axis : input.axes) axis_order.push_back(axis.name);
  std::vector<spec::ComparedVariant> variants;
  for (const VariantReport& v : report.variants) variants.push_back({v.key, v.params, v.counterpart_key});
  return spec::AnswerComparisons(axis_order, input.baseline, variants);
}

// The comparisons of `comparisons` that `key` is a side of, each with its own decision
// (walk.by_comparison, in the same order), named from `key`'s side.
std::vector<AdaptiveComparison> AdaptiveComparisonsOf(const std::string& key,
                                                      const std::vector<spec::AnswerComparison>& comparisons,
                                                      const AdaptiveWalk& walk) {
  std::vector<AdaptiveComparison> mine;
  for (std::size_t i = 0; i < comparisons.size() && i < walk.by_comparison.size(); ++i) {
    const spec::AnswerComparison& c = comparisons[i];
    if (c.variant_key != key && c.counterpart_key != key) continue;
    const bool variant_side = c.variant_key == key;
    const SequentialDecision& d = walk.by_comparison[i];
    AdaptiveComparison& a = mine.emplace_back();
    if (c.axis.empty()) {
      a.against = variant_side ? c.counterpart_key : c.variant_key;
    } else {
      a.against = c.axis + "=" + (variant_side ? c.reference : c.value);
      a.held = c.held;
    }
    a.stopped = d.stopped();
    a.pairs = d.pairs;
    a.reason = d.stopped() ? SequentialStopName(d.stop) : "still running";
  }
  return mine;
}

bool CancelledByAdaptiveRepeats(const TrialView& t) {
  return t.outcome.Is(protocol::Outcome::kCancelled) && t.reason.rfind(kAdaptiveRepeatsReason, 0) == 0;
}

// Adaptive repeats: each compared variant's stop (the coordinator's rule on the same
// outcomes: a variant stops once every comparison of the answer it is a side of has
// stopped) and what the design saved against running every variant to max.
void AddAdaptiveRepeats(const ReportInput& input, const SequentialDesign& design,
                        const std::map<std::string, Side>& sides, Report& report) {
  AdaptiveSavings savings;
  savings.design = AdaptiveDesignInput{design.min_pairs, design.max_pairs, design.ci_half_width};
  savings.look_confidence = SequentialLookConfidence(design);
  std::map<std::string, std::vector<const TrialView*>> by_variant;
  std::vector<double> all_durations;
  std::map<std::string, std::vector<double>> durations;
  std::map<std::int64_t, const TrialInput*> raw;
  for (const TrialInput& t : input.trials) raw[t.id] = &t;
  for (const TrialView& t : report.trials) {
    by_variant[t.variant_key].push_back(&t);
    auto it = raw.find(t.id);
    if (it != raw.end() && it->second->duration_s && !CancelledByAdaptiveRepeats(t)) {
      durations[t.variant_key].push_back(*it->second->duration_s);
      all_durations.push_back(*it->second->duration_s);
    }
  }
  std::map<std::string, int> world_size;
  for (const VariantInput& v : input.variants) world_size[v.key] = v.world_size;
  // Whether a variant is the compared side of a comparison whose throughput was compared
  // (those get a row), and per variant the decisions of the comparisons it is a side of.
  std::set<std::string> compared;
  for (const VariantReport& v : report.variants) {
    if (v.comparison.status == Comparison::Status::kCompared) compared.insert(v.key);
  }
  for (const AxisComparison& a : report.axis_comparisons) {
    if (a.comparison.status == Comparison::Status::kCompared) compared.insert(a.variant_key);
  }
  // The pairs' log ratios are the comparisons' own (a lockstep pair's from its steps).
  std::map<std::int64_t, const RepeatOutcome*> outcome_of;
  for (const auto& [key, side] : sides) {
    for (std::size_t i = 0; i < side.trials.size(); ++i) outcome_of[side.trials[i]->id] = &side.outcomes[i];
  }
  std::vector<RepeatTrial> repeats;
  for (const TrialView& t : report.trials) {
    RepeatTrial& r = repeats.emplace_back();
    r.variant_key = t.variant_key;
    r.repeat = t.repeat;
    r.finished = t.outcome.Finished();
    if (!t.outcome.Succeeded() || !t.tokens_per_s || !(*t.tokens_per_s > 0)) continue;
    r.tokens_per_s = t.tokens_per_s;
    auto outcome = outcome_of.find(t.id);
    if (outcome == outcome_of.end()) continue;
    r.lockstep_sides = outcome->second->lockstep_sides;
    r.steps = outcome->second->steps;
    r.tokens_per_step = outcome->second->tokens_per_step;
  }
  const std::vector<spec::AnswerComparison> comparisons = AnswerComparisonsOf(input, report);
  const AdaptiveWalk walk = WalkComparisons(comparisons, repeats, design);
  double device_seconds = 0;
  bool any_duration = false;
  for (VariantReport& v : report.variants) {
    if (v.excluded) continue;
    savings.trials_max += design.max_pairs;
    int not_run = 0;
    for (const TrialView* t : by_variant[v.key]) not_run += CancelledByAdaptiveRepeats(*t) ? 1 : 0;
    savings.trials_not_run += not_run;
    if (not_run > 0) {
      const std::vector<double>& mine = durations[v.key];
      const std::vector<double>& pool = mine.empty() ? all_durations : mine;
      if (!pool.empty()) {
        any_duration = true;
        auto ws = world_size.find(v.key);
        device_seconds += not_run * Mean(pool) * (ws == world_size.end() ? 1 : ws->second);
      }
    }
    auto decisions = walk.decisions.find(v.key);
    if (!compared.count(v.key) || decisions == walk.decisions.end() || decisions->second.empty()) continue;
    SequentialDecision decision = VariantDecision(decisions->second);
    AdaptiveVariant a;
    a.stopped = decision.stopped();
    a.pairs = decision.pairs;
    a.max_pairs = design.max_pairs;
    a.reason = decision.stopped() ? SequentialStopName(decision.stop) : "still running";
    a.trials_not_run = not_run;
    a.comparisons = AdaptiveComparisonsOf(v.key, comparisons, walk);
    v.adaptive = a;
  }
  if (any_duration) savings.device_seconds_not_run = device_seconds;
  report.adaptive = savings;
}

// The sweep's own facts, copied as the renderers show them.
Report ReportHeading(const ReportInput& input, const ReportOptions& options) {
  Report report;
  report.sweep_id = input.sweep_id;
  report.sweep_name = input.sweep_name;
  report.question = input.question;
  report.order = input.order;
  report.baseline = input.baseline;
  report.axes = input.axes;
  report.options = options;
  return report;
}

// The trials in run order and, per variant, the indices of its trials in that order.
struct RunOrder {
  std::vector<const TrialInput*> trials;
  std::map<std::string, std::vector<std::size_t>> of_variant;
};

// One view per trial in run order (report.trials), the workers that ran them, and how
// many trials there are and have finished.
RunOrder AddTrialViews(const ReportInput& input, const ReportOptions& options, Report& report) {
  std::map<std::string, const VariantInput*> variant_inputs;
  for (const VariantInput& v : input.variants) variant_inputs[v.key] = &v;
  RunOrder order;
  for (const TrialInput& t : input.trials) order.trials.push_back(&t);
  std::stable_sort(order.trials.begin(), order.trials.end(),
                   [](const TrialInput* a, const TrialInput* b) { return a->order_index < b->order_index; });
  std::set<std::string> workers;
  for (const TrialInput* t : order.trials) {
    auto it = variant_inputs.find(t->variant_key);
    report.trials.push_back(
        MakeTrialView(*t, it == variant_inputs.end() ? nullptr : it->second, options));
    order.of_variant[t->variant_key].push_back(report.trials.size() - 1);
    if (!t->worker.empty()) workers.insert(t->worker);
    ++report.trials_total;
    if (t->outcome.Finished()) ++report.trials_finished;
  }
  report.workers.assign(workers.begin(), workers.end());
  report.spread_across_workers = workers.size() > 1;
  return order;
}

// The means of the succeeded trials with a throughput (`ok`): geometric for tokens/s,
// arithmetic for times, MFU (rank 0's) and communication (the slowest rank's).
void AddMeanFigures(const std::vector<const TrialView*>& ok, const std::vector<std::size_t>& indices,
                    const RunOrder& order, VariantReport& v) {
  if (ok.empty()) return;
  std::vector<double> tps, step, first, warm, mfu, comm;
  for (const TrialView* t : ok) {
    tps.push_back(*t->tokens_per_s);
    if (t->step_s_median) step.push_back(*t->step_s_median);
    if (t->first_step_s) first.push_back(*t->first_step_s);
    if (t->warmup_s) warm.push_back(*t->warmup_s);
  }
  for (std::size_t index : indices) {
    const TrialInput& raw = *order.trials[index];
    if (!raw.outcome.Succeeded() || raw.ranks.empty()) continue;
    mfu.push_back(raw.ranks.front().figures.mfu.value_or(0));
    double c = 0;
    for (const RankSummary& r : raw.ranks) c = std::max(c, r.figures.comm_s_per_step.value_or(0));
    comm.push_back(c);
  }
  for (const char* cache : {"cold", "warm", "mixed"}) {
    CacheWarmup w;
    w.cache = cache;
    std::vector<double> cache_first, cache_warm;
    for (const TrialView* t : ok) {
      if (t->compile_cache != cache) continue;
      ++w.trials;
      if (t->first_step_s) cache_first.push_back(*t->first_step_s);
      if (t->warmup_s) cache_warm.push_back(*t->warmup_s);
    }
    if (w.trials == 0) continue;
    if (!cache_first.empty()) w.first_step_s = Mean(cache_first);
    if (!cache_warm.empty()) w.warmup_s = Mean(cache_warm);
    v.by_cache.push_back(w);
  }
  v.tokens_per_s = GeometricMean(tps);
  if (!step.empty()) v.step_s_median = Mean(step);
  if (!first.empty()) v.first_step_s = Mean(first);
  if (!warm.empty()) v.warmup_s = Mean(warm);
  if (!mfu.empty()) v.mfu = Mean(mfu);
  if (!comm.empty()) v.comm_s_per_step = Mean(comm);
}

// The memory breakdown of the rank holding the variant's peak, in the trial that peaked.
void AddMemoryBreakdown(const TrialInput* peak_trial, VariantReport& v) {
  if (peak_trial == nullptr) return;
  const RankSummary* largest = &peak_trial->ranks.front();
  for (const RankSummary& r : peak_trial->ranks) {
    if (r.figures.peak_mem_bytes.value_or(0) > largest->figures.peak_mem_bytes.value_or(0)) largest = &r;
  }
  v.frozen_bytes = largest->figures.frozen_bytes;
  v.trainable_bytes = largest->figures.trainable_bytes;
  v.grad_bytes = largest->figures.grad_bytes;
  v.optimizer_bytes = largest->figures.optimizer_bytes;
}

// The distribution of every measured step of the variant's succeeded trials.
void AddStepDistribution(const std::vector<double>& all_steps, VariantReport& v) {
  if (all_steps.empty()) return;
  StepDistribution& d = v.step_times;
  d.count = all_steps.size();
  d.min = *std::min_element(all_steps.begin(), all_steps.end());
  d.max = *std::max_element(all_steps.begin(), all_steps.end());
  d.p10 = Percentile(all_steps, 10);
  d.p25 = Percentile(all_steps, 25);
  d.p50 = Percentile(all_steps, 50);
  d.p75 = Percentile(all_steps, 75);
  d.p90 = Percentile(all_steps, 90);
}

// One variant's figures from its trials (`indices` into report.trials): outcomes and
// reasons, fallback, evidence, peak memory, means, step times and loss curve; `side`
// gets what its comparisons need.
// What a succeeded trial's pair estimate is computed from (EstimatePair): its tokens/s,
// and in a lockstep group of `lockstep_sides` sides (0: not lockstep) its measured steps
// and tokens per step (a rank's reported tokens_per_step, else the slowest rank's tokens/s
// times its median step, as the trainer computes tokens/s).
RepeatOutcome OutcomeOf(const TrialView& view, const TrialInput& raw, int lockstep_sides) {
  RepeatOutcome outcome{true, view.tokens_per_s, lockstep_sides, {}, std::nullopt};
  if (lockstep_sides == 0) return outcome;
  for (const StepSample& s : raw.steps) {
    outcome.steps.push_back(
        TurnStep{s.step_s, s.tokens ? std::optional<double>(static_cast<double>(*s.tokens)) : std::nullopt, s.turn});
  }
  for (const RankSummary& r : raw.ranks) {
    if (r.figures.tokens_per_step && *r.figures.tokens_per_step > 0) {
      outcome.tokens_per_step = r.figures.tokens_per_step;
      return outcome;
    }
  }
  for (const RankSummary& r : raw.ranks) {
    const protocol::SummaryEvent& f = r.figures;
    if (view.tokens_per_s && f.tokens_per_s == *view.tokens_per_s && f.step_s_median.value_or(0) > 0) {
      outcome.tokens_per_step = *f.tokens_per_s * *f.step_s_median;
    }
  }
  return outcome;
}

// Adds one succeeded trial's compile evidence (its summary's `compile`) to its variant's:
// the per-trial figures as running means, the cache lookups summed.
void AddCompileEvidence(const nlohmann::json& evidence, std::optional<CompileEvidence>& into) {
  if (!evidence.is_object() || !evidence.contains("graphs")) return;
  auto number = [&evidence](const char* key) {
    auto it = evidence.find(key);
    return it != evidence.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  if (!into) into.emplace();
  CompileEvidence& c = *into;
  const double n = ++c.trials;
  c.graphs += (number("graphs") - c.graphs) / n;
  c.graph_breaks += (number("graph_breaks") - c.graph_breaks) / n;
  c.recompiles += (number("recompiles") - c.recompiles) / n;
  c.cache_hits += static_cast<std::int64_t>(number("inductor_cache_hits"));
  c.cache_misses += static_cast<std::int64_t>(number("inductor_cache_misses"));
  if (auto reasons = evidence.find("graph_break_reasons"); reasons != evidence.end() && reasons->is_array()) {
    for (const auto& r : *reasons) {
      if (!r.is_string() || c.break_reasons.size() >= 5) continue;
      const std::string text = r.get<std::string>();
      if (std::find(c.break_reasons.begin(), c.break_reasons.end(), text) == c.break_reasons.end()) {
        c.break_reasons.push_back(text);
      }
    }
  }
}

VariantReport SummariseVariant(const VariantInput& in, const std::vector<std::size_t>& indices,
                               const RunOrder& order, const Report& report, int lockstep_sides, Side& side) {
  VariantReport v;
  v.key = in.key;
  v.params = in.params;
  v.counterpart_key = in.counterpart_key;
  v.is_baseline = in.is_baseline || (!in.counterpart_key.empty() && in.counterpart_key == in.key);
  v.counterpart_excluded = in.counterpart_excluded;
  v.excluded = in.excluded;
  std::vector<const TrialView*> ok;
  std::map<std::int64_t, std::vector<double>> losses;
  std::vector<double> all_steps;
  std::set<std::string> variant_workers;
  std::vector<std::vector<double>> step_lists;
  const TrialInput* peak_trial = nullptr;
  for (std::size_t index : indices) {
    const TrialView& t = report.trials[index];
    const TrialInput& raw = *order.trials[index];
    side.all.push_back(&t);
    ++v.trials;
    ++v.outcome_counts[t.outcome.Text()];
    if (!t.worker.empty()) variant_workers.insert(t.worker);
    if (!t.outcome.Finished()) ++v.unfinished;
    if (!t.outcome.Succeeded()) {
      if (!t.reason.empty() &&
          std::find(v.reasons.begin(), v.reasons.end(), t.reason) == v.reasons.end()) {
        v.reasons.push_back(t.reason);
      }
      continue;
    }
    ++v.succeeded;
    if (t.noisy) ++v.noisy_trials;
    if (t.fell_back && !v.fell_back) {
      v.fell_back = true;
      v.fallback_reason = t.fallback_reason;
    }
    if (v.applied.is_null() && !t.applied.is_null()) v.applied = t.applied;
    AddCompileEvidence(raw.compile, v.compile);
    if (t.environment.is_object() &&
        std::find(v.environments.begin(), v.environments.end(), t.environment) == v.environments.end()) {
      v.environments.push_back(t.environment);
    }
    if (t.peak_mem_bytes && (!v.peak_mem_bytes || *t.peak_mem_bytes > *v.peak_mem_bytes)) {
      v.peak_mem_bytes = t.peak_mem_bytes;
      peak_trial = &raw;
    }
    std::vector<double> steps;
    for (const StepSample& s : raw.steps) {
      if (s.step_s > 0) {
        steps.push_back(s.step_s);
        all_steps.push_back(s.step_s);
      }
      if (s.loss && std::isfinite(*s.loss)) losses[s.step].push_back(*s.loss);
    }
    if (t.tokens_per_s) {
      ok.push_back(&t);
      step_lists.push_back(std::move(steps));
      side.outcomes.push_back(OutcomeOf(t, raw, lockstep_sides));
    }
  }
  v.workers.assign(variant_workers.begin(), variant_workers.end());
  AddMeanFigures(ok, indices, order, v);
  AddMemoryBreakdown(peak_trial, v);
  AddStepDistribution(all_steps, v);
  for (const auto& [step, values] : losses) v.loss_curve.emplace_back(step, Mean(values));
  side.trials = std::move(ok);
  side.steps = std::move(step_lists);
  side.lockstep_sides = lockstep_sides;
  return v;
}

// Whether the variant has no counterpart to be set against (then c says why).
bool NoCounterpart(const VariantReport& v, const VariantReport* cp, Comparison& c) {
  using S = Comparison::Status;
  if (v.excluded) {
    c.status = S::kExcluded;
    c.note = "excluded by a rule of the sweep: not run";
    return true;
  }
  if (v.is_baseline) {
    c.status = S::kIsBaseline;
    c.note = "baseline";
    return true;
  }
  if (v.counterpart_excluded) {
    c.status = S::kCounterpartExcluded;
    c.note = "baseline counterpart " + v.counterpart_key +
             " was excluded by a rule of the sweep: not compared";
    return true;
  }
  if (v.counterpart_key.empty() || cp == nullptr) {
    c.status = S::kNoCounterpart;
    c.note = v.counterpart_key.empty()
                 ? "no baseline counterpart in this sweep"
                 : "baseline counterpart " + v.counterpart_key + " is not in this sweep";
    return true;
  }
  return false;
}

// Whether `v` cannot be set against `cp` for what was run or excluded (then c says why);
// memory facts do not need a comparison and come after.
bool NotComparable(const VariantReport& v, const VariantReport& counterpart, const Side& vs,
                   const Side& cs, Comparison& c) {
  using S = Comparison::Status;
  const VariantReport* cp = &counterpart;
  if (cp->excluded) {
    c.status = S::kCounterpartExcluded;
    c.note = "baseline counterpart " + cp->key + " was excluded by a rule: not compared";
    return true;
  }
  if ((vs.trials.empty() && v.unfinished > 0) || (cs.trials.empty() && cp->unfinished > 0)) {
    c.status = S::kPending;
    c.note = "trials not finished yet";
    return true;
  }
  if (vs.trials.empty() && cs.trials.empty()) {
    c.status = S::kBothFailed;
    c.note = "neither ran: " + OutcomeSummary(v) + "; counterpart " + OutcomeSummary(*cp);
    return true;
  }
  if (vs.trials.empty()) {
    c.status = S::kVariantFailed;
    c.note = "fails where its counterpart succeeds: " + OutcomeSummary(v);
    return true;
  }
  if (cs.trials.empty()) {
    c.status = S::kCounterpartFailed;
    c.note = "succeeds where its counterpart fails: " + OutcomeSummary(*cp);
    return true;
  }
  return false;
}

// Peak memory of both sides, relative change and compression ratio.
void AddMemoryComparison(const VariantReport& v, const VariantReport& cp, Comparison& c) {
  c.variant_peak_bytes = v.peak_mem_bytes;
  c.counterpart_peak_bytes = cp.peak_mem_bytes;
  if (v.peak_mem_bytes && cp.peak_mem_bytes && *v.peak_mem_bytes > 0 && *cp.peak_mem_bytes > 0) {
    c.memory_relative =
        static_cast<double>(*v.peak_mem_bytes) / static_cast<double>(*cp.peak_mem_bytes) - 1;
    c.compression_ratio =
        static_cast<double>(*cp.peak_mem_bytes) / static_cast<double>(*v.peak_mem_bytes);
  }
}

// Whether a fallback on either side leaves the speedup meaningless (then c says which).
bool FellBack(const VariantReport& v, const VariantReport& cp, Comparison& c) {
  if (v.fell_back) {
    c.status = Comparison::Status::kFellBack;
    c.note = "fell back (" + v.fallback_reason + "): not compared";
    return true;
  }
  if (cp.fell_back) {
    c.status = Comparison::Status::kCounterpartFellBack;
    c.note = "counterpart fell back (" + cp.fallback_reason + "): not compared";
    return true;
  }
  return false;
}

std::string WorkerConfound(const Side& vs, const Side& cs, IntervalMethod method);

// The speedup with its interval and verdict, and the repeats a clear verdict needs.
void AddSpeedup(const VariantReport& v, const VariantReport& cp, const Side& vs, const Side& cs,
                bool interleaved, const ReportOptions& compare_options, const ReportOptions& options,
                Comparison& c) {
  c.status = Comparison::Status::kCompared;
  RatioResult ratio = EstimateRatio(vs, cs, interleaved, compare_options);
  c.speedup = ratio.figure;
  c.method = ratio.method;
  c.pairs = ratio.pairs;
  c.variant_trials = static_cast<int>(vs.trials.size());
  c.counterpart_trials = static_cast<int>(cs.trials.size());
  c.df = ratio.df;
  c.lockstep_pairs = std::move(ratio.lockstep_pairs);
  c.pairs_in_lockstep = ratio.pairs_in_lockstep;
  c.within_pair_iqr = ratio.within_pair_iqr;
  c.verdict = VerdictOf(c.speedup, c.method);
  if (c.verdict != Verdict::kUnclear) {
    c.no_measurable_difference = c.verdict == Verdict::kNoMeasurableDifference;
  }
  if (ratio.sd_log_ratio) {
    c.sd_log_ratio = ratio.sd_log_ratio;
    c.repeats_needed = RepeatsToResolve(*ratio.sd_log_ratio, options.resolve_difference,
                                        options.confidence);
  } else {
    // One repeat: the run-to-run noise is unknown, so plan with the assumed one.
    c.repeats_needed = RepeatsToResolve(options.assumed_sd_log_ratio,
                                        options.resolve_difference, options.confidence);
    c.repeats_needed_assumed = true;
  }
  c.worker_confound = WorkerConfound(vs, cs, c.method);
  if (!c.worker_confound.empty()) {
    c.verdict = Verdict::kUnclear;
    c.no_measurable_difference.reset();
  }
  c.needs_more_repeats = c.verdict == Verdict::kUnclear ||
                         *c.repeats_needed > std::min(v.trials, cp.trials);
}

// How the trials a speedup compares are spread over workers; "" when both sides ran on
// the workers in the same proportions, so that a worker's speed cancels in the ratio
// (the coordinator's balanced placement keeps each pair on one worker). Interleaved
// comparisons count their matched pairs only, as the interval does.
std::string WorkerConfound(const Side& vs, const Side& cs, IntervalMethod method) {
  std::map<std::string, int> mine, theirs;
  if (PairsByRepeat(method)) {
    std::map<int, const TrialView*> by_repeat;
    for (const TrialView* t : cs.trials) by_repeat[t->repeat] = t;
    for (const TrialView* t : vs.trials) {
      auto it = by_repeat.find(t->repeat);
      if (it == by_repeat.end()) continue;
      ++mine[t->worker];
      ++theirs[it->second->worker];
    }
  } else {
    for (const TrialView* t : vs.trials) ++mine[t->worker];
    for (const TrialView* t : cs.trials) ++theirs[t->worker];
  }
  int n_mine = 0, n_theirs = 0;
  for (const auto& [w, n] : mine) n_mine += n;
  for (const auto& [w, n] : theirs) n_theirs += n;
  if (n_mine == 0 || n_theirs == 0) return "";
  bool balanced = mine.size() == theirs.size();
  for (const auto& [w, n] : mine) {
    auto it = theirs.find(w);
    // Same share of each side's trials on every worker (n/N == m/M, in integers).
    balanced = balanced && it != theirs.end() && n * n_theirs == it->second * n_mine;
  }
  if (balanced) return "";
  auto list = [](const std::map<std::string, int>& counts) {
    std::string out;
    for (const auto& [w, n] : counts) {
      out += (out.empty() ? "" : ", ") + (w.empty() ? std::string("?") : w) + " x" + std::to_string(n);
    }
    return out;
  };
  return "variant on " + list(mine) + "; counterpart on " + list(theirs);
}

// Warm-up: a trial without warm-up steps pays its compilation in the first step.
std::optional<double> WarmupCost(const std::optional<double>& warmup_s,
                                 const std::optional<double>& first_step_s) {
  if (warmup_s && *warmup_s > 0) return warmup_s;
  return first_step_s;
}

// The step after which a warm-up difference is paid back by the comparison's speedup.
// A break-even is a claim about a speedup: only one the interval backs gets a step count
// (a 1.15x [0.93-1.43] has none: its saving may be zero or negative).
void SetBreakEven(const Comparison& c, const std::optional<double>& warmup_delta_s,
                  std::optional<std::string>* text, std::optional<double>* steps) {
  if (!warmup_delta_s || !c.step_saving_s) return;
  if (c.verdict == Verdict::kFaster) {
    BreakEven be = ComputeBreakEven(*warmup_delta_s, *c.step_saving_s);
    *text = be.ToString();
    if (be.kind == BreakEven::Kind::kAfterSteps) *steps = be.steps;
  } else {
    *text = c.verdict == Verdict::kSlower ? "never" : "not significant";
  }
}

// The warm-up difference and the step after which the variant has paid it back, over
// all its trials and per compile-cache state (a cold and a warm compile apart). A state
// is set against the same state of a counterpart that compiles too (cold with cold, warm
// with warm: a mean over both states is a warm-up nobody pays), and against every trial
// of one that does not (its warm-up does not depend on a compile cache).
void AddBreakEven(const VariantReport& v, const VariantReport& cp, const Side& cs, Comparison& c) {
  if (v.first_step_s && cp.first_step_s) c.first_step_delta_s = *v.first_step_s - *cp.first_step_s;
  auto wv = WarmupCost(v.warmup_s, v.first_step_s), wc = WarmupCost(cp.warmup_s, cp.first_step_s);
  if (wv && wc) c.warmup_delta_s = *wv - *wc;
  if (cp.step_s_median && c.speedup.value > 0) {
    c.step_saving_s = *cp.step_s_median * (1 - 1 / c.speedup.value);
  }
  SetBreakEven(c, c.warmup_delta_s, &c.break_even, &c.break_even_steps);
  const bool counterpart_compiles = !cp.by_cache.empty();
  for (const CacheWarmup& w : v.by_cache) {
    CompileCost cost;
    cost.cache = w.cache;
    cost.trials = w.trials;
    std::optional<double> against = wc;
    cost.counterpart_trials = static_cast<int>(cs.trials.size());
    if (counterpart_compiles) {
      auto same = std::find_if(cp.by_cache.begin(), cp.by_cache.end(),
                               [&](const CacheWarmup& k) { return k.cache == w.cache; });
      against = same == cp.by_cache.end() ? std::nullopt : WarmupCost(same->warmup_s, same->first_step_s);
      cost.counterpart_trials = same == cp.by_cache.end() ? 0 : same->trials;
      if (same == cp.by_cache.end()) cost.note = "counterpart has no " + w.cache + " trial to compare with";
    }
    auto cost_s = WarmupCost(w.warmup_s, w.first_step_s);
    if (cost_s && against) cost.warmup_delta_s = *cost_s - *against;
    SetBreakEven(c, cost.warmup_delta_s, &cost.break_even, &cost.break_even_steps);
    c.compile_costs.push_back(cost);
  }
}

// Whether the loss curves should match (no axis changing the math differs) and whether
// they deviate by more than the threshold.
void AddLossParity(const VariantReport& v, const VariantReport& cp, const ReportOptions& options,
                   Comparison& c) {
  LossParity parity =
      ComputeLossParity(SmoothLossCurve(v.loss_curve, options.loss_smoothing_window),
                        SmoothLossCurve(cp.loss_curve, options.loss_smoothing_window));
  std::vector<std::string> changing = spec::AxesChangingTheMath(v.params, cp.params);
  c.loss_parity_expected = changing.empty();
  for (const std::string& axis : changing) {
    c.loss_parity_note += (c.loss_parity_note.empty() ? "" : ", ") + axis;
  }
  if (!changing.empty()) c.loss_parity_note = "not expected to match: " + c.loss_parity_note + " differs";
  c.loss_common_steps = parity.common_steps;
  if (parity.common_steps > 0) {
    c.loss_max_deviation = parity.max_relative_deviation;
    c.loss_at_step = parity.at_step;
    c.loss_flagged = c.loss_parity_expected &&
                     parity.max_relative_deviation > options.loss_parity_threshold;
  }
}

// The speedup on each worker that ran the variant, where its counterpart also ran there.
void AddWorkerEffects(const Side& vs, const Side& cs, Comparison& c) {
  std::set<std::string> both;
  for (const TrialView* t : vs.trials) both.insert(t->worker);
  for (const std::string& w : both) {
    std::vector<double> num, den;
    for (const TrialView* t : vs.trials) {
      if (t->worker == w) num.push_back(*t->tokens_per_s);
    }
    for (const TrialView* t : cs.trials) {
      if (t->worker == w) den.push_back(*t->tokens_per_s);
    }
    if (num.empty() || den.empty()) continue;
    c.by_worker.push_back(WorkerEffect{w, GeometricMean(num) / GeometricMean(den),
                                       static_cast<int>(num.size()),
                                       static_cast<int>(den.size())});
  }
}

// The comparison of `v` against `cp`: what ran, memory, then (unless either fell back)
// speedup, break-even, loss parity, environments and per-worker effects.
Comparison Compare(const VariantReport& v, const VariantReport& cp, std::map<std::string, Side>& sides,
                   bool interleaved, const ReportOptions& compare_options,
                   const ReportOptions& options, bool spread_across_workers) {
  Comparison c;
  const Side& vs = sides[v.key];
  const Side& cs = sides[cp.key];
  if (NotComparable(v, cp, vs, cs, c)) return c;
  // Memory and outcome facts hold even when the throughput is not compared.
  AddMemoryComparison(v, cp, c);
  if (FellBack(v, cp, c)) return c;
  AddSpeedup(v, cp, vs, cs, interleaved, compare_options, options, c);
  AddBreakEven(v, cp, cs, c);
  AddLossParity(v, cp, options, c);
  c.environment_difference = EnvironmentDifference(vs.trials, cs.trials);
  if (spread_across_workers) AddWorkerEffects(vs, cs, c);
  return c;
}

// The comparison of every variant against its baseline counterpart. With adaptive
// repeats every interval is the sequential rule's per-look interval, so that it covers
// where the rule stopped.
void AddComparisons(const std::optional<SequentialDesign>& design, bool interleaved,
                    const ReportOptions& options, std::map<std::string, Side>& sides, Report& report) {
  ReportOptions compare_options = options;
  if (design) compare_options.confidence = SequentialLookConfidence(*design);
  for (VariantReport& v : report.variants) {
    const VariantReport* cp = report.FindVariant(v.counterpart_key);
    if (NoCounterpart(v, cp, v.comparison)) continue;
    v.comparison = Compare(v, *cp, sides, interleaved, compare_options, options,
                           report.spread_across_workers);
  }
}

// With a baseline over two or more varying axes, each axis on its own: every variant
// whose value of the axis is not the baseline's, against the same variant with only that
// axis at the baseline's value (compile modes within each ZeRO stage, and ZeRO stages
// within each compile mode). The intervals are at the same confidence as the
// counterpart comparisons (the per-look one with adaptive repeats).
void AddAxisComparisons(const ReportInput& input, const std::optional<SequentialDesign>& design,
                        bool interleaved, const ReportOptions& options,
                        std::map<std::string, Side>& sides, Report& report) {
  std::vector<spec::AnswerComparison> pairs = AnswerComparisonsOf(input, report);
  if (pairs.empty() || pairs.front().axis.empty()) return;
  ReportOptions compare_options = options;
  if (design) compare_options.confidence = SequentialLookConfidence(*design);
  for (const spec::AnswerComparison& p : pairs) {
    const VariantReport* v = report.FindVariant(p.variant_key);
    const VariantReport* cp = report.FindVariant(p.counterpart_key);
    if (!v || !cp || v->excluded) continue;
    report.axis_comparisons.push_back(
        AxisComparison{p.axis, p.value, p.reference, p.held, p.variant_key, p.counterpart_key,
                       Compare(*v, *cp, sides, interleaved, compare_options, options, report.spread_across_workers)});
  }
}

// "Noise here: ..." from the workload's calibration, against the repeats the sweep ran.
std::string CalibrationCallout(const Report& report) {
  const CalibrationInput& c = *report.calibration;
  int ran = 0;
  for (const VariantReport& v : report.variants) ran = std::max(ran, v.trials);
  char text[512];
  snprintf(text, sizeof(text),
           "Noise on this machine (calibration %lld, %d A/A pairs of %s): one pair's ratio varies by "
           "about +-%.1f%% (sd %.3f of its log), so resolving a %s difference needs %d interleaved pairs "
           "here; this sweep ran %d%s",
           static_cast<long long>(c.id), c.pairs, c.calibrated_sweep.c_str(), 100 * std::expm1(c.sd_log_ratio),
           c.sd_log_ratio, Percent(report.options.resolve_difference).c_str(), *report.calibration_repeats_needed,
           ran, ran < *report.calibration_repeats_needed ? ", too few to resolve it" : "");
  return text;
}

// Call-outs: outcome mismatches first, then what undermines a verdict, the loader's
// notes, missing evidence of fusion, unfinished and noisy trials.
// "N trial(s) ran far below ...": succeeded trials under options.slow_outlier_ratio of
// their variant's median tokens/s (variants with 4 or more succeeded trials). Whole
// trials slowed by the machine (a host's CPU slowing for seconds, another process) are
// what widens a pair interval most; they are kept, not dropped, and named.
std::string SlowOutliers(const Report& report, const ReportOptions& options) {
  std::map<std::string, std::vector<const TrialView*>> by_variant;
  for (const TrialView& t : report.trials) {
    if (t.outcome.Succeeded() && t.tokens_per_s && *t.tokens_per_s > 0) by_variant[t.variant_key].push_back(&t);
  }
  std::vector<std::string> named;
  for (const auto& [key, trials] : by_variant) {
    if (trials.size() < 4) continue;
    std::vector<double> tokens;
    for (const TrialView* t : trials) tokens.push_back(*t->tokens_per_s);
    const double median = Median(tokens);
    for (const TrialView* t : trials) {
      const double ratio = *t->tokens_per_s / median;
      if (ratio >= options.slow_outlier_ratio) continue;
      char text[64];
      snprintf(text, sizeof(text), "%.2fx", ratio);
      named.push_back("trial " + std::to_string(t->id) + " (" + key + ", repeat " + std::to_string(t->repeat) +
                      ") at " + text);
    }
  }
  if (named.empty()) return "";
  std::string text = std::to_string(named.size()) + " trial(s) ran below " + Percent(options.slow_outlier_ratio) +
                     " of their variant's median tokens/s, as on a disturbed machine: ";
  for (std::size_t i = 0; i < named.size(); ++i) text += (i ? "; " : "") + named[i];
  return text + ". Each widens the intervals of the comparisons it is in; kept, not dropped (docs/statistics.md)";
}

void AddCallouts(const ReportInput& input, const ReportOptions& options, Report& report) {
  for (const VariantReport& v : report.variants) {
    if (v.comparison.status == Comparison::Status::kVariantFailed ||
        v.comparison.status == Comparison::Status::kCounterpartFailed) {
      report.callouts.push_back(v.key + " " + v.comparison.note + " (counterpart " +
                                v.counterpart_key + ")");
    }
  }
  for (const VariantReport& v : report.variants) {
    const Comparison& c = v.comparison;
    if (c.status == Comparison::Status::kFellBack) {
      report.callouts.push_back(v.key + " did not take effect: " + v.fallback_reason +
                                "; flagged, not compared");
    }
    if (c.loss_flagged) {
      report.callouts.push_back(v.key + " loss curve deviates " +
                                Percent(*c.loss_max_deviation) + " from its counterpart at step " +
                                std::to_string(c.loss_at_step) + " (threshold " +
                                Percent(options.loss_parity_threshold) + ")");
    }
  }
  for (const VariantReport& v : report.variants) {
    const Comparison& c = v.comparison;
    if (c.status != Comparison::Status::kCompared || c.environment_difference.empty()) continue;
    report.callouts.push_back(v.key + " and its counterpart " + v.counterpart_key +
                              " ran in different environments (" + c.environment_difference +
                              "): the speedup mixes them");
  }
  for (const VariantReport& v : report.variants) {
    const Comparison& c = v.comparison;
    if (c.status != Comparison::Status::kCompared || c.worker_confound.empty()) continue;
    report.callouts.push_back(v.key + " is confounded with its workers (" + c.worker_confound +
                              "): a faster worker would read as a faster variant, so it gets no verdict");
  }
  for (const std::string& note : input.notes) report.callouts.push_back(note);
  if (report.calibration) report.callouts.push_back(CalibrationCallout(report));
  // Evidence that is not a fallback but limits what a speedup can mean.
  for (const VariantReport& v : report.variants) {
    auto mode = v.params.find("compile_mode");
    if (mode == v.params.end() || mode->second.find("jit") == std::string::npos) continue;
    if (!v.applied.is_object() || !v.applied.contains("fusion_groups")) continue;
    const nlohmann::json& groups = v.applied["fusion_groups"];
    if (groups.is_number() && groups.get<double>() == 0) {
      std::string fuser = v.applied.contains("fuser") ? ScalarText(v.applied["fuser"]) : "unknown";
      report.callouts.push_back(v.key + " ran TorchScript without fusion (fusion_groups=0, fuser=" +
                                fuser + "): any difference is not from fused kernels");
    }
  }
  if (report.trials_finished < report.trials_total) {
    report.callouts.push_back(std::to_string(report.trials_total - report.trials_finished) +
                              " of " + std::to_string(report.trials_total) +
                              " trials not finished: the report is partial");
  }
  int noisy = 0;
  for (const TrialView& t : report.trials) noisy += t.noisy ? 1 : 0;
  if (noisy > 0) {
    std::string callout =
        std::to_string(noisy) + " noisy trial(s): step-time CV above " + Percent(options.noisy_cv_threshold);
    // The main job's lockstep groups are noisy by this measure on a shared VM while their
    // intervals are narrow: say why, so the call-out is not read as a reason to doubt them.
    bool lockstep = false;
    for (const VariantReport& v : report.variants) lockstep |= v.comparison.method == IntervalMethod::kLockstepPairs;
    for (const AxisComparison& a : report.axis_comparisons) {
      lockstep |= a.comparison.method == IntervalMethod::kLockstepPairs;
    }
    if (lockstep) {
      callout += "; lockstep pairs take each step's ratio to its partner's, so a slowdown that both sides' "
                 "turns went through does not widen the intervals (Noise and repeats: sd log ratio, "
                 "within-pair IQR)";
    }
    report.callouts.push_back(callout);
  }
  if (std::string slow = SlowOutliers(report, options); !slow.empty()) report.callouts.push_back(slow);
}

// A variant's side when its throughput can enter a cross-variant figure (it succeeded
// and did not fall back); nullptr otherwise.
const Side* UsableSide(std::map<std::string, Side>& sides, const std::string& key) {
  const Side& s = sides[key];
  if (s.report == nullptr || s.trials.empty() || s.report->fell_back) return nullptr;
  return &s;
}

RatioFigure ExpFigure(const TEstimate& t) {
  return RatioFigure{std::exp(t.estimate), std::exp(t.interval.low), std::exp(t.interval.high)};
}

// The interval of a marginal effect, a linear contrast of the involved variants' mean
// log tokens/s: L = (1/P) sum_pairs (mean ln a - mean ln b), with coefficient +-1/P per
// variant. Paired by repeat when interleaved, else Welch over each variant's repeats.
void AddMarginalInterval(const std::vector<std::pair<const Side*, const Side*>>& pairs,
                         bool interleaved, const ReportOptions& options, MarginalEffect& effect) {
  std::vector<const Side*> involved;
  std::vector<double> coefficient;
  auto add = [&](const Side* s, double c) {
    auto it = std::find(involved.begin(), involved.end(), s);
    if (it == involved.end()) {
      involved.push_back(s);
      coefficient.push_back(c);
    } else {
      coefficient[static_cast<std::size_t>(it - involved.begin())] += c;
    }
  };
  const double share = 1.0 / static_cast<double>(pairs.size());
  for (auto [a, b] : pairs) {
    add(a, share);
    add(b, -share);
  }
  // Interleaved: per repeat where every involved variant ran, d_r = sum_v c_v ln x_vr;
  // a t interval over those repeats keeps the pairing (drift common to a repeat
  // cancels), as in the paired speedup.
  if (interleaved) {
    std::map<int, std::pair<int, double>> by_repeat;  // repeat -> (variants seen, d_r)
    for (std::size_t i = 0; i < involved.size(); ++i) {
      for (const TrialView* t : involved[i]->trials) {
        auto& [seen, d] = by_repeat[t->repeat];
        ++seen;
        d += coefficient[i] * std::log(*t->tokens_per_s);
      }
    }
    std::vector<double> contrasts;
    for (const auto& [repeat, entry] : by_repeat) {
      if (entry.first == static_cast<int>(involved.size())) contrasts.push_back(entry.second);
    }
    if (contrasts.size() >= 2) {
      TEstimate t = WelchContrast({{contrasts, 1.0}}, options.confidence);
      effect.speedup = ExpFigure(t);
      effect.df = t.df;
      effect.method = IntervalMethod::kPairedRepeats;
      return;
    }
  }
  // Otherwise Welch over the variants' own repeats (each needs >= 2).
  std::vector<ContrastGroup> groups;
  bool enough = true;
  for (std::size_t i = 0; i < involved.size(); ++i) {
    if (std::fabs(coefficient[i]) < 1e-15) continue;
    if (involved[i]->trials.size() < 2) enough = false;
    groups.push_back({LogsOf(Throughputs(*involved[i])), coefficient[i]});
  }
  if (enough && !groups.empty()) {
    TEstimate t = WelchContrast(groups, options.confidence);
    effect.speedup = ExpFigure(t);
    effect.df = t.df;
    effect.method = IntervalMethod::kUnpairedRepeats;
  }
}

// The marginal effect of each axis value against the axis's baseline value: over every
// pair of usable variants that differ only in that axis.
void AddMarginalEffects(const ReportInput& input, bool interleaved, const ReportOptions& options,
                        std::map<std::string, Side>& sides, Report& report) {
  std::map<std::string, std::string> key_of_setting;  // full setting -> variant key
  for (const VariantReport& v : report.variants) key_of_setting[SettingKey(input.axes, v.params)] = v.key;
  for (const AxisInput& axis : input.axes) {
    if (axis.values.size() < 2) continue;
    auto base = input.baseline.find(axis.name);
    std::string reference = base != input.baseline.end() ? base->second : axis.values.front();
    for (const std::string& value : axis.values) {
      if (value == reference) continue;
      std::vector<std::pair<const Side*, const Side*>> pairs;
      for (const VariantReport& v : report.variants) {
        auto it = v.params.find(axis.name);
        if (it == v.params.end() || it->second != value) continue;
        auto ref_params = v.params;
        ref_params[axis.name] = reference;
        auto ref = key_of_setting.find(SettingKey(input.axes, ref_params));
        if (ref == key_of_setting.end()) continue;
        const Side* a = UsableSide(sides, v.key);
        const Side* b = UsableSide(sides, ref->second);
        if (a != nullptr && b != nullptr) pairs.emplace_back(a, b);
      }
      if (pairs.empty()) continue;
      MarginalEffect effect;
      effect.axis = axis.name;
      effect.value = value;
      effect.reference = reference;
      effect.pairs = static_cast<int>(pairs.size());
      std::vector<double> ratios;
      for (auto [a, b] : pairs) ratios.push_back(*a->report->tokens_per_s / *b->report->tokens_per_s);
      effect.speedup.value = GeometricMean(ratios);
      effect.min_pair = *std::min_element(ratios.begin(), ratios.end());
      effect.max_pair = *std::max_element(ratios.begin(), ratios.end());
      AddMarginalInterval(pairs, interleaved, options, effect);
      effect.verdict = VerdictOf(effect.speedup, effect.method);
      // A pair whose sides ran on different workers would carry the workers' speed into
      // the contrast, as in a single comparison: no verdict then.
      for (auto [a, b] : pairs) {
        std::string confound = WorkerConfound(*a, *b, effect.method);
        if (confound.empty()) continue;
        effect.worker_confound = a->report->key + " (" + confound + ")";
        effect.verdict = Verdict::kUnclear;
        break;
      }
      report.marginals.push_back(effect);
    }
  }
}

// Whether a verdict says `v` is the fastest: it is faster than its counterpart by its
// interval, or it is a baseline that every comparison against it found slower.
bool VerdictBacksFastest(const Report& report, const VariantReport& v) {
  if (!v.is_baseline) {
    return v.comparison.status == Comparison::Status::kCompared && v.comparison.verdict == Verdict::kFaster;
  }
  bool compared = false;
  for (const VariantReport& other : report.variants) {
    if (other.is_baseline || other.counterpart_key != v.key ||
        other.comparison.status != Comparison::Status::kCompared) {
      continue;
    }
    compared = true;
    if (other.comparison.verdict != Verdict::kSlower) return false;
  }
  return compared;
}

// The fastest variant, and the fastest within the memory budget (fallbacks never count).
// "Fastest" is said only where a verdict backs it (fastest_unbacked_key otherwise).
void AddBestConfigurations(const ReportOptions& options, Report& report) {
  const VariantReport* fastest = nullptr;
  const VariantReport* fastest_fit = nullptr;
  for (const VariantReport& v : report.variants) {
    if (!v.tokens_per_s || v.fell_back) continue;
    if (fastest == nullptr || *v.tokens_per_s > *fastest->tokens_per_s) fastest = &v;
    if (options.memory_budget_bytes && v.peak_mem_bytes &&
        *v.peak_mem_bytes <= *options.memory_budget_bytes &&
        (fastest_fit == nullptr || *v.tokens_per_s > *fastest_fit->tokens_per_s)) {
      fastest_fit = &v;
    }
  }
  if (fastest != nullptr && VerdictBacksFastest(report, *fastest)) {
    report.fastest_key = fastest->key;
  } else if (fastest != nullptr) {
    report.fastest_unbacked_key = fastest->key;
  }
  if (fastest_fit != nullptr) report.fastest_within_budget_key = fastest_fit->key;
}

// Iso-memory view (when micro_batch varies): per setting, its largest usable micro-batch
// against the baseline setting's largest.
void AddIsoMemoryView(const ReportInput& input, bool interleaved, const ReportOptions& options,
                      std::map<std::string, Side>& sides, Report& report) {
  auto mb_axis = std::find_if(input.axes.begin(), input.axes.end(),
                              [](const AxisInput& a) { return a.name == kMicroBatchAxis; });
  if (mb_axis == input.axes.end() || mb_axis->values.size() < 2) return;
  report.iso_memory_applicable = true;
  std::map<std::string, const VariantReport*> best_of_setting;
  std::vector<std::string> setting_order;
  for (const VariantReport& v : report.variants) {
    std::string setting = SettingKey(input.axes, v.params, kMicroBatchAxis);
    if (!best_of_setting.count(setting)) {
      best_of_setting[setting] = nullptr;
      setting_order.push_back(setting);
    }
    if (UsableSide(sides, v.key) == nullptr || !v.params.count(kMicroBatchAxis)) continue;
    const VariantReport*& best = best_of_setting[setting];
    double mb = ParseNumber(v.params.at(kMicroBatchAxis)).value_or(0);
    if (best == nullptr || mb > ParseNumber(best->params.at(kMicroBatchAxis)).value_or(0)) best = &v;
  }
  for (const std::string& setting : setting_order) {
    const VariantReport* best = best_of_setting[setting];
    if (best == nullptr) continue;
    IsoMemoryRow row;
    row.setting = setting;
    row.variant_key = best->key;
    row.micro_batch = best->params.at(kMicroBatchAxis);
    row.tokens_per_s = *best->tokens_per_s;
    auto counterpart_params = best->params;
    for (const auto& [axis, value] : input.baseline) {
      if (axis != kMicroBatchAxis && counterpart_params.count(axis)) counterpart_params[axis] = value;
    }
    row.counterpart_setting = SettingKey(input.axes, counterpart_params, kMicroBatchAxis);
    auto it = best_of_setting.find(row.counterpart_setting);
    if (it != best_of_setting.end() && it->second != nullptr) {
      row.counterpart_variant_key = it->second->key;
      row.counterpart_micro_batch = it->second->params.at(kMicroBatchAxis);
      if (row.counterpart_setting != setting) {
        row.speedup = EstimateRatio(sides[best->key], sides[it->second->key], interleaved,
                                    options).figure;
      }
    }
    report.iso_memory.push_back(row);
  }
}

}  // namespace

Report BuildReport(const ReportInput& input, const ReportOptions& given_options) {
  // A calibrated workload plans repeats with the noise measured here, not an assumed one.
  ReportOptions options = given_options;
  if (input.calibration) options.assumed_sd_log_ratio = input.calibration->sd_log_ratio;
  Report report = ReportHeading(input, options);
  if (input.calibration) {
    report.calibration = input.calibration;
    report.calibration_repeats_needed =
        RepeatsToResolve(input.calibration->sd_log_ratio, options.resolve_difference, options.confidence);
  }
  // Lockstep pairs are pairs by repeat too; each pair's estimate comes from its steps.
  const bool lockstep = input.order == "lockstep";
  const bool interleaved = input.order == "interleaved" || lockstep;
  std::map<std::string, int> lockstep_sides;
  if (lockstep) {
    std::map<std::string, std::string> counterpart_of;
    for (const VariantInput& v : input.variants) {
      if (!v.excluded) counterpart_of[v.key] = v.counterpart_key;
    }
    lockstep_sides = LockstepSides(counterpart_of);
  }
  const RunOrder order = AddTrialViews(input, options, report);
  std::map<std::string, Side> sides;
  for (const VariantInput& in : input.variants) {
    auto trials = order.of_variant.find(in.key);
    auto group = lockstep_sides.find(in.key);
    report.variants.push_back(SummariseVariant(
        in, trials == order.of_variant.end() ? std::vector<std::size_t>() : trials->second, order,
        report, group == lockstep_sides.end() ? 0 : group->second, sides[in.key]));
  }
  for (VariantReport& v : report.variants) sides[v.key].report = &v;
  std::optional<SequentialDesign> design;
  if (input.adaptive) {
    design = SequentialDesign{input.adaptive->min_pairs, input.adaptive->max_pairs,
                              input.adaptive->ci_half_width, options.confidence};
  }
  AddComparisons(design, interleaved, options, sides, report);
  AddAxisComparisons(input, design, interleaved, options, sides, report);
  if (design) AddAdaptiveRepeats(input, *design, sides, report);
  AddCallouts(input, options, report);
  AddMarginalEffects(input, interleaved, options, sides, report);
  AddBestConfigurations(options, report);
  AddIsoMemoryView(input, interleaved, options, sides, report);
  return report;
}

}  // namespace bakeoff::metrics
