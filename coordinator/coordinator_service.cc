#include "coordinator/coordinator_service.h"

#include <string>
#include <vector>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <boost/asio/post.hpp>

#include "coordinator/adaptive_stops.h"
#include "coordinator/api_json.h"
#include "protocol/outcome.h"
#include "protocol/token.h"

namespace bakeoff::coordinator {
namespace asio = boost::asio;
using nlohmann::json;
using protocol::Outcome;

CoordinatorService::CoordinatorService(asio::any_io_executor executor, CoordinatorConfig config,
                                       metrics::ResultsStore& store, const Env& env)
    : executor_(std::move(executor)),
      config_(std::move(config)),
      store_(store),
      env_(env),
      clock_(env.clock()),
      log_(env, "coordinator"),
      registry_(clock_, config_.heartbeat_timeout),
      tick_timer_(executor_),
      quarantine_(config_.quarantine),
      metrics_(clock_),
      events_(config_.max_worker_events_per_s, store_, metrics_, log_),
      group_(executor_, store_, clock_, config_.group_commit_window, metrics_,
             GroupCommit::Hooks{[this]() { ScheduleIfWanted(); },
                                [this](const Status& why) { ReloadAfterLostGroup(why); }}),
      links_(group_, log_) {}

CoordinatorService::~CoordinatorService() { Stop(); }

// ------------------------------------------------------------------ recovery

Status CoordinatorService::Recover() {
  BAKEOFF_RETURN_IF_ERROR(table_.Recover(store_, clock_.Now(), config_.recovery_grace));
  // A name whose attempts await reclaim is held for the worker that ran them: during the
  // grace only a registration carrying its secret (stored hashed) takes it.
  BAKEOFF_RETURN_IF_ERROR(
      HoldAwaitedNames(table_.AwaitedWorkers(), store_, registry_, clock_.Now() + config_.recovery_grace));
  const std::vector<std::int64_t> sweeps = table_.SweepIds();
  if (!sweeps.empty()) {
    log_.Info("recovered unfinished sweeps; their running attempts wait for their workers",
              {{"sweeps", sweeps.size()},
               {"attempts_waiting", table_.AwaitingReclaimCount()},
               {"grace_ms", config_.recovery_grace.count()}});
  }
  // A recovered attempt gets a whole deadline again from now: its start is not known here.
  for (std::int64_t tid : table_.AwaitingReclaim()) SetAttemptDeadline(*table_.FindTrial(tid));
  for (std::int64_t id : sweeps) {
    ApplyAdaptiveStops(id, table_, store_, metrics_, log_);  // a decision the previous process may not have carried out
    MaybeFinishSweep(id);
  }
  return Status::Ok();
}

void CoordinatorService::Start() {
  stopped_ = false;
  group_.Restart();
  tick_timer_.expires_after(config_.tick);
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    Tick();
    Start();
  });
}

void CoordinatorService::Stop() {
  stopped_ = true;
  tick_timer_.cancel();
  group_.Stop();
  links_.CloseAll();
}

void CoordinatorService::Tick() {
  if (reload_needed_) {
    reload_needed_ = false;
    ReloadAfterLostGroup(Status::IoError("the last reload from the store failed"));
  }
  group_.Begin();
  const auto probe_now = clock_.Now();
  if (!store_.healthy() && probe_now >= next_store_probe_) {
    // A full, read-only or capped database refuses writes; try one small real write now
    // and then, so that new work resumes by itself once the disk is fixed.
    next_store_probe_ = probe_now + config_.store_probe_interval;
    if (store_.Probe().ok()) log_.Info("the results database is writable again; accepting new work");
  }
  for (const auto& worker_id : registry_.Expire()) {
    HandleWorkerLost(worker_id, "worker " + worker_id + " sent no heartbeat for " +
                                    std::to_string(config_.heartbeat_timeout.count()) + " ms");
  }
  // What the registry forgot (long-departed workers), the per-worker counters forget too.
  for (const auto& worker_id : registry_.TakeForgotten()) {
    links_.Forget(worker_id);
    events_.ForgetWorker(worker_id);
    quarantine_.Forget(worker_id);
  }
  const auto now = clock_.Now();
  for (std::int64_t tid : table_.TakeUnreclaimed(now)) {
    EndAttempt(*table_.FindTrial(tid), Outcome::kLost, "its worker did not reconnect within the recovery grace period");
  }
  // The coordinator's own deadline: an attempt its workers have not ended by then ends
  // `timeout` here, and they are told to cancel it.
  for (std::int64_t tid : table_.TakeOverdue(now)) {
    TrialEntry& trial = *table_.FindTrial(tid);
    const std::string reason = "the coordinator's deadline passed (trial_timeout " +
                               std::to_string(table_.FindSweep(trial.sweep_id)->timeout_ms / 1000) + " s + " +
                               std::to_string(config_.attempt_deadline_grace.count() / 1000) +
                               " s) and its worker had not ended the attempt";
    log_.Info("attempt past its deadline", {{"trial", trial.id}, {"reason", reason}});
    Status ended = EndAttempt(trial, Outcome::kTimeout, reason);
    if (!ended.ok()) log_.Warning("cannot end an attempt at its deadline", {{"trial", trial.id}, {"error", ended.ToString()}});
  }
  // A finished sweep whose state the store could not take: try again.
  for (std::int64_t id : table_.SweepIds()) {
    SweepEntry& sweep = *table_.FindSweep(id);
    if (sweep.done && !sweep.state_stored && store_.healthy()) StoreSweepState(sweep);
  }
  Schedule();
  EvictFinishedSweeps();
}

void CoordinatorService::ScheduleSoon() {
  schedule_wanted_ = true;
  group_.PostEndOfTurn();
}

void CoordinatorService::ScheduleIfWanted() {
  if (!schedule_wanted_) return;
  schedule_wanted_ = false;
  Schedule();  // its assignments join the turn's group
}

// ------------------------------------------------------------------ a lost store group

void CoordinatorService::ReloadAfterLostGroup(const Status& why) {
  // The store may hold less than memory says (the lost writes), or more (a reader
  // committed part of the group early): memory is rebuilt from the store, and every
  // worker reconnects, re-registers its running attempts and resends what was not
  // acknowledged, exactly as after a coordinator restart.
  log_.Warning("a group of store writes was lost: nothing it decided was sent; closing the worker connections so "
               "that the workers send again what was not acknowledged, and reloading sweeps and trials from the store",
               {{"error", why.ToString()}, {"connections", links_.size()}});
  links_.CloseAll();
  group_.Discard();
  registry_.ReleaseAll();
  table_.Clear();
  history_.Clear();
  schedule_wanted_ = false;
  Status recovered = Recover();
  if (!recovered.ok()) {
    log_.Warning("cannot reload from the store; trying again at the next tick", {{"error", recovered.ToString()}});
    table_.Clear();
    reload_needed_ = true;
  }
}

// ------------------------------------------------------------------ scheduling

void CoordinatorService::Schedule() {
  if (!store_.healthy()) return;  // refuse new work until the disk is fixed
  SchedulingRound round = CollectQueued(table_, registry_, Placeable());
  if (round.sweeps.empty()) return;
  auto history = [this](std::int64_t sweep_id, const std::string& variant, const std::string& worker) {
    return history_.Count(sweep_id, variant, worker);
  };
  auto placements = scheduler_.Schedule(round.sweeps, std::move(round.workers), history);
  if (!placements.empty()) group_.Begin();
  for (const auto& placement : placements) {
    Status applied = ApplyPlacement(placement);
    if (!applied.ok()) {
      log_.Warning("cannot assign", {{"trial", placement.trial_id}, {"error", applied.ToString()}});
      if (!store_.healthy()) return;
    }
  }
}

Connected CoordinatorService::Placeable() const {
  // A worker in quarantine takes nothing while another live worker could: its trials go
  // elsewhere. When every live worker is in quarantine, they all take trials as before
  // (a lone worker on a sweep whose variants all end at once, `unsupported` say, is not
  // a reason to stop the sweep for minutes).
  const auto now = clock_.Now();
  bool quarantined = false;
  bool clear = false;
  for (const auto& [id, info] : registry_.workers()) {
    if (!info.schedulable() || !links_.connected(id)) continue;
    (quarantine_.Quarantined(id, now) ? quarantined : clear) = true;
  }
  if (!quarantined || !clear) return Connected();
  return [this, now](const std::string& worker_id) {
    return links_.connected(worker_id) && !quarantine_.Quarantined(worker_id, now);
  };
}

Status CoordinatorService::ApplyPlacement(const TrialPlacement& placement) {
  TrialEntry& trial = *table_.FindTrial(placement.trial_id);
  SweepEntry& sweep = *table_.FindSweep(trial.sweep_id);
  const std::string& rank0_worker = placement.ranks.front().worker_id;
  WorkerInfo* rank0 = registry_.Find(rank0_worker);
  if (!rank0) return Status::Internal("placement on an unknown worker");

  const metrics::AttemptRecord record = AttemptRecordOf(trial.id, placement, registry_);
  TrialStateMachine next = trial.machine;
  auto attempt = next.Assign();
  if (!attempt.ok()) return attempt.status();
  // Durable before any worker hears of it: after a crash the store knows the attempt.
  auto stored = [&] {
    CoordinatorMetrics::StoreWriteTimer timer(metrics_, "assign_trial");
    return store_.AssignTrial(trial.id, trial.machine.attempts_used(), record);
  }();
  if (!stored.ok()) return stored.status();
  if (!stored->applied) {
    return Status::Internal("the store refused the assignment (trial is " +
                            std::string(metrics::TrialStateName(stored->state)) + ")");
  }
  trial.machine = next;
  trial.assigned_at = clock_.Now();
  SetAttemptDeadline(trial);
  const protocol::AttemptRef ref{trial.id, *attempt};

  const std::string store_address = rank0->host + ":" + std::to_string(registry_.NextStorePort(rank0_worker));
  trial.parts.clear();
  std::vector<TrialPart> parts = PartsOf(placement);
  for (TrialPart& part : parts) {
    ReservePart(registry_, part, ref);
    history_.Add(trial.sweep_id, trial.variant_key, part.worker_id);
    if (parts.size() == 1) NamePairWorker(sweep, trial, part.worker_id);  // the first whole one names it
    links_.Send(part.worker_id, protocol::ToJson(AssignMessageOf(trial, sweep, part, ref, store_address)));
    trial.parts.push_back(std::move(part));
  }
  log_.Info("assigned", {{"trial", trial.id},
                         {"attempt", *attempt},
                         {"variant", trial.variant_key},
                         {"workers", parts.size()},
                         {"rank0", rank0_worker},
                         {"store", store_address}});
  return Status::Ok();
}

// ------------------------------------------------------------------ worker protocol

json CoordinatorService::OnRegister(const protocol::RegisterMessage& message, std::shared_ptr<WorkerLink> link) {
  auto admitted = AdmitWorker(message, config_, registry_, link->peer_address(), log_);
  if (auto* rejected = std::get_if<protocol::RejectedMessage>(&admitted)) return protocol::ToJson(*rejected);
  const AdmittedWorker& checked = std::get<AdmittedWorker>(admitted);
  auto& info = registry_.Register(checked.message, checked.credential);
  const std::string id = info.id;
  links_.Attach(id, link);  // the newer connection wins
  // The reply goes first: the cancels and lost-attempt releases below send on this link,
  // and a worker reads `registered` before anything else (it would otherwise drop the
  // connection, reconnect with the same stale list, and never get in).
  const protocol::RegisteredMessage reply = RegisteredReply(info, config_);
  link->Send(protocol::ToJson(reply));

  const metrics::WorkerRecord record = WorkerRecordOf(message, info);
  group_.Begin();
  Status upsert = store_.UpsertWorker(record);
  if (!upsert.ok()) log_.Warning("cannot record a worker", {{"worker", id}, {"error", upsert.ToString()}});

  // Reclaim: attempts this worker still runs (or has results for) stay; others stop.
  TrialTable::Reclaim reclaim = table_.ReclaimWorker(id, message.running, info.attempts);
  for (const auto& ref : reclaim.stale) {
    links_.Send(id, protocol::ToJson(protocol::CancelMessage{ref, "stale attempt: not current on this coordinator"}));
  }
  for (const auto& [ref, part] : reclaim.parts) {
    ReservePart(registry_, *part, ref);
    log_.Info("reclaimed", {{"trial", ref.trial_id}, {"attempt", ref.attempt}, {"worker", id}});
  }
  // Attempts placed here that the worker no longer knows: it restarted; they are lost.
  for (std::int64_t tid : reclaim.lost) {
    EndAttempt(*table_.FindTrial(tid), Outcome::kLost, "worker " + id + " re-registered without this attempt");
  }
  log_.Info("worker registered", {{"worker", id},
                                  {"host", message.host},
                                  {"slots", message.resources.cpu_slots},
                                  {"cuda", message.resources.cuda_devices.size()},
                                  {"running", message.running.size()},
                                  {"credential", info.credential}});
  ScheduleSoon();
  return protocol::ToJson(reply);
}

template <typename Message>
void CoordinatorService::HandleOutboxFrame(const std::string& worker_id, const json& frame, const char* action,
                                           Status (CoordinatorService::*handle)(const std::string&,
                                                                                const Message&)) {
  auto message = protocol::Parse<Message>(frame);
  if (!message.ok()) {
    log_.Warning("malformed frame",
                 {{"type", frame.value("type", "")}, {"worker", worker_id}, {"error", message.status().message()}});
    return;
  }
  Status handled = (this->*handle)(worker_id, *message);
  if (handled.ok()) {
    links_.Ack(worker_id, message->outbox_seq);
  } else {
    DropUnstored(worker_id, std::string("cannot ") + action + " from worker=" + worker_id + ": " + handled.ToString());
  }
}

void CoordinatorService::OnFrame(const std::string& worker_id, const WorkerLink* link, const json& frame) {
  group_.CommitIfOld();  // first: a reload after a lost group replaces the links checked below
  if (!links_.IsCurrent(worker_id, link)) return;  // a replaced connection
  auto type = protocol::MessageType(frame);
  if (!type.ok()) return;
  registry_.Heartbeat(worker_id);  // any frame proves the worker alive
  group_.Begin();
  if (*type == protocol::kTypeHeartbeat) {
    auto hb = protocol::Parse<protocol::HeartbeatMessage>(frame);
    if (hb.ok()) HandleHeartbeat(worker_id, *hb);
  } else if (*type == protocol::kTypeEvents) {
    HandleOutboxFrame<protocol::EventsMessage>(worker_id, frame, "store events", &CoordinatorService::HandleEvents);
  } else if (*type == protocol::kTypeAttemptFinished) {
    HandleOutboxFrame<protocol::AttemptFinishedMessage>(worker_id, frame, "record a finished attempt",
                                                        &CoordinatorService::HandleFinished);
  } else if (*type == protocol::kTypeDrain) {
    // The worker is leaving (Slurm's signal, docs/slurm.md): place nothing more on it
    // while it reports its stopped attempts, which are then requeued elsewhere.
    registry_.SetDraining(worker_id);
    (void)store_.SetWorkerState(worker_id, metrics::WorkerState::kDraining);
    log_.Info("worker leaving (it said drain); no new attempts go to it", {{"worker", worker_id}});
  } else if (*type == protocol::kTypeGoodbye) {
    // A clean stop: gone, not lost; whatever it still held is requeued now rather than
    // after the heartbeat timeout.
    registry_.SetGone(worker_id);
    HandleWorkerLost(worker_id, "worker " + worker_id + " stopped (goodbye)", metrics::WorkerState::kGone);
  } else {
    log_.Warning("ignoring a frame of an unknown type", {{"type", *type}, {"worker", worker_id}});
  }
}

void CoordinatorService::DropUnstored(const std::string& worker_id, const std::string& reason) {
  // Acks are cumulative: acknowledging a later frame on this connection would make the
  // worker forget this one. Closing it instead makes the worker reconnect and send
  // everything unacknowledged again, once the store takes writes.
  log_.Info("closing the connection so that the worker sends it again", {{"worker", worker_id}, {"reason", reason}});
  links_.Close(worker_id);
}

std::chrono::milliseconds CoordinatorService::EventsReadDelay(const std::string& worker_id, const json& frame) {
  return events_.ReadDelay(worker_id, frame, clock_.Now());
}

void CoordinatorService::OnDisconnect(const std::string& worker_id, const WorkerLink* link) {
  if (!links_.Detach(worker_id, link)) return;
  // Its attempts keep running: the worker may reconnect within the heartbeat TTL.
  log_.Info("worker disconnected; waiting for it to return",
            {{"worker", worker_id}, {"wait_ms", config_.heartbeat_timeout.count()}});
}

void CoordinatorService::HandleHeartbeat(const std::string& worker_id, const protocol::HeartbeatMessage& message) {
  Status recorded = store_.RecordWorkerHeartbeat(worker_id);
  (void)recorded;  // a missed heartbeat row is harmless; the registry is authoritative
  for (const auto& ref : message.running) {
    const TrialPart* part = table_.CurrentPart(ref.trial_id, ref.attempt, worker_id);
    if (part == nullptr || part->finished) {
      links_.Send(worker_id, protocol::ToJson(protocol::CancelMessage{ref, "stale attempt"}));
    }
  }
  // The answer doubles as the worker's proof that the coordinator is alive.
  links_.Send(worker_id, protocol::ToJson(protocol::AckMessage{links_.acked(worker_id)}));
}

Status CoordinatorService::HandleEvents(const std::string& worker_id, const protocol::EventsMessage& message) {
  // A worker speaks only for the ranks of the current attempt that it was given.
  auto started = events_.Store(worker_id, message, table_);
  if (!started.ok()) return started.status();
  for (std::int64_t tid : *started) {
    TrialEntry* trial = table_.FindTrial(tid);
    if (trial == nullptr || trial->machine.phase() != TrialState::kAssigned) continue;
    auto marked = [&] {
      CoordinatorMetrics::StoreWriteTimer timer(metrics_, "mark_running");
      return store_.MarkRunning(tid, trial->machine.attempts_used());
    }();
    if (!marked.ok()) return marked.status();
    if (auto waited = table_.MarkRunning(*trial, clock_.Now())) metrics_.ObserveDispatch(*waited);
  }
  return Status::Ok();
}

Status CoordinatorService::HandleFinished(const std::string& worker_id,
                                          const protocol::AttemptFinishedMessage& message) {
  TrialPart* part = table_.CurrentPart(message.attempt.trial_id, message.attempt.attempt, worker_id);
  // Stale, duplicate or not this worker's: acknowledged, ignored.
  if (part == nullptr || part->finished) return Status::Ok();
  TrialEntry& trial = *table_.FindTrial(message.attempt.trial_id);
  auto outcome = protocol::ParseOutcome(message.outcome).value_or(Outcome::kFailed);
  // How soon the worker ended it decides its quarantine (A2). Only what a worker reports
  // counts: the coordinator's own endings (deadline, loss) are not the worker's doing.
  const auto now = clock_.Now();
  std::optional<std::chrono::milliseconds> ran;
  if (trial.assigned_at) ran = std::chrono::duration_cast<std::chrono::milliseconds>(now - *trial.assigned_at);
  if (auto until = quarantine_.OnAttemptEnded(worker_id, outcome, ran, now)) {
    metrics_.CountQuarantine();
    const auto& policy = quarantine_.policy();
    log_.Warning("worker quarantined: its attempts ended within seconds of their assignment; its new trials go "
                 "to other workers",
                 {{"worker", worker_id},
                  {"for_s", std::chrono::duration_cast<std::chrono::seconds>(*until - now).count()},
                  {"in_a_row", policy.attempts},
                  {"window_s", policy.window.count() / 1000},
                  {"trial", trial.id},
                  {"outcome", protocol::OutcomeName(outcome)}});
  }
  if (outcome != Outcome::kSucceeded) {
    std::string reason = message.reason;
    if (trial.parts.size() > 1) reason = "worker " + worker_id + ": " + reason;
    return EndAttempt(trial, outcome, reason, message.infrastructure);
  }
  part->finished = true;
  for (const auto& p : trial.parts) {
    if (!p.finished) return Status::Ok();  // the gang's other parts are still running
  }
  return EndAttempt(trial, Outcome::kSucceeded, message.reason);
}

Status CoordinatorService::EndAttempt(TrialEntry& trial, Outcome outcome, const std::string& reason,
                                      bool infrastructure) {
  const int attempt = trial.machine.attempts_used();
  if (trial.cancel_requested && outcome == Outcome::kLost) outcome = Outcome::kCancelled;
  TrialStateMachine next = trial.machine;
  SweepEntry* sweep = table_.FindSweep(trial.sweep_id);
  const bool grant = infrastructure && outcome == Outcome::kLost && sweep != nullptr &&
                     next.max_attempts() < sweep->max_attempts + kMaxInfrastructureRetries;
  if (grant) next.GrantAttempt();
  const auto effect = next.Report(attempt, outcome);
  if (effect == TrialStateMachine::Effect::kIgnored) return Status::Ok();
  events_.ForgetAttempt({trial.id, attempt});
  // Durable before anything else happens (and before the worker's ack).
  const bool requeue = effect == TrialStateMachine::Effect::kRequeued;
  Result<metrics::TransitionResult> stored = [&] {
    CoordinatorMetrics::StoreWriteTimer timer(metrics_, requeue ? "requeue_trial" : "finish_trial");
    return requeue ? store_.RequeueTrial(trial.id, attempt, outcome, reason, grant)
                   : store_.FinishTrial(trial.id, attempt, outcome, reason);
  }();
  if (!stored.ok()) return stored.status();
  trial.machine = next;
  if (requeue) {
    table_.Requeued(trial, clock_.Now());
    metrics_.CountRequeue();
  }
  log_.Info(effect == TrialStateMachine::Effect::kRequeued ? "requeued" : "finished",
            {{"trial", trial.id}, {"attempt", attempt}, {"outcome", protocol::OutcomeName(outcome)}, {"reason", reason}});
  ReleaseParts(trial, /*send_cancel=*/true, "attempt ended: " + std::string(protocol::OutcomeName(outcome)));
  if (effect == TrialStateMachine::Effect::kFinished) {
    ApplyAdaptiveStops(trial.sweep_id, table_, store_, metrics_, log_);
    MaybeFinishSweep(trial.sweep_id);
  }
  ScheduleSoon();
  return Status::Ok();
}

void CoordinatorService::SetAttemptDeadline(TrialEntry& trial) {
  const SweepEntry* sweep = table_.FindSweep(trial.sweep_id);
  if (sweep == nullptr || sweep->timeout_ms <= 0) return;
  table_.SetAttemptDeadline(trial, clock_.Now() + std::chrono::milliseconds(sweep->timeout_ms) +
                                       config_.attempt_deadline_grace);
}

void CoordinatorService::ReleaseParts(TrialEntry& trial, bool send_cancel, const std::string& reason) {
  const protocol::AttemptRef ref{trial.id, trial.machine.attempts_used()};
  for (const auto& p : trial.parts) {
    ReleasePart(registry_, p, ref);
    if (send_cancel && !p.finished) links_.Send(p.worker_id, protocol::ToJson(protocol::CancelMessage{ref, reason}));
  }
  trial.parts.clear();
}

void CoordinatorService::HandleWorkerLost(const std::string& worker_id, const std::string& reason,
                                          metrics::WorkerState state) {
  log_.Info("worker lost; its attempts are lost", {{"worker", worker_id}, {"reason", reason}});
  Status s = store_.SetWorkerState(worker_id, state);
  (void)s;
  links_.Drop(worker_id);
  for (std::int64_t tid : table_.RunningOn(worker_id)) EndAttempt(*table_.FindTrial(tid), Outcome::kLost, reason);
}

void CoordinatorService::MaybeFinishSweep(std::int64_t sweep_id) {
  SweepEntry* sweep = table_.FindSweep(sweep_id);
  if (sweep == nullptr || sweep->done || !table_.AllFinished(*sweep)) return;
  sweep->done = true;
  StoreSweepState(*sweep);
}

void CoordinatorService::StoreSweepState(SweepEntry& sweep) {
  auto state = sweep.cancelled ? metrics::SweepState::kCancelled : metrics::SweepState::kFinished;
  Status s = store_.SetSweepState(sweep.id, state);
  if (!s.ok()) {
    log_.Warning("cannot mark a sweep ended; trying again while the coordinator runs",
                 {{"sweep", sweep.id}, {"state", metrics::SweepStateName(state)}, {"error", s.ToString()}});
    return;
  }
  sweep.state_stored = true;
  log_.Info("sweep ended", {{"sweep", sweep.id}, {"name", sweep.name}, {"state", metrics::SweepStateName(state)}});
  // Evicted from memory after the current handler: callers up the stack may still hold
  // references to its trials.
  if (!evict_posted_) {
    evict_posted_ = true;
    asio::post(executor_, [this]() {
      evict_posted_ = false;
      if (!stopped_) EvictFinishedSweeps();
    });
  }
}

void CoordinatorService::EvictFinishedSweeps() {
  const std::size_t evicted_trials = table_.EvictDone([this](const SweepEntry& sweep) {
    // Its last figures stay on /metrics for a while (kFinishedSweepsShown); everything
    // else about it is read from the store, as after a restart.
    finished_sweeps_.push_back(coordinator::SweepSnapshot(sweep, table_));
    while (finished_sweeps_.size() > kFinishedSweepsShown) finished_sweeps_.pop_front();
    history_.ForgetSweep(sweep.id);
  });
#if defined(__GLIBC__)
  // A large sweep's entries (about 460 bytes a trial, docs/scale.md) go back to the
  // system, not only to the allocator's free lists: the resident set follows the live
  // sweeps rather than the largest one ever held.
  if (evicted_trials >= 10000) malloc_trim(0);
#endif
}

// ------------------------------------------------------------------ HTTP API

CoordinatorState CoordinatorService::State() const {
  return CoordinatorState{table_,          registry_,      Connected(), clock_.Now(), !config_.slurm.partition.empty(),
                          capacity_note_, &quarantine_};
}

CoordinatorSnapshot CoordinatorService::MetricsSnapshot() const {
  return coordinator::MetricsSnapshot(finished_sweeps_, table_, registry_, links_.size(),
                                      /*name_sweeps=*/config_.metrics_require_token);
}

Connected CoordinatorService::Connected() const {
  return [this](const std::string& worker_id) { return links_.connected(worker_id); };
}

std::variant<json, ApiError> CoordinatorService::SubmitSweep(const std::string& yaml) {
  auto submission = BeginSubmit();
  if (auto* error = std::get_if<ApiError>(&submission)) return std::move(*error);
  auto prepared = PrepareSweep(std::get<SweepSubmission>(submission), yaml);
  if (auto* error = std::get_if<ApiError>(&prepared)) return std::move(*error);
  return CommitSweep(std::move(std::get<PreparedSweep>(prepared)));
}

std::variant<SweepSubmission, ApiError> CoordinatorService::BeginSubmit() const {
  if (!store_.healthy()) return NoNewSweeps(store_);
  return MakeSubmission(config_, OfferedTemplates(State(), /*live_only=*/false));
}

std::variant<PreparedSweep, ApiError> CoordinatorService::PrepareSweep(const SweepSubmission& submission,
                                                                       std::string yaml) {
  return PrepareSubmittedSweep(submission, std::move(yaml));
}

std::variant<json, ApiError> CoordinatorService::CommitSweep(PreparedSweep prepared) {
  if (!store_.healthy()) return NoNewSweeps(store_);
  const std::vector<metrics::NewTrial>& trials = prepared.trials;
  auto created = [&] {
    CoordinatorMetrics::StoreWriteTimer timer(metrics_, "create_sweep");
    return store_.CreateSweep(prepared.record, prepared.variants, trials);
  }();
  if (!created.ok()) return SweepNotCreated(store_, created.status());
  SweepEntry sweep = SweepFromSpec(created->sweep_id, prepared.spec, prepared.expanded);
  const std::int64_t sweep_id = sweep.id;
  const std::string name = sweep.name;
  table_.AddSubmitted(std::move(sweep), created->trial_ids, trials, prepared.spec.limits.max_attempts, clock_.Now());
  log_.Info("sweep submitted",
            {{"id", sweep_id}, {"name", name}, {"variants", prepared.variants.size()}, {"trials", trials.size()}});
  json out = {{"id", sweep_id}, {"name", name}, {"variant_count", prepared.variants.size()},
              {"trial_count", trials.size()}, {"state", "running"}};
  // The user hears of the sweep once it is durable (it may have joined this turn's group).
  if (Status committed = group_.Finish(); !committed.ok()) {
    return ApiError{503, "the sweep was not stored: " + committed.message() +
                             "; the coordinator accepts no new sweeps until the results database writes again"};
  }
  ScheduleSoon();
  return out;
}

std::variant<json, ApiError> CoordinatorService::CancelSweep(const std::string& id_or_name) {
  auto record = store_.Reader()->FindSweep(id_or_name);
  if (!record.ok()) return ApiErrorFrom(record.status());
  SweepEntry* entry = table_.FindSweep(record->id);
  if (entry == nullptr || entry->done) {
    return json{{"id", record->id}, {"name", record->name}, {"state", metrics::SweepStateName(record->state)},
                {"cancelled_trials", 0}};
  }
  SweepEntry& sweep = *entry;
  auto cancelled = [&] {
    CoordinatorMetrics::StoreWriteTimer timer(metrics_, "cancel_trials");
    return store_.CancelQueuedTrials(sweep.id, "sweep cancelled");
  }();
  if (!cancelled.ok()) return ApiErrorFrom(cancelled.status());
  const TrialTable::Cancelling cancelling = table_.CancelSweep(sweep);
  for (const auto& [worker_id, ref] : cancelling.cancels) {
    links_.Send(worker_id, protocol::ToJson(protocol::CancelMessage{ref, "sweep cancelled"}));
  }
  log_.Info("sweep cancelled",
            {{"sweep", sweep.id}, {"queued_cancelled", *cancelled}, {"running_stopping", cancelling.stopping}});
  MaybeFinishSweep(sweep.id);
  json out{{"id", sweep.id}, {"name", sweep.name}, {"state", sweep.done ? "cancelled" : "cancelling"},
           {"cancelled_trials", *cancelled}, {"stopping_trials", cancelling.stopping}};  // evicted later, not now
  if (Status committed = group_.Finish(); !committed.ok()) return ApiErrorFrom(committed);
  return out;
}

std::variant<json, ApiError> CoordinatorService::DrainWorker(const std::string& worker_id) {
  WorkerInfo* info = registry_.Find(worker_id);
  if (!info) return ApiError{404, "no worker '" + worker_id + "'"};
  registry_.SetDraining(worker_id);
  links_.Send(worker_id, protocol::ToJson(protocol::DrainMessage{}));
  Status s = store_.SetWorkerState(worker_id, metrics::WorkerState::kDraining);
  (void)s;
  log_.Info("draining", {{"worker", worker_id}, {"running", info->attempts.size()}});
  json out{{"id", worker_id}, {"state", "draining"}, {"running", info->attempts.size()}};
  if (Status committed = group_.Finish(); !committed.ok()) return ApiErrorFrom(committed);
  return out;
}

// ------------------------------------------------------------------ live metrics

std::string CoordinatorService::MetricsText() const {
  std::string text = metrics_.Render(MetricsSnapshot());
  if (extra_metrics_) text += extra_metrics_();
  return text;
}

}  // namespace bakeoff::coordinator
