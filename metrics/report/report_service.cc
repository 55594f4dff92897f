#include "metrics/report/report_service.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_loader.h"
#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {

Status CheckReportCost(const ReportInput& input, const ReportOptions& options) {
  if (options.max_bootstrap_draws <= 0) return Status::Ok();
  // The within-run bootstrap resamples the measured steps of a variant and of its
  // counterpart when either has fewer than two succeeded repeats (report_builder.cc,
  // SpeedupOf): count those steps, per comparison.
  struct Side {
    int succeeded = 0;
    std::int64_t steps = 0;
  };
  std::map<std::string, Side> sides;
  for (const TrialInput& trial : input.trials) {
    if (!trial.outcome.Succeeded()) continue;
    Side& side = sides[trial.variant_key];
    ++side.succeeded;
    side.steps += static_cast<std::int64_t>(trial.steps.size());
  }
  std::int64_t steps = 0;
  for (const VariantInput& variant : input.variants) {
    if (variant.is_baseline || variant.counterpart_key.empty()) continue;
    const Side mine = sides.count(variant.key) ? sides.at(variant.key) : Side{};
    const Side theirs = sides.count(variant.counterpart_key) ? sides.at(variant.counterpart_key) : Side{};
    if (mine.succeeded >= 2 && theirs.succeeded >= 2) continue;  // a t interval over repeats
    steps += mine.steps + theirs.steps;
  }
  const std::int64_t resamples = std::max(options.bootstrap_resamples, 1);
  if (steps > 0 && resamples > options.max_bootstrap_draws / steps) {
    return Status::ResourceExhausted(
        "report of sweep " + input.sweep_id + ": " + std::to_string(resamples) + " resamples x " +
        std::to_string(steps) + " measured steps to resample is over the limit of " +
        std::to_string(options.max_bootstrap_draws) + " bootstrap draws per report; ask for at most " +
        std::to_string(options.max_bootstrap_draws / steps) +
        " resamples (resamples=N), or run `bakeoff report --db` on a copy of the database");
  }
  return Status::Ok();
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
  BAKEOFF_RETURN_IF_ERROR(CheckReportCost(*input, options));
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

namespace {

// A number in [lo, hi] (whole when `integral`), or an error naming the parameter.
Result<double> QueryNumber(const std::string& name, const std::string& text, double lo, double hi, bool integral,
                           const std::string& expected) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(value >= lo && value <= hi) ||
      (integral && value != std::floor(value))) {
    return Status::InvalidArgument("query parameter " + name + "=" + text + ": expected " + expected);
  }
  return value;
}

std::string ExactNumber(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

}  // namespace

Result<ReportOptions> ParseReportQuery(const std::map<std::string, std::string>& params) {
  ReportOptions options;
  options.max_bootstrap_draws = kMaxBootstrapDraws;
  for (const auto& [name, value] : params) {
    if (name == "format") {
      auto format = ParseReportFormat(value.empty() ? "table" : value);
      if (!format.ok()) return format.status();
      options.format = *format;
    } else if (name == "memory_budget") {
      auto bytes = ParseByteSize(value);
      if (!bytes.ok()) return bytes.status().WithContext("query parameter memory_budget");
      options.memory_budget_bytes = *bytes;
    } else if (name == "loss_threshold" || name == "noisy_cv") {
      auto parsed = QueryNumber(name, value, 1e-12, 1e9, false, "a positive fraction such as 0.02");
      if (!parsed.ok()) return parsed.status();
      (name == "noisy_cv" ? options.noisy_cv_threshold : options.loss_parity_threshold) = *parsed;
    } else if (name == "seed") {
      auto parsed = QueryNumber(name, value, 0, 9007199254740992.0, true, "a whole number >= 0");
      if (!parsed.ok()) return parsed.status();
      options.seed = static_cast<std::uint64_t>(*parsed);
    } else if (name == "resamples") {
      auto parsed = QueryNumber(name, value, 100, kMaxBootstrapResamples, true,
                                "a whole number in [100, " + std::to_string(kMaxBootstrapResamples) + "]");
      if (!parsed.ok()) return parsed.status();
      options.bootstrap_resamples = static_cast<int>(*parsed);
    } else {
      return Status::InvalidArgument("unknown query parameter '" + name +
                                     "'; the report takes format, memory_budget, loss_threshold, "
                                     "noisy_cv, seed, resamples");
    }
  }
  return options;
}

std::string ReportQuery(const ReportOptions& options) {
  const ReportOptions defaults;
  std::string query = std::string("format=") + ReportFormatName(options.format);
  if (options.memory_budget_bytes) query += "&memory_budget=" + std::to_string(*options.memory_budget_bytes);
  if (options.loss_parity_threshold != defaults.loss_parity_threshold) {
    query += "&loss_threshold=" + ExactNumber(options.loss_parity_threshold);
  }
  if (options.noisy_cv_threshold != defaults.noisy_cv_threshold) {
    query += "&noisy_cv=" + ExactNumber(options.noisy_cv_threshold);
  }
  if (options.seed != defaults.seed) query += "&seed=" + std::to_string(options.seed);
  if (options.bootstrap_resamples != defaults.bootstrap_resamples) {
    query += "&resamples=" + std::to_string(options.bootstrap_resamples);
  }
  return query;
}

}  // namespace bakeoff::metrics
