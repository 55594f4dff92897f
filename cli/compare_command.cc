// `bakeoff compare SWEEP_A SWEEP_B [--db FILE] [--db-b FILE] [--format ...] [--output FILE]
// [--fail-on-regression]`: the same variants across two sweeps (two clusters, two library
// versions), with the report's statistics, regressions first (metrics/report/report_compare.h).
// Both sweeps come from --db unless --db-b names B's results file.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/report_flags.h"
#include "metrics/report/report_compare.h"
#include "metrics/report/report_loader.h"
#include "metrics/report/report_renderer.h"

namespace bakeoff::cli {
namespace {

struct CompareFlags {
  std::string sweep_a, sweep_b;
  std::string db = "results.db";
  std::string db_b;
  ReportFlags report;
  bool fail_on_regression = false;
};

int FailCompare(const Status& status, int code) {
  PrintFailure("compare", status.message());
  return code;
}

Result<metrics::ReportInput> Load(const std::string& db, const std::string& sweep) {
  std::error_code ec;
  if (!std::filesystem::exists(db, ec)) {
    return Status::Unavailable("results database " + db +
                               " does not exist; pass --db FILE (and --db-b FILE for sweep B "
                               "when it is in another file)");
  }
  return metrics::LoadReportInputFromFile(db, sweep);
}

int RunCompare(const CompareFlags& flags) {
  Result<metrics::ReportOptions> options = ReportOptionsFrom(flags.report);
  if (!options.ok()) return FailCompare(options.status(), kExitUsage);
  Result<metrics::ReportInput> a = Load(flags.db, flags.sweep_a);
  if (!a.ok()) return FailCompare(a.status().WithContext("sweep A"), ExitCodeFor(a.status()));
  Result<metrics::ReportInput> b = Load(flags.db_b.empty() ? flags.db : flags.db_b, flags.sweep_b);
  if (!b.ok()) return FailCompare(b.status().WithContext("sweep B"), ExitCodeFor(b.status()));
  metrics::SweepComparison comparison = metrics::CompareSweeps(*a, *b, *options);
  const std::string text = metrics::RenderComparison(comparison, options->format);
  if (int code = WriteCommandOutput("compare", flags.report.output, text); code != kExitOk) return code;
  if (flags.fail_on_regression) {
    for (const metrics::CompareRow& row : comparison.rows) {
      if (row.verdict == metrics::CompareRow::Verdict::kNowFails ||
          row.verdict == metrics::CompareRow::Verdict::kRegression) {
        return kExitFailure;
      }
    }
  }
  return kExitOk;
}

void SetupCompare(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* cmd = root.add_subcommand(
      "compare", "Compare the same variants across two sweeps, regressions first");
  cmd->add_option("sweep_a", flags->sweep_a, "Sweep A (the reference): id or name")->required();
  cmd->add_option("sweep_b", flags->sweep_b, "Sweep B (compared with A): id or name")->required();
  cmd->add_option("--db", flags->db, "Results database of sweep A (and B) (default ./results.db)");
  cmd->add_option("--db-b", flags->db_b, "Results database of sweep B when it is another file");
  AddReportFlags(cmd, &flags->report);
  cmd->add_flag("--fail-on-regression", flags->fail_on_regression,
                "Exit 1 when a variant regressed or now fails (for CI)");
  cmd->callback([flags, exit_code] { *exit_code = RunCompare(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("compare", SetupCompare);

}  // namespace bakeoff::cli
