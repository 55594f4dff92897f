// `bakeoff compare`: the same variants across two sweeps (two clusters, two library
// versions), with the report's statistics. For each variant key present in either
// sweep: the throughput change B/A with a Welch interval on log tokens/s (repeats of the
// two sweeps are independent, so unpaired; a side with one trial: "unclear"), memory and
// warm-up change, loss parity between the sweeps, and each sweep's own speedup over its
// baseline counterpart. Regressions come first: variants that ran in A and fail in B,
// then throughput regressions (interval below 1), worst first.
//
// Computed by BuildReport on a merged input whose "baseline counterpart" of B's variant
// is A's variant of the same key, so every figure has exactly the report's definition
// (docs/statistics.md). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/report/report_model.h"

namespace bakeoff::metrics {

struct CompareRow {
  enum class Verdict {
    kNowFails,      // succeeded in A, no succeeded trial in B
    kRegression,    // B slower: the interval lies below 1
    kNoChange,      // the interval contains 1
    kUnclear,       // no interval over repeats (a side with one trial): note says how many
    kImprovement,   // B faster: the interval lies above 1
    kNowRuns,       // failed in A, succeeds in B
    kNeitherRuns,
    kOnlyInA,
    kOnlyInB,
    kNotCompared,   // a fallback, or trials not finished
  };
  std::string key;
  Verdict verdict = Verdict::kNotCompared;
  std::string note;
  std::string outcome_a, outcome_b;        // "3/3 ok", "oom x2"
  std::optional<double> tokens_per_s_a, tokens_per_s_b;
  RatioFigure change;                      // B / A tokens/s (when both ran)
  IntervalMethod method = IntervalMethod::kNone;
  std::optional<double> df;                // of the Welch interval
  int trials_a = 0, trials_b = 0;
  std::optional<RatioFigure> speedup_a, speedup_b;  // over the counterpart in each sweep
  std::optional<std::int64_t> peak_a, peak_b;
  std::optional<double> memory_change;     // B / A - 1
  std::optional<double> warmup_delta_s;    // B - A
  std::optional<double> loss_deviation;    // between the sweeps' mean loss curves
  bool loss_flagged = false;
  std::string environment_difference;      // between A's and B's trials ("" if none)
};
const char* CompareVerdictName(CompareRow::Verdict verdict);

struct SweepComparison {
  std::string sweep_a, sweep_b;  // "12 \"name\""
  ReportOptions options;
  std::vector<CompareRow> rows;  // regressions first
  std::vector<std::string> callouts;
};

SweepComparison CompareSweeps(const ReportInput& a, const ReportInput& b,
                              const ReportOptions& options);

// options.format picks table, markdown, json, csv or html.
std::string RenderComparison(const SweepComparison& comparison, ReportFormat format);
nlohmann::json ComparisonToJson(const SweepComparison& comparison);

}  // namespace bakeoff::metrics
