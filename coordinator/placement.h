// Placement (docs/sweep.md, "Placement"), the pure part: what one scheduling round
// offers the Scheduler (the workers with room, each sweep's queued trials as far as the
// free units reach, each trial pinned to its pair group's worker when that worker can
// take it), and what a placement becomes (the attempt record the store keeps, one part
// per worker). CoordinatorService stores the attempt, reserves and sends.
// Thread-safety: pure functions of what they are given; call on the coordinator's
// executor, which owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "coordinator/coordinator_views.h"
#include "coordinator/scheduler.h"
#include "coordinator/sweep_entry.h"
#include "coordinator/trial_table.h"
#include "coordinator/worker_registry.h"
#include "metrics/store/store_records.h"
#include "protocol/messages.h"

namespace bakeoff::coordinator {

// Where a trial's pair group wants it: free (no group worker yet, or one that can no
// longer take it: the pair is then split, and the report calls the comparison
// confounded with its workers), pinned to the group's worker (`pinned` gets its id) or
// busy (that worker has no room now: the trial waits).
enum class PairPlacement { kFree, kPinned, kBusy };
PairPlacement PairWorker(const SweepEntry& sweep, const TrialEntry& trial, const VariantInfo& variant,
                         const WorkerRegistry& registry, const Connected& connected, std::string& pinned);

// One scheduling round's input: the schedulable, connected workers with free units, and
// per unfinished sweep its queued trials from the queue cursor (which it advances past
// trials no longer queued) until they cover the free units. A trial whose pair group
// already has one in the round does not count against them; a busy pinned one is left out.
struct SchedulingRound {
  std::vector<SchedulerWorker> workers;
  std::vector<SchedulerSweep> sweeps;
};
SchedulingRound CollectQueued(TrialTable& table, const WorkerRegistry& registry, const Connected& connected);

// The attempt the store records for `placement` of trial `trial_id`: rank 0's worker and
// host, every rank's place, simulated when any of its workers simulates.
metrics::AttemptRecord AttemptRecordOf(std::int64_t trial_id, const TrialPlacement& placement,
                                       const WorkerRegistry& registry);
// The placement's ranks grouped per worker, in the order the workers first appear.
std::vector<TrialPart> PartsOf(const TrialPlacement& placement);
// Holds `part`'s CPU slots or CUDA devices on its worker for attempt `ref`; ReleasePart
// gives them back.
void ReservePart(WorkerRegistry& registry, const TrialPart& part, const protocol::AttemptRef& ref);
void ReleasePart(WorkerRegistry& registry, const TrialPart& part, const protocol::AttemptRef& ref);
// The `assign` frame that tells `part`'s worker to run its ranks of attempt `ref` of
// `trial` (of `sweep`), whose rank 0 serves the rendezvous at `store_address`.
protocol::AssignMessage AssignMessageOf(const TrialEntry& trial, const SweepEntry& sweep, const TrialPart& part,
                                        const protocol::AttemptRef& ref, const std::string& store_address);

// How many attempts of each sweep's variant each worker has been given this process: the
// Scheduler spreads a variant's trials over the workers by it (Scheduler::HistoryFn).
class PlacementHistory {
 public:
  int Count(std::int64_t sweep_id, const std::string& variant_key, const std::string& worker_id) const;
  void Add(std::int64_t sweep_id, const std::string& variant_key, const std::string& worker_id);
  void ForgetSweep(std::int64_t sweep_id);
  void Clear() { counts_.clear(); }

 private:
  std::map<std::tuple<std::int64_t, std::string, std::string>, int> counts_;
};

}  // namespace bakeoff::coordinator
