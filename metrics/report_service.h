// The one call that turns a sweep in a results database into a rendered report, shared
// by `bakeoff report` and the coordinator's /api/v1/sweeps/{id}/report?format=... so
// both serve the same bytes: load (read-only) -> BuildReport -> RenderReport.
//
// Thread-safety: the path overloads open their own connection and may be called from
// any thread; the sqlite3* overloads follow SQLite's rule (one thread per connection
// at a time).
#pragma once

#include <sqlite3.h>

#include <string>

#include "metrics/report_model.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

// The report of `sweep_id_or_name` in options.format. Errors: NotFound (no such file or
// sweep), InvalidArgument (not a results database), IoError (SQLite failed).
Result<std::string> RenderSweepReport(const std::string& db_path,
                                      const std::string& sweep_id_or_name,
                                      const ReportOptions& options);
Result<std::string> RenderSweepReport(sqlite3* db, const std::string& sweep_id_or_name,
                                      const ReportOptions& options);

// The computed report, for callers that render it themselves (`bakeoff compare`).
Result<Report> BuildSweepReport(const std::string& db_path, const std::string& sweep_id_or_name,
                                const ReportOptions& options);

// The HTTP Content-Type of a rendered report: "text/html; charset=utf-8", ...
const char* ReportContentType(ReportFormat format);

// Parses a memory size: plain bytes ("4000000000") or a number with a unit
// (KB, MB, GB, TB powers of 1000; KiB, MiB, GiB, TiB powers of 1024; case-insensitive),
// e.g. "4GiB", "1.5 GB". InvalidArgument says what is accepted.
Result<std::int64_t> ParseByteSize(const std::string& text);

}  // namespace bakeoff::metrics
