// Computes a sweep's verdicts (Report) from its stored data (ReportInput): per variant
// against its baseline counterpart the speedup with a bootstrap interval, memory,
// warm-up and break-even, loss parity, outcomes, evidence that the setting took
// effect, noise and repeats needed; across variants the marginal effect of each axis
// value, the best configurations and the iso-memory view. Definitions and formulas:
// docs/statistics.md.
//
// A pure function of its arguments (the bootstrap is seeded from options.seed), so the
// same input always gives the same report. Thread-safe.
#pragma once

#include <string>

#include "metrics/report/report_model.h"

namespace bakeoff::metrics {

Report BuildReport(const ReportInput& input, const ReportOptions& options);

// Whether a trial's `applied` evidence says it did not run what its variant asked
// (a requested parameter the evidence reports with another value, or an explicit
// `fell_back: true` / non-empty `fallback` string; `fell_back: false` and `fallback: ""`
// say there was none). A requested "auto" matches any applied value: the trainer records
// what it chose. Returns the reason, or an empty string.
std::string FallbackReason(const std::map<std::string, std::string>& params,
                           const nlohmann::json& applied);

// Formats "compile_mode=jit,zero_stage=2" from params in the order of `axes`
// (params not on an axis follow in name order), leaving out `skip_axis`.
std::string SettingKey(const std::vector<AxisInput>& axes,
                       const std::map<std::string, std::string>& params,
                       const std::string& skip_axis = "");

}  // namespace bakeoff::metrics
