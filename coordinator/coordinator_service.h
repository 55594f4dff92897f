// CoordinatorService: the coordinator's logic. It owns the in-memory view of sweeps,
// trials and workers, decides every transition (TrialStateMachine), places trials
// (Scheduler), talks to workers through WorkerLinks, and persists every decision in the
// results store before acknowledging it (the store owns durability).
//
// Group commit (docs/scale.md; group_commit.h). The store writes of one turn of the
// event loop join one store group, and every frame sent while it is open waits until it
// commits; an API call that stores something (submit, cancel, drain) commits the group
// before it answers. When a group is lost, nothing it decided is sent: the service
// closes every worker connection and reloads its state from the store, as after a
// restart; the workers reconnect, re-register their running attempts and send again
// everything that was not acknowledged. On start it recovers from the store: queued
// trials are scheduled again; assigned and running ones wait `recovery_grace` for their
// workers to reconnect and reclaim them, and are requeued as lost otherwise.
//
// What it decides on is translated elsewhere: a submitted or stored sweep into records
// and an in-memory sweep (sweep_intake.h), the store's rows into the trial table it
// holds (trial_table.h, recovery), and a worker's trainer events into store rows
// (event_ingest.h, which also applies the rank-provenance rule); the group commit is
// group_commit.h's, what a placement becomes placement.h's, a worker's admission
// worker_admission.h's, adaptive repeats' cancellations adaptive_stops.h's, and what the
// API shows coordinator_views.h's (on State()). The decisions (state machine calls,
// scheduling, cancel, drain) and their order stay here.
//
// Time and logs come from the Env it is given (protocol/env.h); the parts it owns (the
// registry, group commit, ingest, links) and the servers log through its log().
//
// Thread-safety: not thread-safe. Every method runs on the coordinator's io thread
// (the one executor given to the constructor); the transports (WorkerServer,
// HttpServer) call in from coroutines on that executor.
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "coordinator/coordinator_config.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/coordinator_views.h"
#include "coordinator/event_ingest.h"
#include "coordinator/group_commit.h"
#include "coordinator/placement.h"
#include "coordinator/scheduler.h"
#include "coordinator/sweep_intake.h"
#include "coordinator/trial_state_machine.h"
#include "coordinator/trial_table.h"
#include "coordinator/worker_admission.h"
#include "coordinator/worker_link.h"
#include "coordinator/worker_links.h"
#include "coordinator/worker_quarantine.h"
#include "coordinator/worker_registry.h"
#include "metrics/store/results_store.h"
#include "protocol/clock.h"
#include "protocol/env.h"
#include "protocol/log.h"
#include "protocol/messages.h"

namespace bakeoff::coordinator {

class CoordinatorService {
 public:
  CoordinatorService(boost::asio::any_io_executor executor, CoordinatorConfig config,
                     metrics::ResultsStore& store, const Env& env = Env::Default());
  ~CoordinatorService();

  const Env& env() const { return env_; }
  // The "coordinator" logger, on env(): for the servers and the parts the service owns.
  const logging::Logger& log() const { return log_; }

  // Loads unfinished sweeps and trials from the store. Call once, before Start.
  Status Recover();
  // Starts the housekeeping timer (expiry, grace deadlines, scheduling).
  void Start();
  void Stop();

  // --- Worker protocol (WorkerServer) ------------------------------------------
  // Validates the token and version; on success the link becomes the worker's, the
  // `registered` reply is sent on it (before any cancel this registration causes) and
  // returned; else the `rejected` reply is returned for the caller to send, and it
  // closes the connection.
  nlohmann::json OnRegister(const protocol::RegisterMessage& message, std::shared_ptr<WorkerLink> link);
  // Any later frame of that connection: heartbeat, events, attempt_finished.
  void OnFrame(const std::string& worker_id, const WorkerLink* link, const nlohmann::json& frame);
  void OnDisconnect(const std::string& worker_id, const WorkerLink* link);
  // How long to wait before reading that worker's next frame: zero while the events it
  // sends stay within `max_worker_events_per_s`.
  std::chrono::milliseconds EventsReadDelay(const std::string& worker_id, const nlohmann::json& frame);

  // --- What the API, `bakeoff local` and capacity providers read ------------------
  // A read-only window on the table and registry for coordinator_views.h's views
  // (WaitingReason, AnsweredComparisons, Capacity, WorkersJson, ServiceDiscoveryJson;
  // State().table.LiveCounts for a held sweep's trial counts, which after a store read,
  // which commits the open group, say what the store holds). Use it within the handler.
  CoordinatorState State() const;

  // --- Capacity providers (SlurmProvisioner) --------------------------------------
  // A line on why queued trials wait for capacity ("waiting for Slurm: ..."), shown as
  // the waiting reason of every sweep with queued trials that has no reason of its own;
  // "" clears it.
  void SetCapacityNote(std::string note) { capacity_note_ = std::move(note); }
  // More text for GET /metrics (the provider's own series), appended to the exposition.
  void SetExtraMetrics(std::function<std::string()> render) { extra_metrics_ = std::move(render); }

  // --- HTTP API (HttpServer) -----------------------------------------------------
  // Parses, validates, expands and stores a sweep; its trials are queued at once.
  // Returns {"id", "name", "variant_count", "trial_count", "state"}. The three steps
  // below in turn; HttpServer runs the middle one on another thread, since parsing and
  // expanding a large sweep (up to the trial and configuration caps) takes a while and
  // must not hold heartbeats and requests.
  std::variant<nlohmann::json, ApiError> SubmitSweep(const std::string& yaml);
  // 503 at once while the store cannot write; else what PrepareSweep needs.
  std::variant<SweepSubmission, ApiError> BeginSubmit() const;
  // Parses, validates and expands `yaml`: 413 over a limit (size, nesting, trials,
  // configurations), 400 otherwise. Pure: safe to call from any thread.
  static std::variant<PreparedSweep, ApiError> PrepareSweep(const SweepSubmission& submission, std::string yaml);
  // Stores the sweep and queues its trials (503 when the store cannot write). Sweep
  // and trial ids follow the order of CommitSweep calls.
  std::variant<nlohmann::json, ApiError> CommitSweep(PreparedSweep prepared);
  // Cancels queued trials and stops running ones. Returns the sweep's JSON.
  std::variant<nlohmann::json, ApiError> CancelSweep(const std::string& id_or_name);
  // Tells the worker to finish its running attempts and take no new ones.
  std::variant<nlohmann::json, ApiError> DrainWorker(const std::string& worker_id);
  // GET /metrics: the text exposition (docs/metrics.md).
  std::string MetricsText() const;
  CoordinatorSnapshot MetricsSnapshot() const;
  CoordinatorMetrics& metrics() { return metrics_; }

  metrics::ResultsStore& store() { return store_; }
  const CoordinatorConfig& config() const { return config_; }

  // Observability for tests and benchmarks.
  std::size_t queued_trials() const { return table_.QueuedCount(); }
  std::size_t connected_workers() const { return links_.size(); }
  // Trials held in memory: those of unfinished sweeps only (a finished sweep's are
  // evicted once the store records it finished; reads go to the store).
  std::size_t live_trials() const { return table_.TrialCount(); }

  // Runs expiry, grace deadlines and scheduling now (the timer calls it every tick).
  void Tick();

 private:
  // Whether a registered worker holds a live connection (for the views).
  coordinator::Connected Connected() const;

  void Schedule();
  // Whether a worker may take new placements now: connected and, unless every live
  // connected worker is in quarantine, not in quarantine.
  coordinator::Connected Placeable() const;
  Status ApplyPlacement(const TrialPlacement& placement);
  void HandleHeartbeat(const std::string& worker_id, const protocol::HeartbeatMessage& message);
  // Stores the events (EventIngest) and marks running the trials that started.
  Status HandleEvents(const std::string& worker_id, const protocol::EventsMessage& message);
  Status HandleFinished(const std::string& worker_id, const protocol::AttemptFinishedMessage& message);
  // A frame the worker keeps in its outbox until acknowledged (events, attempt_finished):
  // parsed, handled, and acknowledged once stored; when the store cannot take it, the
  // connection is closed (DropUnstored, "cannot <action> from worker=...").
  template <typename Message>
  void HandleOutboxFrame(const std::string& worker_id, const nlohmann::json& frame, const char* action,
                         Status (CoordinatorService::*handle)(const std::string&, const Message&));
  // Ends the current attempt with `outcome` (requeue when lost and attempts remain),
  // persisting first; stops the attempt's other parts.
  // `infrastructure`: a lost attempt that Bakeoff's machinery failed before the variant
  // ran; its retry does not count against max_attempts (at most
  // kMaxInfrastructureRetries per trial, so a worker cannot loop a trial forever).
  Status EndAttempt(TrialEntry& trial, protocol::Outcome outcome, const std::string& reason,
                    bool infrastructure = false);
  // Sets `trial`'s coordinator deadline for its current attempt: now + the sweep's
  // trial_timeout + config_.attempt_deadline_grace (none without a timeout).
  void SetAttemptDeadline(TrialEntry& trial);
  void ReleaseParts(TrialEntry& trial, bool send_cancel, const std::string& reason);
  // The worker's link is closed and its unfinished attempts are lost (requeued while
  // attempts remain); the store records `state` (lost, or gone after a goodbye).
  void HandleWorkerLost(const std::string& worker_id, const std::string& reason,
                        metrics::WorkerState state = metrics::WorkerState::kLost);
  // Marks a sweep whose trials have all finished done and stores its state; then it is
  // evicted from memory (after the current handler, or at the next tick when the store
  // could not take the state now).
  void MaybeFinishSweep(std::int64_t sweep_id);
  void StoreSweepState(SweepEntry& sweep);
  // Drops done sweeps whose state is stored, with their trials, keeping their last
  // figures for /metrics. REQUIRES: no reference into table_ is held.
  void EvictFinishedSweeps();
  // Adaptive repeats: walks the answer's comparisons on the outcomes the store records
  // (metrics/report/adaptive_repeats.h, the walk the report runs too) and cancels the
  // queued trials of every variant whose comparisons have all stopped. A function of the
  // stored outcomes only, so a restarted coordinator reaches the same decisions. No-op
  // for other sweeps.
  // A frame the store could not take: close the worker's connection (see .cc).
  void DropUnstored(const std::string& worker_id, const std::string& reason);
  // Scheduling at the end of this turn (before its group commits).
  void ScheduleSoon();
  void ScheduleIfWanted();
  // The group was lost (GroupCommit): memory is rebuilt from the store and every worker
  // reconnects. REQUIRES: no reference into table_ is held.
  void ReloadAfterLostGroup(const Status& why);

  boost::asio::any_io_executor executor_;
  CoordinatorConfig config_;
  metrics::ResultsStore& store_;
  const Env& env_;
  const Clock& clock_;  // env_.clock()
  const logging::Logger log_;
  WorkerRegistry registry_;
  Scheduler scheduler_;
  boost::asio::steady_timer tick_timer_;
  bool stopped_ = false;
  bool schedule_wanted_ = false;  // ScheduleSoon was called this turn
  bool reload_needed_ = false;   // a reload after a lost group failed: Tick tries again
  bool evict_posted_ = false;
  Clock::TimePoint next_store_probe_{};  // when an unhealthy store is probed next (Tick)
  // Unfinished sweeps and their trials (finished ones are evicted: EvictFinishedSweeps).
  TrialTable table_;
  // The last figures of the most recently finished sweeps, shown on /metrics.
  static constexpr std::size_t kFinishedSweepsShown = 16;
  std::deque<CoordinatorSnapshot::Sweep> finished_sweeps_;
  PlacementHistory history_;
  // Workers whose attempts end within seconds of starting (A2): no new placements while
  // another live worker can take them (Schedule).
  WorkerQuarantine quarantine_;
  CoordinatorMetrics metrics_;
  EventIngest events_;  // after metrics_, which it uses
  GroupCommit group_;   // after store_ and metrics_; its hooks call back into this service
  WorkerLinks links_;   // after group_, which its frames leave through
  std::string capacity_note_;
  std::function<std::string()> extra_metrics_;
};

}  // namespace bakeoff::coordinator
