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

#include "metrics/sqlite_statement.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

class SqliteConnection {
 public:
  // flags: SQLITE_OPEN_* (e.g. SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE); vfs: a
  // registered VFS name, empty for the default.
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path, int flags,
                                                        const std::string& vfs = "");

  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // Runs one or more statements that return no rows of interest.
  Status Exec(const std::string& sql);
  Result<SqliteStatement> Prepare(const std::string& sql);
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
  SqliteConnection(std::string path, sqlite3* db);

  std::string path_;
  sqlite3* db_ = nullptr;
};

// Maps a SQLite result code to a Status; used where no connection exists yet.
Status SqliteStatusFor(int rc, const std::string& path, const std::string& what,
                       const std::string& detail);

}  // namespace bakeoff::metrics
