#include "metrics/store/results_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>
#include <utility>

#include "metrics/store/row_reader.h"
#include "metrics/store/schema_migrations.h"
#include "metrics/store/sqlite_connection.h"
#include "metrics/store/sqlite_transaction.h"
#include "protocol/own_file.h"

namespace bakeoff::metrics {
namespace {

using namespace rows;

// Pages a Probe() wants free under max_page_count before it calls the store healthy.
constexpr int64_t kProbeMinFreePages = 16;

std::string Dump(const nlohmann::json& value) {
  // Replace invalid UTF-8 instead of throwing: event text may come from a process.
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

Result<TransitionResult> ReadTransitionRow(const SqliteStatement& row, const SqliteConnection& db) {
  TransitionResult result;
  BAKEOFF_RETURN_IF_ERROR(ReadColumns(row, db,
                                      Stored{result.state, ParseTrialState, "trials.state"},
                                      result.attempts_used,
                                      Stored{result.outcome, ParseOutcome, "trials.outcome"}));
  return result;
}

// The trial's state as a not-applied TransitionResult; kNotFound when absent.
Result<TransitionResult> ReadTransitionState(SqliteConnection& db, int64_t trial_id) {
  return QueryOne(db, "SELECT state, attempts_used, outcome FROM trials WHERE id = ?",
                  Status::NotFound("trial " + std::to_string(trial_id) +
                                   " is not in the results database " + db.path()),
                  ReadTransitionRow, trial_id);
}

// Runs an UPDATE meant to change one row; `not_found` when it changed none.
template <typename... Args>
Status UpdateOne(SqliteConnection& db, const Status& not_found, const std::string& sql,
                 const Args&... args) {
  BAKEOFF_RETURN_IF_ERROR(db.RunCached(sql, args...));
  return db.Changes() == 0 ? not_found : Status::Ok();
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

// Inserts a row per item (INSERT OR IGNORE) whose attempt is current, bound by
// bind(insert, item); counts each item as stale, written or a duplicate in `result`.
template <typename Item, typename Bind>
Status InsertCurrent(SqliteConnection& db, CurrentAttemptCache& current, const std::string& sql,
                     const std::vector<Item>& items, BatchResult& result, Bind bind) {
  if (items.empty()) return Status::Ok();
  Result<SqliteStatement> insert = db.PrepareCached(sql);
  if (!insert.ok()) return insert.status();
  for (const Item& item : items) {
    Result<bool> ok = current.IsCurrent(item.trial_id, item.attempt);
    if (!ok.ok()) return ok.status();
    if (!*ok) {
      ++result.stale;
      continue;
    }
    insert->Reset();
    bind(*insert, item);
    BAKEOFF_RETURN_IF_ERROR(insert->Run());
    (db.Changes() > 0 ? result.written : result.duplicates) += 1;
  }
  return Status::Ok();
}

// Single steps as blocks: a new block wherever the rank, phase or attempt changes or the
// step does not increase.
std::vector<StepBlockRecord> StepsAsBlocks(const std::vector<StepRecord>& steps) {
  std::vector<StepBlockRecord> blocks;
  for (const StepRecord& step : steps) {
    StepBlockRecord* last = blocks.empty() ? nullptr : &blocks.back();
    if (last == nullptr || last->trial_id != step.trial_id || last->attempt != step.attempt ||
        last->rank != step.rank || last->phase != step.phase || last->rows.back().step >= step.row.step) {
      blocks.push_back(StepBlockRecord{step.trial_id, step.attempt, step.rank, step.phase, {}});
      last = &blocks.back();
    }
    last->rows.push_back(step.row);
  }
  return blocks;
}

// The summary insert, its columns from the summary figures' table (protocol::
// SummaryFigures, those with a column of trial_summaries).
const std::string& SummaryInsertSql() {
  static const std::string kSql = [] {
    std::string columns = "trial_id, attempt, rank", values = "?, ?, ?";
    for (const protocol::SummaryFigure& figure : protocol::SummaryFigures()) {
      if (!figure.column) continue;
      columns += std::string(", ") + figure.name;
      values += ", ?";
    }
    return "INSERT OR IGNORE INTO trial_summaries (" + columns + ", applied_json, summary_json, recorded_at) VALUES (" +
           values + ", ?, ?, ?)";
  }();
  return kSql;
}

void BindSummaryFigure(SqliteStatement& insert, int index, const protocol::SummaryEvent& s,
                       const protocol::SummaryFigure& figure) {
  if (auto real = std::get_if<std::optional<double> protocol::SummaryEvent::*>(&figure.member)) {
    insert.Bind(index, s.**real);
  } else {
    insert.Bind(index, s.*std::get<std::optional<std::int64_t> protocol::SummaryEvent::*>(figure.member));
  }
}

// Stores the rows of `block` (of a current attempt) as one row of step_blocks, or, where
// they overlap blocks stored before (a redelivery), the rows outside them, as one block
// per run between them; rows inside a stored block's range count as duplicates. Stored
// blocks of a (trial, attempt, rank, phase) never overlap, so the one stored block that
// starts last at or before this block's last step is the only one to check first.
Status InsertStepBlock(SqliteConnection& db, const StepBlockRecord& block, BatchResult& result) {
  const int64_t first = block.rows.front().step;
  const int64_t last = block.rows.back().step;
  Result<SqliteStatement> nearest = db.PrepareCached(
      "SELECT last_step FROM step_blocks WHERE trial_id = ? AND attempt = ? AND rank = ? AND "
      "phase = ? AND first_step <= ? ORDER BY first_step DESC LIMIT 1");
  if (!nearest.ok()) return nearest.status();
  nearest->Reset();
  nearest->BindAll(block.trial_id, block.attempt, block.rank, block.phase, last);
  Result<bool> found = nearest->Step();
  if (!found.ok()) return found.status();
  const bool overlaps = *found && nearest->Int64(0) >= first;
  nearest->Reset();

  Result<SqliteStatement> insert = db.PrepareCached(
      "INSERT OR IGNORE INTO step_blocks (trial_id, attempt, rank, phase, first_step, last_step, "
      "steps, rows_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  std::string text;
  auto insert_run = [&](std::size_t begin, std::size_t end) -> Status {
    if (begin == end) return Status::Ok();
    text.clear();
    text.reserve((end - begin) * 64 + 2);
    text.push_back('[');
    for (std::size_t i = begin; i < end; ++i) {
      if (i != begin) text.push_back(',');
      protocol::AppendStepRowJson(block.rows[i], text);
    }
    text.push_back(']');
    insert->Reset();
    insert->BindAll(block.trial_id, block.attempt, block.rank, block.phase, block.rows[begin].step,
                    block.rows[end - 1].step, static_cast<int64_t>(end - begin), text);
    BAKEOFF_RETURN_IF_ERROR(insert->Run());
    (db.Changes() > 0 ? result.written : result.duplicates) += static_cast<int64_t>(end - begin);
    return Status::Ok();
  };
  if (!overlaps) return insert_run(0, block.rows.size());

  Result<SqliteStatement> ranges = PrepareBound(
      db,
      "SELECT first_step, last_step FROM step_blocks WHERE trial_id = ? AND attempt = ? AND "
      "rank = ? AND phase = ? AND first_step <= ? AND last_step >= ? ORDER BY first_step",
      block.trial_id, block.attempt, block.rank, block.phase, last, first);
  if (!ranges.ok()) return ranges.status();
  using Range = std::pair<int64_t, int64_t>;  // a stored block's first and last step
  Result<std::vector<Range>> stored = ReadAll<Range>(
      *ranges, [](const SqliteStatement& row) -> Result<Range> { return Range{row.Int64(0), row.Int64(1)}; });
  if (!stored.ok()) return stored.status();
  std::size_t range = 0;
  std::size_t run_begin = 0;
  for (std::size_t i = 0; i < block.rows.size(); ++i) {
    const int64_t step = block.rows[i].step;
    while (range < stored->size() && (*stored)[range].second < step) {
      // Past a stored range: the run before it ends there.
      BAKEOFF_RETURN_IF_ERROR(insert_run(run_begin, i));
      run_begin = i;
      ++range;
    }
    if (range < stored->size() && (*stored)[range].first <= step) {
      BAKEOFF_RETURN_IF_ERROR(insert_run(run_begin, i));
      run_begin = i + 1;
      ++result.duplicates;
    }
  }
  return insert_run(run_begin, block.rows.size());
}

Status ValidateBatch(const MetricsBatch& batch) {
  for (const StepRecord& step : batch.steps) {
    if (step.phase != "warmup" && step.phase != "measure") {
      return Status::InvalidArgument("step metric of trial " + std::to_string(step.trial_id) +
                                     " step " + std::to_string(step.row.step) + " has phase '" +
                                     step.phase + "'; expected warmup or measure");
    }
  }
  for (const StepBlockRecord& block : batch.step_blocks) {
    const std::string of = "step block of trial " + std::to_string(block.trial_id);
    if (block.phase != "warmup" && block.phase != "measure") {
      return Status::InvalidArgument(of + " has phase '" + block.phase + "'; expected warmup or measure");
    }
    if (block.rows.empty()) return Status::InvalidArgument(of + " has no steps");
    for (std::size_t i = 1; i < block.rows.size(); ++i) {
      if (block.rows[i].step <= block.rows[i - 1].step) {
        return Status::InvalidArgument(of + ": steps do not increase (" + std::to_string(block.rows[i].step) +
                                       " after " + std::to_string(block.rows[i - 1].step) + ")");
      }
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

ResultsStore::~ResultsStore() {
  if (checkpointer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(checkpoint_mutex_);
      checkpoint_stop_ = true;
    }
    checkpoint_wake_.notify_all();
    checkpointer_.join();
  }
}

namespace {
// The database file is this user's own before SQLite opens it (security review
// 2026-12-07, A11): created here 0600 when missing (SQLite would create it 0644 less the
// umask, and gives its -wal, -shm and -journal files the database's mode), never a link,
// never another user's file; the side files, which SQLite opens by name, are checked too.
// The writer's connections also open with SQLITE_OPEN_NOFOLLOW.
Status ClaimOwnDatabaseFiles(const std::string& path) {
  if (path == ":memory:" || path.rfind("file:", 0) == 0) return Status::Ok();
  constexpr const char* kWhat = "results database";
  Result<int> fd = protocol::OpenOwnFile(path, O_RDWR, kWhat);
  if (fd.ok()) {
    close(*fd);
  } else if (fd.status().code() == Status::Code::kInvalidArgument) {
    return fd.status();  // a link, not a regular file, another user's
  } else if (Status s = protocol::CheckOwnFileIfPresent(path, kWhat); s.code() == Status::Code::kInvalidArgument) {
    return s;
  }  // else (a missing directory, no permission): SQLite's open below says so in its words
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    Status side = protocol::CheckOwnFileIfPresent(path + suffix, "results database's side file");
    if (side.code() == Status::Code::kInvalidArgument) return side;
  }
  return Status::Ok();
}

// Where the writer's own (PASSIVE) checkpoint runs with the thread on: 16 MB of WAL.
constexpr int kWriterCheckpointFrames = 4000;
}  // namespace

void ResultsStore::CheckpointLoop() {
  // A connection of its own: the checkpoint never takes the store's mutex, so the
  // writer's transactions go on while pages are copied and the database is fsync'd.
  auto db = SqliteConnection::Open(options_.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, options_.env->StoreVfs());
  if (!db.ok()) return;  // the writer's own connection still works; checkpoints are then skipped
  sqlite3* handle = (*db)->handle();
  // The checkpoint's fsyncs follow this connection's setting: the database file is synced
  // before the WAL is reused.
  (void)(*db)->Exec("PRAGMA synchronous = FULL");
  std::unique_lock<std::mutex> lock(checkpoint_mutex_);
  while (!checkpoint_wake_.wait_for(lock, options_.checkpoint_interval, [this] { return checkpoint_stop_; })) {
    lock.unlock();
    // PASSIVE: copies what it can and never waits, neither for the writer nor for a
    // reader (a long report or query). Never RESTART here: it holds the write lock while
    // it waits for readers, which would stall the coordinator behind a user's query.
    (void)sqlite3_wal_checkpoint_v2(handle, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    // Failures (a full disk, a busy writer) are left to the next round; the writer
    // reports disk faults itself.
    lock.lock();
  }
}

UnixSeconds ResultsStore::Now() const {
  return std::chrono::duration<double>(options_.env->clock().WallNow().time_since_epoch()).count();
}

Result<std::unique_ptr<ResultsStore>> ResultsStore::Open(StoreOptions options) {
  if (options.path.empty()) {
    return Status::InvalidArgument("results database path is empty; give a file name");
  }
  if (options.env == nullptr) options.env = &Env::Default();
  std::unique_ptr<ResultsStore> store(new ResultsStore(std::move(options)));
  BAKEOFF_RETURN_IF_ERROR(ClaimOwnDatabaseFiles(store->options_.path));
  Result<std::unique_ptr<SqliteConnection>> db = SqliteConnection::Open(
      store->options_.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW,
      store->options_.env->StoreVfs());
  if (!db.ok()) return db.status();
  store->db_ = std::move(*db);
  SqliteConnection& conn = *store->db_;
  store->reader_ = std::make_unique<ResultsReader>(conn);
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
  if (store->options_.background_checkpoint) {
    // The writer still checkpoints past kWriterCheckpointFrames, so that the WAL is reused
    // (it is reused only after a checkpoint caught up with it, which under steady writes
    // the thread's rarely does); the thread has copied nearly all of it by then, so that
    // commit copies what the last 200 ms wrote instead of 1,000 pages.
    BAKEOFF_RETURN_IF_ERROR(
        conn.Exec("PRAGMA wal_autocheckpoint = " + std::to_string(kWriterCheckpointFrames)));
    ResultsStore* raw = store.get();
    store->checkpointer_ = std::thread([raw] { raw->CheckpointLoop(); });
  }
  return store;
}

bool ResultsStore::healthy() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return health_.ok();
}

Status ResultsStore::health() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
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
  auto started = options_.env->clock().Now();
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
        std::chrono::duration<double>(options_.env->clock().Now() - started).count());
  }
  return NoteFailure(status);
}

// --- Group commit ---------------------------------------------------------------------

void ResultsStore::BeginGroup() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  group_ = true;
  group_error_ = Status::Ok();
}

bool ResultsStore::in_group() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return group_;
}

bool ResultsStore::group_pending() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return group_ && group_transaction_;
}

Status ResultsStore::CommitGroup() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
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
  auto started = options_.env->clock().Now();
  Status status = db_->Exec("COMMIT");
  if (!status.ok()) {
    if (db_->InTransaction()) (void)db_->Exec("ROLLBACK");
    status = NoteFailure(AsStoreFailure(status, "committing a group of writes"));
    if (group_error_.ok()) group_error_ = status;
  }
  if (options_.write_observer) {
    options_.write_observer(
        "commit_group", status,
        std::chrono::duration<double>(options_.env->clock().Now() - started).count());
  }
  return status;
}

Status ResultsStore::Probe() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
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
  std::lock_guard<std::recursive_mutex> lock(mutex_);
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
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  UnixSeconds now = Now();
  return WriteTransaction("set_sweep_state", true, [&]() -> Status {
    return UpdateOne(*db_,
                     Status::NotFound("sweep " + std::to_string(sweep_id) +
                                      " is not in the results database " + options_.path),
                     "UPDATE sweeps SET state = ?1, finished_at = CASE WHEN ?1 = 'running' THEN "
                     "NULL ELSE COALESCE(finished_at, ?2) END WHERE id = ?3",
                     SweepStateName(state), now, sweep_id);
  });
}

// --- Trial transitions ---------------------------------------------------------------

Result<TransitionResult> ResultsStore::Transition(
    const char* operation, int64_t trial_id, const std::string& doing,
    const std::function<bool(const TransitionResult&)>& allowed,
    const std::function<Status(UnixSeconds, TransitionResult&)>& apply) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  UnixSeconds now = Now();
  TransitionResult result;
  Status status = WriteTransaction(operation, true, [&]() -> Status {
    Result<TransitionResult> found = ReadTransitionState(*db_, trial_id);
    if (!found.ok()) return found.status();
    result = *found;
    if (!allowed(result)) return Status::Ok();
    BAKEOFF_RETURN_IF_ERROR(apply(now, result));
    result.applied = true;
    return Status::Ok();
  });
  if (!status.ok()) return status.WithContext(doing);
  return result;
}

namespace {

// Ends an attempt with its outcome and reason.
Status EndAttempt(SqliteConnection& db, int64_t trial_id, int64_t attempt, Outcome outcome,
                  const std::string& reason, UnixSeconds now) {
  return db.RunCached(
      "UPDATE attempts SET outcome = ?, reason = ?, ended_at = ? WHERE trial_id = ? AND "
      "attempt = ?",
      OutcomeName(outcome), reason, now, trial_id, attempt);
}

bool IsActive(TrialState state) {
  return state == TrialState::kAssigned || state == TrialState::kRunning;
}

}  // namespace

Result<TransitionResult> ResultsStore::AssignTrial(int64_t trial_id,
                                                   int64_t expected_attempts_used,
                                                   const AttemptRecord& placement) {
  return Transition(
      "assign_trial", trial_id, "assigning trial " + std::to_string(trial_id),
      [&](const TransitionResult& found) {
        return found.state == TrialState::kQueued && found.attempts_used == expected_attempts_used;
      },
      [&](UnixSeconds now, TransitionResult& result) -> Status {
        int64_t attempt = expected_attempts_used + 1;
        BAKEOFF_RETURN_IF_ERROR(db_->RunCached(
            "INSERT INTO attempts (trial_id, attempt, worker_id, host, ranks_json, simulated, "
            "assigned_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            trial_id, attempt, placement.worker_id, placement.host,
            Dump(RanksToJson(placement.ranks)), static_cast<int64_t>(placement.simulated),
            placement.assigned_at != 0 ? placement.assigned_at : now));
        BAKEOFF_RETURN_IF_ERROR(db_->RunCached(
            "UPDATE trials SET state = 'assigned', attempts_used = ? WHERE id = ?", attempt, trial_id));
        result.state = TrialState::kAssigned;
        result.attempts_used = attempt;
        result.attempt = attempt;
        return Status::Ok();
      });
}

Result<TransitionResult> ResultsStore::MarkRunning(int64_t trial_id, int64_t attempt) {
  return Transition(
      "mark_running", trial_id, "marking trial " + std::to_string(trial_id) + " running",
      [&](const TransitionResult& found) {
        return found.state == TrialState::kAssigned && found.attempts_used == attempt;
      },
      [&](UnixSeconds now, TransitionResult& result) -> Status {
        BAKEOFF_RETURN_IF_ERROR(
            db_->RunCached("UPDATE trials SET state = 'running' WHERE id = ?", trial_id));
        BAKEOFF_RETURN_IF_ERROR(db_->RunCached(
            "UPDATE attempts SET started_at = COALESCE(started_at, ?) WHERE trial_id = ? AND "
            "attempt = ?",
            now, trial_id, attempt));
        result.state = TrialState::kRunning;
        result.attempt = attempt;
        return Status::Ok();
      });
}

Result<TransitionResult> ResultsStore::FinishTrial(int64_t trial_id, int64_t expected_attempt,
                                                   Outcome outcome, const std::string& reason) {
  return Transition(
      "finish_trial", trial_id, "finishing trial " + std::to_string(trial_id),
      [&](const TransitionResult& found) {
        return found.state != TrialState::kFinished && found.attempts_used == expected_attempt;
      },
      [&](UnixSeconds now, TransitionResult& result) -> Status {
        if (IsActive(result.state)) {
          BAKEOFF_RETURN_IF_ERROR(EndAttempt(*db_, trial_id, expected_attempt, outcome, reason, now));
        }
        BAKEOFF_RETURN_IF_ERROR(db_->RunCached(
            "UPDATE trials SET state = 'finished', outcome = ?, reason = ?, finished_at = ? "
            "WHERE id = ?",
            OutcomeName(outcome), reason, now, trial_id));
        result.state = TrialState::kFinished;
        result.outcome = outcome;
        result.attempt = expected_attempt;
        return Status::Ok();
      });
}

Result<TransitionResult> ResultsStore::RequeueTrial(int64_t trial_id, int64_t attempt,
                                                    Outcome attempt_outcome,
                                                    const std::string& reason, bool grant_attempt) {
  return Transition(
      "requeue_trial", trial_id, "requeueing trial " + std::to_string(trial_id),
      [&](const TransitionResult& found) {
        return IsActive(found.state) && found.attempts_used == attempt;
      },
      [&](UnixSeconds now, TransitionResult& result) -> Status {
        BAKEOFF_RETURN_IF_ERROR(EndAttempt(*db_, trial_id, attempt, attempt_outcome, reason, now));
        BAKEOFF_RETURN_IF_ERROR(db_->RunCached(
            "UPDATE trials SET state = 'queued', reason = ?, max_attempts = max_attempts + ? WHERE id = ?",
            reason, static_cast<int64_t>(grant_attempt ? 1 : 0), trial_id));
        result.state = TrialState::kQueued;
        result.attempt = attempt;
        return Status::Ok();
      });
}

Result<int64_t> ResultsStore::CancelQueuedTrials(int64_t sweep_id, const std::string& reason) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
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
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  UnixSeconds now = Now();
  return WriteTransaction("upsert_worker", false, [&]() -> Status {
    Result<SqliteStatement> upsert = db_->PrepareCached(
        "INSERT INTO workers (id, name, host, resources_json, metrics_url, state, "
        "registered_at, last_heartbeat_at, secret_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET name = excluded.name, host = excluded.host, "
        "resources_json = excluded.resources_json, metrics_url = excluded.metrics_url, "
        "state = excluded.state, "
        "last_heartbeat_at = COALESCE(excluded.last_heartbeat_at, last_heartbeat_at), "
        "secret_sha256 = CASE WHEN excluded.secret_sha256 = '' THEN secret_sha256 "
        "ELSE excluded.secret_sha256 END");
    if (!upsert.ok()) return upsert.status();
    upsert->BindAll(worker.id, worker.name, worker.host, Dump(worker.resources),
                    worker.metrics_url, WorkerStateName(worker.state),
                    worker.registered_at != 0 ? worker.registered_at : now,
                    worker.last_heartbeat_at, worker.secret_sha256);
    return upsert->Run();
  }).WithContext("storing worker " + worker.id);
}

Status ResultsStore::SetWorkerState(const std::string& worker_id, WorkerState state) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return UpdateWorker("set_worker_state", worker_id, "UPDATE workers SET state = ? WHERE id = ?",
                      WorkerStateName(state));
}

Status ResultsStore::RecordWorkerHeartbeat(const std::string& worker_id, UnixSeconds at) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  UnixSeconds when = at != 0 ? at : Now();
  return UpdateWorker("worker_heartbeat", worker_id,
                      "UPDATE workers SET last_heartbeat_at = ? WHERE id = ?", when);
}

template <typename Value>
Status ResultsStore::UpdateWorker(const char* operation, const std::string& worker_id,
                                  const char* sql, const Value& value) {
  return WriteTransaction(operation, false, [&]() -> Status {
    return UpdateOne(*db_,
                     Status::NotFound("worker " + worker_id + " is not in the results database " +
                                      options_.path),
                     sql, value, worker_id);
  });
}

// --- Metrics and events ------------------------------------------------------------

Result<BatchResult> ResultsStore::AppendBatch(const MetricsBatch& batch) {
  BAKEOFF_RETURN_IF_ERROR(ValidateBatch(batch));
  const std::vector<StepBlockRecord> single_steps = StepsAsBlocks(batch.steps);
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  UnixSeconds now = Now();
  BatchResult result;
  // Durable: the coordinator acknowledges a batch as soon as this returns, and the worker
  // then forgets it, so a power loss must not lose it (docs/reliability.md).
  Status status = WriteTransaction("append_batch", true, [&]() -> Status {
    result = BatchResult();
    CurrentAttemptCache current(*db_);
    for (const auto* blocks : {&batch.step_blocks, &single_steps}) {
      for (const StepBlockRecord& block : *blocks) {
        Result<bool> ok = current.IsCurrent(block.trial_id, block.attempt);
        if (!ok.ok()) return ok.status();
        if (!*ok) {
          result.stale += static_cast<int64_t>(block.rows.size());
          continue;
        }
        BAKEOFF_RETURN_IF_ERROR(InsertStepBlock(*db_, block, result));
      }
    }
    BAKEOFF_RETURN_IF_ERROR(InsertCurrent(
        *db_, current, SummaryInsertSql(), batch.summaries, result,
        [&](SqliteStatement& insert, const SummaryRecord& summary) {
          insert.BindAll(summary.trial_id, summary.attempt, summary.rank);
          int index = 4;
          for (const protocol::SummaryFigure& figure : protocol::SummaryFigures()) {
            if (figure.column) BindSummaryFigure(insert, index++, summary.figures, figure);
          }
          const auto& applied = summary.figures.applied;
          insert.Bind(index++, applied ? std::optional<std::string>(Dump(*applied)) : std::optional<std::string>());
          insert.Bind(index++, Dump(summary.body));
          insert.Bind(index, now);
        }));
    return InsertCurrent(
        *db_, current,
        "INSERT OR IGNORE INTO events (trial_id, attempt, rank, kind, seq, data_json, at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        batch.events, result, [&](SqliteStatement& insert, const EventRecord& event) {
          insert.BindAll(event.trial_id, event.attempt, event.rank, event.kind, event.seq,
                         Dump(event.data), event.at != 0 ? event.at : now);
        });
  });
  if (!status.ok()) return status.WithContext("writing a batch of metrics and events");
  return result;
}

Result<BatchResult> ResultsStore::AppendStepMetrics(const std::vector<StepRecord>& steps) {
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

// --- Read side: through the reader, after the open group's writes are committed ------

ResultsStore::LockedReader::LockedReader(ResultsStore& store) : reader_(store.reader_.get()), lock_(store.mutex_) {
  (void)store.CommitOpenGroup();  // readers never see writes that could still be lost
}

ResultsStore::LockedReader ResultsStore::Reader() { return LockedReader(*this); }

Status ResultsStore::RecordCalibration(CalibrationRecord& record) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const UnixSeconds now = Now();
  return WriteTransaction("record_calibration", true, [&]() -> Status {
    return InsertCalibration(*db_, record, now);
  }).WithContext("storing the calibration of " + record.calibrated_sweep);
}

}  // namespace bakeoff::metrics
