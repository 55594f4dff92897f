// SlurmAllocation: what a worker started inside a Slurm job learns from its environment
// (docs/slurm.md, "The worker inside a job"): the job id it records and reports at
// registration, the node name it takes its name and host from, and the GPUs Slurm gave
// it. Pure: the environment comes in as a lookup function, so tests need no Slurm.
// Thread-safety: values and free functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "protocol/status.h"
#include "worker/worker_config.h"

namespace bakeoff::worker {

struct SlurmAllocation {
  std::string job_id;     // SLURM_JOB_ID; "" = not inside a Slurm job
  std::string node_name;  // SLURMD_NODENAME (else SLURM_TOPOLOGY_ADDR, else "")
  // The GPUs this worker may use, in the numbering its own CUDA_VISIBLE_DEVICES (and so
  // its ranks') uses: CUDA_VISIBLE_DEVICES when Slurm set it (gres/gpu does), else
  // SLURM_STEP_GPUS, else SLURM_JOB_GPUS. Empty on CPU-only allocations.
  std::vector<int> gpus;
  // Where `gpus` came from ("" when none), for the worker's log line.
  std::string gpus_source;

  bool present() const { return !job_id.empty(); }
};

// Returns the allocation described by `getenv` (nullptr for unset variables).
// InvalidArgument naming the variable when a GPU list is not a list of ordinals (GPU
// UUIDs, MIG names): the operator then gives --cuda-devices.
Result<SlurmAllocation> ReadSlurmAllocation(const std::function<const char*(const char*)>& getenv);

// What the command line set explicitly; the allocation fills only the rest.
struct ExplicitWorkerFlags {
  bool name = false;
  bool host = false;
  bool cuda_devices = false;
};

// Fills `config` from a present allocation: job id; name "<node>-<job>" (unique per job,
// so two jobs sharing a node never collide); advertised host = the node name; CUDA
// devices = `gpus`, with cpu_slots 0 unless --slots was given (then both are offered).
// `slots_given` says whether --slots was on the command line. No-op when !present().
void ApplySlurmAllocation(const SlurmAllocation& allocation, const ExplicitWorkerFlags& given, bool slots_given,
                          WorkerConfig& config);

}  // namespace bakeoff::worker
