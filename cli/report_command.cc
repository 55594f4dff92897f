// `bakeoff report SWEEP [--format table|markdown|json|csv|html] [--output FILE]
// [--db FILE | --coordinator URL [--token-file FILE]] [--memory-budget SIZE]
// [--loss-threshold FRACTION] [--seed N] [--resamples N]`: the verdict report of a sweep
// (docs/statistics.md defines every figure). From a results file it is computed here
// (metrics::RenderSweepReport, the same code the coordinator serves); with
// --coordinator it is fetched from /api/v1/sweeps/{id or name}/report.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/report_flags.h"
#include "cli/result_source.h"
#include "metrics/report/report_renderer.h"
#include "metrics/report/report_service.h"
#include "protocol/token.h"

namespace bakeoff::cli {
namespace {

struct ReportCommandFlags {
  std::string sweep;
  ReportFlags report;
  std::string db;           // PickResultSource: --coordinator, --db, $BAKEOFF_COORDINATOR,
  std::string coordinator;  // ./results.db, the default coordinator
  std::string token_file;
  std::string tls_ca;
  std::string memory_budget;
  double noisy_cv = 0.10;
};

int FailReport(const Status& status, int code) {
  PrintFailure("report", status.message());
  return code;
}

int RunReport(const ReportCommandFlags& flags) {
  Result<metrics::ReportOptions> parsed = ReportOptionsFrom(flags.report);
  if (!parsed.ok()) return FailReport(parsed.status(), kExitUsage);
  metrics::ReportOptions options = *parsed;
  options.noisy_cv_threshold = flags.noisy_cv;
  if (!flags.memory_budget.empty()) {
    Result<std::int64_t> budget = metrics::ParseByteSize(flags.memory_budget);
    if (!budget.ok()) return FailReport(budget.status().WithContext("--memory-budget"), kExitUsage);
    options.memory_budget_bytes = *budget;
  }

  Result<std::string> text = Status::Internal("unset");
  const ResultSource source = PickResultSource(flags.coordinator, flags.db);
  if (source.why != "--coordinator" && source.why != "--db") {
    std::cerr << "bakeoff report: reading " << source.Describe() << "\n";
  }
  if (!source.coordinator.empty()) {
    Result<std::string> token = protocol::LoadToken(flags.token_file);
    if (!token.ok()) return FailReport(token.status(), kExitUsage);
    Result<CoordinatorClient> client =
        CoordinatorClient::Create(source.coordinator, *token, std::chrono::seconds(30), flags.tls_ca);
    if (!client.ok()) return FailReport(client.status(), ExitCodeFor(client.status()));
    // The coordinator computes the report with its defaults; options that change the
    // figures travel as query parameters, written by the report library that reads them.
    const std::string target = "/api/v1/sweeps/" + UrlEncode(flags.sweep) + "/report?" + metrics::ReportQuery(options);
    text = client->GetText(target);
    if (!text.ok()) return FailReport(text.status(), ExitCodeFor(text.status()));
  } else {
    std::error_code ec;
    if (!std::filesystem::exists(source.db, ec)) {
      return FailReport(Status::NotFound("results database " + source.db +
                                         " does not exist; pass --db FILE (the coordinator's --db), "
                                         "or --coordinator URL to ask a running coordinator"),
                        kExitUnavailable);
    }
    text = metrics::RenderSweepReport(source.db, flags.sweep, options);
    if (!text.ok()) {
      int code = text.status().code() == Status::Code::kNotFound ? kExitFailure
                                                                 : ExitCodeFor(text.status());
      return FailReport(text.status(), code);
    }
  }
  return WriteCommandOutput("report", flags.report.output, *text);
}

void SetupReport(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<ReportCommandFlags>();
  CLI::App* cmd = root.add_subcommand(
      "report", "The verdict report of a sweep: speedups with intervals, memory, warm-up, "
                "loss parity, outcomes (docs/statistics.md)");
  cmd->add_option("sweep", flags->sweep, "Sweep id or name (the newest sweep of that name)")
      ->required();
  AddReportFlags(cmd, &flags->report);
  cmd->add_option("--db", flags->db, "Results database file (without it or --coordinator: $BAKEOFF_COORDINATOR, else ./results.db, else the default coordinator)");
  cmd->add_option("--coordinator", flags->coordinator,
                  "Ask a running coordinator (URL) instead of reading --db");
  cmd->add_option("--tls-ca", flags->tls_ca, kTlsCaHelp);
  cmd->add_option("--token-file", flags->token_file,
                  "Bearer token file for --coordinator (default $BAKEOFF_TOKEN)");
  cmd->add_option("--memory-budget", flags->memory_budget,
                  "Also name the fastest configuration whose peak memory fits, e.g. 4GiB");
  cmd->add_option("--noisy-cv", flags->noisy_cv,
                  "Mark trials whose step-time coefficient of variation exceeds this (default 0.10)")
      ->check(CLI::PositiveNumber);
  cmd->callback([flags, exit_code] { *exit_code = RunReport(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("report", SetupReport);

}  // namespace bakeoff::cli
