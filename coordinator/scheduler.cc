#include "coordinator/scheduler.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "protocol/messages.h"

namespace bakeoff::coordinator {
namespace {

// Ranks of `trial` that `w` can take now: none when it does not offer the trial's
// command template.
int Capacity(const SchedulerWorker& w, const SchedulerTrial& trial) {
  if (!trial.executor.empty() &&
      std::find(w.executors.begin(), w.executors.end(), trial.executor) == w.executors.end()) {
    return 0;
  }
  if (trial.cuda && !protocol::GpuTypeMatches(w.gpu_model, trial.gpu_type)) return 0;
  return trial.cuda ? static_cast<int>(w.free_cuda_devices.size()) : w.free_cpu_slots;
}

// `workers` are sorted by id, so the index breaks ties as the id would; `runs[i]` is
// how often workers[i] ran the trial's variant.
std::optional<TrialPlacement> Place(std::int64_t sweep_id, const SchedulerTrial& trial,
                                    std::vector<SchedulerWorker>& workers, const std::vector<int>& runs_of) {
  const int need = std::max(1, trial.world_size);
  // (worker index, ranks on it), rank 0's worker first.
  std::vector<std::pair<std::size_t, int>> parts;
  std::optional<std::size_t> single;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (Capacity(workers[i], trial) < need) continue;
    if (!trial.pinned_worker.empty() && workers[i].id != trial.pinned_worker) continue;
    if (!single) {
      single = i;
      continue;
    }
    const auto& a = workers[i];
    const auto& b = workers[*single];
    auto key_a = std::make_tuple(runs_of[i], -Capacity(a, trial), i);
    auto key_b = std::make_tuple(runs_of[*single], -Capacity(b, trial), *single);
    if (key_a < key_b) single = i;
  }
  if (single) {
    parts.push_back({*single, need});
  } else if (!trial.pinned_worker.empty()) {
    return std::nullopt;  // its worker has no room now
  } else {
    std::vector<std::size_t> order;
    int total = 0;
    for (std::size_t i = 0; i < workers.size(); ++i) {
      if (Capacity(workers[i], trial) > 0) {
        order.push_back(i);
        total += Capacity(workers[i], trial);
      }
    }
    if (total < need) return std::nullopt;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const auto& a = workers[x];
      const auto& b = workers[y];
      return std::make_tuple(-Capacity(a, trial), runs_of[x], x) < std::make_tuple(-Capacity(b, trial), runs_of[y], y);
    });
    int left = need;
    for (std::size_t i : order) {
      if (left == 0) break;
      int take = std::min(left, Capacity(workers[i], trial));
      parts.push_back({i, take});
      left -= take;
    }
  }
  TrialPlacement placement;
  placement.trial_id = trial.trial_id;
  placement.sweep_id = sweep_id;
  int rank = 0;
  for (auto [index, count] : parts) {
    auto& w = workers[index];
    for (int local = 0; local < count; ++local) {
      RankAssignment r;
      r.rank = rank++;
      r.worker_id = w.id;
      r.local_rank = local;
      if (trial.cuda) {
        r.cuda_device = w.free_cuda_devices.front();
        w.free_cuda_devices.erase(w.free_cuda_devices.begin());
      } else {
        --w.free_cpu_slots;
      }
      placement.ranks.push_back(r);
    }
  }
  return placement;
}

}  // namespace

Scheduler::Scheduler() : next_group_(std::random_device{}()) {}

std::vector<TrialPlacement> Scheduler::LockstepMates(const SchedulerSweep& sweep, std::size_t head_index,
                                                     TrialPlacement& head, const SchedulerWorker& worker) {
  const SchedulerTrial& first = sweep.queue[head_index];
  std::vector<TrialPlacement> mates;
  for (std::size_t j = head_index + 1; j < sweep.queue.size(); ++j) {
    const SchedulerTrial& t = sweep.queue[j];
    if (t.pair_group != first.pair_group || t.world_size != first.world_size || t.cuda != first.cuda) continue;
    if (!t.executor.empty() &&
        std::find(worker.executors.begin(), worker.executors.end(), t.executor) == worker.executors.end()) {
      continue;  // this worker cannot run it: it runs alone, later
    }
    TrialPlacement mate = head;
    mate.trial_id = t.trial_id;
    mates.push_back(std::move(mate));
    if (static_cast<int>(mates.size()) + 1 >= protocol::kMaxLockstepSides) break;
  }
  const std::string group = "g" + std::to_string(next_group_++) + "-s" + std::to_string(sweep.sweep_id) + "-t" +
                            std::to_string(head.trial_id);
  const int sides = static_cast<int>(mates.size()) + 1;
  head.lockstep = protocol::LockstepSide{group, 0, sides, 0};
  for (std::size_t i = 0; i < mates.size(); ++i) {
    mates[i].lockstep = protocol::LockstepSide{group, static_cast<int>(i) + 1, sides, 0};
  }
  return mates;
}

std::vector<TrialPlacement> Scheduler::Schedule(const std::vector<SchedulerSweep>& sweeps_in,
                                                std::vector<SchedulerWorker> workers,
                                                const HistoryFn& history) {
  std::vector<TrialPlacement> out;
  if (sweeps_in.empty() || workers.empty()) return out;
  auto by_id = [](const SchedulerWorker& a, const SchedulerWorker& b) { return a.id < b.id; };
  if (!std::is_sorted(workers.begin(), workers.end(), by_id)) std::sort(workers.begin(), workers.end(), by_id);
  // Each variant's history on every worker, looked up once per call: a placement compares
  // every free worker, and a thousand free workers made that a million lookups.
  std::map<std::pair<std::int64_t, std::string>, std::vector<int>> runs;
  auto runs_of = [&](std::int64_t sweep_id, const std::string& variant) -> const std::vector<int>& {
    auto [it, added] = runs.try_emplace({sweep_id, variant});
    if (added) {
      it->second.reserve(workers.size());
      for (const auto& w : workers) it->second.push_back(history ? history(sweep_id, variant, w.id) : 0);
    }
    return it->second;
  };
  std::vector<const SchedulerSweep*> sweeps;
  for (const auto& s : sweeps_in) sweeps.push_back(&s);
  std::sort(sweeps.begin(), sweeps.end(),
            [](const SchedulerSweep* a, const SchedulerSweep* b) { return a->sweep_id < b->sweep_id; });
  const std::size_t n = sweeps.size();
  std::vector<std::size_t> cursor(n, 0);
  std::vector<bool> blocked(n, false);
  // Resume the rotation after the sweep served last (across calls).
  std::size_t start = 0;
  while (start < n && sweeps[start]->sweep_id <= last_served_sweep_) ++start;
  if (start == n) start = 0;
  // (sweep, pair group) -> the worker its first trial went to in this call.
  std::map<std::pair<std::int64_t, std::string>, std::string> group_worker;
  std::set<std::int64_t> co_placed;  // lockstep trials placed with their group's first
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t s = (start + k) % n;
      if (blocked[s] || cursor[s] >= sweeps[s]->queue.size()) continue;
      SchedulerTrial head = sweeps[s]->queue[cursor[s]];
      if (co_placed.count(head.trial_id)) {
        ++cursor[s];
        progress = true;
        continue;
      }
      const std::pair<std::int64_t, std::string> group{sweeps[s]->sweep_id, head.pair_group};
      if (head.pinned_worker.empty() && !head.pair_group.empty()) {
        if (auto named = group_worker.find(group); named != group_worker.end()) head.pinned_worker = named->second;
      }
      auto placed = Place(sweeps[s]->sweep_id, head, workers, runs_of(sweeps[s]->sweep_id, head.variant_key));
      if (!placed && !head.pinned_worker.empty()) {
        ++cursor[s];  // it waits for its pair's worker; the sweep's later trials go on
        progress = true;
        continue;
      }
      if (!placed) {
        blocked[s] = true;  // strict order: this sweep waits for its head
        continue;
      }
      const bool whole = std::all_of(placed->ranks.begin(), placed->ranks.end(), [&](const RankAssignment& r) {
        return r.worker_id == placed->ranks.front().worker_id;
      });
      if (!head.pair_group.empty() && whole) group_worker.emplace(group, placed->ranks.front().worker_id);
      std::vector<TrialPlacement> mates;
      if (head.lockstep && !head.pair_group.empty() && whole) {
        auto worker = std::find_if(workers.begin(), workers.end(), [&](const SchedulerWorker& w) {
          return w.id == placed->ranks.front().worker_id;
        });
        mates = LockstepMates(*sweeps[s], cursor[s], *placed, *worker);
        for (const auto& mate : mates) co_placed.insert(mate.trial_id);
      }
      // The history counts this placement at once, so that the pass's next trial of the
      // variant prefers another worker (security review 2026-12-07, A2: history fixed
      // for a whole pass let one worker take every trial of a variant).
      {
        std::vector<int>& variant_runs = runs[{sweeps[s]->sweep_id, head.variant_key}];
        std::set<std::string> counted;
        for (const RankAssignment& r : placed->ranks) {
          if (!counted.insert(r.worker_id).second) continue;
          auto at = std::lower_bound(workers.begin(), workers.end(), r.worker_id,
                                     [](const SchedulerWorker& w, const std::string& id) { return w.id < id; });
          if (at != workers.end() && at->id == r.worker_id) ++variant_runs[static_cast<std::size_t>(at - workers.begin())];
        }
      }
      ++cursor[s];
      last_served_sweep_ = sweeps[s]->sweep_id;
      out.push_back(std::move(*placed));
      for (auto& mate : mates) out.push_back(std::move(mate));
      progress = true;
    }
  }
  return out;
}

}  // namespace bakeoff::coordinator
