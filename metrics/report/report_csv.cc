// The CSV rendering of a report: a header and one row per variant (RFC 4180 quoting),
// for spreadsheets and pandas (report_renderer.h).
#include <sstream>

#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

std::string Number(double value) {
  std::ostringstream out;
  out.precision(10);
  out << value;
  return out.str();
}

template <typename T>
std::string Opt(const std::optional<T>& value) {
  if (!value) return "";
  if constexpr (std::is_same_v<T, std::string>) {
    return *value;
  } else {
    return Number(static_cast<double>(*value));
  }
}

}  // namespace

std::string RenderReportCsv(const Report& report) {
  std::vector<std::string> header = {
      "sweep_id", "variant", "counterpart", "status", "trials", "succeeded", "outcomes",
      "tokens_per_s", "speedup", "ci_low", "ci_high", "interval_method", "variant_trials",
      "counterpart_trials", "verdict", "no_measurable_difference", "peak_mem_bytes", "memory_relative",
      "compression_ratio", "first_step_s", "warmup_s", "first_step_delta_s", "warmup_delta_s",
      "break_even", "break_even_steps", "loss_max_deviation", "loss_flagged", "fell_back",
      "repeats_needed", "noisy_trials", "note"};
  for (const AxisInput& axis : report.axes) header.push_back("param_" + axis.name);
  std::ostringstream out;
  for (std::size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << header[i];
  out << "\n";
  for (const VariantReport& v : report.variants) {
    const Comparison& c = v.comparison;
    bool compared = c.status == Comparison::Status::kCompared;
    std::string outcomes;
    for (const auto& [outcome, count] : v.outcome_counts) {
      outcomes += (outcomes.empty() ? "" : ";") + outcome + "=" + std::to_string(count);
    }
    std::vector<std::string> row = {
        report.sweep_id, v.key, v.counterpart_key, ComparisonStatusName(c.status),
        std::to_string(v.trials), std::to_string(v.succeeded), outcomes, Opt(v.tokens_per_s),
        compared ? Number(c.speedup.value) : "", compared ? Opt(c.speedup.low) : "",
        compared ? Opt(c.speedup.high) : "", compared ? IntervalMethodName(c.method) : "",
        compared ? std::to_string(c.variant_trials) : "",
        compared ? std::to_string(c.counterpart_trials) : "",
        compared ? VerdictName(c.verdict) : "",
        c.no_measurable_difference ? (*c.no_measurable_difference ? "true" : "false") : "",
        Opt(v.peak_mem_bytes),
        Opt(c.memory_relative), Opt(c.compression_ratio), Opt(v.first_step_s), Opt(v.warmup_s),
        Opt(c.first_step_delta_s), Opt(c.warmup_delta_s), Opt(c.break_even),
        Opt(c.break_even_steps), Opt(c.loss_max_deviation), c.loss_flagged ? "true" : "false",
        v.fell_back ? "true" : "false", Opt(c.repeats_needed), std::to_string(v.noisy_trials),
        compared ? "" : c.note};
    for (const AxisInput& axis : report.axes) {
      auto it = v.params.find(axis.name);
      row.push_back(it == v.params.end() ? "" : it->second);
    }
    for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << CsvField(row[i]);
    out << "\n";
  }
  return out.str();
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace bakeoff::metrics
