// What the coordinator shows of its state, read-only: why a sweep's queued trials wait,
// the capacity a provider (Slurm) sizes its workers by, the snapshot /metrics renders,
// and the workers the API lists and Prometheus discovers. Pure functions of the trial
// table and the worker registry (and which workers hold a connection), so that each is
// tested without a running service; the HTTP API, `bakeoff local` and the Slurm
// provisioner call them on CoordinatorService::State().
// Thread-safety: pure; call them where what they read is owned (the coordinator's
// executor).
#pragma once

#include <cstddef>
#include <deque>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/sweep_entry.h"
#include "coordinator/trial_table.h"
#include "coordinator/worker_quarantine.h"
#include "coordinator/worker_registry.h"
#include "protocol/clock.h"

namespace bakeoff::coordinator {

// What a capacity provider (the Slurm provisioner, coordinator/slurm_provisioner.h)
// reads to decide how many workers to ask for: the waiting trials and the live workers.
struct CapacityView {
  struct QueuedTrial {
    int world_size = 1;
    bool cuda = false;
  };
  struct Worker {
    std::string id;
    std::string slurm_job_id;  // "" = not started by Slurm
    bool schedulable = false;  // alive (not draining)
    int free_cpu_slots = 0;
    int free_cuda_devices = 0;
    bool busy = false;  // runs at least one attempt
  };
  std::vector<QueuedTrial> queued;  // queued trials of unfinished sweeps, sweep by sweep in run order
  std::vector<Worker> workers;      // live workers (alive or draining)
};

// Whether the registered worker `worker_id` holds a live connection.
using Connected = std::function<bool(const std::string& worker_id)>;

// What the views read of a coordinator: its trial table and worker registry, which
// workers hold a connection, its clock's now, whether Slurm is on and the capacity
// provider's line. A window on the owner's state (CoordinatorService::State()): use it
// within the handler that took it.
struct CoordinatorState {
  const TrialTable& table;
  const WorkerRegistry& registry;
  Connected connected;
  Clock::TimePoint now{};
  bool slurm_on = false;
  std::string capacity_note;
  const WorkerQuarantine* quarantine = nullptr;  // null: none is in quarantine
};

// The command templates registered workers offer (live_only: schedulable and connected).
std::set<std::string> OfferedTemplates(const CoordinatorState& state, bool live_only);

// Why sweep `sweep_id`'s queued trials cannot start now ("" when they can, none wait or
// the sweep is not held): no
// live worker offers a command template they need, or the live workers' whole capacity
// is short of the next trial's ranks (said only while no provider obtains capacity and
// Slurm is off, since workers may still come); else `capacity_note`, the provider's
// line, while trials wait.
std::string WaitingReason(const CoordinatorState& state, std::int64_t sweep_id);
// (answered, all) comparisons of a held adaptive sweep (SweepEntry::comparisons_answered);
// nullopt for another sweep.
std::optional<std::pair<int, int>> AnsweredComparisons(const CoordinatorState& state, std::int64_t sweep_id);

// At most `max_queued` queued trials of unfinished sweeps, and the live workers.
CapacityView Capacity(const CoordinatorState& state, std::size_t max_queued);

// A sweep's figures for /metrics: trials by state, outcomes, queue depth.
CoordinatorSnapshot::Sweep SweepSnapshot(const SweepEntry& sweep, const TrialTable& table);
// The state /metrics renders: the finished sweeps kept, the unfinished ones, and the
// workers' slots. `name_sweeps` false (an open /metrics) names no sweep.
CoordinatorSnapshot MetricsSnapshot(const std::deque<CoordinatorSnapshot::Sweep>& finished_sweeps, const TrialTable& table,
                                    const WorkerRegistry& registry, std::size_t connected_workers, bool name_sweeps);

// GET /api/v1/workers: every registered worker with its resources, usage and attempts.
nlohmann::json WorkersJson(const CoordinatorState& state);
// GET /api/v1/sd (Prometheus HTTP service discovery): one target group per live worker
// that serves /metrics, labelled with its worker id.
nlohmann::json ServiceDiscoveryJson(const CoordinatorState& state);

}  // namespace bakeoff::coordinator
