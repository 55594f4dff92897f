// SlurmPolicy: decides how many Slurm worker jobs to submit and which to cancel, from
// the queued trials, the capacity of the workers the coordinator has, and the jobs it
// already asked for. Pure: no processes, no clock of its own (times come in), so every
// rule is tested without Slurm.
//  - Demand: the queued trials of the kind the Slurm workers offer (GPU trials when
//    gpus_per_node > 0, else CPU), in queue order, at most kMaxLookahead of them.
//  - Supply: the free units (GPUs or CPU slots) of every schedulable worker, and one
//    node's worth for every node of our jobs whose worker has not registered yet
//    (pending in Slurm's queue or starting).
//  - Placement as the Scheduler does it: a trial fits on one worker with room, else
//    spread over several; what fits nowhere opens new nodes: ceil(world_size / units)
//    nodes in one job (gang: Slurm starts all of them together, never half a trial), a
//    small trial one node that later small trials share.
//  - Limits: new jobs are taken in order while the nodes held stay within max_nodes,
//    the jobs not yet fully registered within max_pending_jobs, and at most
//    max_submits_per_poll; the first that does not fit stops the rest (so a gang is
//    not starved by smaller trials behind it). A trial wider than max_nodes nodes is
//    unplaceable and reported.
//  - Cancel: once no trial of that kind waits, a job is cancelled when none of its
//    workers has run anything for idle_grace (a job still pending in Slurm's queue
//    too); a running job whose workers have not all registered within
//    worker_start_timeout is cancelled whatever waits.
// Thread-safety: a value; not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "protocol/clock.h"

namespace bakeoff::coordinator {

enum class SlurmJobState { kPending, kRunning, kEnding };

// One of our worker jobs as squeue last reported it, with what the coordinator knows.
struct SlurmJob {
  std::string id;
  int nodes = 1;
  SlurmJobState state = SlurmJobState::kPending;
  std::string reason;  // squeue's %r for a pending job (Resources, Priority, ...)
  Clock::TimePoint submitted_at{};
  std::optional<Clock::TimePoint> running_since;
  int registered_workers = 0;  // workers that registered with this SLURM_JOB_ID (live or since gone)
  int busy_workers = 0;        // of those, how many run an attempt
  // When the job last did something or something waited for it: the idle clock's start.
  Clock::TimePoint last_active{};
};

struct SlurmPolicyLimits {
  int units_per_node = 1;  // GPUs (or CPU slots) one worker node offers
  int max_nodes = 4;
  int max_pending_jobs = 4;
  int max_submits_per_poll = 4;
  std::chrono::milliseconds idle_grace{std::chrono::minutes(5)};
  std::chrono::milliseconds worker_start_timeout{std::chrono::minutes(10)};
};

struct SlurmPlan {
  std::vector<int> submit_nodes;           // one entry per job to submit: its node count
  std::vector<std::string> cancel;         // job ids to scancel
  std::vector<std::string> cancel_reasons;  // parallel to `cancel`, for the log
  int demand = 0;        // queued trials of the Slurm workers' kind looked at
  int unplaceable = 0;   // trials wider than max_nodes nodes
  int held_back = 0;     // nodes wanted beyond the limits (they wait for capacity to free)
};

class SlurmPolicy {
 public:
  static constexpr std::size_t kMaxLookahead = 4096;

  explicit SlurmPolicy(SlurmPolicyLimits limits) : limits_(limits) {}

  // `queued`: world sizes of the waiting trials of the workers' kind, in queue order.
  // `free_units`: free units of each schedulable worker (any worker, Slurm's or not).
  // `jobs`: our jobs (their last_active is read, not updated: the provisioner keeps it).
  SlurmPlan Plan(const std::vector<int>& queued, const std::vector<int>& free_units,
                 const std::vector<SlurmJob>& jobs, Clock::TimePoint now) const;

  const SlurmPolicyLimits& limits() const { return limits_; }

 private:
  SlurmPolicyLimits limits_;
};

}  // namespace bakeoff::coordinator
