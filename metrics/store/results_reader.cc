#include "metrics/store/results_reader.h"

#include <algorithm>
#include <map>
#include <utility>

#include "metrics/store/row_reader.h"
#include "metrics/store/schema_migrations.h"
#include "metrics/store/sqlite_connection.h"

namespace bakeoff::metrics {
namespace {

using namespace rows;

// A sweep with its trial counts. The counts are a join of the sweep's own trials (the
// trials_by_sweep index), grouped per sweep: reading one sweep used to aggregate every
// trial of every sweep in the database, about 10 ms per status read at 20,000 trials
// and growing with the database.
std::string SweepQuery(const std::string& where, const std::string& order,
                       ResultsReader::Counts counts = ResultsReader::Counts::kRead) {
  if (counts == ResultsReader::Counts::kSkip) {
    return "SELECT w.id, w.name, w.question, w.yaml, w.spec_json, w.state, w.created_at, w.finished_at, "
           "w.variant_count, w.trial_count, 0, 0, 0, 0, 0, 0, 0 FROM sweeps w " +
           where + " " + order;
  }
  return "SELECT w.id, w.name, w.question, w.yaml, w.spec_json, w.state, w.created_at, w.finished_at, "
         "w.variant_count, w.trial_count, COALESCE(SUM(t.state = 'queued'), 0), "
         "COALESCE(SUM(t.state = 'assigned'), 0), COALESCE(SUM(t.state = 'running'), 0), "
         "COALESCE(SUM(t.state = 'finished'), 0), COALESCE(SUM(t.outcome = 'succeeded'), 0), "
         "COALESCE(SUM(t.state = 'finished' AND t.outcome <> 'succeeded'), 0), "
         "COALESCE(SUM(t.state = 'finished' AND t.outcome = 'cancelled'), 0) "
         "FROM sweeps w LEFT JOIN trials t ON t.sweep_id = w.id " +
         where + " GROUP BY w.id " + order;
}

Result<SweepRecord> ReadSweepRow(const SqliteStatement& row, const SqliteConnection& db) {
  SweepRecord w;
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(
      row, db, w.id, w.name, w.question, w.yaml, JsonOr{w.spec, nlohmann::json()},
      Stored{w.state, ParseSweepState, "sweeps.state"}, w.created_at, w.finished_at,
      w.variant_count, w.trial_count, w.counts.queued, w.counts.assigned, w.counts.running,
      w.counts.finished, w.counts.succeeded, w.counts.unsuccessful, w.counts.cancelled));
  return w;
}

constexpr const char* kTrialColumns =
    "t.id, t.sweep_id, t.variant_key, t.repeat, t.order_index, t.state, t.outcome, "
    "t.reason, t.attempts_used, t.max_attempts, t.queued_at, t.finished_at FROM trials t ";

Result<TrialRecord> ReadTrialRow(const SqliteStatement& row, const SqliteConnection& db) {
  TrialRecord t;
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(
      row, db, t.id, t.sweep_id, t.variant_key, t.repeat, t.order_index,
      Stored{t.state, ParseTrialState, "trials.state"},
      Stored{t.outcome, ParseOutcome, "trials.outcome"}, t.reason, t.attempts_used,
      t.max_attempts, t.queued_at, t.finished_at));
  return t;
}

constexpr const char* kAttemptColumns =
    "a.trial_id, a.attempt, a.worker_id, a.host, a.ranks_json, a.simulated, a.assigned_at, "
    "a.started_at, a.ended_at, a.outcome, a.reason FROM attempts a ";

Result<AttemptRecord> ReadAttemptRow(const SqliteStatement& row, const SqliteConnection& db) {
  AttemptRecord a;
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(
      row, db, a.trial_id, a.attempt, a.worker_id, a.host, a.ranks, a.simulated, a.assigned_at,
      a.started_at, a.ended_at, Stored{a.outcome, ParseOutcome, "attempts.outcome"},
      a.reason));
  return a;
}

constexpr const char* kSummaryColumns =
    "s.trial_id, s.attempt, s.rank, s.summary_json FROM trial_summaries s ";

// A stored summary read into its type; one that no longer reads keeps its body and has
// no figures (it was checked on its way in: only a damaged row fails here).
Result<SummaryRecord> ReadSummaryRow(const SqliteStatement& row, const SqliteConnection& db) {
  TrialSummary stored;
  BAKEOFF_RETURN_IF_ERROR(
      ReadColumns(row, db, stored.trial_id, stored.attempt, stored.rank, stored.summary));
  Result<SummaryRecord> typed = ReadSummaryRecord(stored);
  if (typed.ok()) return typed;
  return SummaryRecord{stored.trial_id, stored.attempt, stored.rank, {}, std::move(stored.summary)};
}

Result<VariantRecord> ReadVariantRow(const SqliteStatement& row, const SqliteConnection& db) {
  VariantRecord v;
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(row, db, v.key, v.ordinal, v.params, v.trainer_config,
                                      v.counterpart_key, v.is_baseline, v.counterpart_excluded));
  return v;
}

Result<StepRecord> ReadStepMetricRow(const SqliteStatement& row, const SqliteConnection& db) {
  StepRecord m;
  protocol::StepRow& r = m.row;
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(row, db, m.trial_id, m.attempt, m.rank, r.step, m.phase, r.step_s, r.tokens,
                                      r.loss, r.lr, r.peak_mem_bytes, r.rss_bytes, r.comm_s, r.comm_bytes,
                                      r.turn));
  return m;
}

Result<EventRecord> ReadEventRow(const SqliteStatement& row, const SqliteConnection& db) {
  EventRecord e;
  BAKEOFF_RETURN_IF_ERROR(
      ReadColumns(row, db, e.trial_id, e.attempt, e.rank, e.kind, e.seq, e.data, e.at));
  return e;
}

Result<WorkerRecord> ReadWorkerRow(const SqliteStatement& row, const SqliteConnection& db) {
  WorkerRecord w;
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(row, db, w.id, w.name, w.host, w.resources, w.metrics_url,
                                      Stored{w.state, ParseWorkerState, "workers.state"},
                                      w.registered_at, w.last_heartbeat_at, w.secret_sha256));
  return w;
}

Result<LiveTrialFigures> ReadLiveFiguresRow(const SqliteStatement& row, const SqliteConnection& db) {
  LiveTrialFigures f;
  double steps = 0, tokens = 0;  // TOTAL() is a real
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(row, db, f.trial_id, f.attempt, steps, tokens, f.step_s, f.peak_mem_bytes));
  f.measured_steps = static_cast<int64_t>(steps);
  f.tokens = static_cast<int64_t>(tokens);
  return f;
}

// Fills each trial's current attempt and summaries; `where` selects the trials (over
// alias t) and binds nothing or one integer.
Result<std::vector<TrialResult>> ReadTrialResults(SqliteConnection& db, const std::string& where,
                                                  const std::string& order,
                                                  std::optional<int64_t> param) {
  // The same selection, with its parameter when it has one, for each table.
  auto query = [&](const std::string& sql, auto read) {
    return param ? QueryAll(db, sql, read, *param) : QueryAll(db, sql, read);
  };
  auto trials = query(std::string("SELECT ") + kTrialColumns + where + order, ReadTrialRow);
  if (!trials.ok()) return trials.status();

  std::vector<TrialResult> results;
  std::map<int64_t, size_t> index_of;
  for (TrialRecord& trial : *trials) {
    index_of[trial.id] = results.size();
    TrialResult result;
    result.trial = std::move(trial);
    results.push_back(std::move(result));
  }

  auto attempts = query(std::string("SELECT ") + kAttemptColumns +
                           "JOIN trials t ON t.id = a.trial_id AND a.attempt = t.attempts_used " +
                           where,
                       ReadAttemptRow);
  if (!attempts.ok()) return attempts.status();
  for (AttemptRecord& attempt : *attempts) {
    auto it = index_of.find(attempt.trial_id);
    if (it != index_of.end()) results[it->second].attempt = std::move(attempt);
  }

  auto summaries = query(std::string("SELECT ") + kSummaryColumns +
                            "JOIN trials t ON t.id = s.trial_id AND s.attempt = t.attempts_used " +
                            where + "ORDER BY s.trial_id, s.rank",
                        ReadSummaryRow);
  if (!summaries.ok()) return summaries.status();
  for (SummaryRecord& summary : *summaries) {
    auto it = index_of.find(summary.trial_id);
    if (it != index_of.end()) results[it->second].summaries.push_back(std::move(summary));
  }
  return results;
}

// Tables and views every results database of schema version 3 or later has.
constexpr const char* kResultsTables =
    "'sweeps', 'variants', 'trials', 'attempts', 'trial_summaries', 'step_metrics'";
constexpr int64_t kResultsTableCount = 6;

}  // namespace

Result<std::unique_ptr<ResultsReader>> ResultsReader::Open(const std::string& path) {
  Result<std::unique_ptr<SqliteConnection>> db = SqliteConnection::OpenReadOnly(
      path, "pass --db FILE (the coordinator's --db) or run `bakeoff local` to create one");
  if (!db.ok()) return db.status();
  SqliteConnection& conn = **db;
  BAKEOFF_RETURN_IF_ERROR(conn.Exec("PRAGMA busy_timeout = 5000"));
  BAKEOFF_RETURN_IF_ERROR(conn.Exec("PRAGMA query_only = ON"));
  Result<int64_t> tables = conn.QueryInt64(
      std::string("SELECT COUNT(*) FROM sqlite_master WHERE type IN ('table', 'view') AND name IN (") +
      kResultsTables + ")");
  if (!tables.ok()) return tables.status();
  if (*tables != kResultsTableCount) {
    return Status::InvalidArgument(path + " is not a Bakeoff results database (no sweeps, "
                                   "variants and trials tables); pass the coordinator's --db file");
  }
  Result<int> version = ReadSchemaVersion(conn);
  if (!version.ok()) return version.status();
  if (*version != kLatestSchemaVersion) {
    return Status::InvalidArgument(
        "results database " + path + " has schema version " + std::to_string(*version) +
        " but this Bakeoff reads version " + std::to_string(kLatestSchemaVersion) + "; " +
        (*version < kLatestSchemaVersion
             ? "open it once with a writer (e.g. `bakeoff coordinator --db`) to migrate it"
             : "use a newer bakeoff"));
  }
  std::unique_ptr<ResultsReader> reader(new ResultsReader(conn));
  reader->owned_ = std::move(*db);
  return reader;
}

ResultsReader::ResultsReader(SqliteConnection& db) : db_(db) {}
ResultsReader::~ResultsReader() = default;

const std::string& ResultsReader::path() const { return db_.path(); }

Result<int> ResultsReader::SchemaVersion() { return ReadSchemaVersion(db_); }

ResultsReader::Snapshot::~Snapshot() {
  if (active_) static_cast<void>(db_->Exec("COMMIT"));
}

ResultsReader::Snapshot::Snapshot(Snapshot&& other) noexcept : db_(other.db_), active_(other.active_) {
  other.active_ = false;
}

ResultsReader::Snapshot ResultsReader::BeginSnapshot() {
  return Snapshot(&db_, !db_.InTransaction() && db_.Exec("BEGIN").ok());
}

Result<std::vector<SweepRecord>> ResultsReader::ListSweeps(std::optional<SweepState> state) {
  if (!state) return QueryAll(db_, SweepQuery("", "ORDER BY w.id DESC"), ReadSweepRow);
  return QueryAll(db_, SweepQuery("WHERE w.state = ?", "ORDER BY w.id DESC"), ReadSweepRow,
                  SweepStateName(*state));
}

Result<SweepRecord> ResultsReader::GetSweep(int64_t sweep_id, Counts counts) {
  return QueryOne(db_, SweepQuery("WHERE w.id = ?", "", counts),
                  Status::NotFound("sweep " + std::to_string(sweep_id) +
                                   " is not in the results database " + path() +
                                   "; `bakeoff status` lists the sweeps"),
                  ReadSweepRow, sweep_id);
}

Result<SweepRecord> ResultsReader::GetSweepByName(const std::string& name, Counts counts) {
  return QueryOne(db_, SweepQuery("WHERE w.name = ?", "ORDER BY w.id DESC LIMIT 1", counts),
                  Status::NotFound("no sweep named '" + name + "' in the results database " +
                                   path() + "; `bakeoff status` lists the sweeps"),
                  ReadSweepRow, name);
}

Result<SweepRecord> ResultsReader::FindSweep(const std::string& id_or_name, Counts counts) {
  if (std::optional<int64_t> id = SweepIdToTry(id_or_name)) {
    Result<SweepRecord> by_id = GetSweep(*id, counts);
    if (by_id.ok() || by_id.status().code() != Status::Code::kNotFound) return by_id;
  }
  Result<SweepRecord> by_name = GetSweepByName(id_or_name, counts);
  if (by_name.ok() || by_name.status().code() != Status::Code::kNotFound) return by_name;
  return Status::NotFound("no sweep with id or name '" + id_or_name +
                          "' in the results database " + path() +
                          "; `bakeoff status` lists the sweeps");
}

Result<std::vector<VariantRecord>> ResultsReader::ListVariants(int64_t sweep_id) {
  return QueryAll(db_,
                  "SELECT key, ordinal, params_json, trainer_config_json, counterpart_key, "
                  "is_baseline, counterpart_excluded FROM variants WHERE sweep_id = ? "
                  "ORDER BY ordinal, key",
                  ReadVariantRow, sweep_id);
}

Result<std::vector<TrialRecord>> ResultsReader::ListTrials(int64_t sweep_id) {
  return QueryAll(db_,
                  std::string("SELECT ") + kTrialColumns +
                      "WHERE t.sweep_id = ? ORDER BY t.order_index, t.id",
                  ReadTrialRow, sweep_id);
}

Result<std::vector<TrialResult>> ResultsReader::ListTrialResults(int64_t sweep_id) {
  return ReadTrialResults(db_, "WHERE t.sweep_id = ? ", "ORDER BY t.order_index, t.id", sweep_id);
}

Result<std::vector<TrialResult>> ResultsReader::ListActiveTrials() {
  return ReadTrialResults(db_, "WHERE t.state IN ('assigned', 'running') ", "ORDER BY t.id",
                          std::nullopt);
}

Result<TrialRecord> ResultsReader::GetTrial(int64_t trial_id) {
  return QueryOne(db_, std::string("SELECT ") + kTrialColumns + "WHERE t.id = ?",
                  Status::NotFound("trial " + std::to_string(trial_id) +
                                   " is not in the results database " + path()),
                  ReadTrialRow, trial_id);
}

Result<std::vector<AttemptRecord>> ResultsReader::ListAttempts(int64_t trial_id) {
  return QueryAll(db_,
                  std::string("SELECT ") + kAttemptColumns + "WHERE a.trial_id = ? ORDER BY a.attempt",
                  ReadAttemptRow, trial_id);
}

Result<std::vector<StepRecord>> ResultsReader::ReadStepMetrics(int64_t trial_id,
                                                               std::optional<int64_t> attempt,
                                                               std::optional<int64_t> rank) {
  return QueryAll(
      db_,
      "SELECT m.trial_id, m.attempt, m.rank, m.step, m.phase, m.step_s, m.tokens, m.loss, "
      "m.lr, m.peak_mem_bytes, m.rss_bytes, m.comm_s, m.comm_bytes, m.turn FROM step_metrics m "
      "WHERE m.trial_id = ?1 AND m.attempt = COALESCE(?2, (SELECT attempts_used FROM trials "
      "WHERE id = ?1)) AND (?3 IS NULL OR m.rank = ?3) "
      "ORDER BY m.rank, m.phase = 'measure', m.step",
      ReadStepMetricRow, trial_id, attempt, rank);
}

Result<std::vector<MeasuredStep>> ResultsReader::MeasuredSteps(int64_t sweep_id) {
  // One pass in trial, step and rank order (a correlated lookup per step cost a scan of
  // the trial's steps per step on the step_metrics view).
  Result<SqliteStatement> stmt = PrepareBound(
      db_,
      "SELECT m.trial_id, m.step, m.step_s, m.loss, m.tokens, m.turn "
      "FROM step_metrics m JOIN trials t ON t.id = m.trial_id AND m.attempt = t.attempts_used "
      "WHERE t.sweep_id = ? AND m.phase = 'measure' ORDER BY m.trial_id, m.step, m.rank",
      sweep_id);
  if (!stmt.ok()) return stmt.status();
  std::vector<MeasuredStep> steps;
  while (true) {
    Result<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return steps;
    const int64_t trial_id = stmt->Int64(0);
    const int64_t step = stmt->Int64(1);
    if (steps.empty() || steps.back().trial_id != trial_id || steps.back().step != step) {
      steps.push_back(MeasuredStep{trial_id, step, stmt->Double(2), std::nullopt, std::nullopt, std::nullopt});
    }
    MeasuredStep& measured = steps.back();
    measured.step_s = std::max(measured.step_s, stmt->Double(2));
    if (!measured.loss) measured.loss = stmt->OptionalDouble(3);
    if (!measured.tokens) measured.tokens = stmt->OptionalInt64(4);
    if (!measured.turn) measured.turn = stmt->OptionalInt64(5);
  }
}

namespace {
// The live figures' SELECT up to its sweep id: one statement for both readers.
// A row per trial of the sweep from attempt_live_sums, kept as steps are stored (schema
// version 8): O(trials), never a read of the steps (A5).
constexpr const char* kLiveFiguresSelect =
    "SELECT t.id, t.attempts_used, l.measured_steps, l.tokens, l.step_s, l.peak_mem_bytes "
    "FROM trials t JOIN attempt_live_sums l ON l.trial_id = t.id AND l.attempt = t.attempts_used "
    "WHERE t.sweep_id = ";
constexpr const char* kLiveFiguresOrder = " ORDER BY t.order_index";
}  // namespace

std::string LiveFiguresSql(int64_t sweep_id) {
  return std::string(kLiveFiguresSelect) + std::to_string(sweep_id) + kLiveFiguresOrder;
}

Result<std::vector<LiveTrialFigures>> ResultsReader::LiveFigures(int64_t sweep_id) {
  return QueryAll(db_, std::string(kLiveFiguresSelect) + "?" + kLiveFiguresOrder, ReadLiveFiguresRow, sweep_id);
}

Result<std::vector<EventRecord>> ResultsReader::ReadEvents(int64_t trial_id) {
  return QueryAll(db_,
                  "SELECT trial_id, attempt, rank, kind, seq, data_json, at FROM events "
                  "WHERE trial_id = ? ORDER BY id",
                  ReadEventRow, trial_id);
}

Result<std::vector<WorkerRecord>> ResultsReader::ListWorkers() {
  return QueryAll(db_,
                  "SELECT id, name, host, resources_json, metrics_url, state, registered_at, "
                  "last_heartbeat_at, secret_sha256 FROM workers ORDER BY registered_at, id",
                  ReadWorkerRow);
}

Result<std::optional<CalibrationRecord>> ResultsReader::LatestCalibration(const std::string& workload_key,
                                                                         const std::string& order) {
  return metrics::LatestCalibration(db_, workload_key, order);
}

}  // namespace bakeoff::metrics
