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
  // Ports for the trials' TCPStores that no other job on this node uses: Slurm's
  // reserved ports of the step (SLURM_STEP_RESV_PORTS, with MpiParams=ports=...), else a
  // window of kStorePortWindow ports inside 29500-29999 chosen by the job id (two jobs
  // sharing a node collide only when their ids differ by a multiple of 50).
  protocol::PortRange store_ports{29500, 29999};
  std::string store_ports_source;

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
  bool store_ports = false;
};

inline constexpr int kStorePortWindow = 10;

// Fills `config` from a present allocation: job id; name "<node>-<job>" (unique per job,
// so two jobs sharing a node never collide); advertised host = the node name; CUDA
// devices = `gpus`, with cpu_slots 0 unless --slots was given (then both are offered);
// store ports = `store_ports` (workers of two jobs on one node must not hand out the
// same TCPStore port).
// `slots_given` says whether --slots was on the command line. No-op when !present().
void ApplySlurmAllocation(const SlurmAllocation& allocation, const ExplicitWorkerFlags& given, bool slots_given,
                          WorkerConfig& config);

}  // namespace bakeoff::worker
