// TrialTable: the coordinator's in-memory view of its unfinished sweeps and their trials,
// and how it is rebuilt from the results store (recovery after a restart or a lost store
// group). It holds what CoordinatorService decides on; it decides nothing itself: the
// service changes the entries (state machine, placement, cancel) and persists first.
//
// Recovery reads the store's rows into entries: queued trials are queued again (since
// now); assigned and running ones get a reclaim deadline (now + recovery_grace) and the
// placement their attempt had, marked not yet reclaimed, until their worker reconnects.
// A finished trial keeps its phase only (its outcome is in the store).
//
// The entries themselves are sweep_entry.h's.
//
// Thread-safety: not thread-safe; owned by CoordinatorService and used on its executor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/sweep_entry.h"
#include "metrics/store/results_store.h"
#include "protocol/clock.h"
#include "protocol/status.h"

namespace bakeoff::coordinator {

class TrialTable {
 public:
  // Loads every running sweep of `store` with its trials (see above). On an error the
  // table may hold the sweeps loaded before it: the caller clears it or gives up.
  Status Recover(metrics::ResultsStore& store, Clock::TimePoint now, std::chrono::milliseconds recovery_grace);
  // Adds a sweep the store has just created: `trial_ids[i]` is the id of `trials[i]`;
  // every trial is queued since `now`, with `max_attempts`.
  // REQUIRES: trial_ids.size() == trials.size(), and `sweep` holds no trials yet.
  void AddSubmitted(SweepEntry sweep, const std::vector<std::int64_t>& trial_ids,
                    const std::vector<metrics::NewTrial>& trials, int max_attempts, Clock::TimePoint now);
  // Forgets everything (before a reload from the store).
  void Clear();

  // The entry of an unfinished sweep or trial; nullptr when the table does not hold it.
  SweepEntry* FindSweep(std::int64_t sweep_id);
  TrialEntry* FindTrial(std::int64_t trial_id);
  // The sweep's queued trials of one variant not already being cancelled, in run order.
  std::vector<TrialEntry*> QueuedTrialsOf(const SweepEntry& sweep, const std::string& variant_key);
  const SweepEntry* FindSweep(std::int64_t sweep_id) const;
  const TrialEntry* FindTrial(std::int64_t trial_id) const;
  // The part on `worker_id` of trial `trial_id`'s attempt `attempt` while that attempt is
  // current; nullptr otherwise (stale, or not placed on that worker).
  TrialPart* CurrentPart(std::int64_t trial_id, int attempt, const std::string& worker_id);
  const TrialPart* CurrentPart(std::int64_t trial_id, int attempt, const std::string& worker_id) const;
  // Trials whose current attempt has an unfinished part on `worker_id`.
  std::vector<std::int64_t> RunningOn(const std::string& worker_id) const;
  // Whether every trial of the sweep has finished; advances its finished prefix (finished
  // is final, so each call resumes where the last stopped).
  bool AllFinished(SweepEntry& sweep) const;
  // Drops every done sweep whose state is stored, with its trials, calling `before` on
  // each first; returns how many trials went.
  std::size_t EvictDone(const std::function<void(const SweepEntry&)>& before);
  std::vector<std::int64_t> SweepIds() const;
  std::size_t QueuedCount() const;
  // Recovered attempts still waiting for their workers, and those workers.
  const std::set<std::int64_t>& AwaitingReclaim() const { return awaiting_reclaim_; }
  std::size_t AwaitingReclaimCount() const { return awaiting_reclaim_.size(); }
  std::set<std::string> AwaitedWorkers() const;
  // The trial counts of an unfinished sweep held whole; nullopt otherwise (the store
  // counts those).
  std::optional<metrics::TrialCounts> LiveCounts(std::int64_t sweep_id) const;

  // What a (re-)registering worker's running attempts mean here. `parts`: its parts of
  // current attempts that need their resources reserved again (recovered after a
  // restart, or not held by the registry), marked reclaimed; `stale`: attempts it runs
  // that are not current here (it is told to cancel them); `lost`: trials whose current
  // attempt has an unfinished part on it that it no longer runs (it restarted).
  struct Reclaim {
    std::vector<std::pair<protocol::AttemptRef, const TrialPart*>> parts;
    std::vector<protocol::AttemptRef> stale;
    std::vector<std::int64_t> lost;
  };
  Reclaim ReclaimWorker(const std::string& worker_id, const std::vector<protocol::AttemptRef>& running,
                        const std::set<protocol::AttemptRef>& held);
  // Trials recovered assigned or running whose reclaim deadline has passed with a part
  // no worker reclaimed (their attempts are lost); each is taken off the waiting list.
  std::vector<std::int64_t> TakeUnreclaimed(Clock::TimePoint now);
  // Trials whose current attempt's coordinator deadline has passed (they end `timeout`);
  // each deadline is taken off the list, and stale entries are dropped.
  std::vector<std::int64_t> TakeOverdue(Clock::TimePoint now);

  // Unfinished sweeps by id (read-only: the table's methods change them), a trial the
  // table holds (REQUIRES: it does, e.g. one of a held sweep's trial_order), and how many.
  const std::map<std::int64_t, SweepEntry>& sweeps() const { return sweeps_; }
  const TrialEntry& Trial(std::int64_t trial_id) const { return trials_.at(trial_id); }
  std::size_t TrialCount() const { return trials_.size(); }
  // `trial` (its state machine requeued it) is queued again since `now`: its sweep's
  // queue cursor goes back to the start.
  void Requeued(TrialEntry& trial, Clock::TimePoint now);
  // Moves `sweep`'s queue cursor (queued_from) past the trials no longer queued and
  // returns it: a long sweep's scan starts where its queue does.
  std::size_t AdvanceQueueCursor(std::int64_t sweep_id);

  // Cancels sweep `sweep_id`: its queued trials now (the caller has stored that), the
  // others that still run are marked cancel_requested; `cancels` are the unfinished parts
  // of those, to be told to stop. `stopping` counts the running trials.
  struct Cancelling {
    int stopping = 0;
    std::vector<std::pair<std::string, protocol::AttemptRef>> cancels;  // (worker, attempt)
  };
  Cancelling CancelSweep(SweepEntry& sweep);
  // Marks `trial`'s current attempt running (the caller has stored that); returns how
  // long it waited from queued to running, once per queueing.
  std::optional<std::chrono::steady_clock::duration> MarkRunning(TrialEntry& trial, Clock::TimePoint now);
  // Sets `trial`'s coordinator deadline for its current attempt (TakeOverdue finds it).
  void SetAttemptDeadline(TrialEntry& trial, Clock::TimePoint at);

 private:
  Status LoadSweep(metrics::ResultsStore& store, const metrics::SweepRecord& record,
                   const std::map<std::int64_t, metrics::TrialResult>& active, Clock::TimePoint now,
                   std::chrono::milliseconds recovery_grace);

  std::map<std::int64_t, TrialEntry> trials_;
  std::map<std::int64_t, SweepEntry> sweeps_;
  // Trials recovered assigned or running, until reclaimed or past their deadline
  // (TakeUnreclaimed walks these, not every trial).
  std::set<std::int64_t> awaiting_reclaim_;
  // (deadline, trial) of every attempt with a coordinator deadline, soonest first; an
  // entry whose trial has since moved on (another attempt, finished) is stale and skipped.
  std::set<std::pair<Clock::TimePoint, std::int64_t>> attempt_deadlines_;
};

}  // namespace bakeoff::coordinator
