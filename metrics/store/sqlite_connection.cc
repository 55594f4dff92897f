#include "metrics/store/sqlite_connection.h"

#include <sys/stat.h>

#include <utility>

namespace bakeoff::metrics {

Status SqliteStatusFor(int rc, const std::string& path, const std::string& what,
                       const std::string& detail) {
  std::string where = "results database " + path + ": " + what + " failed (" + detail + ")";
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return Status::ResourceExhausted(
          where + ": the disk or the database's size limit is full; free space on the "
                  "file system, or raise the limit; results stored so far are kept");
    case SQLITE_READONLY:
      return Status::IoError(where + ": the database is read-only; make the file and its "
                                     "directory writable; results stored so far are kept");
    case SQLITE_CANTOPEN:
      return Status::IoError(where + ": cannot open the file; check that its directory "
                                     "exists and is writable (a WAL database also needs "
                                     "its -wal and -shm files there)");
    case SQLITE_IOERR:
    case SQLITE_PERM:
      return Status::IoError(where + ": check that the file system is mounted, writable "
                                     "and not full; results stored so far are kept");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::IoError(where + ": the file is damaged or not a Bakeoff results "
                                     "database; restore it or point to another file");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(where + ": another process holds the database lock; "
                                         "retry, or stop the other writer");
    case SQLITE_INTERRUPT:
      return Status::Timeout(where + ": interrupted at its time limit");
    case SQLITE_CONSTRAINT:
    case SQLITE_ERROR:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
      return Status::InvalidArgument(where);
    default:
      return Status::Internal(where);
  }
}

SqliteConnection::SqliteConnection(std::string path, sqlite3* db)
    : path_(std::move(path)), db_(db) {}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, idle] : cache_) {
    for (sqlite3_stmt* stmt : idle) sqlite3_finalize(stmt);
  }
  // Unfinalized statements would make close fail; v2 defers until they are gone.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path,
                                                                 int flags,
                                                                 const std::string& vfs) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX,
                           vfs.empty() ? nullptr : vfs.c_str());
  if (rc != SQLITE_OK) {
    std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (db != nullptr) sqlite3_close_v2(db);
    return SqliteStatusFor(rc, path, "opening", detail);
  }
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<SqliteConnection>(new SqliteConnection(path, db));
}

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::OpenReadOnly(const std::string& path,
                                                                         const std::string& missing_hint) {
  struct stat info;
  if (path.empty() || ::lstat(path.c_str(), &info) != 0) {
    return Status::NotFound("results database " + path + " does not exist; " + missing_hint);
  }
  if (S_ISLNK(info.st_mode)) {
    return Status::InvalidArgument("results database '" + path +
                                   "' is a symbolic link; give the database file itself");
  }
  return Open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW);
}

Status SqliteConnection::StatusFor(int rc, const std::string& what) const {
  std::string detail = sqlite3_errstr(rc);
  if (db_ != nullptr && sqlite3_errcode(db_) == rc) detail = sqlite3_errmsg(db_);
  return SqliteStatusFor(rc, path_, what, detail);
}

Status SqliteConnection::Exec(const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  std::string detail = error != nullptr ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  if (rc == SQLITE_OK) return Status::Ok();
  return SqliteStatusFor(rc, path_, "running \"" + sql.substr(0, 80) + "\"", detail);
}

Result<SqliteStatement> SqliteConnection::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    if (stmt != nullptr) sqlite3_finalize(stmt);
    return StatusFor(rc, "preparing \"" + sql.substr(0, 80) + "\"");
  }
  return SqliteStatement(this, stmt);
}

Result<SqliteStatement> SqliteConnection::PrepareCached(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end() && cache_.size() >= kMaxCachedStatements) return Prepare(sql);
  if (it != cache_.end() && !it->second.empty()) {
    sqlite3_stmt* stmt = it->second.back();
    it->second.pop_back();
    return SqliteStatement(this, stmt, /*cached=*/true);
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt, nullptr);
  if (rc != SQLITE_OK) {
    if (stmt != nullptr) sqlite3_finalize(stmt);
    return StatusFor(rc, "preparing \"" + sql.substr(0, 80) + "\"");
  }
  cache_.try_emplace(sql);  // the text is known from now on; the statement comes back on release
  return SqliteStatement(this, stmt, /*cached=*/true);
}

void SqliteConnection::ReturnCached(sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  const char* sql = sqlite3_sql(stmt);
  auto it = sql != nullptr ? cache_.find(sql) : cache_.end();
  if (it == cache_.end()) {
    sqlite3_finalize(stmt);
    return;
  }
  it->second.push_back(stmt);
}

Status SqliteConnection::ExecCached(const std::string& sql) {
  Result<SqliteStatement> stmt = PrepareCached(sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Run();
}

Result<int64_t> SqliteConnection::QueryInt64(const std::string& sql) {
  Result<SqliteStatement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal("results database " + path_ + ": \"" + sql + "\" returned no row");
  return stmt->Int64(0);
}

int64_t SqliteConnection::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int SqliteConnection::Changes() const { return sqlite3_changes(db_); }

bool SqliteConnection::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

}  // namespace bakeoff::metrics
