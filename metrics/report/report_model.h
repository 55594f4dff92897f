// The pure data of a sweep report: ReportInput is everything the verdicts are computed
// from (filled from SQLite by report_loader.h, or by hand in tests), Report is the
// computed verdicts (report_builder.h) that every renderer draws (report_renderer.h).
// Neither depends on SQLite, so the statistics and the rendering are tested on fixtures.
// Definitions of every figure: docs/statistics.md. Plain values; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/trainer_event.h"
#include "protocol/outcome.h"

namespace bakeoff::metrics {

// ---------------------------------------------------------------- input

struct AxisInput {
  std::string name;
  std::vector<std::string> values;  // as written in the sweep, in order
};

struct VariantInput {
  std::string key;  // "compile_mode=jit,zero_stage=2"
  // Varying axis name -> value as it appears in keys (spec::CanonicalValue).
  std::map<std::string, std::string> params;
  std::string counterpart_key;  // == key for a baseline variant; empty when none
  bool is_baseline = false;     // its own counterpart
  bool counterpart_excluded = false;  // its counterpart matched an exclude rule
  bool excluded = false;        // listed, but removed by an exclude rule: no trials
  int world_size = 1;           // ranks per trial (device-seconds of adaptive savings)
};

// One rank's `summary` event (docs/trainer.md): its figures as the rank reported them,
// each absent when not reported (protocol::SummaryFigures lists them once).
struct RankSummary {
  int rank = 0;
  protocol::SummaryEvent figures;
};

// One measured (phase "measure") step: the slowest rank's time. Loss and tokens are
// global, so one rank's suffice; so does the turn, which every rank of a lockstep side
// shares (docs/lockstep.md).
struct StepSample {
  std::int64_t step = 0;
  double step_s = 0;
  std::optional<double> loss;
  std::optional<std::int64_t> tokens;
  std::optional<std::int64_t> turn;  // lockstep trials that took turns only
};

// Where a trial stands: its outcome once it finished, else the state it is in. Parsed
// once, where the report reads the store; the report decides on the typed outcome and
// prints Text().
struct TrialStanding {
  std::optional<protocol::Outcome> outcome;  // once finished
  std::string state;                         // "queued", "assigned", "running" until then
  // An outcome's name ("succeeded", "oom", ...) or else a state's.
  static TrialStanding FromText(const std::string& text) {
    TrialStanding standing;
    standing.outcome = protocol::ParseOutcome(text);
    if (!standing.outcome) standing.state = text;
    return standing;
  }
  bool Finished() const { return outcome.has_value(); }
  bool Is(protocol::Outcome o) const { return outcome == o; }
  bool Succeeded() const { return Is(protocol::Outcome::kSucceeded); }
  // The outcome's name, or the state while unfinished.
  std::string Text() const { return outcome ? protocol::OutcomeName(*outcome) : state; }
};

struct TrialInput {
  std::int64_t id = 0;
  std::string variant_key;
  int repeat = 0;
  int order_index = 0;  // position in the sweep's run order
  std::string worker;   // of the final attempt; empty if never assigned
  TrialStanding outcome;
  std::string reason;
  std::vector<RankSummary> ranks;  // empty unless the trial succeeded
  nlohmann::json applied;          // the trainer's `applied` evidence (rank 0), or null
  // The summary's `environment` (rank 0; docs/trainer.md): host, cpu_model, cpu_flags,
  // torch_version, cuda_version, blas, gpu_model, gpu_driver, bakeoff_version (any may be
  // null), or null when the trainer did not report one.
  nlohmann::json environment;
  // The summary's `compile` evidence (rank 0; bakeoff_report.compile_evidence()): graphs,
  // graph_breaks, graph_break_reasons, recompiles, inductor_cache_hits/misses; or null.
  nlohmann::json compile;
  std::vector<StepSample> steps;   // measured steps, in step order
  // Wall seconds of the final attempt (started to ended), when it ran.
  std::optional<double> duration_s;
};

// The design of adaptive repeats (sweep spec `repeats: {min, max, until}`).
struct AdaptiveDesignInput {
  int min_pairs = 3;
  int max_pairs = 20;
  double ci_half_width = 0.02;
};

// This machine's noise for the sweep's workload, from `bakeoff calibrate` (the newest
// calibration with the sweep's workload key; docs/statistics.md, "Calibration").
struct CalibrationInput {
  std::int64_t id = 0;
  double created_at = 0;  // Unix seconds
  std::string calibrated_sweep;
  std::string host;
  int pairs = 0;
  double sd_log_ratio = 0;  // sd of one A/A pair's log tokens/s ratio
};

struct ReportInput {
  std::string sweep_id;
  std::string sweep_name;
  std::string question;
  std::string order = "interleaved";  // interleaved | sequential | random | lockstep
  std::map<std::string, std::string> baseline;  // axis -> baseline value
  std::vector<AxisInput> axes;
  std::vector<VariantInput> variants;
  std::vector<TrialInput> trials;
  std::optional<AdaptiveDesignInput> adaptive;  // set for a sweep with adaptive repeats
  std::optional<CalibrationInput> calibration;
  // Facts the loader found that a reader must know (e.g. simulated trials); shown
  // among the call-outs.
  std::vector<std::string> notes;
};

// ---------------------------------------------------------------- options

enum class ReportFormat { kTable, kMarkdown, kJson, kCsv, kHtml };

struct ReportOptions {
  ReportFormat format = ReportFormat::kTable;
  // --memory-budget: the fastest configuration whose peak fits is named too.
  std::optional<std::int64_t> memory_budget_bytes;
  double loss_parity_threshold = 0.02;  // flag a loss curve deviating more (2%)
  int loss_smoothing_window = 5;        // centred moving mean over this many steps
  double noisy_cv_threshold = 0.10;     // a trial whose step-time CV exceeds this is noisy
  // A succeeded trial below this fraction of its variant's median tokens/s (4 or more
  // succeeded trials) is called out as a slow outlier: a disturbed machine, usually.
  double slow_outlier_ratio = 0.85;
  double resolve_difference = 0.05;     // "repeats needed to resolve a 5% difference"
  // With one repeat the run-to-run noise is unknown: "repeats needed" then assumes this
  // sd of one pair's log-throughput ratio (docs/statistics.md: typical of a quiet machine),
  // or the calibrated one when `bakeoff calibrate` measured this workload here.
  double assumed_sd_log_ratio = 0.03;
  double confidence = 0.95;
  // The within-run (measured steps) bootstrap only; repeat intervals are t intervals.
  int bootstrap_resamples = 2000;
  std::uint64_t seed = 20261130;
  // A cap on the bootstrap's work: resamples x the measured steps it resamples (each
  // resample draws every step once; CheckReportCost in report_service.h). Over it the report is refused with
  // kResourceExhausted before any resample is drawn; 0: no cap (the CLI on a local file).
  // The coordinator's report route sets kMaxBootstrapDraws (report_service.h).
  std::int64_t max_bootstrap_draws = 0;
};

// ---------------------------------------------------------------- report

// A ratio with its confidence interval (absent when it could not be estimated).
struct RatioFigure {
  double value = 0;
  std::optional<double> low;
  std::optional<double> high;
  bool Contains(double x) const { return low && high && *low <= x && x <= *high; }
};

// How a speedup's interval was obtained.
enum class IntervalMethod {
  kNone,             // one trial each and too few steps: no interval
  kPairedRepeats,    // Student t on the repeat pairs' log ratios (interleaved order)
  kUnpairedRepeats,  // Welch on each side's log tokens/s
  kMeasuredSteps,    // one repeat: bootstrap over measured steps, within-run only
  kLockstepPairs,    // Student t over lockstep pairs, each from its per-step log ratios
};
inline const char* IntervalMethodName(IntervalMethod method) {
  switch (method) {
    case IntervalMethod::kNone: return "none";
    case IntervalMethod::kPairedRepeats: return "paired repeats";
    case IntervalMethod::kUnpairedRepeats: return "unpaired repeats";
    case IntervalMethod::kMeasuredSteps: return "measured steps (within-run only)";
    case IntervalMethod::kLockstepPairs: return "lockstep pairs";
  }
  return "none";
}
// Whether an interval from `method` may give a verdict: only intervals over repeats see
// the run-to-run variation; a within-run interval does not (docs/statistics.md).
inline bool GivesVerdict(IntervalMethod method) {
  return method == IntervalMethod::kPairedRepeats || method == IntervalMethod::kUnpairedRepeats ||
         method == IntervalMethod::kLockstepPairs;
}
// Whether `method` pairs the two sides' trials by repeat (interleaved or lockstep pairs).
inline bool PairsByRepeat(IntervalMethod method) {
  return method == IntervalMethod::kPairedRepeats || method == IntervalMethod::kLockstepPairs;
}

// What a speedup's interval says.
enum class Verdict {
  kUnclear,                 // no interval over repeats (one repeat, or too few trials)
  kNoMeasurableDifference,  // the interval contains 1.0
  kFaster,                  // the interval lies above 1.0
  kSlower,                  // the interval lies below 1.0
};
inline const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kUnclear: return "unclear";
    case Verdict::kNoMeasurableDifference: return "no measurable difference";
    case Verdict::kFaster: return "faster";
    case Verdict::kSlower: return "slower";
  }
  return "unclear";
}

struct TrialView {
  std::int64_t id = 0;
  std::string variant_key;
  int repeat = 0;
  int order_index = 0;
  std::string worker;
  TrialStanding outcome;
  std::string reason;
  std::optional<double> tokens_per_s;    // slowest rank
  std::optional<double> step_s_median;   // slowest rank
  std::optional<double> step_cv;         // over measured steps
  bool noisy = false;
  std::optional<std::int64_t> peak_mem_bytes;  // largest rank
  std::optional<double> first_step_s;
  std::optional<double> warmup_s;
  nlohmann::json applied;
  // The compile this trial paid, from rank 0's `applied.compile_cache_state`: "cold",
  // "warm" or "mixed"; empty when it reported none (eager, the native trainer).
  std::string compile_cache;
  nlohmann::json environment;  // as reported in the trial's summary, or null
  bool fell_back = false;
  std::string fallback_reason;
};

// Step-time distribution of all measured steps of a variant's succeeded trials.
struct StepDistribution {
  std::size_t count = 0;
  double min = 0, p10 = 0, p25 = 0, p50 = 0, p75 = 0, p90 = 0, max = 0;
};

struct WorkerEffect {
  std::string worker;
  double speedup = 0;
  int variant_trials = 0;
  int counterpart_trials = 0;
};

// The warm-up a variant's trials paid in one compile-cache state (docs/statistics.md,
// "Compile cost"): a cold compile and a warm one are different costs, never averaged.
struct CacheWarmup {
  std::string cache;  // "cold", "warm" or "mixed"
  int trials = 0;     // succeeded trials in this state
  std::optional<double> first_step_s;  // means over them
  std::optional<double> warmup_s;
};

// The warm-up difference and break-even of one compile-cache state.
struct CompileCost {
  std::string cache;
  int trials = 0;
  // The counterpart's trials it is compared with: those in the same state when the
  // counterpart compiles too, else all of them (a warm-up without compilation does not
  // depend on a compile cache).
  int counterpart_trials = 0;
  // This state's warm-up - the counterpart's (cold with cold, warm with warm); absent,
  // with `note` saying why, when the counterpart compiles but has no trial in this state.
  std::optional<double> warmup_delta_s;
  std::string note;
  std::optional<std::string> break_even;
  std::optional<double> break_even_steps;
};

// One repeat of a lockstep comparison (docs/statistics.md, "Lockstep pairs"): how its
// pair's estimate was obtained, or why it has none.
struct LockstepPair {
  enum class Basis {
    kLockstep,    // the median of its per-step log ratios
    kWholeTrial,  // the whole trials' tokens/s ratio: its steps did not pair (note says why)
    kUnpaired,    // one side has no succeeded trial at this repeat (note: its outcome, reason)
  };
  int repeat = 0;
  Basis basis = Basis::kLockstep;
  std::optional<double> ratio;  // exp(d_r); absent when unpaired
  int paired_steps = 0;         // step pairs with adjacent turns
  int unpaired_steps = 0;
  std::optional<double> step_iqr;  // IQR of the per-step log ratios (>= 2 step pairs)
  std::string note;
};
inline const char* LockstepBasisName(LockstepPair::Basis basis) {
  switch (basis) {
    case LockstepPair::Basis::kLockstep: return "lockstep";
    case LockstepPair::Basis::kWholeTrial: return "whole trial";
    case LockstepPair::Basis::kUnpaired: return "unpaired";
  }
  return "unpaired";
}

// The verdict of one variant against its baseline counterpart.
struct Comparison {
  enum class Status {
    kCompared,
    kIsBaseline,           // the variant is its own counterpart
    kExcluded,             // an exclude rule removed the variant itself
    kNoCounterpart,        // no counterpart variant in the sweep
    kCounterpartExcluded,  // an exclude rule removed the counterpart
    kVariantFailed,        // no succeeded trial; the counterpart has some
    kCounterpartFailed,    // the counterpart has no succeeded trial; the variant has
    kBothFailed,
    kPending,              // trials not finished yet
    kFellBack,             // the evidence says the variant did not apply what it asked
    kCounterpartFellBack,
  };
  Status status = Status::kIsBaseline;
  std::string note;  // a sentence for anything but kCompared

  // Throughput (meaningful when kCompared).
  RatioFigure speedup;
  IntervalMethod method = IntervalMethod::kNone;
  int variant_trials = 0;      // succeeded trials behind the figure
  int counterpart_trials = 0;
  int pairs = 0;               // repeat pairs (kPairedRepeats, kLockstepPairs)
  std::optional<double> df;    // degrees of freedom of the t / Welch interval
  Verdict verdict = Verdict::kUnclear;
  // The interval contains 1.0; absent when there is no verdict (kUnclear).
  std::optional<bool> no_measurable_difference;

  // Memory: largest rank's peak.
  std::optional<std::int64_t> variant_peak_bytes;
  std::optional<std::int64_t> counterpart_peak_bytes;
  std::optional<double> memory_relative;     // variant / counterpart - 1
  std::optional<double> compression_ratio;   // counterpart / variant

  // Warm-up.
  std::optional<double> first_step_delta_s;  // variant - counterpart
  std::optional<double> warmup_delta_s;      // variant - counterpart
  std::optional<double> step_saving_s;       // per counterpart-sized step
  std::optional<std::string> break_even;     // "never", "immediately", "N steps"
  std::optional<double> break_even_steps;
  // The same figures per compile-cache state (cold, warm, mixed: in that order) when the
  // variant's trials report one; the two above then average over every state.
  std::vector<CompileCost> compile_costs;

  // Loss parity.
  std::size_t loss_common_steps = 0;
  std::optional<double> loss_max_deviation;
  std::int64_t loss_at_step = 0;
  // Whether the variant should train like its counterpart: only axes that keep the math
  // differ (docs/statistics.md). When not, the deviation is shown, never flagged, and
  // loss_parity_note names the axes that change the math.
  bool loss_parity_expected = true;
  std::string loss_parity_note;
  bool loss_flagged = false;

  // Lockstep sweeps: every repeat's pair (in repeat order), how many were estimated from
  // their steps, and the within-pair spread: the median over those pairs of the IQR of
  // their per-step log ratios (the step-to-step noise the median of a pair sees).
  std::vector<LockstepPair> lockstep_pairs;
  int pairs_in_lockstep = 0;
  std::optional<double> within_pair_iqr;

  // Noise and repeats.
  std::optional<double> sd_log_ratio;   // per repeat, from the observed noise
  // To resolve options.resolve_difference: from sd_log_ratio, or with one repeat from
  // options.assumed_sd_log_ratio (repeats_needed_assumed).
  std::optional<int> repeats_needed;
  bool repeats_needed_assumed = false;
  bool needs_more_repeats = false;      // the sweep ran fewer than repeats_needed

  std::vector<WorkerEffect> by_worker;  // when trials spread across workers

  // Non-empty when the compared trials of the two sides ran on workers in different
  // proportions ("variant: local-1 x3; counterpart: local-2 x3"): a worker's speed would
  // read as the variant's, so the comparison gets no verdict (docs/statistics.md).
  std::string worker_confound;

  // Non-empty when the compared trials (both sides) ran in different environments:
  // "torch_version 2.4.0 vs 2.5.1; hosts node-a vs node-b" (docs/statistics.md).
  std::string environment_difference;
};
inline const char* ComparisonStatusName(Comparison::Status status) {
  using S = Comparison::Status;
  switch (status) {
    case S::kCompared: return "compared";
    case S::kIsBaseline: return "baseline";
    case S::kExcluded: return "excluded";
    case S::kNoCounterpart: return "no_counterpart";
    case S::kCounterpartExcluded: return "counterpart_excluded";
    case S::kVariantFailed: return "variant_failed";
    case S::kCounterpartFailed: return "counterpart_failed";
    case S::kBothFailed: return "both_failed";
    case S::kPending: return "pending";
    case S::kFellBack: return "fell_back";
    case S::kCounterpartFellBack: return "counterpart_fell_back";
  }
  return "unknown";
}

// One comparison of the answer that a variant is a side of, and where the sequential rule
// stopped that comparison.
struct AdaptiveComparison {
  std::string against;  // the other side as the answer names it ("micro_batch=1"), else its key
  std::string held;     // the axes both sides share ("compile_mode=jit"), or empty
  bool stopped = false;
  int pairs = 0;
  std::string reason;   // SequentialStopName, or "still running"
};

// Adaptive repeats, per compared variant: where the sequential rule stopped it (the
// same rule, on the same outcomes, as the coordinator: metrics::SequentialWalk). A
// variant stops once every comparison it is a side of has stopped, so its pairs and
// reason are those of the comparison that stopped last (VariantDecision); `comparisons`
// says which one that was and how each of the others stopped.
struct AdaptiveVariant {
  bool stopped = false;
  int pairs = 0;        // complete pairs behind the decision
  int max_pairs = 0;
  std::string reason;   // SequentialStopName, e.g. "interval excludes 1"
  int trials_not_run = 0;  // its trials cancelled by adaptive repeats
  std::vector<AdaptiveComparison> comparisons;  // in the answer's order
};

// What the adaptive design saved against running every variant to max.
struct AdaptiveSavings {
  AdaptiveDesignInput design;
  double look_confidence = 0;     // of every comparison's interval in this sweep
  int trials_max = 0;             // variants x max
  int trials_not_run = 0;         // cancelled by adaptive repeats
  // trials not run x mean duration of the trials of that variant that ran (else of the
  // sweep's) x world_size; absent when no trial duration is known.
  std::optional<double> device_seconds_not_run;
};

// What torch.compile did in a variant's succeeded trials that reported compile evidence
// (the summary's `compile`; docs/question.md H7): the figures each trial reports, as the
// mean per trial, and the Inductor cache lookups summed over them.
struct CompileEvidence {
  int trials = 0;              // succeeded trials with evidence
  double graphs = 0;           // mean per trial
  double graph_breaks = 0;     // mean per trial
  double recompiles = 0;       // mean per trial
  std::int64_t cache_hits = 0;    // Inductor FX-graph cache hits, over the trials
  std::int64_t cache_misses = 0;  // and misses (a miss compiles)
  std::vector<std::string> break_reasons;  // distinct, first seen first (at most 5)
};

struct VariantReport {
  std::string key;
  std::map<std::string, std::string> params;
  std::string counterpart_key;
  bool is_baseline = false;
  bool counterpart_excluded = false;
  bool excluded = false;

  int trials = 0;
  int succeeded = 0;
  int unfinished = 0;
  std::map<std::string, int> outcome_counts;  // by TrialStanding::Text()
  // Trials of the variant that ended with `outcome`.
  int CountOf(protocol::Outcome outcome) const {
    auto it = outcome_counts.find(protocol::OutcomeName(outcome));
    return it == outcome_counts.end() ? 0 : it->second;
  }
  std::vector<std::string> reasons;  // distinct, of trials that did not succeed

  std::optional<double> tokens_per_s;    // geometric mean over succeeded trials
  std::optional<double> step_s_median;   // mean of the trials' median step times
  std::optional<double> first_step_s;    // mean over succeeded trials
  std::optional<double> warmup_s;        // mean over succeeded trials
  std::vector<CacheWarmup> by_cache;     // the same means per compile-cache state
  std::optional<std::int64_t> peak_mem_bytes;  // max over trials of the largest rank
  // Held bytes by kind, of the rank and trial with the largest peak.
  std::optional<std::int64_t> frozen_bytes, trainable_bytes, grad_bytes, optimizer_bytes;
  std::optional<double> mfu;
  std::optional<double> comm_s_per_step;
  StepDistribution step_times;
  std::vector<std::pair<std::int64_t, double>> loss_curve;  // mean over trials
  nlohmann::json applied;  // evidence of the first succeeded trial
  std::optional<CompileEvidence> compile;  // none when no succeeded trial reported any
  std::vector<nlohmann::json> environments;  // distinct environments of succeeded trials
  bool fell_back = false;
  std::string fallback_reason;
  int noisy_trials = 0;
  std::vector<std::string> workers;

  Comparison comparison;
  std::optional<AdaptiveVariant> adaptive;  // adaptive sweeps, compared variants
};

// One axis on its own, every other axis held (a baseline over two or more varying axes):
// a variant against the same variant with only `axis` at the baseline's value.
struct AxisComparison {
  std::string axis;             // "compile_mode"
  std::string value;            // the variant's value of it: "default"
  std::string reference;        // the baseline's: "eager"
  std::string held;             // the other axes' values: "zero_stage=2" (may be empty)
  std::string variant_key;
  std::string counterpart_key;
  Comparison comparison;
};

// Marginal effect of one axis value against the axis's reference value.
struct MarginalEffect {
  std::string axis;
  std::string value;
  std::string reference;  // the baseline's value of the axis, or its first value
  RatioFigure speedup;    // geometric mean over pairs
  IntervalMethod method = IntervalMethod::kNone;  // of the interval (kNone: none)
  std::optional<double> df;
  Verdict verdict = Verdict::kUnclear;
  int pairs = 0;
  double min_pair = 0, max_pair = 0;
  // As Comparison::worker_confound, for the first of its pairs whose sides ran on the
  // workers in different shares: then no verdict (kUnclear), "" otherwise.
  std::string worker_confound;
};

// Iso-memory view: each setting (every axis but micro_batch) at its own largest
// micro-batch that did not run out of memory.
struct IsoMemoryRow {
  std::string setting;                // "compile_mode=jit,zero_stage=2"
  std::string variant_key;            // the variant at that micro-batch
  std::string micro_batch;
  double tokens_per_s = 0;
  std::string counterpart_setting;    // with the baseline's values substituted
  std::string counterpart_variant_key;
  std::string counterpart_micro_batch;
  std::optional<RatioFigure> speedup;  // against the counterpart setting's best
};

struct Report {
  std::string sweep_id;
  std::string sweep_name;
  std::string question;
  std::string order;
  std::map<std::string, std::string> baseline;
  std::vector<AxisInput> axes;
  ReportOptions options;

  int trials_total = 0;
  int trials_finished = 0;
  std::vector<std::string> workers;
  bool spread_across_workers = false;

  std::vector<std::string> callouts;  // outcome mismatches first, then warnings
  std::vector<VariantReport> variants;
  std::vector<MarginalEffect> marginals;
  std::vector<AxisComparison> axis_comparisons;  // empty unless two or more baseline axes vary
  std::optional<std::string> fastest_key;  // only where a verdict backs it
  // The highest tokens/s when no verdict backs it: said as such, never as "Fastest".
  std::optional<std::string> fastest_unbacked_key;
  std::optional<std::string> fastest_within_budget_key;
  bool iso_memory_applicable = false;
  std::vector<IsoMemoryRow> iso_memory;
  std::vector<TrialView> trials;
  std::optional<AdaptiveSavings> adaptive;  // set for a sweep with adaptive repeats
  // Set when the workload is calibrated; its sd then replaces options.assumed_sd_log_ratio
  // and calibration_repeats_needed is what options.resolve_difference needs with it.
  std::optional<CalibrationInput> calibration;
  std::optional<int> calibration_repeats_needed;

  const VariantReport* FindVariant(const std::string& key) const {
    for (const auto& v : variants) {
      if (v.key == key) return &v;
    }
    return nullptr;
  }
};

}  // namespace bakeoff::metrics
