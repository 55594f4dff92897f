// SlurmConfig: how `bakeoff coordinator --slurm-partition P` obtains workers from Slurm
// (docs/slurm.md lists every flag and limit). Off while `partition` is empty. Parsed once
// from flags by the CLI; SlurmConfig::Validate checks it before the coordinator starts.
// Thread-safety: a value.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "protocol/status.h"

namespace bakeoff::coordinator {

struct SlurmConfig {
  // Partition worker jobs are submitted to (sbatch --partition); "" = Slurm off.
  std::string partition;
  std::string account;     // sbatch --account; "" = the user's default
  std::string qos;         // sbatch --qos; "" = the default
  std::string time_limit;  // sbatch --time (e.g. 4:00:00); "" = the partition's default
  // Nodes held at once by all worker jobs together, pending and running (each node runs
  // one worker). A trial needing more nodes than this never gets them (its sweep's
  // waiting reason says so).
  int max_nodes = 4;
  // Jobs submitted whose workers have not all registered yet (pending in Slurm's queue or
  // starting); no more are submitted past it, so a busy cluster does not collect an
  // unbounded queue of our jobs.
  int max_pending_jobs = 4;
  // sbatch calls per poll (a burst bound on top of the two limits above).
  int max_submits_per_poll = 4;
  // GPUs per worker node (sbatch --gpus-per-node; the worker offers the allocation's
  // GPUs). 0: CPU workers offering `slots_per_node` slots (sbatch --cpus-per-task).
  int gpus_per_node = 0;
  int slots_per_node = 1;
  // A worker job whose workers have run nothing while no trial waited for this long is
  // cancelled (scancel), as is a job still pending in Slurm's queue once nothing waits.
  std::chrono::milliseconds idle_grace{std::chrono::minutes(5)};
  // A running job whose workers have not all registered by then is cancelled (its
  // output file says why, e.g. a wrong binary path or an unreachable coordinator).
  std::chrono::milliseconds worker_start_timeout{std::chrono::minutes(10)};
  // How often squeue is asked about our jobs and demand is compared with capacity.
  std::chrono::milliseconds poll_interval{std::chrono::seconds(10)};
  // A sbatch/squeue/scancel call running longer is killed and counts as failed.
  std::chrono::milliseconds command_timeout{std::chrono::seconds(30)};
  // sbatch --signal=USR1@N: Slurm signals each worker N seconds before the time limit,
  // and the worker requeues its trials and leaves (0: no early signal; SIGTERM at the
  // limit does the same).
  int signal_seconds = 120;
  // sbatch --job-name; squeue finds this coordinator's jobs by it, so give every
  // coordinator sharing a cluster account its own name. Jobs of this name found at start
  // (a restarted coordinator's) are adopted.
  std::string job_name = "bakeoff-worker";
  // A file of more sbatch arguments, one per line ('#' comments and blank lines
  // skipped), e.g. --constraint=a100 or --reservation=x; "" = none.
  std::string sbatch_args_file;
  std::vector<std::string> sbatch_args;  // read from sbatch_args_file by Validate
  // What the job runs: `worker_binary worker --coordinator coordinator_address
  // --token-file worker_token_file [--slots N] worker_args...` under srun, one task per
  // node. The token file and binary must be readable at these paths on the nodes.
  std::string worker_binary;       // default: this bakeoff binary
  // HOST:PORT the workers dial; default: --worker-listen's address and bound port (this
  // host's name when it listens on every interface), filled by CoordinatorNode.
  std::string coordinator_address;
  std::string worker_token_file;    // default: the coordinator's --worker-token-file
  std::vector<std::string> worker_args;
  // The generated batch script and the jobs' output files (%x-%j.out); default: a
  // `slurm` directory next to the results database. Must be on a shared file system.
  std::string work_dir;
  // The Slurm commands (absolute paths or names looked up in PATH).
  std::string sbatch = "sbatch";
  std::string squeue = "squeue";
  std::string scancel = "scancel";

  bool enabled() const { return !partition.empty(); }
  // Checks the values and reads sbatch_args_file. InvalidArgument naming the flag.
  Status Validate();
};

}  // namespace bakeoff::coordinator
