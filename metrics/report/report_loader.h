// Reads one sweep's data from a results database (the schema of docs/schema.md) into a
// ReportInput, with plain SQL through the store's SQLite wrapper (sqlite_connection.h)
// on a read-only connection, so a report never writes to results.db and can run while the coordinator writes (WAL).
// Only each trial's current attempt (trials.attempts_used) counts, as in the schema's
// trial_results view.
//
// Thread-safety: a loader call uses only the connection it is given; a connection must
// not be used by two threads at once (SQLite's own rule in its default threading mode).
#pragma once

#include <memory>
#include <string>

#include "metrics/report/report_model.h"
#include "metrics/store/sqlite_connection.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

// Fills the ReportInput of the sweep named by `sweep_id_or_name`: an id ("12"), else the
// newest sweep with that name. NotFound names what was looked for and how to list sweeps.
Result<ReportInput> LoadReportInput(SqliteConnection& db, const std::string& sweep_id_or_name);

// Opens `db_path` read-only (the store's SqliteConnection, busy timeout 5 s) and checks
// it is a results database. NotFound when the file does not exist; InvalidArgument when
// it is not a Bakeoff results database; SQLite's failures as SqliteConnection maps them.
Result<std::unique_ptr<SqliteConnection>> OpenResultsReadOnly(const std::string& db_path);

// Opens `db_path` as OpenResultsReadOnly does and loads as above.
Result<ReportInput> LoadReportInputFromFile(const std::string& db_path,
                                            const std::string& sweep_id_or_name);

}  // namespace bakeoff::metrics
