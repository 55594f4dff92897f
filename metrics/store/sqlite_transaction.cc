#include "metrics/store/sqlite_transaction.h"

namespace bakeoff::metrics {

SqliteTransaction::SqliteTransaction(SqliteConnection& db) : db_(db) {
  begin_status_ = db_.Exec("BEGIN IMMEDIATE");
  open_ = begin_status_.ok();
}

SqliteTransaction::~SqliteTransaction() {
  if (open_) Rollback();
}

Status SqliteTransaction::Commit() {
  if (!open_) return begin_status_.ok() ? Status::Internal("transaction already ended") : begin_status_;
  Status status = db_.Exec("COMMIT");
  if (!status.ok()) {
    Rollback();
    return status;
  }
  open_ = false;
  return Status::Ok();
}

void SqliteTransaction::Rollback() {
  open_ = false;
  // After SQLITE_FULL or an I/O error SQLite may already have rolled back on its own.
  if (db_.InTransaction()) (void)db_.Exec("ROLLBACK");
}

}  // namespace bakeoff::metrics
