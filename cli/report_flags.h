// The flags `bakeoff report` and `bakeoff compare` share (docs/cli.md): the output's
// format and file, and the statistics' settings (docs/statistics.md), added to a command
// by AddReportFlags and turned into metrics::ReportOptions by ReportOptionsFrom.
// Thread-safety: CLI parsing only.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "metrics/report/report_renderer.h"
#include "protocol/status.h"

namespace bakeoff::cli {

struct ReportFlags {
  std::string format = "table";
  std::string output;  // "" = stdout
  double loss_threshold = 0.02;
  std::uint64_t seed = metrics::ReportOptions{}.seed;
  int resamples = 2000;
};

// --format, --output, --loss-threshold, --seed and --resamples.
void AddReportFlags(CLI::App* cmd, ReportFlags* flags);

// The options they set (the format parsed: InvalidArgument for an unknown one).
Result<metrics::ReportOptions> ReportOptionsFrom(const ReportFlags& flags);

}  // namespace bakeoff::cli
