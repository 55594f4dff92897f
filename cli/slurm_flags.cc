#include "cli/slurm_flags.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "experiments/sweep/duration.h"

namespace bakeoff::cli {
namespace {

// "500ms", or what spec::ParseDuration takes ("10s", "5m", "1h").
Result<std::chrono::milliseconds> ParseMillis(const std::string& flag, const std::string& text) {
  if (text.size() > 2 && text.compare(text.size() - 2, 2, "ms") == 0) {
    try {
      std::size_t used = 0;
      long long ms = std::stoll(text.substr(0, text.size() - 2), &used);
      if (used == text.size() - 2 && ms >= 0) return std::chrono::milliseconds(ms);
    } catch (const std::exception&) {
    }
  } else if (auto s = spec::ParseDuration(text); s.ok()) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(*s);
  }
  return Status::InvalidArgument(flag + " '" + text + "': expected a duration such as 500ms, 10s, 5m or 1h");
}

std::string ThisBinary() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("bakeoff") : exe.string();
}

}  // namespace

void AddSlurmFlags(CLI::App* cmd, SlurmFlags* f) {
  auto& c = f->config;
  const char* group = "Slurm (docs/slurm.md)";
  auto add = [&](const std::string& name, auto& value, const std::string& help) {
    return cmd->add_option(name, value, help)->group(group);
  };
  add("--slurm-partition", c.partition,
      "obtain workers from Slurm: submit worker jobs to this partition when queued trials need capacity");
  add("--slurm-account", c.account, "sbatch --account of the worker jobs");
  add("--slurm-qos", c.qos, "sbatch --qos of the worker jobs");
  add("--slurm-time-limit", c.time_limit, "sbatch --time of the worker jobs, e.g. 4:00:00 (default: the partition's)");
  add("--slurm-max-nodes", c.max_nodes, "nodes held by all worker jobs together, pending and running")
      ->capture_default_str();
  add("--slurm-max-pending-jobs", c.max_pending_jobs,
      "worker jobs submitted whose workers have not registered yet; no more are submitted past it")
      ->capture_default_str();
  add("--slurm-max-submits-per-poll", c.max_submits_per_poll, "sbatch calls per poll")->capture_default_str();
  add("--slurm-gpus-per-node", c.gpus_per_node,
      "GPUs per worker node (sbatch --gpus-per-node); 0: CPU workers with --slurm-slots-per-node slots")
      ->capture_default_str();
  add("--slurm-slots-per-node", c.slots_per_node, "CPU slots each CPU worker offers (sbatch --cpus-per-task)")
      ->capture_default_str();
  add("--slurm-idle-grace", f->idle_grace,
      "cancel a worker job once its workers ran nothing and no trial waited for this long")
      ->capture_default_str();
  add("--slurm-worker-start-timeout", f->worker_start_timeout,
      "cancel a running job whose workers have not registered by then")
      ->capture_default_str();
  add("--slurm-poll-interval", f->poll_interval, "how often squeue is read and demand compared with capacity")
      ->capture_default_str();
  add("--slurm-command-timeout", f->command_timeout, "sbatch/squeue/scancel running longer are killed")
      ->capture_default_str();
  add("--slurm-signal-seconds", c.signal_seconds,
      "sbatch --signal=USR1@N: workers requeue their trials and leave N s before the time limit (0: none)")
      ->capture_default_str();
  add("--slurm-job-name", c.job_name, "job name of the worker jobs (unique per coordinator: squeue finds ours by it)")
      ->capture_default_str();
  add("--slurm-sbatch-args-file", c.sbatch_args_file,
      "file of more sbatch options, one per line (e.g. --constraint=a100, --reservation=x)");
  add("--slurm-worker-binary", c.worker_binary, "bakeoff binary the jobs run (default: this one; a path on the nodes)");
  add("--slurm-worker-token-file", c.worker_token_file,
      "worker token file the jobs' workers read (default: --worker-token-file; a path on the nodes)");
  add("--slurm-worker-args", f->worker_args,
      "more `bakeoff worker` flags for the jobs, split on whitespace (e.g. \"--data-root /data --executors x.yaml\")");
  add("--slurm-coordinator-address", c.coordinator_address,
      "HOST:PORT the jobs' workers dial (default: --worker-listen's address and port, this host's name for 0.0.0.0)");
  add("--slurm-work-dir", c.work_dir,
      "the generated batch script and the jobs' output files (default: slurm/ next to --db; shared with the nodes)");
  add("--slurm-sbatch", c.sbatch, "sbatch command")->capture_default_str();
  add("--slurm-squeue", c.squeue, "squeue command")->capture_default_str();
  add("--slurm-scancel", c.scancel, "scancel command")->capture_default_str();
}

Status FinishSlurmFlags(SlurmFlags& f, const std::string& worker_token_file, coordinator::CoordinatorConfig& config) {
  auto& c = f.config;
  if (!c.enabled()) return Status::Ok();
  for (auto [flag, text, out] : {std::tuple{"--slurm-idle-grace", &f.idle_grace, &c.idle_grace},
                                 std::tuple{"--slurm-worker-start-timeout", &f.worker_start_timeout, &c.worker_start_timeout},
                                 std::tuple{"--slurm-poll-interval", &f.poll_interval, &c.poll_interval},
                                 std::tuple{"--slurm-command-timeout", &f.command_timeout, &c.command_timeout}}) {
    auto ms = ParseMillis(flag, *text);
    if (!ms.ok()) return ms.status();
    *out = *ms;
  }
  std::istringstream words(f.worker_args);
  c.worker_args.clear();
  for (std::string w; words >> w;) c.worker_args.push_back(w);
  std::error_code ec;
  if (c.worker_token_file.empty() && !worker_token_file.empty()) {
    c.worker_token_file = std::filesystem::absolute(worker_token_file, ec).string();
  }
  if (c.worker_binary.empty()) c.worker_binary = ThisBinary();
  if (c.work_dir.empty()) {
    auto db = std::filesystem::absolute(config.db_path, ec);
    c.work_dir = (db.parent_path() / "slurm").string();
  }
  BAKEOFF_RETURN_IF_ERROR(c.Validate());
  config.slurm = c;
  return Status::Ok();
}

}  // namespace bakeoff::cli
