#include "coordinator/slurm_config.h"

#include <fstream>

namespace bakeoff::coordinator {

Status SlurmConfig::Validate() {
  if (!enabled()) return Status::Ok();
  auto positive = [](int v, const char* flag) {
    return v >= 1 ? Status::Ok()
                  : Status::InvalidArgument(std::string(flag) + " must be at least 1, got " + std::to_string(v));
  };
  BAKEOFF_RETURN_IF_ERROR(positive(max_nodes, "--slurm-max-nodes"));
  BAKEOFF_RETURN_IF_ERROR(positive(max_pending_jobs, "--slurm-max-pending-jobs"));
  BAKEOFF_RETURN_IF_ERROR(positive(max_submits_per_poll, "--slurm-max-submits-per-poll"));
  if (gpus_per_node < 0) return Status::InvalidArgument("--slurm-gpus-per-node must be >= 0");
  if (gpus_per_node == 0) BAKEOFF_RETURN_IF_ERROR(positive(slots_per_node, "--slurm-slots-per-node"));
  if (signal_seconds < 0 || signal_seconds > 65535) {
    return Status::InvalidArgument("--slurm-signal-seconds must be within 0-65535 (sbatch --signal=USR1@N)");
  }
  if (poll_interval.count() < 100) return Status::InvalidArgument("--slurm-poll-interval must be at least 100ms");
  if (command_timeout.count() < 100) return Status::InvalidArgument("--slurm-command-timeout must be at least 100ms");
  if (job_name.empty() || job_name.size() > 64 ||
      job_name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != std::string::npos) {
    return Status::InvalidArgument("--slurm-job-name \"" + job_name + "\": use 1-64 letters, digits, '.', '_' or '-'");
  }
  if (worker_token_file.empty()) {
    return Status::InvalidArgument(
        "--slurm-partition needs the workers' token file: give --worker-token-file (or --slurm-worker-token-file) "
        "at a path the nodes can read");
  }
  sbatch_args.clear();
  if (!sbatch_args_file.empty()) {
    std::ifstream in(sbatch_args_file);
    if (!in) return Status::InvalidArgument("--slurm-sbatch-args-file '" + sbatch_args_file + "' cannot be read");
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      const auto first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos || line[first] == '#') continue;
      const auto last = line.find_last_not_of(" \t\r");
      std::string arg = line.substr(first, last - first + 1);
      if (arg[0] != '-') {
        return Status::InvalidArgument("--slurm-sbatch-args-file '" + sbatch_args_file + "' line " +
                                       std::to_string(number) + ": \"" + arg +
                                       "\" is not an sbatch option (one option per line, e.g. --constraint=a100)");
      }
      sbatch_args.push_back(std::move(arg));
    }
  }
  return Status::Ok();
}

}  // namespace bakeoff::coordinator
