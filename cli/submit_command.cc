// `bakeoff submit FILE [--wait]`: sends a sweep to the coordinator; with --wait, shows
// a live progress line on stderr until the sweep ends, then prints its report.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include <unistd.h>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/progress_eta.h"
#include "cli/sweep_file.h"
#include "protocol/env.h"

namespace bakeoff::cli {
namespace {

struct SubmitFlags {
  std::string file;
  bool wait = false;
  std::string coordinator = DefaultCoordinatorUrl();
  std::string token_file;
  std::string tls_ca;
  std::string format = "table";
  std::string output;
  double poll_s = 1.0;
};

// Set by Ctrl-C (or SIGTERM) while --wait watches: the sweep is the coordinator's, so
// watching stops and the sweep runs on.
volatile std::sig_atomic_t g_stop_watching = 0;
void StopWatching(int) { g_stop_watching = 1; }

int RunSubmit(const SubmitFlags& flags) {
  auto yaml = ReadSweepFile(flags.file);
  if (!yaml.ok()) return ReportFailure("submit", yaml.status());
  auto client = ConnectCoordinator(flags.coordinator, flags.token_file, flags.tls_ca);
  if (!client.ok()) return ReportFailure("submit", client.status());
  auto created = client->PostJson("/api/v1/sweeps", *yaml, "application/yaml");
  if (!created.ok()) return ReportFailure("submit", created.status().WithContext(flags.file));
  const std::string id = std::to_string(created->value("id", 0));
  if (!flags.wait) {
    std::string text = flags.format == "json"
                           ? created->dump(2)
                           : "submitted sweep " + id + " (" + created->value("name", "") + "): " +
                                 std::to_string(created->value("variant_count", 0)) + " variants, " +
                                 std::to_string(created->value("trial_count", 0)) + " trials";
    return WriteCommandOutput("submit", flags.output, text);
  }
  std::cerr << "submitted sweep " << id << " (" << created->value("name", "") << "), "
            << created->value("trial_count", 0) << " trials\n";
  const bool tty = isatty(STDERR_FILENO);
  const Clock& clock = Env::Default().clock();
  const auto start = clock.Now();
  nlohmann::json sweep;
  int failures = 0;
  ProgressEta eta;
  g_stop_watching = 0;
  std::signal(SIGINT, StopWatching);
  std::signal(SIGTERM, StopWatching);
  while (true) {
    if (g_stop_watching) {
      // The flags that reached this coordinator reach it again.
      std::string reach = " --coordinator " + flags.coordinator;
      if (!flags.token_file.empty()) reach += " --token-file " + flags.token_file;
      if (!flags.tls_ca.empty()) reach += " --tls-ca " + flags.tls_ca;
      std::cerr << (tty ? "\n" : "") << "bakeoff submit: stopped watching; sweep " << id
                << " keeps running on the coordinator. Watch it again: bakeoff status " << id << reach
                << "; cancel it: bakeoff cancel " << id << reach << "\n";
      return kExitInterrupted;
    }
    auto got = client->GetJson("/api/v1/sweeps/" + id);
    if (!got.ok()) {
      // The coordinator may be restarting: keep waiting, within reason.
      if (++failures > 60) {
        std::cerr << "\nbakeoff submit: lost the coordinator: " << EscapeControlCharacters(got.status().message()) << "\n";
        return ExitCodeFor(got.status());
      }
    } else {
      failures = 0;
      sweep = *got;
      const auto& c = sweep["counts"];
      ProgressFigures figures;
      figures.total = sweep.value("trial_count", 0L);
      figures.done = c.value("finished", 0L);
      figures.running = c.value("running", 0L) + c.value("assigned", 0L);
      figures.queued = c.value("queued", 0L);
      figures.elapsed_s = std::chrono::duration<double>(clock.Now() - start).count();
      figures.remaining_s = eta.Update(figures.done, figures.total, figures.elapsed_s);
      if (sweep.contains("comparisons")) {
        const auto& a = sweep["comparisons"];
        figures.comparisons = ProgressFigures::Answered{a.value("answered", 0), a.value("total", 0)};
      }
      figures.waiting = sweep.value("waiting", "");
      const std::string line = "sweep " + id + ": " + FormatProgressLine(figures);
      if (tty) {
        std::cerr << "\r\033[K" << line << std::flush;
      } else {
        std::cerr << line << "\n";
      }
      if (sweep.value("state", "running") != "running") break;
    }
    // In short naps, so that Ctrl-C is answered at once.
    const auto wake = clock.Now() + std::chrono::milliseconds(static_cast<int>(flags.poll_s * 1000));
    while (!g_stop_watching && clock.Now() < wake) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (tty) std::cerr << "\n";
  auto report = client->GetText("/api/v1/sweeps/" + id + "/report?format=" + UrlEncode(flags.format));
  if (report.ok()) {
    if (int code = WriteCommandOutput("submit", flags.output, *report); code != kExitOk) return code;
  } else {
    std::cerr << "bakeoff submit: the sweep ended but its report is unavailable: " << EscapeControlCharacters(report.status().message())
              << "\n";
  }
  const auto& c = sweep["counts"];
  const bool all_ok = SweepSucceeded(sweep.value("state", "") == "finished", c.value("succeeded", 0L),
                                     c.value("cancelled", 0L), sweep.value("trial_count", 0L));
  if (!all_ok) {
    std::cerr << "sweep " << id << " " << sweep.value("state", "") << ": " << c.value("succeeded", 0L) << " of "
              << sweep.value("trial_count", 0L) << " trials succeeded\n";
  }
  return all_ok ? kExitOk : kExitIncomplete;
}

void SetupSubmit(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<SubmitFlags>();
  auto* cmd = root.add_subcommand("submit", "Submit a sweep to the coordinator");
  cmd->add_option("file", flags->file, "sweep YAML file")->required();
  cmd->add_flag("--wait", flags->wait, "show progress until the sweep ends, then print its report");
  cmd->add_option("--coordinator", flags->coordinator, "coordinator URL (default $BAKEOFF_COORDINATOR or http://127.0.0.1:8080)");
  cmd->add_option("--token-file", flags->token_file, "file holding the API token (else $BAKEOFF_TOKEN)");
  cmd->add_option("--tls-ca", flags->tls_ca, kTlsCaHelp);
  cmd->add_option("--format", flags->format, "table|json (and markdown|csv|html for the report with --wait)")
      ->capture_default_str();
  cmd->add_option("--output", flags->output, "write the result to this file instead of stdout");
  cmd->add_option("--poll-interval", flags->poll_s, "seconds between progress updates")->capture_default_str();
  cmd->callback([flags, exit_code]() { *exit_code = RunSubmit(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("submit", SetupSubmit);

}  // namespace bakeoff::cli
