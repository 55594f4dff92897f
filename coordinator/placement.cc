#include "coordinator/placement.h"

#include <algorithm>
#include <map>
#include <set>

namespace bakeoff::coordinator {

PairPlacement PairWorker(const SweepEntry& sweep, const TrialEntry& trial, const VariantInfo& variant,
                         const WorkerRegistry& registry, const Connected& connected, std::string& pinned) {
  const std::string group = PairGroup(trial.variant_key, variant, trial.repeat);
  auto it = group.empty() ? sweep.pair_workers.end() : sweep.pair_workers.find(group);
  if (it == sweep.pair_workers.end()) return PairPlacement::kFree;
  const WorkerInfo* w = registry.Find(it->second);
  // A worker that left, or one too small for this trial, cannot take it: the pair is then
  // split, and the report calls the comparison confounded with its workers.
  if (!w || !w->schedulable() || !connected(it->second)) return PairPlacement::kFree;
  const std::string executor = variant.CommandTemplate();
  if (!executor.empty() && std::find(w->executors.begin(), w->executors.end(), executor) == w->executors.end()) {
    return PairPlacement::kFree;
  }
  const int need = std::max(1, variant.world_size);
  if (w->capacity(sweep.cuda) < need) return PairPlacement::kFree;
  if (sweep.cuda && !protocol::GpuTypeMatches(w->resources.gpu_model, sweep.gpu_type)) return PairPlacement::kFree;
  const int room = sweep.cuda ? static_cast<int>(w->free_cuda_devices().size()) : w->free_cpu_slots();
  if (room < need) return PairPlacement::kBusy;
  pinned = it->second;
  return PairPlacement::kPinned;
}

SchedulingRound CollectQueued(TrialTable& table, const WorkerRegistry& registry, const Connected& connected) {
  // Workers with room only; every trial placed takes at least one of their free units
  // (CPU slots, CUDA devices), so no sweep needs more of its queue than that.
  SchedulingRound round;
  std::vector<SchedulerWorker>& workers = round.workers;
  std::size_t free_units = 0;
  for (const auto& [id, info] : registry.workers()) {
    if (!info.schedulable()) continue;
    const int cpu = info.free_cpu_slots();
    std::vector<int> cuda = info.free_cuda_devices();
    if ((cpu <= 0 && cuda.empty()) || !connected(id)) continue;
    free_units += static_cast<std::size_t>(std::max(0, cpu)) + cuda.size();
    workers.push_back(SchedulerWorker{id, cpu, std::move(cuda), info.executors, info.resources.gpu_model});
  }
  if (workers.empty()) return round;
  for (const auto& [sid, sweep] : table.sweeps()) {
    if (sweep.done || sweep.cancelled) continue;
    SchedulerSweep s;
    s.sweep_id = sid;
    const std::size_t queued_from = table.AdvanceQueueCursor(sid);
    // A trial whose pair group already has a trial in this queue may wait for that
    // trial's worker, so it does not count against the free units.
    std::set<std::string> groups_queued;
    std::size_t counted = 0;
    for (std::size_t i = queued_from; i < sweep.trial_order.size(); ++i) {
      const std::int64_t tid = sweep.trial_order[i];
      const TrialEntry& trial = table.Trial(tid);
      if (trial.machine.phase() != TrialState::kQueued || trial.cancel_requested) continue;
      auto v = sweep.variants.find(trial.variant_key);
      // Past the free units, only the rest of a group already in the round: a lockstep
      // group is placed whole in one call, or its first side runs alone.
      if (counted >= free_units &&
          (v == sweep.variants.end() ||
           !groups_queued.count(PairGroup(trial.variant_key, v->second, trial.repeat)))) {
        break;
      }
      SchedulerTrial queued{tid, trial.variant_key, v == sweep.variants.end() ? 1 : v->second.world_size,
                            sweep.cuda, sweep.gpu_type, v == sweep.variants.end() ? "" : v->second.CommandTemplate(),
                            "", ""};
      if (v != sweep.variants.end()) {
        switch (PairWorker(sweep, trial, v->second, registry, connected, queued.pinned_worker)) {
          case PairPlacement::kBusy: continue;  // its pair's worker has no room: it waits, uncounted
          case PairPlacement::kPinned:
          case PairPlacement::kFree: break;
        }
        queued.pair_group = PairGroup(trial.variant_key, v->second, trial.repeat);
        queued.lockstep = sweep.lockstep;
      }
      if (queued.pair_group.empty() || groups_queued.insert(queued.pair_group).second) ++counted;
      s.queue.push_back(std::move(queued));
    }
    if (!s.queue.empty()) round.sweeps.push_back(std::move(s));
  }
  return round;
}

metrics::AttemptRecord AttemptRecordOf(std::int64_t trial_id, const TrialPlacement& placement,
                                       const WorkerRegistry& registry) {
  metrics::AttemptRecord record;
  record.trial_id = trial_id;
  record.worker_id = placement.ranks.front().worker_id;
  const WorkerInfo* rank0 = registry.Find(record.worker_id);
  record.host = rank0 ? rank0->host : "";
  bool simulated = false;
  for (const auto& r : placement.ranks) {
    const WorkerInfo* w = registry.Find(r.worker_id);
    simulated = simulated || (w && w->simulate);
    record.ranks.push_back(metrics::RankPlacement{
        r.rank, r.worker_id, w ? w->host : "",
        r.cuda_device >= 0 ? "cuda:" + std::to_string(r.cuda_device) : "cpu"});
  }
  record.simulated = simulated;
  return record;
}

std::vector<TrialPart> PartsOf(const TrialPlacement& placement) {
  std::vector<TrialPart> parts;
  for (const auto& r : placement.ranks) {
    auto part = std::find_if(parts.begin(), parts.end(), [&](const TrialPart& p) { return p.worker_id == r.worker_id; });
    if (part == parts.end()) {
      parts.push_back(TrialPart{r.worker_id, {}, r.cuda_device >= 0, placement.lockstep});
      part = parts.end() - 1;
    }
    part->cuda = r.cuda_device >= 0;
    protocol::RankSlot slot{r.rank, r.local_rank, {}};
    if (r.cuda_device >= 0) slot.cuda_devices = {r.cuda_device};
    part->ranks.push_back(slot);
  }
  return parts;
}

namespace {
std::vector<int> DevicesOf(const TrialPart& part) {
  std::vector<int> devices;
  for (const auto& slot : part.ranks) devices.insert(devices.end(), slot.cuda_devices.begin(), slot.cuda_devices.end());
  return devices;
}
}  // namespace

void ReservePart(WorkerRegistry& registry, const TrialPart& part, const protocol::AttemptRef& ref) {
  registry.Reserve(part.worker_id, ref, part.cuda ? 0 : static_cast<int>(part.ranks.size()), DevicesOf(part),
                   part.lockstep ? part.lockstep->group : std::string());
}

void ReleasePart(WorkerRegistry& registry, const TrialPart& part, const protocol::AttemptRef& ref) {
  registry.Release(part.worker_id, ref, part.cuda ? 0 : static_cast<int>(part.ranks.size()), DevicesOf(part));
}

protocol::AssignMessage AssignMessageOf(const TrialEntry& trial, const SweepEntry& sweep, const TrialPart& part,
                                        const protocol::AttemptRef& ref, const std::string& store_address) {
  const VariantInfo& variant = sweep.variants.at(trial.variant_key);
  protocol::AssignMessage assign;
  assign.attempt = ref;
  assign.sweep_id = std::to_string(trial.sweep_id);
  assign.variant_key = trial.variant_key;
  assign.config = variant.config.Merged();
  assign.ranks = part.ranks;
  assign.world_size = variant.world_size;
  assign.store_address = store_address;
  assign.timeout_ms = sweep.timeout_ms;
  if (part.lockstep) {
    assign.lockstep = part.lockstep;
    assign.lockstep->turn_timeout_ms = sweep.turn_timeout_ms;
  }
  return assign;
}

int PlacementHistory::Count(std::int64_t sweep_id, const std::string& variant_key,
                            const std::string& worker_id) const {
  auto it = counts_.find({sweep_id, variant_key, worker_id});
  return it == counts_.end() ? 0 : it->second;
}

void PlacementHistory::Add(std::int64_t sweep_id, const std::string& variant_key, const std::string& worker_id) {
  ++counts_[{sweep_id, variant_key, worker_id}];
}

void PlacementHistory::ForgetSweep(std::int64_t sweep_id) {
  counts_.erase(counts_.lower_bound({sweep_id, std::string(), std::string()}),
                counts_.lower_bound({sweep_id + 1, std::string(), std::string()}));
}

}  // namespace bakeoff::coordinator
