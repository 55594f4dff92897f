// SqliteTransaction: RAII BEGIN IMMEDIATE ... COMMIT on a SqliteConnection. A
// transaction not committed is rolled back on destruction, so an early return on an
// error leaves the database as it was. BEGIN IMMEDIATE takes the write lock at once,
// so a transaction never fails half-way for lack of the lock.
// Thread-safety: as the connection (none).
#pragma once

#include "metrics/store/sqlite_connection.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

class SqliteTransaction {
 public:
  // Starts the transaction; check begin_status() before use.
  explicit SqliteTransaction(SqliteConnection& db);
  ~SqliteTransaction();
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;

  const Status& begin_status() const { return begin_status_; }
  // Commits; on failure the transaction is rolled back and the Status returned.
  Status Commit();

 private:
  void Rollback();

  SqliteConnection& db_;
  Status begin_status_;
  bool open_ = false;
};

}  // namespace bakeoff::metrics
