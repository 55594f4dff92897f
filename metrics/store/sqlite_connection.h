// SqliteConnection: an RAII handle on one SQLite database connection (the C API), and
// the one place where SQLite result codes become bakeoff::Status values:
//   SQLITE_FULL                                   -> kResourceExhausted
//   SQLITE_READONLY, _IOERR, _CANTOPEN, _CORRUPT,
//   SQLITE_NOTADB, _PERM                           -> kIoError
//   SQLITE_BUSY, SQLITE_LOCKED                    -> kUnavailable
//   SQLITE_INTERRUPT                              -> kTimeout
//   SQLITE_CONSTRAINT, SQLITE_ERROR (bad SQL)     -> kInvalidArgument
//   anything else                                 -> kInternal
// Every message names the database file.
// Thread-safety: none; the owner serialises all use (ResultsStore holds a mutex).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "metrics/store/sqlite_statement.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

class SqliteConnection {
 public:
  // flags: SQLITE_OPEN_* (e.g. SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE); vfs: a
  // registered VFS name, empty for the default.
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path, int flags,
                                                        const std::string& vfs = "");
  // An existing results database, read-only, never through a symbolic link (its last
  // component): kNotFound when nothing is there (`missing_hint` says what to do), and
  // kInvalidArgument naming the path when it is a link. lstat gives the clear message;
  // SQLITE_OPEN_NOFOLLOW closes the window between that check and the open, so that a
  // link swapped in under a reading coordinator is refused too (security review A11).
  static Result<std::unique_ptr<SqliteConnection>> OpenReadOnly(const std::string& path,
                                                                const std::string& missing_hint);

  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // Runs one or more statements that return no rows of interest.
  Status Exec(const std::string& sql);
  Result<SqliteStatement> Prepare(const std::string& sql);
  // As Prepare, for SQL the program runs again and again (a fixed text, never user
  // input): the compiled statement is kept and reused, reset with no bindings, so a
  // hot write does not parse its SQL each time. At most kMaxCachedStatements texts are
  // kept; others are prepared as by Prepare.
  Result<SqliteStatement> PrepareCached(const std::string& sql);
  // Runs one statement of a fixed text through the cache (e.g. "SAVEPOINT name").
  Status ExecCached(const std::string& sql);
  // As ExecCached, with `args` bound from parameter 1 (SqliteStatement::BindAll):
  // RunCached("UPDATE trials SET state = ? WHERE id = ?", "running", trial_id).
  template <typename... Args>
  Status RunCached(const std::string& sql, const Args&... args) {
    Result<SqliteStatement> stmt = PrepareCached(sql);
    if (!stmt.ok()) return stmt.status();
    stmt->BindAll(args...);
    return stmt->Run();
  }
  static constexpr std::size_t kMaxCachedStatements = 128;
  // Runs a statement that returns one integer (e.g. "PRAGMA user_version").
  Result<int64_t> QueryInt64(const std::string& sql);

  int64_t LastInsertRowId() const;
  int Changes() const;  // rows changed by the last statement
  bool InTransaction() const;

  // The Status for a failed SQLite call with result code rc; `what` says what was
  // being done ("inserting step metrics").
  Status StatusFor(int rc, const std::string& what) const;

  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  friend class SqliteStatement;
  SqliteConnection(std::string path, sqlite3* db);
  // A cached statement's SqliteStatement is gone: keep it for the next PrepareCached.
  void ReturnCached(sqlite3_stmt* stmt);

  std::string path_;
  sqlite3* db_ = nullptr;
  // Idle cached statements by SQL text (one text may be in use more than once at a time).
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> cache_;
};

// Maps a SQLite result code to a Status; used where no connection exists yet.
Status SqliteStatusFor(int rc, const std::string& path, const std::string& what,
                       const std::string& detail);

}  // namespace bakeoff::metrics
