#include "metrics/store/results_store.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "metrics/store/schema_migrations.h"
#include "metrics/store/sqlite_connection.h"
#include "metrics/store/sqlite_transaction.h"

namespace bakeoff::metrics {
namespace {

// Pages a Probe() wants free under max_page_count before it calls the store healthy.
constexpr int64_t kProbeMinFreePages = 16;

std::string Dump(const nlohmann::json& value) {
  // Replace invalid UTF-8 instead of throwing: event text may come from a process.
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json ParseJsonOr(const std::string& text, nlohmann::json fallback) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? fallback : parsed;
}

nlohmann::json RanksToJson(const std::vector<RankPlacement>& ranks) {
  nlohmann::json array = nlohmann::json::array();
  for (const RankPlacement& rank : ranks) {
    array.push_back({{"rank", rank.rank},
                     {"worker_id", rank.worker_id},
                     {"host", rank.host},
                     {"device", rank.device}});
  }
  return array;
}

std::vector<RankPlacement> RanksFromJson(const std::string& text) {
  std::vector<RankPlacement> ranks;
  nlohmann::json array = ParseJsonOr(text, nlohmann::json::array());
  if (!array.is_array()) return ranks;
  for (const nlohmann::json& item : array) {
    if (!item.is_object()) continue;
    RankPlacement rank;
    rank.rank = item.value("rank", int64_t{0});
    rank.worker_id = item.value("worker_id", std::string());
    rank.host = item.value("host", std::string());
    rank.device = item.value("device", std::string());
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

// Converts a stored enum name, treating an unknown one as a damaged database.
template <typename Enum>
Result<Enum> ParseStored(Result<Enum> parsed, const SqliteConnection& db, const char* column) {
  if (parsed.ok()) return parsed;
  return Status::IoError("results database " + db.path() + ": column " + column +
                         " holds an unexpected value (" + parsed.status().message() + ")");
}

// --- Row readers: the column lists and the code reading them stay side by side. ----

constexpr const char* kSweepColumns =
    "w.id, w.name, w.question, w.yaml, w.spec_json, w.state, w.created_at, w.finished_at, "
    "w.variant_count, w.trial_count, COALESCE(c.queued, 0), COALESCE(c.assigned, 0), "
    "COALESCE(c.running, 0), COALESCE(c.finished, 0), COALESCE(c.succeeded, 0), "
    "COALESCE(c.unsuccessful, 0) "
    "FROM sweeps w LEFT JOIN ("
    "  SELECT sweep_id, SUM(state = 'queued') AS queued, SUM(state = 'assigned') AS assigned,"
    "    SUM(state = 'running') AS running, SUM(state = 'finished') AS finished,"
    "    SUM(outcome = 'succeeded') AS succeeded,"
    "    SUM(state = 'finished' AND outcome <> 'succeeded') AS unsuccessful"
    "  FROM trials GROUP BY sweep_id) c ON c.sweep_id = w.id ";

Result<SweepRecord> ReadSweepRow(const SqliteStatement& row, const SqliteConnection& db) {
  SweepRecord sweep;
  sweep.id = row.Int64(0);
  sweep.name = row.Text(1);
  sweep.question = row.Text(2);
  sweep.yaml = row.Text(3);
  sweep.spec = row.IsNull(4) ? nlohmann::json() : ParseJsonOr(row.Text(4), nlohmann::json());
  Result<SweepState> state = ParseStored(ParseSweepState(row.Text(5)), db, "sweeps.state");
  if (!state.ok()) return state.status();
  sweep.state = *state;
  sweep.created_at = row.Double(6);
  sweep.finished_at = row.OptionalDouble(7);
  sweep.variant_count = row.Int64(8);
  sweep.trial_count = row.Int64(9);
  sweep.counts.queued = row.Int64(10);
  sweep.counts.assigned = row.Int64(11);
  sweep.counts.running = row.Int64(12);
  sweep.counts.finished = row.Int64(13);
  sweep.counts.succeeded = row.Int64(14);
  sweep.counts.unsuccessful = row.Int64(15);
  return sweep;
}

constexpr const char* kTrialColumns =
    "t.id, t.sweep_id, t.variant_key, t.repeat, t.order_index, t.state, t.outcome, "
    "t.reason, t.attempts_used, t.max_attempts, t.queued_at, t.finished_at FROM trials t ";

Result<TrialRecord> ReadTrialRow(const SqliteStatement& row, const SqliteConnection& db) {
  TrialRecord trial;
  trial.id = row.Int64(0);
  trial.sweep_id = row.Int64(1);
  trial.variant_key = row.Text(2);
  trial.repeat = row.Int64(3);
  trial.order_index = row.Int64(4);
  Result<TrialState> state = ParseStored(ParseTrialState(row.Text(5)), db, "trials.state");
  if (!state.ok()) return state.status();
  trial.state = *state;
  if (!row.IsNull(6)) {
    Result<Outcome> outcome = ParseStored(ParseOutcome(row.Text(6)), db, "trials.outcome");
    if (!outcome.ok()) return outcome.status();
    trial.outcome = *outcome;
  }
  trial.reason = row.Text(7);
  trial.attempts_used = row.Int64(8);
  trial.max_attempts = row.Int64(9);
  trial.queued_at = row.Double(10);
  trial.finished_at = row.OptionalDouble(11);
  return trial;
}

constexpr const char* kAttemptColumns =
    "a.trial_id, a.attempt, a.worker_id, a.host, a.ranks_json, a.simulated, a.assigned_at, "
    "a.started_at, a.ended_at, a.outcome, a.reason FROM attempts a ";

Result<AttemptRecord> ReadAttemptRow(const SqliteStatement& row, const SqliteConnection& db) {
  AttemptRecord attempt;
  attempt.trial_id = row.Int64(0);
  attempt.attempt = row.Int64(1);
  attempt.worker_id = row.Text(2);
  attempt.host = row.Text(3);
  attempt.ranks = RanksFromJson(row.Text(4));
  attempt.simulated = row.Int64(5) != 0;
  attempt.assigned_at = row.Double(6);
  attempt.started_at = row.OptionalDouble(7);
  attempt.ended_at = row.OptionalDouble(8);
  if (!row.IsNull(9)) {
    Result<Outcome> outcome = ParseStored(ParseOutcome(row.Text(9)), db, "attempts.outcome");
    if (!outcome.ok()) return outcome.status();
    attempt.outcome = *outcome;
  }
  attempt.reason = row.Text(10);
  return attempt;
}

constexpr const char* kSummaryColumns =
    "s.trial_id, s.attempt, s.rank, s.summary_json FROM trial_summaries s ";

TrialSummary ReadSummaryRow(const SqliteStatement& row) {
  TrialSummary summary;
  summary.trial_id = row.Int64(0);
  summary.attempt = row.Int64(1);
  summary.rank = row.Int64(2);
  summary.summary = ParseJsonOr(row.Text(3), nlohmann::json::object());
  return summary;
}

// Reads every row of `stmt` with `read` into a vector.
template <typename T, typename Reader>
Result<std::vector<T>> ReadAll(SqliteStatement& stmt, Reader read) {
  std::vector<T> rows;
  while (true) {
    Result<bool> has_row = stmt.Step();
    if (!has_row.ok()) return has_row.status();
    if (!*has_row) return rows;
    Result<T> row = read(stmt);
    if (!row.ok()) return row.status();
    rows.push_back(std::move(*row));
  }
}

// The trial's state as a not-applied TransitionResult; kNotFound when absent.
Result<TransitionResult> ReadTransitionState(SqliteConnection& db, int64_t trial_id) {
  Result<SqliteStatement> stmt =
      db.PrepareCached("SELECT state, attempts_used, outcome FROM trials WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, trial_id);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return Status::NotFound("trial " + std::to_string(trial_id) +
                            " is not in the results database " + db.path());
  }
  TransitionResult result;
  Result<TrialState> state = ParseStored(ParseTrialState(stmt->Text(0)), db, "trials.state");
  if (!state.ok()) return state.status();
  result.state = *state;
  result.attempts_used = stmt->Int64(1);
  if (!stmt->IsNull(2)) {
    Result<Outcome> outcome = ParseStored(ParseOutcome(stmt->Text(2)), db, "trials.outcome");
    if (!outcome.ok()) return outcome.status();
    result.outcome = *outcome;
  }
  return result;
}

// Whether rows for (trial, attempt) may be written: the attempt is the trial's current
// one, the trial has not been requeued since, and the attempt was not declared lost.
class CurrentAttemptCache {
 public:
  explicit CurrentAttemptCache(SqliteConnection& db) : db_(db) {}

  Result<bool> IsCurrent(int64_t trial_id, int64_t attempt) {
    auto key = std::make_pair(trial_id, attempt);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    if (!stmt_) {
      Result<SqliteStatement> stmt = db_.PrepareCached(
          "SELECT t.attempts_used, t.state, a.outcome, a.attempt IS NOT NULL FROM trials t "
          "LEFT JOIN attempts a ON a.trial_id = t.id AND a.attempt = t.attempts_used "
          "WHERE t.id = ?");
      if (!stmt.ok()) return stmt.status();
      stmt_.emplace(std::move(*stmt));
    }
    stmt_->Reset();
    stmt_->Bind(1, trial_id);
    Result<bool> row = stmt_->Step();
    if (!row.ok()) return row.status();
    bool current = false;
    if (*row) {
      current = attempt >= 1 && stmt_->Int64(0) == attempt && stmt_->Text(1) != "queued" &&
                stmt_->Int64(3) != 0 && (stmt_->IsNull(2) || stmt_->Text(2) != "lost");
    }
    stmt_->Reset();
    cache_[key] = current;
    return current;
  }

 private:
  SqliteConnection& db_;
  std::optional<SqliteStatement> stmt_;
  std::map<std::pair<int64_t, int64_t>, bool> cache_;
};

Status ValidateBatch(const MetricsBatch& batch) {
  for (const StepMetric& step : batch.steps) {
    if (step.phase != "warmup" && step.phase != "measure") {
      return Status::InvalidArgument("step metric of trial " + std::to_string(step.trial_id) +
                                     " step " + std::to_string(step.step) + " has phase '" +
                                     step.phase + "'; expected warmup or measure");
    }
  }
  for (const SummaryRecord& summary : batch.summaries) {
    if (!summary.body.is_object()) {
      return Status::InvalidArgument("summary of trial " + std::to_string(summary.trial_id) +
                                     " is not a JSON object");
    }
  }
  for (const EventRecord& event : batch.events) {
    if (event.kind.empty()) {
      return Status::InvalidArgument("event of trial " + std::to_string(event.trial_id) +
                                     " has an empty kind");
    }
  }
  return Status::Ok();
}

// Whether a failed write says the store cannot write at all (as opposed to a write it
// refused: bad input, a constraint): a full, read-only or failing disk, a size cap,
// SQLite out of memory or in an internal error, or a lock held past the busy timeout.
// Any of them makes the store unhealthy (and /healthz 503) until Probe() writes again.
bool IsStoreFailure(const Status& status) {
  switch (status.code()) {
    case Status::Code::kResourceExhausted:
    case Status::Code::kIoError:
    case Status::Code::kInternal:
    case Status::Code::kUnavailable: return true;
    default: return false;
  }
}

// `status` with `context`, as a store failure (kIoError unless it already is one): a
// lost group transaction always means the store could not write.
Status AsStoreFailure(const Status& status, const std::string& context) {
  return IsStoreFailure(status) ? status.WithContext(context)
                                : Status::IoError(context + ": " + status.message());
}

}  // namespace

// --- Opening and health ------------------------------------------------------------

ResultsStore::ResultsStore(StoreOptions options) : options_(std::move(options)) {}

ResultsStore::~ResultsStore() = default;

UnixSeconds ResultsStore::Now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<std::unique_ptr<ResultsStore>> ResultsStore::Open(StoreOptions options) {
  if (options.path.empty()) {
    return Status::InvalidArgument("results database path is empty; give a file name");
  }
  std::unique_ptr<ResultsStore> store(new ResultsStore(std::move(options)));
  if (store->options_.read_only) return OpenReadOnly(std::move(store));
  Result<std::unique_ptr<SqliteConnection>> db = SqliteConnection::Open(
      store->options_.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, store->options_.vfs);
  if (!db.ok()) return db.status();
  store->db_ = std::move(*db);
  SqliteConnection& conn = *store->db_;
  sqlite3_busy_timeout(conn.handle(), store->options_.busy_timeout_ms);

  std::string mode;
  {
    // Scoped: a statement left stepping would block every later COMMIT.
    Result<SqliteStatement> wal = conn.Prepare("PRAGMA journal_mode = WAL");
    if (!wal.ok()) return wal.status();
    Result<bool> wal_row = wal->Step();
    if (!wal_row.ok()) return wal_row.status();
    if (*wal_row) mode = wal->Text(0);
  }
  if (mode != "wal") {
    return Status::IoError("results database " + store->options_.path +
                           ": cannot switch to WAL mode (got '" + mode +
                           "'); put the file on a local file system that supports "
                           "shared memory");
  }
  BAKEOFF_RETURN_IF_ERROR(conn.Exec("PRAGMA foreign_keys = ON"));
  BAKEOFF_RETURN_IF_ERROR(store->SetSynchronous(true));
  if (store->options_.max_page_count > 0) {
    BAKEOFF_RETURN_IF_ERROR(conn.Exec("PRAGMA max_page_count = " +
                                      std::to_string(store->options_.max_page_count)));
  }
  BAKEOFF_RETURN_IF_ERROR(MigrateSchema(conn, store->Now()));
  return store;
}

Result<std::unique_ptr<ResultsStore>> ResultsStore::OpenReadOnly(
    std::unique_ptr<ResultsStore> store) {
  const std::string& path = store->options_.path;
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return Status::NotFound("results database " + path +
                            " does not exist; give the file a sweep's results were written to");
  }
  Result<std::unique_ptr<SqliteConnection>> db =
      SqliteConnection::Open(path, SQLITE_OPEN_READONLY, store->options_.vfs);
  if (!db.ok()) return db.status();
  store->db_ = std::move(*db);
  sqlite3_busy_timeout(store->db_->handle(), store->options_.busy_timeout_ms);
  BAKEOFF_RETURN_IF_ERROR(store->db_->Exec("PRAGMA query_only = ON"));
  Result<int> version = ReadSchemaVersion(*store->db_);
  if (!version.ok()) return version.status();
  if (*version != kLatestSchemaVersion) {
    return Status::InvalidArgument(
        "results database " + path + " has schema version " + std::to_string(*version) +
        " but this Bakeoff reads version " + std::to_string(kLatestSchemaVersion) + "; " +
        (*version < kLatestSchemaVersion
             ? "open it once with a writer (e.g. `bakeoff coordinator --db`) to migrate it"
             : "use a newer bakeoff"));
  }
  return store;
}

Result<int> ResultsStore::SchemaVersion() {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  return ReadSchemaVersion(*db_);
}

bool ResultsStore::healthy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return health_.ok();
}

Status ResultsStore::health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return health_;
}

Status ResultsStore::NoteFailure(Status status) {
  if (IsStoreFailure(status)) health_ = status;
  return status;
}

Status ResultsStore::SetSynchronous(bool full) {
  // Open() sets FULL first, so the flag mirrors the connection from then on.
  if (!options_.durable) {
    if (synchronous_full_ || !normal_set_) {
      BAKEOFF_RETURN_IF_ERROR(db_->Exec("PRAGMA synchronous = NORMAL"));
      synchronous_full_ = false;
      normal_set_ = true;
    }
    return Status::Ok();
  }
  if (synchronous_full_ == full) return Status::Ok();
  BAKEOFF_RETURN_IF_ERROR(db_->Exec(full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL"));
  synchronous_full_ = full;
  return Status::Ok();
}

Status ResultsStore::WriteTransaction(const char* operation, bool durable,
                                      const std::function<Status()>& body) {
  if (options_.read_only) {
    return Status::Unsupported("results database " + options_.path +
                               " was opened read-only; " + operation + " needs a writer");
  }
  auto started = std::chrono::steady_clock::now();
  Status status = [&]() -> Status {
    if (group_) return GroupWrite(body);
    BAKEOFF_RETURN_IF_ERROR(SetSynchronous(durable));
    SqliteTransaction transaction(*db_);
    BAKEOFF_RETURN_IF_ERROR(transaction.begin_status());
    BAKEOFF_RETURN_IF_ERROR(body());
    return transaction.Commit();
  }();
  if (options_.write_observer) {
    options_.write_observer(
        operation, status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return NoteFailure(status);
}

// --- Group commit ---------------------------------------------------------------------

void ResultsStore::BeginGroup() {
  std::lock_guard<std::mutex> lock(mutex_);
  group_ = true;
  group_error_ = Status::Ok();
}

bool ResultsStore::in_group() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return group_;
}

bool ResultsStore::group_pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return group_ && group_transaction_;
}

Status ResultsStore::CommitGroup() {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // a failure is latched in group_error_
  group_ = false;
  Status result = group_error_;
  group_error_ = Status::Ok();
  return result;
}

Status ResultsStore::GroupWrite(const std::function<Status()>& body) {
  // A lost transaction takes the group with it: nothing more joins it (a later write
  // could otherwise commit decisions taken on the lost ones).
  if (!group_error_.ok()) return group_error_;
  if (!group_transaction_) {
    BAKEOFF_RETURN_IF_ERROR(SetSynchronous(true));
    BAKEOFF_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    group_transaction_ = true;
  }
  BAKEOFF_RETURN_IF_ERROR(db_->ExecCached("SAVEPOINT bakeoff_write"));
  Status status = body();
  if (status.ok()) status = db_->ExecCached("RELEASE bakeoff_write");
  if (status.ok()) return status;
  if (!IsStoreFailure(status) && db_->InTransaction()) {
    // A write refused for its content: only it is undone; the group's earlier writes stay.
    Status undone = db_->ExecCached("ROLLBACK TO bakeoff_write");
    if (undone.ok()) undone = db_->ExecCached("RELEASE bakeoff_write");
    if (undone.ok()) return status;
  }
  // The disk failed (SQLite may already have rolled the whole transaction back; it is
  // rolled back here otherwise, so that the outcome does not depend on which): the
  // group's earlier writes go with it.
  if (db_->InTransaction()) (void)db_->Exec("ROLLBACK");
  group_transaction_ = false;
  group_error_ = NoteFailure(AsStoreFailure(status, "a write rolled back its whole group"));
  return status;
}

Status ResultsStore::CommitOpenGroup() {
  if (!group_transaction_) return Status::Ok();
  group_transaction_ = false;
  auto started = std::chrono::steady_clock::now();
  Status status = db_->Exec("COMMIT");
  if (!status.ok()) {
    if (db_->InTransaction()) (void)db_->Exec("ROLLBACK");
    status = NoteFailure(AsStoreFailure(status, "committing a group of writes"));
    if (group_error_.ok()) group_error_ = status;
  }
  if (options_.write_observer) {
    options_.write_observer(
        "commit_group", status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return status;
}

Status ResultsStore::Probe() {
  std::lock_guard<std::mutex> lock(mutex_);
  // A real write of its own, outside any group (it decides whether the disk writes).
  (void)CommitOpenGroup();
  const bool grouped = group_;
  group_ = false;
  struct RestoreGroup {
    bool& flag;
    bool value;
    ~RestoreGroup() { flag = value; }
  } restore{group_, grouped};
  if (options_.max_page_count > 0) {
    Result<int64_t> pages = db_->QueryInt64("PRAGMA page_count");
    if (!pages.ok()) return NoteFailure(pages.status());
    Result<int64_t> free_pages = db_->QueryInt64("PRAGMA freelist_count");
    if (!free_pages.ok()) return NoteFailure(free_pages.status());
    if (options_.max_page_count - *pages + *free_pages < kProbeMinFreePages) {
      return NoteFailure(Status::ResourceExhausted(
          "results database " + options_.path + " has reached its size limit of " +
          std::to_string(options_.max_page_count) +
          " pages; raise the limit or use another file; results stored so far are kept"));
    }
  }
  Result<int> version = ReadSchemaVersion(*db_);
  if (!version.ok()) return NoteFailure(version.status());
  // Rewriting the header's user_version is a real, durable write of one page.
  Status written = WriteTransaction("probe", true, [&] {
    return db_->Exec("PRAGMA user_version = " + std::to_string(*version));
  });
  if (written.ok()) health_ = Status::Ok();
  return written;
}

// --- Sweeps ------------------------------------------------------------------------

Result<CreatedSweep> ResultsStore::CreateSweep(const SweepRecord& sweep,
                                               const std::vector<VariantRecord>& variants,
                                               const std::vector<NewTrial>& trials) {
  std::set<std::string> keys;
  for (const VariantRecord& variant : variants) {
    if (!keys.insert(variant.key).second) {
      return Status::InvalidArgument("sweep '" + sweep.name + "' has two variants with key '" +
                                     variant.key + "'; variant keys must be unique");
    }
  }
  for (const NewTrial& trial : trials) {
    if (keys.count(trial.variant_key) == 0) {
      return Status::InvalidArgument("sweep '" + sweep.name + "' has a trial of variant '" +
                                     trial.variant_key + "', which is not among its variants");
    }
    if (trial.max_attempts < 1) {
      return Status::InvalidArgument("sweep '" + sweep.name + "': max_attempts must be >= 1");
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  CreatedSweep created;
  UnixSeconds now = Now();
  Status status = WriteTransaction("create_sweep", true, [&]() -> Status {
    Result<SqliteStatement> insert_sweep = db_->PrepareCached(
        "INSERT INTO sweeps (name, question, yaml, spec_json, state, created_at, "
        "finished_at, variant_count, trial_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!insert_sweep.ok()) return insert_sweep.status();
    insert_sweep->BindAll(sweep.name, sweep.question, sweep.yaml,
                          sweep.spec.is_null() ? std::optional<std::string>()
                                               : std::optional<std::string>(Dump(sweep.spec)),
                          SweepStateName(sweep.state),
                          sweep.created_at != 0 ? sweep.created_at : now, sweep.finished_at,
                          static_cast<int64_t>(variants.size()),
                          static_cast<int64_t>(trials.size()));
    BAKEOFF_RETURN_IF_ERROR(insert_sweep->Run());
    created.sweep_id = db_->LastInsertRowId();

    Result<SqliteStatement> insert_variant = db_->PrepareCached(
        "INSERT INTO variants (sweep_id, key, ordinal, params_json, trainer_config_json, "
        "counterpart_key, is_baseline, counterpart_excluded) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    if (!insert_variant.ok()) return insert_variant.status();
    for (const VariantRecord& variant : variants) {
      insert_variant->Reset();
      insert_variant->BindAll(
          created.sweep_id, variant.key, variant.ordinal, Dump(variant.params),
          Dump(variant.trainer_config),
          variant.counterpart_key.empty() ? std::optional<std::string>()
                                          : std::optional<std::string>(variant.counterpart_key),
          static_cast<int64_t>(variant.is_baseline),
          static_cast<int64_t>(variant.counterpart_excluded));
      BAKEOFF_RETURN_IF_ERROR(insert_variant->Run());
    }

    Result<SqliteStatement> insert_trial = db_->PrepareCached(
        "INSERT INTO trials (sweep_id, variant_key, repeat, order_index, state, "
        "max_attempts, queued_at) VALUES (?, ?, ?, ?, 'queued', ?, ?)");
    if (!insert_trial.ok()) return insert_trial.status();
    created.trial_ids.reserve(trials.size());
    for (const NewTrial& trial : trials) {
      insert_trial->Reset();
      insert_trial->BindAll(created.sweep_id, trial.variant_key, trial.repeat, trial.order_index,
                            trial.max_attempts, now);
      BAKEOFF_RETURN_IF_ERROR(insert_trial->Run());
      created.trial_ids.push_back(db_->LastInsertRowId());
    }
    return Status::Ok();
  });
  if (!status.ok()) return status.WithContext("storing sweep '" + sweep.name + "'");
  return created;
}

Status ResultsStore::SetSweepState(int64_t sweep_id, SweepState state) {
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  return WriteTransaction("set_sweep_state", true, [&]() -> Status {
    Result<SqliteStatement> update = db_->PrepareCached(
        "UPDATE sweeps SET state = ?1, finished_at = CASE WHEN ?1 = 'running' THEN NULL "
        "ELSE COALESCE(finished_at, ?2) END WHERE id = ?3");
    if (!update.ok()) return update.status();
    update->BindAll(SweepStateName(state), now, sweep_id);
    BAKEOFF_RETURN_IF_ERROR(update->Run());
    if (db_->Changes() == 0) {
      return Status::NotFound("sweep " + std::to_string(sweep_id) +
                              " is not in the results database " + options_.path);
    }
    return Status::Ok();
  });
}

// --- Trial transitions ---------------------------------------------------------------

Result<TransitionResult> ResultsStore::AssignTrial(int64_t trial_id,
                                                   int64_t expected_attempts_used,
                                                   const AttemptRecord& placement) {
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  TransitionResult result;
  Status status = WriteTransaction("assign_trial", true, [&]() -> Status {
    Result<TransitionResult> found = ReadTransitionState(*db_, trial_id);
    if (!found.ok()) return found.status();
    result = *found;
    if (result.state != TrialState::kQueued || result.attempts_used != expected_attempts_used) {
      return Status::Ok();
    }
    int64_t attempt = expected_attempts_used + 1;
    Result<SqliteStatement> insert = db_->PrepareCached(
        "INSERT INTO attempts (trial_id, attempt, worker_id, host, ranks_json, simulated, "
        "assigned_at) VALUES (?, ?, ?, ?, ?, ?, ?)");
    if (!insert.ok()) return insert.status();
    insert->BindAll(trial_id, attempt, placement.worker_id, placement.host,
                    Dump(RanksToJson(placement.ranks)), static_cast<int64_t>(placement.simulated),
                    placement.assigned_at != 0 ? placement.assigned_at : now);
    BAKEOFF_RETURN_IF_ERROR(insert->Run());
    Result<SqliteStatement> update = db_->PrepareCached(
        "UPDATE trials SET state = 'assigned', attempts_used = ? WHERE id = ?");
    if (!update.ok()) return update.status();
    update->BindAll(attempt, trial_id);
    BAKEOFF_RETURN_IF_ERROR(update->Run());
    result.applied = true;
    result.state = TrialState::kAssigned;
    result.attempts_used = attempt;
    result.attempt = attempt;
    return Status::Ok();
  });
  if (!status.ok()) return status.WithContext("assigning trial " + std::to_string(trial_id));
  return result;
}

Result<TransitionResult> ResultsStore::MarkRunning(int64_t trial_id, int64_t attempt) {
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  TransitionResult result;
  Status status = WriteTransaction("mark_running", true, [&]() -> Status {
    Result<TransitionResult> found = ReadTransitionState(*db_, trial_id);
    if (!found.ok()) return found.status();
    result = *found;
    if (result.state != TrialState::kAssigned || result.attempts_used != attempt) {
      return Status::Ok();
    }
    Result<SqliteStatement> running = db_->PrepareCached("UPDATE trials SET state = 'running' WHERE id = ?");
    if (!running.ok()) return running.status();
    running->Bind(1, trial_id);
    BAKEOFF_RETURN_IF_ERROR(running->Run());
    Result<SqliteStatement> update = db_->PrepareCached(
        "UPDATE attempts SET started_at = COALESCE(started_at, ?) WHERE trial_id = ? AND "
        "attempt = ?");
    if (!update.ok()) return update.status();
    update->BindAll(now, trial_id, attempt);
    BAKEOFF_RETURN_IF_ERROR(update->Run());
    result.applied = true;
    result.state = TrialState::kRunning;
    result.attempt = attempt;
    return Status::Ok();
  });
  if (!status.ok()) {
    return status.WithContext("marking trial " + std::to_string(trial_id) + " running");
  }
  return result;
}

Result<TransitionResult> ResultsStore::FinishTrial(int64_t trial_id, int64_t expected_attempt,
                                                   Outcome outcome, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  TransitionResult result;
  Status status = WriteTransaction("finish_trial", true, [&]() -> Status {
    Result<TransitionResult> found = ReadTransitionState(*db_, trial_id);
    if (!found.ok()) return found.status();
    result = *found;
    if (result.state == TrialState::kFinished || result.attempts_used != expected_attempt) {
      return Status::Ok();
    }
    if (result.state == TrialState::kAssigned || result.state == TrialState::kRunning) {
      Result<SqliteStatement> end_attempt = db_->PrepareCached(
          "UPDATE attempts SET outcome = ?, reason = ?, ended_at = ? WHERE trial_id = ? AND "
          "attempt = ?");
      if (!end_attempt.ok()) return end_attempt.status();
      end_attempt->BindAll(OutcomeName(outcome), reason, now, trial_id, expected_attempt);
      BAKEOFF_RETURN_IF_ERROR(end_attempt->Run());
    }
    Result<SqliteStatement> finish = db_->PrepareCached(
        "UPDATE trials SET state = 'finished', outcome = ?, reason = ?, finished_at = ? "
        "WHERE id = ?");
    if (!finish.ok()) return finish.status();
    finish->BindAll(OutcomeName(outcome), reason, now, trial_id);
    BAKEOFF_RETURN_IF_ERROR(finish->Run());
    result.applied = true;
    result.state = TrialState::kFinished;
    result.outcome = outcome;
    result.attempt = expected_attempt;
    return Status::Ok();
  });
  if (!status.ok()) return status.WithContext("finishing trial " + std::to_string(trial_id));
  return result;
}

Result<TransitionResult> ResultsStore::RequeueTrial(int64_t trial_id, int64_t attempt,
                                                    Outcome attempt_outcome,
                                                    const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  TransitionResult result;
  Status status = WriteTransaction("requeue_trial", true, [&]() -> Status {
    Result<TransitionResult> found = ReadTransitionState(*db_, trial_id);
    if (!found.ok()) return found.status();
    result = *found;
    bool active = result.state == TrialState::kAssigned || result.state == TrialState::kRunning;
    if (!active || result.attempts_used != attempt) return Status::Ok();
    Result<SqliteStatement> end_attempt = db_->PrepareCached(
        "UPDATE attempts SET outcome = ?, reason = ?, ended_at = ? WHERE trial_id = ? AND "
        "attempt = ?");
    if (!end_attempt.ok()) return end_attempt.status();
    end_attempt->BindAll(OutcomeName(attempt_outcome), reason, now, trial_id, attempt);
    BAKEOFF_RETURN_IF_ERROR(end_attempt->Run());
    Result<SqliteStatement> requeue =
        db_->PrepareCached("UPDATE trials SET state = 'queued', reason = ? WHERE id = ?");
    if (!requeue.ok()) return requeue.status();
    requeue->BindAll(reason, trial_id);
    BAKEOFF_RETURN_IF_ERROR(requeue->Run());
    result.applied = true;
    result.state = TrialState::kQueued;
    result.attempt = attempt;
    return Status::Ok();
  });
  if (!status.ok()) return status.WithContext("requeueing trial " + std::to_string(trial_id));
  return result;
}

Result<int64_t> ResultsStore::CancelQueuedTrials(int64_t sweep_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  int64_t cancelled = 0;
  Status status = WriteTransaction("cancel_queued_trials", true, [&]() -> Status {
    Result<SqliteStatement> exists = db_->PrepareCached("SELECT 1 FROM sweeps WHERE id = ?");
    if (!exists.ok()) return exists.status();
    exists->Bind(1, sweep_id);
    Result<bool> row = exists->Step();
    if (!row.ok()) return row.status();
    if (!*row) {
      return Status::NotFound("sweep " + std::to_string(sweep_id) +
                              " is not in the results database " + options_.path);
    }
    Result<SqliteStatement> cancel = db_->PrepareCached(
        "UPDATE trials SET state = 'finished', outcome = 'cancelled', reason = ?, "
        "finished_at = ? WHERE sweep_id = ? AND state = 'queued'");
    if (!cancel.ok()) return cancel.status();
    cancel->BindAll(reason, now, sweep_id);
    BAKEOFF_RETURN_IF_ERROR(cancel->Run());
    cancelled = db_->Changes();
    return Status::Ok();
  });
  if (!status.ok()) {
    return status.WithContext("cancelling queued trials of sweep " + std::to_string(sweep_id));
  }
  return cancelled;
}

// --- Workers -----------------------------------------------------------------------

Status ResultsStore::UpsertWorker(const WorkerRecord& worker) {
  if (worker.id.empty()) return Status::InvalidArgument("worker id is empty");
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  return WriteTransaction("upsert_worker", false, [&]() -> Status {
    Result<SqliteStatement> upsert = db_->PrepareCached(
        "INSERT INTO workers (id, name, host, resources_json, metrics_url, state, "
        "registered_at, last_heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET name = excluded.name, host = excluded.host, "
        "resources_json = excluded.resources_json, metrics_url = excluded.metrics_url, "
        "state = excluded.state, "
        "last_heartbeat_at = COALESCE(excluded.last_heartbeat_at, last_heartbeat_at)");
    if (!upsert.ok()) return upsert.status();
    upsert->BindAll(worker.id, worker.name, worker.host, Dump(worker.resources),
                    worker.metrics_url, WorkerStateName(worker.state),
                    worker.registered_at != 0 ? worker.registered_at : now,
                    worker.last_heartbeat_at);
    return upsert->Run();
  }).WithContext("storing worker " + worker.id);
}

Status ResultsStore::SetWorkerState(const std::string& worker_id, WorkerState state) {
  std::lock_guard<std::mutex> lock(mutex_);
  return WriteTransaction("set_worker_state", false, [&]() -> Status {
    Result<SqliteStatement> update = db_->PrepareCached("UPDATE workers SET state = ? WHERE id = ?");
    if (!update.ok()) return update.status();
    update->BindAll(WorkerStateName(state), worker_id);
    BAKEOFF_RETURN_IF_ERROR(update->Run());
    if (db_->Changes() == 0) {
      return Status::NotFound("worker " + worker_id + " is not in the results database " +
                              options_.path);
    }
    return Status::Ok();
  });
}

Status ResultsStore::RecordWorkerHeartbeat(const std::string& worker_id, UnixSeconds at) {
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds when = at != 0 ? at : Now();
  return WriteTransaction("worker_heartbeat", false, [&]() -> Status {
    Result<SqliteStatement> update =
        db_->PrepareCached("UPDATE workers SET last_heartbeat_at = ? WHERE id = ?");
    if (!update.ok()) return update.status();
    update->BindAll(when, worker_id);
    BAKEOFF_RETURN_IF_ERROR(update->Run());
    if (db_->Changes() == 0) {
      return Status::NotFound("worker " + worker_id + " is not in the results database " +
                              options_.path);
    }
    return Status::Ok();
  });
}

// --- Metrics and events ------------------------------------------------------------

Result<BatchResult> ResultsStore::AppendBatch(const MetricsBatch& batch) {
  BAKEOFF_RETURN_IF_ERROR(ValidateBatch(batch));
  std::lock_guard<std::mutex> lock(mutex_);
  UnixSeconds now = Now();
  BatchResult result;
  // Durable: the coordinator acknowledges a batch as soon as this returns, and the worker
  // then forgets it, so a power loss must not lose it (docs/reliability.md).
  Status status = WriteTransaction("append_batch", true, [&]() -> Status {
    result = BatchResult();
    CurrentAttemptCache current(*db_);
    auto count = [&](bool inserted) { (inserted ? result.written : result.duplicates) += 1; };

    if (!batch.steps.empty()) {
      Result<SqliteStatement> insert = db_->PrepareCached(
          "INSERT OR IGNORE INTO step_metrics (trial_id, attempt, rank, phase, step, step_s, "
          "tokens, loss, lr, peak_mem_bytes, rss_bytes, comm_s, comm_bytes) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      if (!insert.ok()) return insert.status();
      for (const StepMetric& step : batch.steps) {
        Result<bool> ok = current.IsCurrent(step.trial_id, step.attempt);
        if (!ok.ok()) return ok.status();
        if (!*ok) {
          ++result.stale;
          continue;
        }
        insert->Reset();
        insert->BindAll(step.trial_id, step.attempt, step.rank, step.phase, step.step,
                        step.step_s, step.tokens, step.loss, step.lr, step.peak_mem_bytes,
                        step.rss_bytes, step.comm_s, step.comm_bytes);
        BAKEOFF_RETURN_IF_ERROR(insert->Run());
        count(db_->Changes() > 0);
      }
    }

    if (!batch.summaries.empty()) {
      Result<SqliteStatement> insert = db_->PrepareCached(
          "INSERT OR IGNORE INTO trial_summaries (trial_id, attempt, rank, startup_s, "
          "first_step_s, warmup_s, step_s_median, step_s_p10, step_s_p90, tokens_per_s, "
          "flops_per_s, mfu, peak_mem_bytes, frozen_bytes, trainable_bytes, grad_bytes, "
          "optimizer_bytes, comm_s_per_step, comm_bytes_per_step, applied_json, summary_json, "
          "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      if (!insert.ok()) return insert.status();
      for (const SummaryRecord& summary : batch.summaries) {
        Result<bool> ok = current.IsCurrent(summary.trial_id, summary.attempt);
        if (!ok.ok()) return ok.status();
        if (!*ok) {
          ++result.stale;
          continue;
        }
        const protocol::SummaryEvent& s = summary.figures;
        insert->Reset();
        insert->BindAll(
            summary.trial_id, summary.attempt, summary.rank, s.startup_s, s.first_step_s,
            s.warmup_s, s.step_s_median, s.step_s_p10, s.step_s_p90, s.tokens_per_s,
            s.flops_per_s, s.mfu, s.peak_mem_bytes, s.frozen_bytes, s.trainable_bytes,
            s.grad_bytes, s.optimizer_bytes, s.comm_s_per_step, s.comm_bytes_per_step,
            s.applied ? std::optional<std::string>(Dump(*s.applied)) : std::optional<std::string>(),
            Dump(summary.body), now);
        BAKEOFF_RETURN_IF_ERROR(insert->Run());
        count(db_->Changes() > 0);
      }
    }

    if (!batch.events.empty()) {
      Result<SqliteStatement> insert = db_->PrepareCached(
          "INSERT OR IGNORE INTO events (trial_id, attempt, rank, kind, seq, data_json, at) "
          "VALUES (?, ?, ?, ?, ?, ?, ?)");
      if (!insert.ok()) return insert.status();
      for (const EventRecord& event : batch.events) {
        Result<bool> ok = current.IsCurrent(event.trial_id, event.attempt);
        if (!ok.ok()) return ok.status();
        if (!*ok) {
          ++result.stale;
          continue;
        }
        insert->Reset();
        insert->BindAll(event.trial_id, event.attempt, event.rank, event.kind, event.seq,
                        Dump(event.data), event.at != 0 ? event.at : now);
        BAKEOFF_RETURN_IF_ERROR(insert->Run());
        count(db_->Changes() > 0);
      }
    }
    return Status::Ok();
  });
  if (!status.ok()) return status.WithContext("writing a batch of metrics and events");
  return result;
}

Result<BatchResult> ResultsStore::AppendStepMetrics(const std::vector<StepMetric>& steps) {
  MetricsBatch batch;
  batch.steps = steps;
  return AppendBatch(batch);
}

Result<BatchResult> ResultsStore::AppendEvents(const std::vector<EventRecord>& events) {
  MetricsBatch batch;
  batch.events = events;
  return AppendBatch(batch);
}

Result<BatchResult> ResultsStore::RecordSummary(const TrialSummary& summary) {
  Result<SummaryRecord> record = ReadSummaryRecord(summary);
  if (!record.ok()) return record.status();
  MetricsBatch batch;
  batch.summaries.push_back(std::move(record).value());
  return AppendBatch(batch);
}

// --- Read side -----------------------------------------------------------------------

Result<std::vector<SweepRecord>> ResultsStore::ListSweeps(std::optional<SweepState> state) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  std::string sql = std::string("SELECT ") + kSweepColumns +
                    (state ? "WHERE w.state = ? " : "") + "ORDER BY w.id DESC";
  Result<SqliteStatement> stmt = db_->PrepareCached(sql);
  if (!stmt.ok()) return stmt.status();
  if (state) stmt->Bind(1, SweepStateName(*state));
  return ReadAll<SweepRecord>(*stmt, [&](const SqliteStatement& row) {
    return ReadSweepRow(row, *db_);
  });
}

Result<SweepRecord> ResultsStore::GetSweep(int64_t sweep_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt =
      db_->PrepareCached(std::string("SELECT ") + kSweepColumns + "WHERE w.id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, sweep_id);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return Status::NotFound("sweep " + std::to_string(sweep_id) +
                            " is not in the results database " + options_.path +
                            "; `bakeoff status` lists the sweeps");
  }
  return ReadSweepRow(*stmt, *db_);
}

Result<SweepRecord> ResultsStore::GetSweepByName(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt = db_->PrepareCached(std::string("SELECT ") + kSweepColumns +
                                              "WHERE w.name = ? ORDER BY w.id DESC LIMIT 1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, name);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return Status::NotFound("no sweep named '" + name + "' in the results database " +
                            options_.path + "; `bakeoff status` lists the sweeps");
  }
  return ReadSweepRow(*stmt, *db_);
}

Result<SweepRecord> ResultsStore::FindSweep(const std::string& id_or_name) {
  bool numeric = !id_or_name.empty() && id_or_name.size() <= 18 &&
                 id_or_name.find_first_not_of("0123456789") == std::string::npos;
  if (numeric) {
    Result<SweepRecord> by_id = GetSweep(std::stoll(id_or_name));
    if (by_id.ok() || by_id.status().code() != Status::Code::kNotFound) return by_id;
  }
  Result<SweepRecord> by_name = GetSweepByName(id_or_name);
  if (by_name.ok() || by_name.status().code() != Status::Code::kNotFound) return by_name;
  return Status::NotFound("no sweep with id or name '" + id_or_name +
                          "' in the results database " + options_.path +
                          "; `bakeoff status` lists the sweeps");
}

Result<std::vector<VariantRecord>> ResultsStore::ListVariants(int64_t sweep_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt = db_->PrepareCached(
      "SELECT key, ordinal, params_json, trainer_config_json, counterpart_key, is_baseline, "
      "counterpart_excluded FROM variants WHERE sweep_id = ? ORDER BY ordinal, key");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, sweep_id);
  return ReadAll<VariantRecord>(*stmt, [](const SqliteStatement& row) -> Result<VariantRecord> {
    VariantRecord variant;
    variant.key = row.Text(0);
    variant.ordinal = row.Int64(1);
    variant.params = ParseJsonOr(row.Text(2), nlohmann::json::object());
    variant.trainer_config = ParseJsonOr(row.Text(3), nlohmann::json::object());
    variant.counterpart_key = row.Text(4);
    variant.is_baseline = row.Int64(5) != 0;
    variant.counterpart_excluded = row.Int64(6) != 0;
    return variant;
  });
}

Result<std::vector<TrialRecord>> ResultsStore::ListTrials(int64_t sweep_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt = db_->PrepareCached(std::string("SELECT ") + kTrialColumns +
                                              "WHERE t.sweep_id = ? ORDER BY t.order_index, t.id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, sweep_id);
  return ReadAll<TrialRecord>(*stmt, [&](const SqliteStatement& row) {
    return ReadTrialRow(row, *db_);
  });
}

namespace {

// Fills each trial's current attempt and summaries; `where` selects the trials (over
// alias t) and binds nothing or one integer.
Result<std::vector<TrialResult>> ReadTrialResults(SqliteConnection& db, const std::string& where,
                                                  const std::string& order,
                                                  std::optional<int64_t> param) {
  Result<SqliteStatement> trials_stmt =
      db.PrepareCached(std::string("SELECT ") + kTrialColumns + where + order);
  if (!trials_stmt.ok()) return trials_stmt.status();
  if (param) trials_stmt->Bind(1, *param);
  Result<std::vector<TrialRecord>> trials = ReadAll<TrialRecord>(
      *trials_stmt, [&](const SqliteStatement& row) { return ReadTrialRow(row, db); });
  if (!trials.ok()) return trials.status();

  std::vector<TrialResult> results;
  std::map<int64_t, size_t> index_of;
  for (TrialRecord& trial : *trials) {
    index_of[trial.id] = results.size();
    TrialResult result;
    result.trial = std::move(trial);
    results.push_back(std::move(result));
  }

  Result<SqliteStatement> attempts_stmt = db.PrepareCached(
      std::string("SELECT ") + kAttemptColumns +
      "JOIN trials t ON t.id = a.trial_id AND a.attempt = t.attempts_used " + where);
  if (!attempts_stmt.ok()) return attempts_stmt.status();
  if (param) attempts_stmt->Bind(1, *param);
  Result<std::vector<AttemptRecord>> attempts = ReadAll<AttemptRecord>(
      *attempts_stmt, [&](const SqliteStatement& row) { return ReadAttemptRow(row, db); });
  if (!attempts.ok()) return attempts.status();
  for (AttemptRecord& attempt : *attempts) {
    auto it = index_of.find(attempt.trial_id);
    if (it != index_of.end()) results[it->second].attempt = std::move(attempt);
  }

  Result<SqliteStatement> summaries_stmt = db.PrepareCached(
      std::string("SELECT ") + kSummaryColumns +
      "JOIN trials t ON t.id = s.trial_id AND s.attempt = t.attempts_used " + where +
      "ORDER BY s.trial_id, s.rank");
  if (!summaries_stmt.ok()) return summaries_stmt.status();
  if (param) summaries_stmt->Bind(1, *param);
  Result<std::vector<TrialSummary>> summaries = ReadAll<TrialSummary>(
      *summaries_stmt,
      [](const SqliteStatement& row) -> Result<TrialSummary> { return ReadSummaryRow(row); });
  if (!summaries.ok()) return summaries.status();
  for (TrialSummary& summary : *summaries) {
    auto it = index_of.find(summary.trial_id);
    if (it != index_of.end()) results[it->second].summaries.push_back(std::move(summary));
  }
  return results;
}

}  // namespace

Result<std::vector<TrialResult>> ResultsStore::ListTrialResults(int64_t sweep_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  return ReadTrialResults(*db_, "WHERE t.sweep_id = ? ", "ORDER BY t.order_index, t.id",
                          sweep_id);
}

Result<std::vector<TrialResult>> ResultsStore::ListActiveTrials() {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  return ReadTrialResults(*db_, "WHERE t.state IN ('assigned', 'running') ", "ORDER BY t.id",
                          std::nullopt);
}

Result<TrialRecord> ResultsStore::GetTrial(int64_t trial_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt =
      db_->PrepareCached(std::string("SELECT ") + kTrialColumns + "WHERE t.id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, trial_id);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return Status::NotFound("trial " + std::to_string(trial_id) +
                            " is not in the results database " + options_.path);
  }
  return ReadTrialRow(*stmt, *db_);
}

Result<std::vector<AttemptRecord>> ResultsStore::ListAttempts(int64_t trial_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt = db_->PrepareCached(std::string("SELECT ") + kAttemptColumns +
                                              "WHERE a.trial_id = ? ORDER BY a.attempt");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, trial_id);
  return ReadAll<AttemptRecord>(*stmt, [&](const SqliteStatement& row) {
    return ReadAttemptRow(row, *db_);
  });
}

Result<std::vector<StepMetric>> ResultsStore::ReadStepMetrics(int64_t trial_id,
                                                              std::optional<int64_t> attempt,
                                                              std::optional<int64_t> rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt = db_->PrepareCached(
      "SELECT m.trial_id, m.attempt, m.rank, m.step, m.phase, m.step_s, m.tokens, m.loss, "
      "m.lr, m.peak_mem_bytes, m.rss_bytes, m.comm_s, m.comm_bytes FROM step_metrics m "
      "WHERE m.trial_id = ?1 AND m.attempt = COALESCE(?2, (SELECT attempts_used FROM trials "
      "WHERE id = ?1)) AND (?3 IS NULL OR m.rank = ?3) "
      "ORDER BY m.rank, m.phase = 'measure', m.step");
  if (!stmt.ok()) return stmt.status();
  stmt->BindAll(trial_id, attempt, rank);
  return ReadAll<StepMetric>(*stmt, [](const SqliteStatement& row) -> Result<StepMetric> {
    StepMetric step;
    step.trial_id = row.Int64(0);
    step.attempt = row.Int64(1);
    step.rank = row.Int64(2);
    step.step = row.Int64(3);
    step.phase = row.Text(4);
    step.step_s = row.Double(5);
    step.tokens = row.OptionalInt64(6);
    step.loss = row.OptionalDouble(7);
    step.lr = row.OptionalDouble(8);
    step.peak_mem_bytes = row.OptionalInt64(9);
    step.rss_bytes = row.OptionalInt64(10);
    step.comm_s = row.OptionalDouble(11);
    step.comm_bytes = row.OptionalInt64(12);
    return step;
  });
}

Result<std::vector<EventRecord>> ResultsStore::ReadEvents(int64_t trial_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt = db_->PrepareCached(
      "SELECT trial_id, attempt, rank, kind, seq, data_json, at FROM events "
      "WHERE trial_id = ? ORDER BY id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, trial_id);
  return ReadAll<EventRecord>(*stmt, [](const SqliteStatement& row) -> Result<EventRecord> {
    EventRecord event;
    event.trial_id = row.Int64(0);
    event.attempt = row.Int64(1);
    event.rank = row.OptionalInt64(2);
    event.kind = row.Text(3);
    event.seq = row.OptionalInt64(4);
    event.data = ParseJsonOr(row.Text(5), nlohmann::json::object());
    event.at = row.Double(6);
    return event;
  });
}

Result<std::vector<WorkerRecord>> ResultsStore::ListWorkers() {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)CommitOpenGroup();  // readers never see writes that could still be lost
  Result<SqliteStatement> stmt = db_->PrepareCached(
      "SELECT id, name, host, resources_json, metrics_url, state, registered_at, "
      "last_heartbeat_at FROM workers ORDER BY registered_at, id");
  if (!stmt.ok()) return stmt.status();
  return ReadAll<WorkerRecord>(*stmt, [&](const SqliteStatement& row) -> Result<WorkerRecord> {
    WorkerRecord worker;
    worker.id = row.Text(0);
    worker.name = row.Text(1);
    worker.host = row.Text(2);
    worker.resources = ParseJsonOr(row.Text(3), nlohmann::json::object());
    worker.metrics_url = row.Text(4);
    Result<WorkerState> state = ParseStored(ParseWorkerState(row.Text(5)), *db_, "workers.state");
    if (!state.ok()) return state.status();
    worker.state = *state;
    worker.registered_at = row.Double(6);
    worker.last_heartbeat_at = row.OptionalDouble(7);
    return worker;
  });
}

}  // namespace bakeoff::metrics
