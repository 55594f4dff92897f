// The one call that turns a sweep in a results database into a rendered report, shared
// by `bakeoff report` and the coordinator's /api/v1/sweeps/{id}/report?format=... so
// both serve the same bytes: load (read-only) -> BuildReport -> RenderReport.
//
// Thread-safety: the path overloads open their own connection and may be called from
// any thread; the connection overload follows SQLite's rule (one thread per connection
// at a time).
#pragma once

#include <map>
#include <string>

#include "metrics/report/report_model.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

// Limits of the coordinator's report route (docs/api.md): resamples a request may ask
// for, and the bootstrap work of one report (resamples x the measured steps the
// within-run bootstrap resamples: those of every comparison whose variant or
// counterpart has fewer than two succeeded repeats). At the default 2000 resamples,
// 100,000 such steps are reported.
inline constexpr int kMaxBootstrapResamples = 100000;
inline constexpr std::int64_t kMaxBootstrapDraws = 200'000'000;  // about 9 s of one core (46 ns a draw measured)

// kResourceExhausted, saying what to lower, when options.max_bootstrap_draws is set and
// options.bootstrap_resamples x the steps to resample is over it; Ok otherwise.
Status CheckReportCost(const ReportInput& input, const ReportOptions& options);

// The report of `sweep_id_or_name` in options.format. Errors: NotFound (no such file or
// sweep), InvalidArgument (not a results database), IoError (SQLite failed),
// ResourceExhausted (over options.max_bootstrap_draws: CheckReportCost).
Result<std::string> RenderSweepReport(const std::string& db_path,
                                      const std::string& sweep_id_or_name,
                                      const ReportOptions& options);

// The computed report, for callers that render it themselves (`bakeoff compare`).
Result<Report> BuildSweepReport(const std::string& db_path, const std::string& sweep_id_or_name,
                                const ReportOptions& options);

// The HTTP Content-Type of a rendered report: "text/html; charset=utf-8", ...
const char* ReportContentType(ReportFormat format);

// The report's options as query parameters: what the coordinator's report route takes
// (format, memory_budget, loss_threshold, noisy_cv, seed, resamples; docs/api.md) and
// what `bakeoff report --coordinator` sends. One parser and one writer, so the route and
// the CLI cannot drift. ParseReportQuery fills every parameter's default, caps the
// bootstrap work at kMaxBootstrapDraws, and returns InvalidArgument naming a bad or
// unknown parameter and what it expects.
Result<ReportOptions> ParseReportQuery(const std::map<std::string, std::string>& params);
// "format=json&seed=7": the format always, the other options where they differ from
// ReportOptions' defaults, numbers exact (ParseReportQuery reads back `options`).
std::string ReportQuery(const ReportOptions& options);

// Parses a memory size: plain bytes ("4000000000") or a number with a unit
// (KB, MB, GB, TB powers of 1000; KiB, MiB, GiB, TiB powers of 1024; case-insensitive),
// e.g. "4GiB", "1.5 GB". InvalidArgument says what is accepted.
Result<std::int64_t> ParseByteSize(const std::string& text);

}  // namespace bakeoff::metrics
