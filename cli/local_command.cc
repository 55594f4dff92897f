// `bakeoff local FILE`: the embedded default. Runs the sweep on this machine
// (local_run.h: a coordinator plus N workers in this process), prints the report and
// leaves the results database behind.
#include <iostream>
#include <memory>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/local_run.h"
#include "cli/sweep_file.h"
#include "metrics/report/report_service.h"

namespace bakeoff::cli {
namespace {

struct LocalFlags {
  std::string file;
  std::string format = "table";
  std::string output;
  LocalRunFlags run;
};

int RunLocal(const LocalFlags& flags) {
  auto yaml = ReadSweepFile(flags.file);
  if (!yaml.ok()) return ReportFailure("local", yaml.status());
  // The report is printed as soon as the sweep ends, while the page may stay up
  // (--linger): the answer does not wait for the page.
  int write_code = kExitOk;
  LocalRunFlags run_flags = flags.run;
  run_flags.on_sweep_end = [&flags, &write_code](const LocalRun& run) {
    auto options = metrics::ParseReportQuery({{"format", flags.format}});
    auto report = options.ok() ? metrics::RenderSweepReport(flags.run.db, std::to_string(run.sweep_id), *options)
                               : Result<std::string>(options.status());
    if (report.ok()) {
      write_code = WriteCommandOutput("local", flags.output, *report);
      std::cout << std::flush;
    } else {
      std::cerr << "bakeoff local: no report: " << EscapeControlCharacters(report.status().message()) << "\n";
    }
  };
  const LocalRun run = RunSweepLocally(*yaml, flags.file, run_flags);
  if (run.exit_code != kExitOk) return run.exit_code;
  if (write_code != kExitOk) return write_code;
  const auto& final_state = run.final_state;
  const auto& c = final_state.counts;
  const bool finished = final_state.state == metrics::SweepState::kFinished;
  std::cerr << "bakeoff local: sweep " << run.sweep_id << " " << metrics::SweepStateName(final_state.state) << ": "
            << c.succeeded << " of " << final_state.trial_count << " trials succeeded"
            << (finished && c.cancelled > 0 ? ", " + std::to_string(c.cancelled) + " not needed (adaptive repeats)"
                                            : "")
            << "; results in " << flags.run.db << "\n";
  if (run.interrupted) return kExitInterrupted;
  return SweepSucceeded(finished, c.succeeded, c.cancelled, final_state.trial_count) ? kExitOk : kExitIncomplete;
}

void SetupLocal(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<LocalFlags>();
  auto* cmd = root.add_subcommand("local", "Run a sweep on this machine: a coordinator plus N workers");
  cmd->add_option("file", flags->file, "sweep YAML file")->required();
  cmd->add_option("--format", flags->format, "report format: table|markdown|json|csv|html")->capture_default_str();
  cmd->add_option("--output", flags->output, "write the report to this file instead of stdout");
  AddLocalRunFlags(cmd, &flags->run);
  cmd->callback([flags, exit_code] { *exit_code = RunLocal(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("local", SetupLocal);

}  // namespace bakeoff::cli
