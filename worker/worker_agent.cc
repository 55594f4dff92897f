#include "worker/worker_agent.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "protocol/outcome.h"
#include "worker/rank_process.h"
#include "worker/stray_reaper.h"

namespace bakeoff::worker {
namespace asio = boost::asio;
using boost::system::error_code;
using namespace std::chrono_literals;

namespace {

asio::awaitable<void> Sleep(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(duration);
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace

WorkerAgent::WorkerAgent(asio::any_io_executor executor, WorkerConfig config, const Env& env)
    : executor_(std::move(executor)),
      config_(std::move(config)),
      env_(env),
      clock_(env.clock()),
      log_(env, "worker"),
      cores_(config_.cores),
      outbox_(config_.max_buffered_events),
      backoff_({config_.backoff_initial, config_.backoff_max, config_.backoff_jitter}) {}

bool WorkerAgent::Finished() const {
  if (stopping_) {
    return (runners_.empty() && outbox_.empty()) || clock_.Now() >= stop_deadline_;
  }
  return draining_ && runners_.empty() && outbox_.empty();
}

Status WorkerAgent::StartMetrics() {
  if (metrics_ || config_.metrics_listen == "off" || config_.metrics_listen.empty()) return Status::Ok();
  std::unique_ptr<NvmlLibrary> nvml;
  if (!config_.nvml_library.empty()) {
    auto loaded = NvmlLibrary::Load(config_.nvml_library);
    if (loaded.ok()) {
      nvml = std::move(loaded).value();
      log_.Info("NVML loaded; its GPUs are in /metrics",
                {{"library", config_.nvml_library}, {"gpus", nvml->DeviceCount()}});
    } else if (!config_.cuda_devices.empty()) {
      // Expected on CPU nodes; worth a line only where GPUs were offered.
      log_.Warning("no GPU series in /metrics", {{"error", loaded.status().message()}});
    }
  }
  auto metrics = std::make_shared<WorkerMetrics>(
      std::make_shared<NodeCollector>(config_.proc_root, std::move(nvml)));
  metrics->SetCapacity(config_.cpu_slots, static_cast<int>(config_.cuda_devices.size()));
  auto server = std::make_shared<MetricsHttpServer>(executor_, [metrics]() { return metrics->Render(); });
  BAKEOFF_RETURN_IF_ERROR(server->Listen(config_.metrics_listen));
  server->Start();
  metrics_ = std::move(metrics);
  metrics_server_ = std::move(server);
  log_.Info("metrics served (GET /metrics)", {{"port", metrics_server_->port()}});
  return Status::Ok();
}

std::string WorkerAgent::MetricsHost() const {
  auto split = protocol::SplitHostPort(config_.metrics_listen, "--metrics-listen");
  if (!split.ok()) return "";
  // A wildcard bind is reached at the worker's advertised address.
  if (split->first.empty() || split->first == "0.0.0.0" || split->first == "::") return "";
  return split->first;
}

asio::awaitable<Status> WorkerAgent::Run() {
  auto self = shared_from_this();
  if (config_.tls) {
    auto tls = protocol::MakeClientTlsContext(config_.tls_ca_path);
    if (!tls.ok()) co_return tls.status().WithContext("worker");
    tls_ = std::move(tls).value();
  }
  if (Status metrics = StartMetrics(); !metrics.ok()) co_return metrics;
  if (!config_.simulate) {
    // What a rank leaves behind becomes ours, and ends (worker/stray_reaper.h).
    if (Status reaper = StartStrayReaper(executor_); !reaper.ok()) log_.Warning(reaper.message());
    // What a dead worker of this range left running ends before any uid is used again.
    for (int i = 0; i < config_.rank_uid_count; ++i) {
      if (Status s = KillEveryProcessOf(config_.rank_uid_first + static_cast<unsigned>(i)); !s.ok()) {
        log_.Warning(s.message());
      }
    }
  }
  Status result = co_await Connect();
  if (metrics_server_) metrics_server_->Stop();  // frees the port whatever ended the run
  co_return result;
}

asio::awaitable<Status> WorkerAgent::Connect() {
  auto self = shared_from_this();
  asio::co_spawn(executor_, [self]() { return self->FlushLoop(); }, asio::detached);
  auto address = protocol::SplitHostPort(config_.coordinator_address, "coordinator address");
  if (!address.ok()) co_return address.status();
  int failures = 0;
  while (!Finished()) {
    if (stopping_ && !connection_) break;  // nobody to deliver results to
    auto dialed = co_await Dial(address->first, address->second);
    if (!dialed.ok()) {
      ++failures;
      if (config_.max_connect_attempts > 0 && failures >= config_.max_connect_attempts) {
        co_return Status::Unavailable("worker: gave up after " + std::to_string(failures) +
                                      " failed connection attempts: " + dialed.status().message());
      }
      auto delay = backoff_.Next();
      log_.Warning("cannot reach the coordinator; retrying",
                   {{"error", dialed.status().message()}, {"retry_ms", delay.count()}});
      co_await Sleep(delay);
      continue;
    }
    connection_ = std::move(dialed).value();
    Status session = co_await Session();
    registered_ = false;
    if (connection_) connection_->Close();
    connection_.reset();
    if (session.code() == Status::Code::kInvalidArgument) co_return session;  // rejected
    if (Finished()) break;
    ++failures;
    auto delay = backoff_.Next();
    log_.Warning("connection to the coordinator lost; reconnecting",
                 {{"error", session.ToString()}, {"retry_ms", delay.count()}, {"running", runners_.size()},
                  {"buffered_events", outbox_.pending_events()}});
    co_await Sleep(delay);
  }
  for (auto& [ref, runner] : runners_) runner->Cancel("worker stopped");
  co_return Status::Ok();
}

asio::awaitable<Result<std::shared_ptr<protocol::FrameConnection>>> WorkerAgent::Dial(const std::string& host,
                                                                                        int port) {
  auto socket = co_await protocol::ConnectTcp(host, port, config_.connect_timeout);
  if (!socket.ok()) co_return socket.status();
  if (!tls_) co_return std::make_shared<protocol::FrameConnection>(std::move(socket).value());
  // The certificate must name the host as written in --coordinator (name or IP).
  auto stream = co_await protocol::TlsClientHandshake(std::move(socket).value(), *tls_, host, config_.connect_timeout);
  if (!stream.ok()) co_return stream.status();
  co_return std::make_shared<protocol::FrameConnection>(std::move(stream).value());
}

asio::awaitable<Status> WorkerAgent::Session() {
  auto conn = connection_;
  protocol::RegisterMessage reg;
  reg.token = config_.token;
  reg.worker_name = config_.name;
  reg.worker_secret = worker_secret_;
  reg.host = config_.advertise_host;
  reg.resources.cpu_slots = config_.cpu_slots;
  reg.resources.cuda_devices = config_.cuda_devices;
  reg.resources.gpu_model = config_.gpu_model;
  reg.store_ports = config_.store_ports;
  reg.running = RunningAttempts();
  for (const auto& done : outbox_.PendingFinishedAttempts()) reg.running.push_back(done);
  reg.simulate = config_.simulate;
  reg.slurm_job_id = config_.slurm_job_id;
  reg.executors = config_.executors.Names();
  if (metrics_) {
    reg.metrics_port = metrics_server_->port();
    reg.metrics_host = MetricsHost();
  }
  Status sent = conn->Send(protocol::ToJson(reg));
  if (!sent.ok()) co_return sent;
  auto reply = co_await conn->Read(config_.connect_timeout * 2);
  if (!reply.ok()) {
    // A TLS coordinator drops a plain worker's first frame without a word.
    if (!tls_ && reply.status().code() == Status::Code::kUnavailable) {
      co_return Status::Unavailable("registration: " + reply.status().message() +
                                    " (if the coordinator runs with --tls-cert, give this worker --tls-ca or --tls)");
    }
    co_return reply.status().WithContext("registration");
  }
  auto type = protocol::MessageType(*reply);
  if (!type.ok()) co_return Status::Unavailable("registration: " + type.status().message());
  if (*type == protocol::kTypeRejected) {
    auto rejected = protocol::Parse<protocol::RejectedMessage>(*reply);
    if (rejected.ok() && rejected->retry_after_ms > 0) {  // the name is held for now: try again later
      co_return Status::Unavailable("the coordinator refused this registration for now: " + rejected->reason);
    }
    co_return Status::InvalidArgument("the coordinator rejected this worker: " +
                                      (rejected.ok() ? rejected->reason : std::string("no reason given")));
  }
  auto registered = protocol::Parse<protocol::RegisteredMessage>(*reply);
  if (!registered.ok()) co_return Status::Unavailable(registered.status().message());
  worker_id_ = registered->worker_id;
  worker_secret_ = registered->worker_secret;
  registered_ = true;
  backoff_.Reset();
  log_.Info("registered", {{"worker", worker_id_}, {"name", config_.name}, {"slots", config_.cpu_slots},
                           {"running", runners_.size()}});
  const auto interval = std::chrono::milliseconds(std::max<std::int64_t>(10, registered->heartbeat_interval_ms));
  const auto read_timeout = std::max(interval * 3, std::chrono::milliseconds(registered->heartbeat_timeout_ms));
  auto self = shared_from_this();
  asio::co_spawn(executor_, [self, conn, interval]() { return self->HeartbeatLoop(conn, interval); },
                 asio::detached);
  outbox_.MarkAllUnsent();
  Flush();
  while (conn->is_open()) {
    if (Finished()) {
      co_await SayGoodbye();
      co_return Status::Ok();
    }
    // The coordinator answers every heartbeat, so silence past read_timeout means it
    // is gone even when TCP has not noticed (a half-open connection).
    auto frame = co_await conn->Read(read_timeout);
    if (!frame.ok()) co_return frame.status();
    HandleFrame(*frame);
  }
  co_return Status::Unavailable("connection closed");
}

asio::awaitable<void> WorkerAgent::HeartbeatLoop(std::shared_ptr<protocol::FrameConnection> conn,
                                                 std::chrono::milliseconds interval) {
  auto self = shared_from_this();
  while (conn->is_open() && connection_ == conn) {
    protocol::HeartbeatMessage hb;
    hb.running = RunningAttempts();
    if (!conn->Send(protocol::ToJson(hb)).ok()) break;
    co_await Sleep(interval);
  }
}

asio::awaitable<void> WorkerAgent::FlushLoop() {
  auto self = shared_from_this();
  while (true) {
    co_await Sleep(config_.flush_interval);
    Flush();
    if (metrics_) metrics_->SetAgentState(connected(), outbox_.pending_events());
    if (Finished()) {  // stopped, or a drain completed
      co_await SayGoodbye();
      if (connection_) connection_->Close();  // ends Session's read
      break;
    }
  }
}

asio::awaitable<void> WorkerAgent::SayGoodbye() {
  // A clean stop: the coordinator marks this worker gone, not lost. Once, from whichever
  // of the session and the flush loop sees the end first.
  if (goodbye_sent_ || !connected()) co_return;
  goodbye_sent_ = true;
  auto connection = connection_;
  if (connection->Send(protocol::ToJson(protocol::GoodbyeMessage{})).ok()) {
    (void)co_await connection->Flush();  // Close would drop what is still queued
  }
}

void WorkerAgent::Flush() {
  if (!connected()) return;
  for (auto& frame : outbox_.TakeUnsent(config_.max_events_per_frame, config_.max_frames_in_flight)) {
    Status sent = connection_->Send(frame);
    if (!sent.ok() && sent.code() == Status::Code::kResourceExhausted && connection_->is_open() &&
        frame.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() > protocol::kDefaultMaxFrameBytes) {
      // A frame the codec refuses for its own size would be refused again after any
      // reconnect: its events are dropped (counted), never resent, and the connection
      // stays (security review 2026-12-07, A4). The outbox cuts frames by bytes, so
      // this is a safety net.
      const std::uint64_t before = outbox_.dropped_events();
      outbox_.DropFrame(frame.value("outbox_seq", std::int64_t{0}));
      log_.Warning("dropped events whose frame is over the protocol's limit",
                   {{"events", outbox_.dropped_events() - before}, {"limit_bytes", protocol::kDefaultMaxFrameBytes},
                    {"error", sent.message()}});
      continue;
    }
    if (!sent.ok()) {
      log_.Warning("cannot send to the coordinator", {{"error", sent.ToString()}});
      connection_->Close();
      outbox_.MarkAllUnsent();
      return;
    }
  }
}

std::vector<protocol::AttemptRef> WorkerAgent::RunningAttempts() const {
  std::vector<protocol::AttemptRef> out;
  for (const auto& [ref, runner] : runners_) out.push_back(ref);
  return out;
}

void WorkerAgent::HandleFrame(const nlohmann::json& frame) {
  auto type = protocol::MessageType(frame);
  if (!type.ok()) {
    log_.Warning("ignoring a frame without a type");
    return;
  }
  if (*type == protocol::kTypeAssign) {
    auto assign = protocol::Parse<protocol::AssignMessage>(frame);
    if (!assign.ok()) {
      log_.Warning("ignoring a malformed assign", {{"error", assign.status().message()}});
      return;
    }
    StartAttempt(std::move(assign).value());
  } else if (*type == protocol::kTypeCancel) {
    auto cancel = protocol::Parse<protocol::CancelMessage>(frame);
    if (!cancel.ok()) return;
    auto it = runners_.find(cancel->attempt);
    if (it != runners_.end()) {
      log_.Info("cancel", {{"trial", cancel->attempt.trial_id}, {"attempt", cancel->attempt.attempt},
                           {"reason", cancel->reason}});
      it->second->Cancel(cancel->reason.empty() ? "cancelled by the coordinator" : cancel->reason);
    }
  } else if (*type == protocol::kTypeDrain) {
    draining_ = true;
    log_.Info("draining: finishing the running attempts, taking no new ones", {{"running", runners_.size()}});
  } else if (*type == protocol::kTypeAck) {
    auto ack = protocol::Parse<protocol::AckMessage>(frame);
    if (!ack.ok()) return;
    outbox_.Acknowledge(ack->outbox_seq);
    Flush();  // the window has room again
  } else {
    log_.Warning("ignoring an unknown message type", {{"type", *type}});
  }
}

void WorkerAgent::StartAttempt(protocol::AssignMessage assign) {
  const auto ref = assign.attempt;
  if (runners_.count(ref)) return;  // a redelivered assign: already running
  if (draining_ || stopping_) {
    RefuseAttempt(ref, "the worker is draining", /*infrastructure=*/false);
    return;
  }
  log_.Info("start", {{"trial", ref.trial_id}, {"attempt", ref.attempt}, {"variant", assign.variant_key},
                      {"ranks", assign.ranks.size()}, {"world_size", assign.world_size}});
  std::weak_ptr<WorkerAgent> weak = shared_from_this();
  TrialRunner::Callbacks callbacks;
  callbacks.on_event = [weak, ref](int rank, protocol::TrainerEvent event) {
    auto agent = weak.lock();
    if (!agent) return;
    if (agent->metrics_) agent->metrics_->ObserveEvent(ref, rank, event);
    const std::uint64_t oversized = agent->outbox_.oversized_events();
    agent->outbox_.AddEvent(ref, rank, std::move(event));
    if (agent->outbox_.oversized_events() != oversized && (oversized & (oversized + 1)) == 0) {
      // The 1st, 2nd, 4th, 8th, ... such event: a script cannot flood the log with them.
      agent->log_.Warning("dropped an event too large for any frame",
                          {{"trial", ref.trial_id}, {"attempt", ref.attempt}, {"rank", rank}, {"so_far", oversized + 1},
                           {"limit_bytes", protocol::kDefaultMaxFrameBytes}});
    }
  };
  callbacks.on_finished = [weak, ref](protocol::AttemptFinishedMessage finished) {
    auto agent = weak.lock();
    if (!agent) return;
    if (!agent->preempt_reason_.empty() &&
        finished.outcome == protocol::OutcomeName(protocol::Outcome::kCancelled)) {
      // Not the trial's doing: the coordinator retries a lost attempt.
      finished.outcome = protocol::OutcomeName(protocol::Outcome::kLost);
      finished.reason = agent->preempt_reason_;
    }
    agent->log_.Info("finished", {{"trial", ref.trial_id}, {"attempt", ref.attempt}, {"outcome", finished.outcome},
                                  {"reason", finished.reason}});
    // The attempt's live series go now; its history is in the coordinator's store.
    if (agent->metrics_) agent->metrics_->EndTrial(ref, finished.outcome);
    const bool succeeded = finished.outcome == protocol::OutcomeName(protocol::Outcome::kSucceeded);
    agent->outbox_.AddFinished(std::move(finished));
    if (auto it = agent->runners_.find(ref); it != agent->runners_.end()) {
      agent->ReclaimRankUid(ref, it->second->trial_dir(), it->second->cache_dir());
      agent->RetireTrialDir(it->second->trial_dir(), succeeded);
    }
    agent->runners_.erase(ref);
    agent->ReleaseAttemptSlots(ref);
    agent->Flush();
  };
  if (metrics_) metrics_->StartTrial(assign);
  std::vector<std::vector<int>> rank_cpus = PinAttempt(assign);
  std::optional<unsigned> uid;
  if (config_.rank_uid_count > 0 && !config_.simulate) {
    rank_uid_busy_.resize(static_cast<std::size_t>(config_.rank_uid_count), false);
    auto free = std::find(rank_uid_busy_.begin(), rank_uid_busy_.end(), false);
    if (free == rank_uid_busy_.end()) {  // more attempts than uids: Finalize's check makes this a bug
      log_.Error("no free uid of --rank-uids; the attempt is requeued", {{"trial", ref.trial_id}});
      ReleaseAttemptSlots(ref);
      RefuseAttempt(ref, "infrastructure: no free uid of the worker's --rank-uids", /*infrastructure=*/true);
      return;
    }
    *free = true;
    uid = config_.rank_uid_first + static_cast<unsigned>(free - rank_uid_busy_.begin());
    attempt_uids_[ref] = *uid;
  }
  const int assign_side = assign.lockstep ? assign.lockstep->side : 0;
  auto runner = std::make_shared<TrialRunner>(executor_, config_, std::move(assign), std::move(callbacks), env_);
  runner->PinRanks(std::move(rank_cpus));
  if (uid) runner->RunAs(*uid);
  if (auto group = attempt_groups_.find(ref); group != attempt_groups_.end()) {
    runner->JoinLockstep(lockstep_groups_.at(group->second), assign_side);
  }
  runners_[ref] = runner;
  runner->Start();
}

std::vector<std::vector<int>> WorkerAgent::PinAttempt(const protocol::AssignMessage& assign) {
  const auto& ref = assign.attempt;
  std::shared_ptr<LockstepGroup> group;
  if (assign.lockstep && !config_.simulate) {
    auto& slot = lockstep_groups_[assign.lockstep->group];
    if (!slot) {
      slot = std::make_shared<LockstepGroup>(executor_, assign.lockstep->group, assign.lockstep->sides,
                                             std::chrono::milliseconds(assign.lockstep->turn_timeout_ms), env_);
    }
    group = slot;
    attempt_groups_[ref] = assign.lockstep->group;
    ++group->members;
  }
  // CPU ranks each get a slot's own cores (docs/sweep.md, "Isolation"); a lockstep
  // group's sides all get the slots its first side took: they take turns on them.
  std::vector<std::vector<int>> rank_cpus;
  const bool cpu_ranks = !assign.ranks.empty() && assign.ranks.front().cuda_devices.empty();
  if (!cpu_ranks || !cores_.pinned()) return rank_cpus;
  if (group && group->slots_acquired) {
    for (std::size_t slot : group->slots) rank_cpus.push_back(cores_.SlotCpus(slot));
    return rank_cpus;
  }
  if (auto slots = cores_.Acquire(static_cast<int>(assign.ranks.size()))) {
    for (std::size_t slot : *slots) rank_cpus.push_back(cores_.SlotCpus(slot));
    if (group) {
      group->slots = *slots;
      group->slots_acquired = true;
    } else {
      pinned_slots_[ref] = *slots;
    }
  } else {
    log_.Info("more ranks than free CPU slots; running them unpinned", {{"trial", ref.trial_id}});
  }
  return rank_cpus;
}

void WorkerAgent::ReleaseAttemptSlots(const protocol::AttemptRef& ref) {
  if (auto held = pinned_slots_.find(ref); held != pinned_slots_.end()) {
    cores_.Release(held->second);
    pinned_slots_.erase(held);
  }
  auto member = attempt_groups_.find(ref);
  if (member == attempt_groups_.end()) return;
  auto group = lockstep_groups_.find(member->second);
  attempt_groups_.erase(member);
  if (group == lockstep_groups_.end() || --group->second->members > 0) return;
  if (group->second->slots_acquired) cores_.Release(group->second->slots);
  lockstep_groups_.erase(group);
}

void WorkerAgent::RefuseAttempt(const protocol::AttemptRef& ref, const std::string& reason, bool infrastructure) {
  protocol::AttemptFinishedMessage refused;
  refused.attempt = ref;
  refused.outcome = protocol::OutcomeName(protocol::Outcome::kLost);
  refused.reason = reason;
  refused.infrastructure = infrastructure;
  outbox_.AddFinished(refused);
  Flush();
}

void WorkerAgent::ReclaimRankUid(const protocol::AttemptRef& ref, const std::string& trial_dir,
                                 const std::string& cache_dir) {
  auto it = attempt_uids_.find(ref);
  if (it == attempt_uids_.end()) return;
  const unsigned uid = it->second;
  attempt_uids_.erase(it);
  // Nothing of the attempt may run on into the uid's next attempt (docs/security.md).
  if (Status s = KillEveryProcessOf(uid); !s.ok()) {
    log_.Error("the uid is not used again", {{"uid", uid}, {"error", s.message()}});
    return;
  }
  // Without private mounts its /tmp and /dev/shm files are the host's: remove them.
  if (!PrivateMountsAvailable()) {
    for (const char* dir : {"/tmp", "/dev/shm"}) {
      if (Status s = RemoveEntriesOwnedBy(uid, dir); !s.ok()) log_.Warning(s.message());
    }
  }
  // Back to root: the next attempt under this uid (another sweep's) cannot read them.
  for (const std::string& dir : {trial_dir, cache_dir}) {
    if (dir.empty() || dir == config_.cache_dir) continue;
    if (Status s = ChownTree(dir, 0, 0); !s.ok()) log_.Warning(s.message());
  }
  rank_uid_busy_[uid - config_.rank_uid_first] = false;
}

void WorkerAgent::RetireTrialDir(const std::string& dir, bool succeeded) {
  if (config_.keep_trial_dirs || dir.empty()) return;
  std::error_code ec;
  if (succeeded) {
    std::filesystem::remove_all(dir, ec);
  } else {
    kept_failed_dirs_.push_back(dir);
    while (kept_failed_dirs_.size() > static_cast<std::size_t>(std::max(0, config_.keep_failed_trials))) {
      std::filesystem::remove_all(kept_failed_dirs_.front(), ec);
      kept_failed_dirs_.pop_front();
    }
  }
  if (ec) log_.Warning("cannot remove a trial directory", {{"dir", dir}, {"error", ec.message()}});
}

void WorkerAgent::Preempt(const std::string& reason, std::chrono::milliseconds grace) {
  if (stopping_) return;
  preempt_reason_ = reason.empty() ? std::string("the worker was preempted") : reason;
  // First, so that the coordinator places nothing more here while the stopped attempts'
  // results (sent after it on the same connection) are requeued elsewhere.
  if (connected()) (void)connection_->Send(protocol::ToJson(protocol::DrainMessage{}));
  log_.Info(runners_.empty() ? "preempted; no attempt running"
                             : "preempted; stopping the running attempts, the coordinator requeues them",
            {{"reason", preempt_reason_}, {"running", runners_.size()}});
  Stop(grace);
}

void WorkerAgent::Stop(std::chrono::milliseconds grace) {
  if (stopping_) return;
  stopping_ = true;
  stop_deadline_ = clock_.Now() + grace;
  for (auto& [ref, runner] : runners_) runner->Cancel("the worker is shutting down");
  if (!connected() && connection_) connection_->Close();
}

}  // namespace bakeoff::worker
