#include "coordinator/coordinator_views.h"

#include <algorithm>
#include <map>

#include "protocol/outcome.h"

namespace bakeoff::coordinator {

using nlohmann::json;
using protocol::Outcome;

std::set<std::string> OfferedTemplates(const CoordinatorState& state, bool live_only) {
  std::set<std::string> names;
  for (const auto& [id, info] : state.registry.workers()) {
    if (live_only && (!info.schedulable() || !state.connected(id))) continue;
    names.insert(info.executors.begin(), info.executors.end());
  }
  return names;
}

std::string WaitingReason(const CoordinatorState& state, std::int64_t sweep_id) {
  const SweepEntry* held = state.table.FindSweep(sweep_id);
  if (held == nullptr || held->done || held->cancelled) return "";
  const SweepEntry& sweep = *held;
  const std::string& capacity_note = state.capacity_note;
  // The command templates of the queued trials (a sweep may compare executors). Only
  // trials from the queue cursor on can be queued; without templates, the first queued
  // trial answers (a status read of a 20,000-trial sweep walked all of them).
  bool any_template = false;
  for (const auto& [key, variant] : sweep.variants) any_template = any_template || !variant.CommandTemplate().empty();
  std::set<std::string> wanted;
  bool waiting = false;
  int first_world_size = 1;
  for (std::size_t i = sweep.queued_from; i < sweep.trial_order.size(); ++i) {
    const TrialEntry& trial = state.table.Trial(sweep.trial_order[i]);
    if (trial.machine.phase() != TrialState::kQueued || trial.cancel_requested) continue;
    auto v = sweep.variants.find(trial.variant_key);
    if (!waiting && v != sweep.variants.end()) first_world_size = std::max(1, v->second.world_size);
    waiting = true;
    if (!any_template) break;
    if (v != sweep.variants.end() && !v->second.CommandTemplate().empty()) wanted.insert(v->second.CommandTemplate());
  }
  // Capacity a provider is obtaining (Slurm jobs pending), when nothing else holds it.
  const std::string capacity = waiting ? capacity_note : std::string();
  // The first queued trial's ranks against every live worker's whole capacity (in use or
  // not): short of it, no live worker can ever place it, as Slurm's REASON says. While a
  // provider obtains capacity (its note is set) or Slurm is on, workers may still come:
  // then only the provider's note is said.
  if (waiting && !state.slurm_on && capacity_note.empty()) {
    int offered = 0;
    int live = 0;
    std::map<std::string, int> other_models;  // GPUs of live workers that do not match
    for (const auto& [id, w] : state.registry.workers()) {
      if (!w.schedulable() || !state.connected(id)) continue;
      ++live;
      if (sweep.cuda && !protocol::GpuTypeMatches(w.resources.gpu_model, sweep.gpu_type)) {
        if (w.capacity(true) > 0) {
          other_models[w.resources.gpu_model.empty() ? "unknown model" : w.resources.gpu_model] += w.capacity(true);
        }
        continue;
      }
      offered += w.capacity(sweep.cuda);
    }
    if (offered < first_world_size) {
      const std::string unit =
          sweep.cuda ? (sweep.gpu_type.empty() ? "CUDA device" : sweep.gpu_type + " CUDA device") : "CPU slot";
      std::string others;
      for (const auto& [model, n] : other_models) {
        others += (others.empty() ? " (they have " : ", ") + model + " x" + std::to_string(n);
      }
      if (!others.empty()) others += ")";
      return "its next trial needs " + std::to_string(first_world_size) + " " + unit +
             (first_world_size == 1 ? "" : "s") + " and the " + std::to_string(live) + " live worker" +
             (live == 1 ? "" : "s") + " offer " + std::to_string(offered) + " in all" + others + "; start workers with " +
             (sweep.cuda ? (sweep.gpu_type.empty() ? std::string("--cuda-devices")
                                                   : "--cuda-devices on " + sweep.gpu_type + " nodes")
                         : std::string("more --slots")) +
             " or lower the sweep's " + (sweep.gpu_type.empty() ? "world_size" : "world_size or gpu_type");
    }
  }
  if (wanted.empty()) return capacity;
  std::set<std::string> offered = OfferedTemplates(state, /*live_only=*/true);
  std::string missing;
  for (const auto& name : wanted) {
    if (!offered.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  }
  if (missing.empty()) return capacity;
  std::string list;
  for (const auto& n : offered) list += (list.empty() ? "" : ", ") + n;
  return "no live worker offers command template " + missing + " (live workers offer: " +
         (list.empty() ? "none" : list) + "); start a worker whose --executors file has it";
}

CoordinatorSnapshot::Sweep SweepSnapshot(const SweepEntry& sweep, const TrialTable& table) {
  CoordinatorSnapshot::Sweep s;
  s.id = sweep.id;
  s.name = sweep.name;
  s.active = !sweep.done;
  for (std::int64_t tid : sweep.trial_order) {
    const TrialEntry& trial = table.Trial(tid);
    const TrialState phase = trial.machine.phase();
    ++s.trials_by_state[metrics::TrialStateName(phase)];
    if (phase == TrialState::kQueued && !sweep.cancelled && !trial.cancel_requested) ++s.queue_depth;
    if (phase == TrialState::kFinished) {
      auto outcome = trial.machine.outcome();
      // A trial finished before a coordinator restart has its outcome in the store only.
      ++s.outcomes[outcome ? protocol::OutcomeName(*outcome) : "recorded"];
    }
  }
  return s;
}

CoordinatorSnapshot MetricsSnapshot(const std::deque<CoordinatorSnapshot::Sweep>& finished_sweeps, const TrialTable& table,
                                    const WorkerRegistry& registry, std::size_t connected_workers, bool name_sweeps) {
  CoordinatorSnapshot snapshot;
  for (const auto& finished : finished_sweeps) snapshot.sweeps.push_back(finished);
  for (const auto& [sid, sweep] : table.sweeps()) snapshot.sweeps.push_back(SweepSnapshot(sweep, table));
  for (auto& s : snapshot.sweeps) {
    snapshot.queue_depth += s.queue_depth;
    if (!name_sweeps) s.name.clear();  // the open /metrics names no sweep
  }
  for (const auto& [id, info] : registry.workers()) {
    ++snapshot.workers_by_state[WorkerLivenessName(info.liveness)];
    if (info.departed()) continue;
    snapshot.cpu_slots_total += info.resources.cpu_slots;
    snapshot.cpu_slots_used += info.used_cpu_slots;
    snapshot.cuda_devices_total += static_cast<int>(info.resources.cuda_devices.size());
    snapshot.cuda_devices_used += static_cast<int>(info.used_cuda_devices.size());
  }
  snapshot.workers_connected = static_cast<int>(connected_workers);
  return snapshot;
}

std::optional<std::pair<int, int>> AnsweredComparisons(const CoordinatorState& state, std::int64_t sweep_id) {
  const SweepEntry* sweep = state.table.FindSweep(sweep_id);
  if (sweep == nullptr || !sweep->adaptive || sweep->comparisons.empty()) return std::nullopt;
  return std::make_pair(sweep->comparisons_answered, static_cast<int>(sweep->comparisons.size()));
}

CapacityView Capacity(const CoordinatorState& state, std::size_t max_queued) {
  const TrialTable& table = state.table;
  CapacityView view;
  for (const auto& [sid, sweep] : table.sweeps()) {
    if (sweep.done || sweep.cancelled) continue;
    for (std::int64_t tid : sweep.trial_order) {
      if (view.queued.size() >= max_queued) break;
      const TrialEntry& trial = table.Trial(tid);
      if (trial.machine.phase() != TrialState::kQueued || trial.cancel_requested) continue;
      auto v = sweep.variants.find(trial.variant_key);
      view.queued.push_back({v != sweep.variants.end() ? v->second.world_size : 1, sweep.cuda});
    }
  }
  for (const auto& [id, info] : state.registry.workers()) {
    if (info.departed()) continue;
    CapacityView::Worker w;
    w.id = id;
    w.slurm_job_id = info.slurm_job_id;
    w.schedulable = info.schedulable() && state.connected(id);
    w.free_cpu_slots = info.free_cpu_slots();
    w.free_cuda_devices = static_cast<int>(info.free_cuda_devices().size());
    w.busy = !info.attempts.empty();
    view.workers.push_back(std::move(w));
  }
  return view;
}

json WorkersJson(const CoordinatorState& state) {
  json out = json::array();
  for (const auto& [id, info] : state.registry.workers()) {
    json attempts = json::array();
    for (const auto& a : info.attempts) attempts.push_back({{"trial_id", a.trial_id}, {"attempt", a.attempt}});
    // A live worker in quarantine shows as such (A2), with the seconds it has left.
    std::optional<Clock::TimePoint> quarantined;
    if (state.quarantine != nullptr && info.liveness == WorkerLiveness::kAlive) {
      quarantined = state.quarantine->QuarantinedUntil(id, state.now);
    }
    out.push_back({{"id", id},
                   {"host", info.host},
                   {"state", quarantined ? "quarantined" : WorkerLivenessName(info.liveness)},
                   {"quarantine_s_left",
                    quarantined ? json(std::chrono::duration<double>(*quarantined - state.now).count()) : json(nullptr)},
                   {"credential", info.credential},
                   {"connected", state.connected(id)},
                   {"cpu_slots", info.resources.cpu_slots},
                   {"cpu_slots_used", info.used_cpu_slots},
                   {"cuda_devices", info.resources.cuda_devices},
                   {"cuda_devices_used", std::vector<int>(info.used_cuda_devices.begin(), info.used_cuda_devices.end())},
                   {"gpu_model", info.resources.gpu_model},
                   {"simulate", info.simulate},
                   {"slurm_job_id", info.slurm_job_id},
                   {"running", attempts},
                   {"last_heartbeat_s_ago",
                    std::chrono::duration<double>(state.now - info.last_heartbeat).count()}});
  }
  return out;
}

json ServiceDiscoveryJson(const CoordinatorState& state) {
  json out = json::array();
  for (const auto& [id, info] : state.registry.workers()) {
    if (info.departed() || info.metrics_port <= 0) continue;
    std::string host = info.metrics_host.empty() ? info.host : info.metrics_host;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6 literal
    out.push_back({{"targets", {host + ":" + std::to_string(info.metrics_port)}},
                   {"labels", {{"worker", id}, {"__meta_bakeoff_worker_state", WorkerLivenessName(info.liveness)}}}});
  }
  return out;
}

}  // namespace bakeoff::coordinator
