// SlurmClient: the three Slurm commands the provisioner uses, as an interface so that
// its tests can stand in a fake (and fail on purpose). Every call returns at once and
// completes `done` later on the executor given to the implementation; none blocks it.
// Thread-safety: call from that executor only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "protocol/status.h"

namespace bakeoff::coordinator {

struct SlurmSubmitRequest {
  int nodes = 1;
  std::vector<std::string> sbatch_args;  // everything but the script
  std::string script_path;
};

struct SlurmQueueEntry {
  std::string id;
  std::string state;   // squeue %T: PENDING, RUNNING, COMPLETING, ...
  int nodes = 1;       // %D
  std::string reason;  // %r
};

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  // sbatch: the new job's id, or why it was refused (exit status and stderr).
  virtual void Submit(const SlurmSubmitRequest& request, std::function<void(Result<std::string>)> done) = 0;
  // squeue: the jobs named `job_name` that Slurm still knows.
  virtual void Query(const std::string& job_name, std::function<void(Result<std::vector<SlurmQueueEntry>>)> done) = 0;
  // scancel of these job ids.
  virtual void Cancel(const std::vector<std::string>& job_ids, std::function<void(Status)> done) = 0;
};

}  // namespace bakeoff::coordinator
