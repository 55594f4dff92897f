#include "metrics/report/report_renderer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace bakeoff::metrics {

Result<ReportFormat> ParseReportFormat(const std::string& name) {
  if (name == "table" || name == "text") return ReportFormat::kTable;
  if (name == "markdown" || name == "md") return ReportFormat::kMarkdown;
  if (name == "json") return ReportFormat::kJson;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "html") return ReportFormat::kHtml;
  return Status::InvalidArgument("report format '" + name +
                                 "' is not one of table, markdown, json, csv, html");
}

const char* ReportFormatName(ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: return "table";
    case ReportFormat::kMarkdown: return "markdown";
    case ReportFormat::kJson: return "json";
    case ReportFormat::kCsv: return "csv";
    case ReportFormat::kHtml: return "html";
  }
  return "table";
}

std::string RenderReport(const Report& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: return RenderReportTable(report);
    case ReportFormat::kMarkdown: return RenderReportMarkdown(report);
    case ReportFormat::kJson: return RenderReportJson(report);
    case ReportFormat::kCsv: return RenderReportCsv(report);
    case ReportFormat::kHtml: return RenderReportHtml(report);
  }
  return RenderReportTable(report);
}

namespace {

std::string Printf(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

}  // namespace

std::string FormatBytes(std::int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " B";
  return Printf(std::fabs(value) >= 100 ? "%.0f" : "%.1f", value) + " " + kUnits[unit];
}

std::string FormatRatio(double ratio) {
  return Printf(ratio >= 10 ? "%.1f" : "%.2f", ratio) + "x";
}

std::string FormatSignedPercent(double fraction) {
  return Printf("%+.1f", fraction * 100) + "%";
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return "inf";
  return Printf(fraction * 100 < 0.1 && fraction > 0 ? "%.2f" : "%.1f", fraction * 100) + "%";
}

std::string FormatNumber(double value, int significant) {
  if (!std::isfinite(value)) return "n/a";
  if (value == 0) return "0";
  double magnitude = std::floor(std::log10(std::fabs(value))) + 1;
  int decimals = std::max(0, significant - static_cast<int>(magnitude));
  char format[16];
  std::snprintf(format, sizeof format, "%%.%df", std::min(decimals, 9));
  return Printf(format, value);
}

std::string FormatSeconds(double seconds) {
  if (std::fabs(seconds) >= 100) return Printf("%.0f", seconds) + " s";
  if (std::fabs(seconds) >= 1) return Printf("%.1f", seconds) + " s";
  return FormatNumber(seconds, 3) + " s";
}

std::string FormatSignedSeconds(double seconds) {
  return (seconds >= 0 ? "+" : "-") + FormatSeconds(std::fabs(seconds));
}

namespace {

std::string Fixed(double x, int decimals) {
  std::string format = "%." + std::to_string(decimals) + "f";
  return Printf(format.c_str(), x);
}

// Whether `x`, printed with `decimals` decimals, would read as exactly 1 although it is not.
bool ReadsAsOne(double x, int decimals) {
  return x != 1.0 && std::fabs(std::strtod(Fixed(x, decimals).c_str(), nullptr) - 1.0) < 1e-12;
}

}  // namespace

std::string FormatRatioAwayFromOne(double ratio) {
  int decimals = ratio >= 10 ? 1 : 2;
  while (decimals < 6 && ReadsAsOne(ratio, decimals)) ++decimals;
  return Fixed(ratio, decimals) + "x";
}

std::string FormatInterval(const RatioFigure& figure) {
  if (!figure.low || !figure.high) return "";
  // Both bounds with the same decimals: two, more while a bound that is not 1 would read
  // "1.00" or distinct bounds would read alike ("1.003-1.004", never "1.00-1.00").
  int decimals = *figure.low >= 10 ? 1 : 2;
  while (decimals < 6 &&
         (ReadsAsOne(*figure.low, decimals) || ReadsAsOne(*figure.high, decimals) ||
          (*figure.low != *figure.high &&
           Fixed(*figure.low, decimals) == Fixed(*figure.high, decimals)))) {
    ++decimals;
  }
  return Fixed(*figure.low, decimals) + "-" + Fixed(*figure.high, decimals);
}

std::string VerdictSentence(const VariantReport& variant, double confidence) {
  const Comparison& c = variant.comparison;
  if (c.status != Comparison::Status::kCompared) return c.note;
  if (!c.worker_confound.empty()) return "no verdict: confounded with workers (" + c.worker_confound + ")";
  return VerdictText(c.verdict, c.speedup, c.method, c.repeats_needed, confidence);
}

std::string VerdictText(Verdict verdict, const RatioFigure& figure, IntervalMethod method,
                        const std::optional<int>& repeats_needed, double confidence) {
  std::string ci = FormatInterval(figure);
  std::string level = Printf("%.0f", confidence * 100) + "% CI ";
  switch (verdict) {
    case Verdict::kUnclear: {
      std::string text = "unclear";
      if (repeats_needed) text += ": " + std::to_string(*repeats_needed) + " repeats needed";
      text += " (" + FormatRatio(figure.value) + ", ";
      if (ci.empty()) return text + "no interval)";
      return text + (method == IntervalMethod::kMeasuredSteps ? "within-run only " : "") + level + ci + ")";
    }
    case Verdict::kNoMeasurableDifference:
      return "no measurable difference: " + FormatRatio(figure.value) + " (" + level + ci + ")";
    case Verdict::kFaster:
      return FormatRatioAwayFromOne(figure.value) + " faster (" + level + ci + ")";
    case Verdict::kSlower:
      return FormatRatioAwayFromOne(figure.value) + " (slower) (" + level + ci + ")";
  }
  return "unclear";
}

}  // namespace bakeoff::metrics
