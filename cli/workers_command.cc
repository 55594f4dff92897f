// `bakeoff workers`: the workers a coordinator knows, with their capacity and trials.
#include <cstdio>

#include "cli/api_client_flags.h"
#include "cli/command_registry.h"
#include "cli/coordinator_client.h"

namespace bakeoff::cli {
namespace {

struct WorkersFlags {
  ApiClientFlags api;
};

int RunWorkers(const WorkersFlags& flags) {
  auto workers = GetFromCoordinator(flags.api, "/api/v1/workers");
  if (!workers.ok()) return ReportFailure("workers", workers.status());
  std::string text;
  if (flags.api.format == "json") {
    text = workers->dump(2);
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& w : *workers) {
      std::string running;
      for (const auto& a : w["running"]) {
        running += (running.empty() ? "" : ",") + std::to_string(a.value("trial_id", 0)) + "#" +
                   std::to_string(a.value("attempt", 0));
      }
      char ago[32];
      snprintf(ago, sizeof(ago), "%.1f s", w.value("last_heartbeat_s_ago", 0.0));
      rows.push_back({w.value("id", ""), w.value("host", ""),
                      w.value("state", "") + (w.value("connected", false) ? "" : " (disconnected)"),
                      std::to_string(w.value("cpu_slots_used", 0)) + "/" + std::to_string(w.value("cpu_slots", 0)),
                      std::to_string(w["cuda_devices_used"].size()) + "/" + std::to_string(w["cuda_devices"].size()),
                      running.empty() ? "-" : running, ago});
    }
    std::vector<std::string> header{"WORKER", "HOST", "STATE", "CPU SLOTS", "GPUS", "RUNNING (trial#attempt)",
                                    "HEARTBEAT"};
    std::vector<bool> right{false, false, false, true, true, false, true};
    // Workers started by Slurm (docs/slurm.md): their job, in a column shown only then.
    bool slurm = false;
    for (const auto& w : *workers) slurm = slurm || !w.value("slurm_job_id", "").empty();
    if (slurm) {
      header.push_back("SLURM JOB");
      right.push_back(true);
      std::size_t i = 0;
      for (const auto& w : *workers) {
        const std::string job = w.value("slurm_job_id", "");
        rows[i++].push_back(job.empty() ? "-" : job);
      }
    }
    text = RenderTextTable(header, rows, right);
    if (rows.empty()) text += "(no workers registered)\n";
  }
  return WriteCommandOutput("workers", flags.api.output, text);
}

void SetupWorkers(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<WorkersFlags>();
  auto* cmd = root.add_subcommand("workers", "List the coordinator's workers");
  AddApiClientOptions(cmd, &flags->api);
  cmd->callback([flags, exit_code]() { *exit_code = RunWorkers(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("workers", SetupWorkers);

}  // namespace bakeoff::cli
