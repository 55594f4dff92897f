#include "metrics/report_service.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "metrics/report_builder.h"
#include "metrics/report_loader.h"
#include "metrics/report_renderer.h"

namespace bakeoff::metrics {

Result<std::string> RenderSweepReport(sqlite3* db, const std::string& sweep_id_or_name,
                                      const ReportOptions& options) {
  Result<ReportInput> input = LoadReportInput(db, sweep_id_or_name);
  if (!input.ok()) return input.status();
  return RenderReport(BuildReport(*input, options), options.format);
}

Result<std::string> RenderSweepReport(const std::string& db_path,
                                      const std::string& sweep_id_or_name,
                                      const ReportOptions& options) {
  Result<Report> report = BuildSweepReport(db_path, sweep_id_or_name, options);
  if (!report.ok()) return report.status();
  return RenderReport(*report, options.format);
}

Result<Report> BuildSweepReport(const std::string& db_path, const std::string& sweep_id_or_name,
                                const ReportOptions& options) {
  Result<ReportInput> input = LoadReportInputFromFile(db_path, sweep_id_or_name);
  if (!input.ok()) return input.status();
  return BuildReport(*input, options);
}

const char* ReportContentType(ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: return "text/plain; charset=utf-8";
    case ReportFormat::kMarkdown: return "text/markdown; charset=utf-8";
    case ReportFormat::kJson: return "application/json";
    case ReportFormat::kCsv: return "text/csv; charset=utf-8";
    case ReportFormat::kHtml: return "text/html; charset=utf-8";
  }
  return "text/plain; charset=utf-8";
}

Result<std::int64_t> ParseByteSize(const std::string& text) {
  auto invalid = [&] {
    return Status::InvalidArgument("memory size '" + text +
                                   "' is not bytes or a number with a unit such as 4GiB, 1.5GB, "
                                   "512MiB (KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB of 1024)");
  };
  const char* begin = text.c_str();
  char* end = nullptr;
  double number = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number) || number < 0) return invalid();
  std::string unit;
  for (const char* p = end; *p != '\0'; ++p) {
    if (!std::isspace(static_cast<unsigned char>(*p))) unit += static_cast<char>(std::tolower(*p));
  }
  double scale = 1;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "kb" || unit == "k") {
    scale = 1e3;
  } else if (unit == "mb" || unit == "m") {
    scale = 1e6;
  } else if (unit == "gb" || unit == "g") {
    scale = 1e9;
  } else if (unit == "tb" || unit == "t") {
    scale = 1e12;
  } else if (unit == "kib") {
    scale = 1024.0;
  } else if (unit == "mib") {
    scale = 1024.0 * 1024;
  } else if (unit == "gib") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "tib") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return invalid();
  }
  double bytes = number * scale;
  if (bytes > 9.0e18) return invalid();
  return static_cast<std::int64_t>(std::llround(bytes));
}

}  // namespace bakeoff::metrics
