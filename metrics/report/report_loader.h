// Reads one sweep's data from a results database (the schema of docs/schema.md) into a
// ReportInput, with plain SQL through the SQLite C API on a read-only connection, so a
// report never writes to results.db and can run while the coordinator writes (WAL).
// Only each trial's current attempt (trials.attempts_used) counts, as in the schema's
// trial_results view.
//
// Thread-safety: a loader call uses only the connection it is given; a sqlite3* must
// not be used by two threads at once (SQLite's own rule in its default threading mode).
#pragma once

#include <sqlite3.h>

#include <string>

#include "metrics/report/report_model.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

// Fills the ReportInput of the sweep named by `sweep_id_or_name`: an id ("12"), else the
// newest sweep with that name. NotFound names what was looked for and how to list sweeps.
Result<ReportInput> LoadReportInput(sqlite3* db, const std::string& sweep_id_or_name);

// Opens `db_path` read-only and loads as above. NotFound when the file does not exist;
// InvalidArgument when it is not a Bakeoff results database.
Result<ReportInput> LoadReportInputFromFile(const std::string& db_path,
                                            const std::string& sweep_id_or_name);

// A read-only connection that closes itself. REQUIRES: used from one thread at a time.
class ReadOnlyDatabase {
 public:
  static Result<ReadOnlyDatabase> Open(const std::string& db_path);
  ReadOnlyDatabase(ReadOnlyDatabase&& other) noexcept;
  ReadOnlyDatabase& operator=(ReadOnlyDatabase&& other) noexcept;
  ReadOnlyDatabase(const ReadOnlyDatabase&) = delete;
  ReadOnlyDatabase& operator=(const ReadOnlyDatabase&) = delete;
  ~ReadOnlyDatabase();

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  ReadOnlyDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace bakeoff::metrics
