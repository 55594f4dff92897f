#include "metrics/store/calibrations.h"

#include "metrics/store/row_reader.h"

namespace bakeoff::metrics {

Status InsertCalibration(SqliteConnection& db, CalibrationRecord& record, UnixSeconds now) {
  if (record.workload_key.empty() || record.pairs < 2 || record.workers < 1 || !(record.sd_log_ratio >= 0)) {
    return Status::InvalidArgument("a calibration needs a workload key, >= 2 pairs, >= 1 worker and a finite sd");
  }
  if (record.created_at == 0) record.created_at = now;
  Result<SqliteStatement> insert = db.Prepare(
      "INSERT INTO calibrations (created_at, workload_key, calibrated_sweep, sweep_id, host, workers, pairs, "
      "sd_log_ratio, aa_ratio, aa_low, aa_high, sweep_order) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  insert->BindAll(record.created_at, record.workload_key, record.calibrated_sweep, record.sweep_id, record.host,
                  record.workers, record.pairs, record.sd_log_ratio, record.aa_ratio, record.aa_low,
                  record.aa_high, record.order);
  BAKEOFF_RETURN_IF_ERROR(insert->Run());
  record.id = db.LastInsertRowId();
  return Status::Ok();
}

Result<std::optional<CalibrationRecord>> LatestCalibration(SqliteConnection& db, const std::string& workload_key,
                                                           const std::string& order) {
  Result<int64_t> has_table =
      db.QueryInt64("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'calibrations'");
  if (!has_table.ok()) return has_table.status();
  if (*has_table == 0) return std::optional<CalibrationRecord>();
  Result<SqliteStatement> select = db.Prepare(
      "SELECT id, created_at, workload_key, calibrated_sweep, sweep_id, host, workers, pairs, sd_log_ratio, "
      "aa_ratio, aa_low, aa_high, sweep_order FROM calibrations WHERE workload_key = ? AND (? = '' OR sweep_order = ?) "
      "ORDER BY id DESC LIMIT 1");
  if (!select.ok()) return select.status();
  select->BindAll(workload_key, order, order);
  Result<bool> row = select->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<CalibrationRecord>();
  CalibrationRecord r;
  BAKEOFF_RETURN_IF_ERROR(rows::ReadColumns(*select, db, r.id, r.created_at, r.workload_key, r.calibrated_sweep,
                                            r.sweep_id, r.host, r.workers, r.pairs, r.sd_log_ratio, r.aa_ratio,
                                            r.aa_low, r.aa_high, r.order));
  return std::optional<CalibrationRecord>(std::move(r));
}

}  // namespace bakeoff::metrics
