// ResultsStore: the coordinator's SQLite results database (results.db). It keeps every
// sweep, variant, trial, attempt, worker, step metric, trial summary and event, so that
// the coordinator can recover after a restart and users can query results with no
// server (docs/schema.md documents every table).
//
// Write model. The store applies and persists transitions of the trial state machine;
// it does not decide them (the coordinator does). Every transition is a compare-and-set
// on the trial's current state and attempt, applied in one transaction, so a message
// delivered twice changes nothing the second time (the call returns applied=false with
// the state found). Transitions that decide whether a trial runs again (assign, finish,
// requeue), sweep creation and metric and event batches (the coordinator acknowledges
// them to the worker, which then forgets them) are committed with synchronous=FULL
// before the call returns: they survive power loss. Worker rows are committed with
// synchronous=NORMAL (rebuilt from re-registration).
// Group commit: between BeginGroup and CommitGroup the writes share one transaction and
// one fsync (see BeginGroup); outside a group each write commits on its own.
// Writes for an attempt that is not the trial's current attempt, or whose attempt was
// marked lost, are refused row by row and counted (BatchResult::stale).
//
// Disk trouble. SQLITE_FULL becomes kResourceExhausted; SQLITE_READONLY, SQLITE_IOERR,
// SQLITE_CANTOPEN and SQLITE_CORRUPT become kIoError, each naming the database file;
// SQLITE_BUSY past the busy timeout kUnavailable; SQLITE_NOMEM and other engine errors
// kInternal. Any of these on a write means the store cannot write: the failed
// transaction is rolled back (nothing committed earlier is lost) and the store turns
// unhealthy: healthy() is false and health() says why, until Probe() succeeds. A write
// refused for its content (kInvalidArgument: a constraint) leaves it healthy. The
// coordinator refuses new work, and /healthz answers 503, while the store is unhealthy.
//
// Read side. The read methods are ResultsReader's (results_reader.h), run on the
// store's connection; a process that only reads opens a ResultsReader of its own.
//
// Thread-safety: one connection guarded by an internal mutex. Every method may be
// called from any thread; calls are serialised. Other processes may read the file at
// the same time (WAL mode), e.g. `bakeoff query` or `sqlite3 results.db`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "metrics/store/calibrations.h"
#include "metrics/store/read_only_query.h"
#include "metrics/store/results_reader.h"
#include "metrics/store/store_records.h"
#include "protocol/env.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

class SqliteConnection;

struct StoreOptions {
  // The database file; created 0600 if absent. Refused (kInvalidArgument, naming the
  // path) when it, or its -wal, -shm or -journal file, is a symbolic link or another
  // user's file (protocol/own_file.h).
  std::string path = "results.db";
  // The environment (protocol/env.h): its wall clock stamps every time the store writes
  // itself, its steady clock times the writes for write_observer, and its StoreVfs()
  // names the SQLite VFS the files are opened through (tests pass one that fails
  // writes: a full or failing disk). nullptr: Env::Default(). Must outlive the store.
  const Env* env = nullptr;
  // How long a write waits for another process's lock before failing (kUnavailable).
  int busy_timeout_ms = 5000;
  // Cap on the database size in pages (PRAGMA max_page_count); 0 = SQLite's default.
  // Reaching it is reported like a full disk (kResourceExhausted).
  int64_t max_page_count = 0;
  // synchronous=FULL for the durable writes (the default, what the store promises).
  // false: NORMAL for every write, so a power loss may lose the last commits, acknowledged
  // ones included. Only for benchmarks that measure what FULL costs.
  bool durable = true;
  // Called after every write transaction with its operation name, its Status and its
  // wall-clock seconds: the coordinator's store-write-latency metric. Operations:
  // create_sweep, set_sweep_state, assign_trial, mark_running, finish_trial,
  // requeue_trial, cancel_queued_trials, upsert_worker, set_worker_state,
  // worker_heartbeat, append_batch, probe. Runs under the store's mutex: keep it cheap
  // and never call the store from it.
  std::function<void(const char* operation, const Status& status, double seconds)>
      write_observer;
  // WAL checkpoints on a thread of the store's own, with a connection of its own (PASSIVE,
  // every checkpoint_interval), instead of inside the commit that crosses SQLite's
  // 1,000-page mark: a checkpoint copies pages into the database and fsyncs it, which
  // stalled the coordinator's event loop for 8-22 ms every second or two under load
  // (docs/scale.md). The writer then checkpoints only past 4,000 pages, copying what the
  // thread has not (so that the WAL is reused). Off: SQLite's automatic checkpoint in the
  // writer's commit (tests that inject disk faults count on it).
  bool background_checkpoint = true;
  // How often the checkpoint thread looks at the WAL.
  std::chrono::milliseconds checkpoint_interval{200};
};

// What a compare-and-set transition did. applied=false is not an error: the trial was
// not in the expected state or attempt (a duplicate or stale message); `state` and
// `attempts_used` say what was found so the caller can log it.
struct TransitionResult {
  bool applied = false;
  TrialState state = TrialState::kQueued;
  int64_t attempts_used = 0;
  std::optional<Outcome> outcome;
  // For AssignTrial: the new attempt's number when applied.
  int64_t attempt = 0;
};

// What a batch write did with its rows.
struct BatchResult {
  int64_t written = 0;     // rows inserted
  int64_t duplicates = 0;  // rows already stored (redelivered), left unchanged
  int64_t stale = 0;       // rows for a non-current or lost attempt, refused
};

// Rows of one delivery from a worker; written in one transaction.
struct MetricsBatch {
  std::vector<StepBlockRecord> step_blocks;
  // Single steps, stored as blocks of consecutive rows of one rank and phase (a caller
  // with blocks at hand passes step_blocks).
  std::vector<StepRecord> steps;
  std::vector<SummaryRecord> summaries;
  std::vector<EventRecord> events;
};

// Created by CreateSweep: the sweep's id and its trials' ids in the order given.
struct CreatedSweep {
  int64_t sweep_id = 0;
  std::vector<int64_t> trial_ids;
};

// Input for one trial of a new sweep (ids and states are set by the store).
struct NewTrial {
  std::string variant_key;
  int64_t repeat = 0;
  int64_t order_index = 0;
  int64_t max_attempts = 1;
};

class ResultsStore {
 public:
  // Opens or creates the database, switches it to WAL mode and applies every pending
  // migration (each in its own transaction). Fails with kIoError / kResourceExhausted
  // when the file cannot be opened or migrated, and kInvalidArgument when the file was
  // written by a newer Bakeoff (schema version above kLatestSchemaVersion).
  static Result<std::unique_ptr<ResultsStore>> Open(StoreOptions options);

  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  const std::string& path() const { return options_.path; }

  // --- Health -------------------------------------------------------------------
  // False after a write failed for a disk reason (full, read-only, I/O error).
  bool healthy() const;
  // Ok while healthy; otherwise the error that made the store unhealthy.
  Status health() const;
  // Tries a small real write; on success the store is healthy again.
  Status Probe();

  // --- Group commit ---------------------------------------------------------------
  // Opens a group: every write until CommitGroup joins one transaction, which
  // CommitGroup commits with synchronous=FULL, so that the group costs one fsync instead
  // of one per write. Each write still runs as its own savepoint: one refused for its
  // content (kInvalidArgument, kNotFound) is rolled back alone and returns its error as
  // it would outside a group, and what the group wrote before it stays. A write in an open group is neither durable nor visible
  // to other connections: the caller must not act on it outside the process
  // (acknowledge it to a worker, send what it decided, answer a user) before
  // CommitGroup returns Ok. A read method called while the group holds writes, from any
  // thread, commits them first, so that no reader sees a write that could still be
  // lost (the group goes on in a new transaction).
  // When a transaction of the group is lost (its commit failed, or a write failed for
  // a disk reason: the whole transaction is rolled back), the store turns unhealthy, every
  // further write of the group fails with that error, and CommitGroup returns it: the
  // caller must then treat every write since BeginGroup as possibly lost and re-read
  // what it needs from the store (some may have been committed early by a reader).
  // REQUIRES: no group open (BeginGroup); one thread drives the group.
  void BeginGroup();
  // Commits the group's writes and closes the group; Ok when they are all durable.
  Status CommitGroup();
  bool in_group() const;
  // The open group holds writes not yet committed (a commit would write and fsync).
  bool group_pending() const;

  // --- Sweeps (durable: FULL) ------------------------------------------------------
  // Stores the sweep, its variants and its trials (state queued) in one transaction.
  // REQUIRES: variant keys unique; every trial names a given variant.
  Result<CreatedSweep> CreateSweep(const SweepRecord& sweep,
                                   const std::vector<VariantRecord>& variants,
                                   const std::vector<NewTrial>& trials);
  // Sets the sweep's state; finished_at is stamped when the state is terminal.
  Status SetSweepState(int64_t sweep_id, SweepState state);

  // --- Trial transitions (compare-and-set, durable: FULL) ---------------------------
  // queued -> assigned, expecting attempts_used == expected_attempts_used. Creates
  // attempt number expected_attempts_used + 1 with its placement.
  Result<TransitionResult> AssignTrial(int64_t trial_id, int64_t expected_attempts_used,
                                       const AttemptRecord& placement);
  // assigned -> running for the current attempt `attempt` (stamps started_at).
  Result<TransitionResult> MarkRunning(int64_t trial_id, int64_t attempt);
  // Any unfinished state -> finished with `outcome`, expecting attempts_used ==
  // expected_attempt. When the trial was assigned or running, its current attempt ends
  // with the same outcome and reason. Use expected_attempt = attempts_used of a queued
  // trial to finish it without an attempt (e.g. cancelled, or lost with no attempts
  // left after a requeue).
  Result<TransitionResult> FinishTrial(int64_t trial_id, int64_t expected_attempt,
                                       Outcome outcome, const std::string& reason);
  // assigned|running -> queued for the current attempt `attempt`, which ends with
  // `attempt_outcome` (normally kLost) and `reason`. Later writes for that attempt are
  // refused as stale. `grant_attempt`: the trial's max_attempts grows by one in the same
  // transaction (an infrastructure failure does not use up the sweep's attempts).
  Result<TransitionResult> RequeueTrial(int64_t trial_id, int64_t attempt,
                                        Outcome attempt_outcome, const std::string& reason,
                                        bool grant_attempt = false);
  // Finishes every queued trial of the sweep as cancelled, in one transaction; returns
  // how many. Assigned and running trials are left to the coordinator (it stops them
  // first, then calls FinishTrial).
  Result<int64_t> CancelQueuedTrials(int64_t sweep_id, const std::string& reason);

  // --- Workers (synchronous=NORMAL: rebuilt from re-registration after a crash) ------
  // Inserts or replaces the worker row (registered_at kept when already present).
  Status UpsertWorker(const WorkerRecord& worker);
  Status SetWorkerState(const std::string& worker_id, WorkerState state);
  // at = 0 means now.
  Status RecordWorkerHeartbeat(const std::string& worker_id, UnixSeconds at = 0);

  // --- Metrics and events (batched, synchronous=FULL: acknowledged once stored) -----
  // Writes every row of the batch in one transaction; rows of stale attempts are
  // refused and counted, redelivered rows are counted as duplicates. A summary for the
  // same (trial, attempt, rank) replaces nothing: the first one stays.
  Result<BatchResult> AppendBatch(const MetricsBatch& batch);
  Result<BatchResult> AppendStepMetrics(const std::vector<StepRecord>& steps);
  Result<BatchResult> AppendEvents(const std::vector<EventRecord>& events);
  // The summary read through ReadSummaryRecord first (InvalidArgument when mistyped).
  Result<BatchResult> RecordSummary(const TrialSummary& summary);

  // Calibrations (calibrations.h): stores `record` (id and created_at filled in).
  Status RecordCalibration(CalibrationRecord& record);

  // --- Read side ----------------------------------------------------------------
  // Every read goes through the store's one ResultsReader (results_reader.h says what
  // each method returns), never a copy of its methods here: `store.Reader()->GetSweep(id)`.
  // The returned object holds the store's mutex until the end of the full expression,
  // after committing the open group's writes (readers never see a write that could still
  // be lost). The mutex is recursive, so a statement may read twice, or read and write,
  // on one store.
  class LockedReader {
   public:
    LockedReader(LockedReader&&) = delete;
    ResultsReader* operator->() const { return reader_; }

   private:
    friend class ResultsStore;
    explicit LockedReader(ResultsStore& store);
    ResultsReader* reader_;
    std::unique_lock<std::recursive_mutex> lock_;
  };
  LockedReader Reader();
  using Counts = ResultsReader::Counts;

 private:
  explicit ResultsStore(StoreOptions options);

  UnixSeconds Now() const;
  // Runs body inside BEGIN IMMEDIATE ... COMMIT with synchronous FULL when `durable`
  // (NORMAL otherwise); rolls back on any error and records store failures in health_.
  // REQUIRES: mutex_ held.
  Status WriteTransaction(const char* operation, bool durable,
                          const std::function<Status()>& body);
  // REQUIRES: mutex_ held.
  Status SetSynchronous(bool full);
  // Turns the store unhealthy when `status` says it cannot write (IsStoreFailure); returns it unchanged.
  // REQUIRES: mutex_ held.
  Status NoteFailure(Status status);
  // Runs body as one savepoint of the open group's transaction (opening it if needed).
  // REQUIRES: mutex_ held, group_.
  Status GroupWrite(const std::function<Status()>& body);
  // Sets one column of a worker's row (`sql` binds the value, then the id); NotFound
  // when the worker is not stored. REQUIRES: mutex_ held.
  template <typename Value>
  Status UpdateWorker(const char* operation, const std::string& worker_id, const char* sql,
                      const Value& value);
  // A compare-and-set transition of one trial in one durable write transaction: reads
  // the trial's state (NotFound when absent); when `allowed` holds for it, `apply`
  // writes and updates the result, which comes back applied; otherwise the state comes
  // back not applied. `doing` names the transition in errors ("assigning trial 7").
  // REQUIRES: mutex_ not held (it takes it).
  Result<TransitionResult> Transition(const char* operation, int64_t trial_id,
                                      const std::string& doing,
                                      const std::function<bool(const TransitionResult&)>& allowed,
                                      const std::function<Status(UnixSeconds, TransitionResult&)>& apply);
  // Commits the group's open transaction, if any (a failure is latched in
  // group_error_). Read methods call it first. REQUIRES: mutex_ held.
  Status CommitOpenGroup();

  StoreOptions options_;
  // Recursive: a LockedReader may be alive while the same statement writes.
  mutable std::recursive_mutex mutex_;
  std::unique_ptr<SqliteConnection> db_;  // guarded by mutex_
  std::unique_ptr<ResultsReader> reader_;  // over db_; guarded by mutex_
  // The background checkpoint (StoreOptions::background_checkpoint): its thread, and how
  // it is told to stop.
  void CheckpointLoop();
  std::thread checkpointer_;
  std::mutex checkpoint_mutex_;
  std::condition_variable checkpoint_wake_;
  bool checkpoint_stop_ = false;  // guarded by checkpoint_mutex_
  Status health_;                         // guarded by mutex_
  bool synchronous_full_ = false;         // the connection's current setting
  bool normal_set_ = false;               // !options_.durable: NORMAL was set
  // Group commit (guarded by mutex_): a group is open; its transaction is open; the
  // error that lost a transaction of the group (Ok while none).
  bool group_ = false;
  bool group_transaction_ = false;
  Status group_error_;
};

}  // namespace bakeoff::metrics
