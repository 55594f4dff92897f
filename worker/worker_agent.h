// WorkerAgent: the node agent behind `bakeoff worker`. Connects to the coordinator's
// worker listener, registers with the token and its resources, heartbeats, runs the
// attempts it is assigned (one TrialRunner each), and sends their events and results
// through an acknowledged outbox (worker/outbox.h). When the connection drops it keeps
// its trials running, buffers their events, and reconnects with exponential backoff
// and jitter; on re-registration it lists its running attempts so that a restarted
// coordinator can reclaim them (docs/protocol.md).
// Time and logs come from an injected Env (protocol/env.h): the stop deadline reads its
// clock's steady time, the attempts' timestamps its wall time; its lines (component
// "worker") and those of its trials and lockstep groups go through the Env.
// Thread-safety: not thread-safe; Run and every other method run on the agent's
// executor (single-threaded io_context). Stop may be posted from a signal handler's
// asio::signal_set callback on that executor.
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "protocol/backoff.h"
#include "protocol/clock.h"
#include "protocol/env.h"
#include "protocol/log.h"
#include "protocol/frame_connection.h"
#include "protocol/messages.h"
#include "protocol/status.h"
#include "worker/metrics_http_server.h"
#include "worker/outbox.h"
#include "worker/lockstep_group.h"
#include "worker/trial_runner.h"
#include "worker/worker_config.h"
#include "worker/worker_metrics.h"

namespace bakeoff::worker {

class WorkerAgent : public std::enable_shared_from_this<WorkerAgent> {
 public:
  // REQUIRES: config.Finalize() succeeded; `env` outlives the agent and its trials.
  WorkerAgent(boost::asio::any_io_executor executor, WorkerConfig config, const Env& env = Env::Default());

  // Runs until Stop(), a completed drain, a rejected registration (kInvalidArgument:
  // wrong token or protocol version; a name held by a live worker is retried) or
  // max_connect_attempts failures (kUnavailable).
  boost::asio::awaitable<Status> Run();

  // Starts the /metrics endpoint (config.metrics_listen; "off": none). Run calls it
  // when it was not called before; call it first to learn the port early.
  Status StartMetrics();
  // Null while /metrics is off or not started.
  const WorkerMetrics* metrics() const { return metrics_.get(); }
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }

  // Cancels running trials, delivers their results for up to `grace` (by the clock's
  // steady time), then ends Run.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  // Stop for a reason outside the trials (Slurm's signal before a time limit or on
  // preemption): running attempts are stopped and reported `lost` with `reason`, so the
  // coordinator requeues them (while attempts remain) instead of finishing them
  // cancelled; then as Stop.
  void Preempt(const std::string& reason, std::chrono::milliseconds grace = std::chrono::milliseconds(3000));

  const WorkerConfig& config() const { return config_; }
  const std::string& worker_id() const { return worker_id_; }
  bool connected() const { return connection_ && connection_->is_open() && registered_; }
  std::size_t running_attempts() const { return runners_.size(); }
  const Outbox& outbox() const { return outbox_; }

 private:
  // Removes an ended attempt's directory by WorkerConfig's keep rules.
  void RetireTrialDir(const std::string& dir, bool succeeded);
  // Reports an assigned attempt `lost` without running it (the coordinator requeues it).
  // The CPUs each local rank of `assign` runs on: its own slots, or for a lockstep side
  // its group's (shared by every side); empty when the ranks run unpinned.
  std::vector<std::vector<int>> PinAttempt(const protocol::AssignMessage& assign);
  // Releases what the attempt held: its slots, or its share of its lockstep group.
  void ReleaseAttemptSlots(const protocol::AttemptRef& ref);
  void RefuseAttempt(const protocol::AttemptRef& ref, const std::string& reason, bool infrastructure);
  boost::asio::awaitable<Status> Connect();  // connects and reconnects until the run ends
  boost::asio::awaitable<Status> Session();  // one connection, until it drops
  // A connection to the coordinator, over TLS when configured.
  boost::asio::awaitable<Result<std::shared_ptr<protocol::FrameConnection>>> Dial(const std::string& host, int port);
  boost::asio::awaitable<void> HeartbeatLoop(std::shared_ptr<protocol::FrameConnection> conn,
                                             std::chrono::milliseconds interval);
  boost::asio::awaitable<void> FlushLoop();
  // Tells the coordinator this worker stops cleanly (it is then gone, not lost); once.
  boost::asio::awaitable<void> SayGoodbye();
  void HandleFrame(const nlohmann::json& frame);
  void StartAttempt(protocol::AssignMessage assign);
  void Flush();
  std::vector<protocol::AttemptRef> RunningAttempts() const;
  bool Finished() const;
  std::string MetricsHost() const;  // for registration; "" = the advertised host

  boost::asio::any_io_executor executor_;
  WorkerConfig config_;
  const Env& env_;
  const Clock& clock_;  // env_.clock()
  const logging::Logger log_;  // "worker"
  std::shared_ptr<protocol::FrameConnection> connection_;
  std::shared_ptr<protocol::TlsContext> tls_;  // null: plain TCP
  bool registered_ = false;
  std::string worker_id_;
  std::string worker_secret_;  // from the last `registered`; proves this is the same worker
  std::map<protocol::AttemptRef, std::shared_ptr<TrialRunner>> runners_;
  // Which CPU slots (config_.cores) each running CPU attempt holds.
  CorePartition cores_;
  std::map<protocol::AttemptRef, std::vector<std::size_t>> pinned_slots_;
  // Lockstep groups with a running side here, by name, and the group of each such
  // attempt: a group's sides share its CPU slots, released when its last side ends.
  std::map<std::string, std::shared_ptr<LockstepGroup>> lockstep_groups_;
  std::map<protocol::AttemptRef, std::string> attempt_groups_;
  std::deque<std::string> kept_failed_dirs_;  // oldest first (WorkerConfig::keep_failed_trials)
  // --rank-uids: which uid of the range each running attempt's ranks run as (the lowest
  // free one, so that a sweep's next trial tends to find its cache warm).
  std::vector<bool> rank_uid_busy_;
  std::map<protocol::AttemptRef, unsigned> attempt_uids_;
  // After an attempt under a uid has finished: every process of the uid is killed and
  // its directories go back to root, then the uid is free again.
  void ReclaimRankUid(const protocol::AttemptRef& ref, const std::string& trial_dir, const std::string& cache_dir);
  Outbox outbox_;
  bool draining_ = false;
  bool stopping_ = false;
  bool goodbye_sent_ = false;
  std::string preempt_reason_;  // set by Preempt: stopped attempts are reported lost
  Clock::TimePoint stop_deadline_{};
  Backoff backoff_;  // reconnects; reset on registration
  std::shared_ptr<WorkerMetrics> metrics_;  // shared with the endpoint's sessions
  std::shared_ptr<MetricsHttpServer> metrics_server_;
};

}  // namespace bakeoff::worker
