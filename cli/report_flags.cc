#include "cli/report_flags.h"

namespace bakeoff::cli {

void AddReportFlags(CLI::App* cmd, ReportFlags* flags) {
  cmd->add_option("--format", flags->format, "table, markdown, json, csv or html (default table)")
      ->check(CLI::IsMember({"table", "text", "markdown", "md", "json", "csv", "html"}));
  cmd->add_option("--output", flags->output, "Write to this file instead of stdout");
  cmd->add_option("--loss-threshold", flags->loss_threshold,
                  "Flag loss curves deviating more than this fraction (default 0.02)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", flags->seed, "Bootstrap seed (the same seed gives the same intervals)");
  cmd->add_option("--resamples", flags->resamples, "Bootstrap resamples (default 2000)")
      ->check(CLI::Range(100, 1000000));
}

Result<metrics::ReportOptions> ReportOptionsFrom(const ReportFlags& flags) {
  Result<metrics::ReportFormat> format = metrics::ParseReportFormat(flags.format);
  if (!format.ok()) return format.status();
  metrics::ReportOptions options;
  options.format = *format;
  options.loss_parity_threshold = flags.loss_threshold;
  options.seed = flags.seed;
  options.bootstrap_resamples = flags.resamples;
  return options;
}

}  // namespace bakeoff::cli
