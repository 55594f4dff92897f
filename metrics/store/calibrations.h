// The calibrations table (schema version 4, docs/schema.md): the run-to-run noise that
// `bakeoff calibrate` measured for a workload on this machine. Written by the calibrate
// command through ResultsStore::RecordCalibration; read by `bakeoff validate` and the
// report (LatestCalibration), each on a connection of its own.
// Thread-safety: SQLite's rule, one thread per connection at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "metrics/store/sqlite_connection.h"
#include "metrics/store/store_records.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

struct CalibrationRecord {
  int64_t id = 0;                 // set by InsertCalibration
  UnixSeconds created_at = 0;     // set by InsertCalibration when 0
  std::string workload_key;       // spec::CalibrationKey of the calibrated sweep
  std::string calibrated_sweep;   // that sweep's name
  int64_t sweep_id = 0;           // the A/A sweep that measured it (its trials are stored)
  std::string host;               // where it ran
  int64_t workers = 1;
  int64_t pairs = 0;              // A/A pairs behind sd_log_ratio
  double sd_log_ratio = 0;        // sd of one pair's log tokens/s ratio
  std::string order = "interleaved";  // the A/A sweep's order: interleaved or lockstep
  std::optional<double> aa_ratio, aa_low, aa_high;  // the A/A ratio and its interval
};

// Inserts `record` (its id and created_at are filled in). Call inside a write
// transaction; InvalidArgument for a record the table's checks would refuse.
Status InsertCalibration(SqliteConnection& db, CalibrationRecord& record, UnixSeconds now);

// The newest calibration with `workload_key` of `order` ("" any order), or nullopt: also
// for a database older than schema version 4, which has no calibrations table.
Result<std::optional<CalibrationRecord>> LatestCalibration(SqliteConnection& db, const std::string& workload_key,
                                                           const std::string& order = "");

}  // namespace bakeoff::metrics
