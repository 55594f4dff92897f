// ResultsReader: the read side of the results database (docs/schema.md), as typed
// records (store_records.h): sweeps with their trial counts, variants, trials with their
// typed state and outcome, attempts, per-rank summaries read once into the protocol's
// SummaryEvent, steps, events, workers and calibrations. It has no write method.
//
// Two ways to hold one:
//   - ResultsReader::Open(path): a read-only connection of its own (SQLITE_OPEN_READONLY
//     and query_only), for `bakeoff status/report/compare/validate --db` beside a running
//     coordinator (WAL) or on a read-only copy. No file is created, no migration runs.
//   - ResultsStore reads through one over its own connection, under its lock and after
//     committing its open group (results_store.h).
// Sweeps are named by one rule everywhere (FindSweep, SweepIdToTry).
//
// Thread-safety: uses only its connection, which must not be used by two threads at once
// (SQLite's rule in its default threading mode); the store serialises its calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metrics/store/calibrations.h"
#include "metrics/store/store_records.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

class SqliteConnection;

// The SQL of ResultsReader::LiveFigures for one sweep, its id written in: for a reader on
// a connection of its own (RunReadOnlyQuery), whose rows are LiveTrialFigures' fields in
// order (trial_id, attempt, measured steps, tokens and step_s as reals; peak_mem_bytes).
// It reads attempt_live_sums, a row per trial of the sweep, and no step (A5).
std::string LiveFiguresSql(int64_t sweep_id);

class ResultsReader {
 public:
  // Opens `path` read-only and checks that it is a results database of this Bakeoff's
  // schema version. kNotFound when the file does not exist (nothing is created);
  // kInvalidArgument when it is not a Bakeoff results database, or of another schema
  // version (the message says how to migrate it); SQLite's failures as
  // SqliteConnection maps them. Waits up to 5 s for a writer's lock.
  static Result<std::unique_ptr<ResultsReader>> Open(const std::string& path);

  // Reads through `db`, which the caller owns and keeps open while this reader lives.
  explicit ResultsReader(SqliteConnection& db);
  ~ResultsReader();
  ResultsReader(const ResultsReader&) = delete;
  ResultsReader& operator=(const ResultsReader&) = delete;

  const std::string& path() const;
  // PRAGMA user_version.
  Result<int> SchemaVersion();

  // Holds one read transaction while it lives, so that the calls made meanwhile see one
  // state of the database while a coordinator writes. A no-op inside a transaction the
  // connection already has.
  class Snapshot {
   public:
    ~Snapshot();
    Snapshot(Snapshot&& other) noexcept;
    Snapshot(const Snapshot&) = delete;
    Snapshot& operator=(const Snapshot&) = delete;

   private:
    friend class ResultsReader;
    Snapshot(SqliteConnection* db, bool active) : db_(db), active_(active) {}
    SqliteConnection* db_;
    bool active_;
  };
  Snapshot BeginSnapshot();

  // --- Sweeps ---------------------------------------------------------------------
  // `counts` (SweepRecord::counts) are read from the sweep's trials unless the caller
  // knows them (a coordinator running the sweep): kSkip leaves them zero.
  enum class Counts { kRead, kSkip };
  // Newest first. `state` filters when given.
  Result<std::vector<SweepRecord>> ListSweeps(std::optional<SweepState> state = std::nullopt);
  Result<SweepRecord> GetSweep(int64_t sweep_id, Counts counts = Counts::kRead);
  // The newest sweep with this name (names need not be unique).
  Result<SweepRecord> GetSweepByName(const std::string& name, Counts counts = Counts::kRead);
  // The one rule for text naming a sweep (SweepIdToTry): 1 to 18 digits is an id first,
  // then a name. kNotFound names what was looked for and how to list sweeps.
  Result<SweepRecord> FindSweep(const std::string& id_or_name, Counts counts = Counts::kRead);

  // --- Variants, trials, attempts -------------------------------------------------
  // In expansion order.
  Result<std::vector<VariantRecord>> ListVariants(int64_t sweep_id);
  // In order_index order.
  Result<std::vector<TrialRecord>> ListTrials(int64_t sweep_id);
  // Each trial with its current attempt and that attempt's per-rank summaries, in
  // order_index order.
  Result<std::vector<TrialResult>> ListTrialResults(int64_t sweep_id);
  // Trials in state assigned or running, each with its current attempt, across all
  // sweeps, in trial id order (the coordinator's recovery after a restart).
  Result<std::vector<TrialResult>> ListActiveTrials();
  Result<TrialRecord> GetTrial(int64_t trial_id);
  // Oldest first.
  Result<std::vector<AttemptRecord>> ListAttempts(int64_t trial_id);

  // --- Steps and events -------------------------------------------------------------
  // Step metrics of one attempt (default: the trial's current attempt), ordered by
  // rank, phase (warmup first) and step; `rank` filters when given.
  Result<std::vector<StepRecord>> ReadStepMetrics(int64_t trial_id,
                                                  std::optional<int64_t> attempt = std::nullopt,
                                                  std::optional<int64_t> rank = std::nullopt);
  // The measured steps of every trial of the sweep (current attempts), per trial in step
  // order, each the slowest rank's time (ranks wait for each other) and the loss of the
  // lowest rank that reported one (the global mean, the same on every rank), likewise its
  // tokens and lockstep turn. One pass over the rows, in trial, step and rank order.
  Result<std::vector<MeasuredStep>> MeasuredSteps(int64_t sweep_id);
  // Every trial of the sweep that has stored steps in its current attempt, in order_index
  // order: what the web page charts while the sweep runs. One indexed pass over
  // step_metrics per trial (its primary key starts with trial_id).
  Result<std::vector<LiveTrialFigures>> LiveFigures(int64_t sweep_id);  // LiveFiguresSql's statement
  // In insertion order.
  Result<std::vector<EventRecord>> ReadEvents(int64_t trial_id);

  // --- Workers and calibrations ------------------------------------------------------
  Result<std::vector<WorkerRecord>> ListWorkers();
  // The newest calibration for a workload key (calibrations.h), or nullopt.
  Result<std::optional<CalibrationRecord>> LatestCalibration(const std::string& workload_key,
                                                             const std::string& order = "");

 private:
  std::unique_ptr<SqliteConnection> owned_;  // set by Open
  SqliteConnection& db_;
};

}  // namespace bakeoff::metrics
