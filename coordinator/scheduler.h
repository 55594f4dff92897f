// Scheduler: decides which queued trials start now and where. Pure: it sees queues
// and free capacity and returns placements; the coordinator applies them.
//  - Gang allocation: all ranks of a trial are placed at once or not at all; on one
//    worker when one has room, else spread over several (rank 0 on the worker with the
//    most ranks).
//  - Order: each sweep's queue is taken strictly in its order (interleaved by the
//    spec); a head that does not fit holds back its own sweep only.
//  - Fairness: sweeps take turns (round robin, one trial per turn, resuming after the
//    sweep served last).
//  - Executors: a command trial's ranks go only to workers offering its template.
//  - GPU type: a trial of a sweep naming resources.gpu_type goes only to workers whose
//    GPU model matches it.
//  - Repeats spread: among workers with room, the one that has run this variant the
//    fewest times is preferred (so a worker's speed does not masquerade as an effect).
//  - Balanced pairs: a trial with a `pinned_worker` (its pair group's worker, chosen by
//    the coordinator) goes whole onto that worker or waits; a pinned trial that waits
//    does not hold back its sweep's later trials (the pair's partner is placed with it
//    later, so both sides of every pair run on one worker and its speed cancels). Within
//    one call, the first trial of a `pair_group` placed whole names the group's worker
//    for the rest of the call (the coordinator records it for later calls).
//  - Lockstep groups (docs/lockstep.md): a lockstep trial placed whole on one worker
//    takes with it its pair group's other queued trials of the same width that the
//    worker offers the executor of, onto the same ranks, in queue order (the turn order);
//    they take no capacity of their own. A trial placed over several workers runs alone.
// Thread-safety: not thread-safe (keeps the round-robin cursor).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace bakeoff::coordinator {

struct SchedulerWorker {
  std::string id;
  int free_cpu_slots = 0;
  std::vector<int> free_cuda_devices;
  std::vector<std::string> executors;  // command templates it offers
  std::string gpu_model;               // its CUDA devices' model ("" unknown)
};

struct SchedulerTrial {
  std::int64_t trial_id = 0;
  std::string variant_key;
  int world_size = 1;
  bool cuda = false;  // needs one CUDA device per rank (else one CPU slot per rank)
  // With cuda: the sweep's resources.gpu_type; only workers whose gpu_model it is part
  // of take the trial (protocol::GpuTypeMatches). "" = any.
  std::string gpu_type;
  // executor: command: the template every rank's worker must offer; "" = the native trainer.
  std::string executor;
  // Place all ranks on this worker or not at all now; "" = anywhere.
  std::string pinned_worker;
  // Its pair group ("" none): when a trial of a group is placed whole on one worker, the
  // group's later trials in the same call are pinned to that worker too.
  std::string pair_group;
  // order: lockstep: when placed whole, the group's queued trials of the same width that
  // the worker can run go with it, onto the same ranks (TrialPlacement::lockstep).
  bool lockstep = false;
};

struct SchedulerSweep {
  std::int64_t sweep_id = 0;
  std::vector<SchedulerTrial> queue;  // queued trials in run order
};

struct RankAssignment {
  int rank = 0;
  std::string worker_id;
  int local_rank = 0;
  int cuda_device = -1;  // -1 on CPU
};

struct TrialPlacement {
  std::int64_t trial_id = 0;
  std::int64_t sweep_id = 0;
  std::vector<RankAssignment> ranks;  // by rank; ranks[0] is rank 0
  // A side of a lockstep group: the group's sides share these ranks' units (the first
  // side's placement takes them; the others, placed right after it, take none).
  std::optional<protocol::LockstepSide> lockstep;
};

class Scheduler {
 public:
  Scheduler();

  // How many attempts of `variant_key` (in `sweep_id`) have run on `worker_id`.
  using HistoryFn = std::function<int(std::int64_t sweep_id, const std::string& variant_key,
                                      const std::string& worker_id)>;

  // Places as many trials as fit. `workers` are the schedulable workers (their free
  // capacity is consumed by the placements returned).
  std::vector<TrialPlacement> Schedule(const std::vector<SchedulerSweep>& sweeps,
                                       std::vector<SchedulerWorker> workers,
                                       const HistoryFn& history);

 private:
  // The group's other queued trials that go with `head` (placed whole), as placements.
  std::vector<TrialPlacement> LockstepMates(const SchedulerSweep& sweep, std::size_t head_index,
                                            TrialPlacement& head, const SchedulerWorker& worker);

  std::int64_t last_served_sweep_ = -1;
  // Names lockstep groups: unique per coordinator process, and across its restarts by
  // its random start (a worker may still run an older group's survivor).
  std::uint64_t next_group_;
};

}  // namespace bakeoff::coordinator
