// EventIngest: how the events a worker relays (the trainer's typed events, protocol/
// trainer_event.h) become rows of the results store, and how fast a worker's events are
// read. Each event of a current attempt is read once into its type: a step becomes a
// step row, a summary a summary row, anything else an event row; an event that does not
// read (a worker that skipped the checks) is dropped and logged, not stored. One frame's
// rows are appended as one batch (timed as the `append_events` store write). The trials
// whose first rank said `started` or `ready` are returned: marking them running is the
// caller's decision (CoordinatorService).
//
// Provenance (docs/security.md, "A worker speaks only for its own ranks"): per (attempt,
// rank) the trial table says whether the event is stored (the current attempt's rank was
// given to the sending worker), stale (a replaced attempt: skipped silently) or foreign
// (a current attempt whose rank the sending worker was not given: dropped, counted and
// logged once per frame). The rest of the frame is
// stored and acknowledged either way, so a worker cannot make its frame hold back others.
//
// Quotas (docs/security.md, "Limits"): each (attempt, rank) stores at most
// kMaxStepRowsPerRank step rows, kMaxOtherEventsPerRank events that are neither steps
// nor summaries, and kMaxEventBytesPerRank bytes of events other than steps (summaries
// included; each event by its JSON as encoded; a step row's size is bounded by its ten
// numeric columns, so its count bounds its bytes); what is over is dropped, counted and
// logged once per frame, so one trial's flood cannot fill the database for everyone
// (security review 2026-12-07, A6: counted only by number, 1,000 events of 1 MB were
// about 1 GiB per rank and attempt).
//
// Reading: each worker has a budget of `max_worker_events_per_s`; a frame over it is
// read later, not dropped (ReadDelay), counted in the coordinator's metrics and logged
// at most every 10 s per worker.
//
// Thread-safety: not thread-safe; owned by CoordinatorService and used on its executor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/event_rate_limiter.h"
#include "coordinator/trial_table.h"
#include "metrics/store/results_store.h"
#include "protocol/clock.h"
#include "protocol/messages.h"
#include "protocol/status.h"
#include "protocol/log.h"

namespace bakeoff::coordinator {

class EventIngest {
 public:
  // Per (attempt, rank), stored by this coordinator process (a restart starts anew).
  static constexpr std::size_t kMaxStepRowsPerRank = 1'000'000;
  static constexpr std::size_t kMaxOtherEventsPerRank = 1'000;
  static constexpr std::size_t kMaxEventBytesPerRank = 16u << 20;

  // `max_events_per_s` 0: no limit. The references must outlive this object; drops and
  // slowed readers are logged to `log`.
  EventIngest(std::size_t max_events_per_s, metrics::ResultsStore& store, CoordinatorMetrics& metrics,
              const logging::Logger& log);

  // Stores the events of `message` from `worker_id` of the ranks `table` says it was
  // given (above). Returns the ids of the trials that reported started or ready, or the
  // store's error (nothing of the frame is stored then).
  Result<std::set<std::int64_t>> Store(const std::string& worker_id, const protocol::EventsMessage& message,
                                       const TrialTable& table);

  // How long to wait before reading `frame` from `worker_id`: zero unless it is an
  // events frame over the worker's budget at `now`.
  std::chrono::milliseconds ReadDelay(const std::string& worker_id, const nlohmann::json& frame,
                                      Clock::TimePoint now);

  // Drops the budget of a worker the registry forgot.
  void ForgetWorker(const std::string& worker_id) { budgets_.erase(worker_id); }
  // Drops the quotas of an attempt that ended.
  void ForgetAttempt(const protocol::AttemptRef& attempt);

 private:
  struct Budget {
    EventRateLimiter limiter;
    std::chrono::steady_clock::time_point last_logged{};
  };

  std::size_t max_events_per_s_;
  metrics::ResultsStore& store_;
  CoordinatorMetrics& metrics_;
  const logging::Logger& log_;
  std::map<std::string, Budget> budgets_;  // per worker
  struct Quota {
    std::size_t step_rows = 0;
    std::size_t other_events = 0;
    std::size_t event_bytes = 0;  // events other than steps, summaries included
  };
  // Per (trial id, attempt, rank).
  std::map<std::tuple<std::int64_t, int, int>, Quota> quotas_;

  // The steps of Store, each counting what it drops in `drops`.
  struct Drops;
  // Whether to store what names (attempt, rank) (provenance, above).
  static bool Keep(const std::string& worker_id, const TrialTable& table, const protocol::AttemptRef& attempt,
                   int rank, Drops& drops);
  // Whether (attempt, rank) may store `rows` more step rows (steps) or one more other
  // event (!steps); taken from its quota when so.
  bool WithinCount(const protocol::AttemptRef& attempt, int rank, bool steps, std::size_t rows, Drops& drops);
  // Whether (attempt, rank) may store `body`, an event other than a step, by its bytes.
  bool WithinBytes(const protocol::AttemptRef& attempt, int rank, const nlohmann::json& body, Drops& drops);
  // Reads one relayed event into its row of `batch`; a started or ready event's trial
  // joins `started`.
  void AddEvent(const protocol::TrialEvent& ev, metrics::MetricsBatch& batch, std::set<std::int64_t>& started,
                Drops& drops);
  // One log line per reason, and the counters.
  void ReportDrops(const std::string& worker_id, const Drops& drops);
};

}  // namespace bakeoff::coordinator
