#include "metrics/store/schema_migrations.h"

#include <cassert>

#include "metrics/store/sqlite_transaction.h"

namespace bakeoff::metrics {
namespace {

// Version 1: the core tables. Times are Unix seconds (REAL); JSON columns hold text.
constexpr const char* kV1 = R"sql(
CREATE TABLE schema_migrations (
  version INTEGER PRIMARY KEY,
  description TEXT NOT NULL,
  applied_at REAL NOT NULL
);

CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  question TEXT NOT NULL DEFAULT '',
  yaml TEXT NOT NULL,
  spec_json TEXT,
  state TEXT NOT NULL CHECK (state IN ('running', 'finished', 'cancelled')),
  created_at REAL NOT NULL,
  finished_at REAL,
  variant_count INTEGER NOT NULL,
  trial_count INTEGER NOT NULL
);
CREATE INDEX sweeps_by_name ON sweeps (name, id);

CREATE TABLE variants (
  sweep_id INTEGER NOT NULL REFERENCES sweeps (id),
  key TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  params_json TEXT NOT NULL,
  trainer_config_json TEXT NOT NULL,
  counterpart_key TEXT,
  is_baseline INTEGER NOT NULL CHECK (is_baseline IN (0, 1)),
  counterpart_excluded INTEGER NOT NULL CHECK (counterpart_excluded IN (0, 1)),
  PRIMARY KEY (sweep_id, key)
);

CREATE TABLE trials (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep_id INTEGER NOT NULL REFERENCES sweeps (id),
  variant_key TEXT NOT NULL,
  repeat INTEGER NOT NULL,
  order_index INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'assigned', 'running', 'finished')),
  outcome TEXT CHECK (outcome IN ('succeeded', 'oom', 'unsupported', 'diverged',
                                  'failed', 'timeout', 'lost', 'cancelled')),
  reason TEXT NOT NULL DEFAULT '',
  attempts_used INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
  queued_at REAL NOT NULL,
  finished_at REAL,
  UNIQUE (sweep_id, variant_key, repeat),
  FOREIGN KEY (sweep_id, variant_key) REFERENCES variants (sweep_id, key),
  CHECK ((state = 'finished') = (outcome IS NOT NULL))
);
CREATE INDEX trials_by_sweep ON trials (sweep_id, order_index);

CREATE TABLE attempts (
  trial_id INTEGER NOT NULL REFERENCES trials (id),
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  worker_id TEXT NOT NULL,
  host TEXT NOT NULL,
  ranks_json TEXT NOT NULL,
  assigned_at REAL NOT NULL,
  started_at REAL,
  ended_at REAL,
  outcome TEXT CHECK (outcome IN ('succeeded', 'oom', 'unsupported', 'diverged',
                                  'failed', 'timeout', 'lost', 'cancelled')),
  reason TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (trial_id, attempt)
);

CREATE TABLE workers (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  host TEXT NOT NULL,
  resources_json TEXT NOT NULL,
  metrics_url TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state IN ('idle', 'busy', 'draining', 'lost', 'gone')),
  registered_at REAL NOT NULL,
  last_heartbeat_at REAL
);

CREATE TABLE step_metrics (
  trial_id INTEGER NOT NULL REFERENCES trials (id),
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('warmup', 'measure')),
  step INTEGER NOT NULL,
  step_s REAL NOT NULL,
  tokens INTEGER,
  loss REAL,
  lr REAL,
  peak_mem_bytes INTEGER,
  rss_bytes INTEGER,
  comm_s REAL,
  comm_bytes INTEGER,
  PRIMARY KEY (trial_id, attempt, rank, phase, step)
) WITHOUT ROWID;

CREATE TABLE trial_summaries (
  trial_id INTEGER NOT NULL REFERENCES trials (id),
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  startup_s REAL,
  first_step_s REAL,
  warmup_s REAL,
  step_s_median REAL,
  step_s_p10 REAL,
  step_s_p90 REAL,
  tokens_per_s REAL,
  flops_per_s REAL,
  mfu REAL,
  peak_mem_bytes INTEGER,
  frozen_bytes INTEGER,
  trainable_bytes INTEGER,
  grad_bytes INTEGER,
  optimizer_bytes INTEGER,
  comm_s_per_step REAL,
  comm_bytes_per_step INTEGER,
  applied_json TEXT,
  summary_json TEXT NOT NULL,
  recorded_at REAL NOT NULL,
  PRIMARY KEY (trial_id, attempt, rank)
);

CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  trial_id INTEGER NOT NULL REFERENCES trials (id),
  attempt INTEGER NOT NULL,
  rank INTEGER,
  kind TEXT NOT NULL,
  seq INTEGER,
  data_json TEXT NOT NULL,
  at REAL NOT NULL
);
CREATE UNIQUE INDEX events_once ON events (trial_id, attempt, IFNULL(rank, -1), seq)
  WHERE seq IS NOT NULL;
)sql";

// Version 2: what recovery, the report and the benchmark need on top of v1.
constexpr const char* kV2 = R"sql(
ALTER TABLE attempts ADD COLUMN simulated INTEGER NOT NULL DEFAULT 0
  CHECK (simulated IN (0, 1));
CREATE INDEX trials_active ON trials (state) WHERE state IN ('assigned', 'running');
CREATE INDEX attempts_by_worker ON attempts (worker_id);
CREATE INDEX events_by_trial ON events (trial_id, attempt);

CREATE VIEW trial_results AS
SELECT t.sweep_id, t.id AS trial_id, t.variant_key, t.repeat, t.order_index,
       t.state, t.outcome, t.reason, t.attempts_used AS attempt, t.max_attempts,
       v.is_baseline, v.counterpart_key, v.counterpart_excluded,
       a.worker_id, a.host, a.simulated, a.started_at, a.ended_at,
       s.tokens_per_s, s.step_s_median, s.step_s_p10, s.step_s_p90,
       s.startup_s, s.first_step_s, s.warmup_s, s.mfu,
       (SELECT MAX(m.peak_mem_bytes) FROM trial_summaries m
         WHERE m.trial_id = t.id AND m.attempt = t.attempts_used) AS peak_mem_bytes
FROM trials t
JOIN variants v ON v.sweep_id = t.sweep_id AND v.key = t.variant_key
LEFT JOIN attempts a ON a.trial_id = t.id AND a.attempt = t.attempts_used
LEFT JOIN trial_summaries s
  ON s.trial_id = t.id AND s.attempt = t.attempts_used AND s.rank = 0;

CREATE VIEW sweep_progress AS
SELECT w.id AS sweep_id, w.name, w.state, w.trial_count,
       COUNT(t.id) FILTER (WHERE t.state = 'queued') AS queued,
       COUNT(t.id) FILTER (WHERE t.state IN ('assigned', 'running')) AS running,
       COUNT(t.id) FILTER (WHERE t.state = 'finished') AS finished,
       COUNT(t.id) FILTER (WHERE t.outcome = 'succeeded') AS succeeded,
       COUNT(t.id) FILTER (WHERE t.state = 'finished' AND t.outcome <> 'succeeded')
         AS unsuccessful
FROM sweeps w LEFT JOIN trials t ON t.sweep_id = w.id
GROUP BY w.id;
)sql";

// Version 3: steps stored as blocks (docs/schema.md, "step_blocks"): a row per block of a
// rank's consecutive steps, the steps as JSON text; step_metrics is a view with a row per
// step, as the table was. Stored steps move into one block per (trial, attempt, rank,
// phase).
constexpr const char* kV3 = R"sql(
CREATE TABLE step_blocks (
  trial_id INTEGER NOT NULL REFERENCES trials (id),
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('warmup', 'measure')),
  first_step INTEGER NOT NULL,
  last_step INTEGER NOT NULL CHECK (last_step >= first_step),
  steps INTEGER NOT NULL CHECK (steps >= 1),
  rows_json TEXT NOT NULL,
  PRIMARY KEY (trial_id, attempt, rank, phase, first_step)
) WITHOUT ROWID;
INSERT INTO step_blocks
SELECT trial_id, attempt, rank, phase, MIN(step), MAX(step), COUNT(*),
       json_group_array(json_array(step, step_s, tokens, loss, lr, peak_mem_bytes, rss_bytes,
                                   comm_s, comm_bytes))
FROM step_metrics GROUP BY trial_id, attempt, rank, phase;
DROP TABLE step_metrics;
CREATE VIEW step_metrics AS
SELECT b.trial_id, b.attempt, b.rank, b.phase,
       r.value ->> 0 AS step, r.value ->> 1 AS step_s, r.value ->> 2 AS tokens,
       r.value ->> 3 AS loss, r.value ->> 4 AS lr, r.value ->> 5 AS peak_mem_bytes,
       r.value ->> 6 AS rss_bytes, r.value ->> 7 AS comm_s, r.value ->> 8 AS comm_bytes
FROM step_blocks b, json_each(b.rows_json) r;
)sql";

// Version 4: calibrations (docs/schema.md): the run-to-run noise `bakeoff calibrate`
// measured for a workload on this machine, read by `validate` and the report.
constexpr const char* kV4 = R"sql(
CREATE TABLE calibrations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at REAL NOT NULL,
  workload_key TEXT NOT NULL,
  calibrated_sweep TEXT NOT NULL,
  sweep_id INTEGER NOT NULL REFERENCES sweeps (id),
  host TEXT NOT NULL,
  workers INTEGER NOT NULL CHECK (workers >= 1),
  pairs INTEGER NOT NULL CHECK (pairs >= 2),
  sd_log_ratio REAL NOT NULL CHECK (sd_log_ratio >= 0),
  aa_ratio REAL,
  aa_low REAL,
  aa_high REAL
);
CREATE INDEX calibrations_by_key ON calibrations (workload_key, id);
)sql";

// Version 5: a hash of each worker's secret, so that after a coordinator restart a worker
// name whose attempts await reclaim can be taken only by the worker that holds its secret
// (docs/security.md, "Worker identity").
constexpr const char* kV5 = R"sql(
ALTER TABLE workers ADD COLUMN secret_sha256 TEXT NOT NULL DEFAULT '';
)sql";

// Version 6: a step's lockstep turn number (docs/lockstep.md), the tenth element of a
// stored step row; step_metrics gains it as its last column. Rows stored before it are
// shorter and read it as NULL, so no stored block changes.
constexpr const char* kV6 = R"sql(
DROP VIEW step_metrics;
CREATE VIEW step_metrics AS
SELECT b.trial_id, b.attempt, b.rank, b.phase,
       r.value ->> 0 AS step, r.value ->> 1 AS step_s, r.value ->> 2 AS tokens,
       r.value ->> 3 AS loss, r.value ->> 4 AS lr, r.value ->> 5 AS peak_mem_bytes,
       r.value ->> 6 AS rss_bytes, r.value ->> 7 AS comm_s, r.value ->> 8 AS comm_bytes,
       r.value ->> 9 AS turn
FROM step_blocks b, json_each(b.rows_json) r;
)sql";

// Version 7: the order a calibration measured (docs/statistics.md, "Calibration"):
// `bakeoff calibrate` measures interleaved and lockstep pairs, which differ in noise.
constexpr const char* kV7 = R"sql(
ALTER TABLE calibrations ADD COLUMN sweep_order TEXT NOT NULL DEFAULT 'interleaved';
)sql";

// Version 8: each attempt's live figures summed as its steps are stored (docs/schema.md,
// "attempt_live_sums"), so that GET /api/v1/sweeps/{sweep}/live reads a row per trial
// instead of every stored step (security review 2026-12-07, A5: 3.3 s a call at 2M
// steps). A trigger keeps the sums in the step insert's own transaction; a block that
// INSERT OR IGNORE skips (a redelivery) fires nothing, so a step is counted once. The
// sums are those of the step_metrics view: rank 0's measured steps, their tokens and
// step_s (TOTAL, a real), and the highest peak_mem_bytes of any rank and phase. Stored
// steps are summed once here.
constexpr const char* kV8 = R"sql(
CREATE TABLE attempt_live_sums (
  trial_id INTEGER NOT NULL REFERENCES trials (id),
  attempt INTEGER NOT NULL,
  measured_steps INTEGER NOT NULL,
  tokens REAL NOT NULL,
  step_s REAL NOT NULL,
  peak_mem_bytes INTEGER,
  PRIMARY KEY (trial_id, attempt)
) WITHOUT ROWID;
INSERT INTO attempt_live_sums
SELECT trial_id, attempt, TOTAL(rank = 0 AND phase = 'measure'),
       TOTAL(CASE WHEN rank = 0 AND phase = 'measure' THEN tokens END),
       TOTAL(CASE WHEN rank = 0 AND phase = 'measure' THEN step_s END), MAX(peak_mem_bytes)
FROM step_metrics GROUP BY trial_id, attempt;
CREATE TRIGGER step_blocks_live_sums AFTER INSERT ON step_blocks BEGIN
  INSERT INTO attempt_live_sums (trial_id, attempt, measured_steps, tokens, step_s, peak_mem_bytes)
  SELECT NEW.trial_id, NEW.attempt,
         CASE WHEN NEW.rank = 0 AND NEW.phase = 'measure' THEN COUNT(*) ELSE 0 END,
         CASE WHEN NEW.rank = 0 AND NEW.phase = 'measure' THEN TOTAL(r.value ->> 2) ELSE 0 END,
         CASE WHEN NEW.rank = 0 AND NEW.phase = 'measure' THEN TOTAL(r.value ->> 1) ELSE 0 END,
         MAX(r.value ->> 5)
  FROM json_each(NEW.rows_json) r WHERE true
  ON CONFLICT (trial_id, attempt) DO UPDATE SET
    measured_steps = measured_steps + excluded.measured_steps,
    tokens = tokens + excluded.tokens,
    step_s = step_s + excluded.step_s,
    peak_mem_bytes = CASE WHEN excluded.peak_mem_bytes IS NULL THEN peak_mem_bytes
                          WHEN peak_mem_bytes IS NULL THEN excluded.peak_mem_bytes
                          ELSE MAX(peak_mem_bytes, excluded.peak_mem_bytes) END;
END;
)sql";

}  // namespace

const std::vector<Migration>& SchemaMigrations() {
  static const std::vector<Migration> migrations = {
      {1, "core tables: sweeps, variants, trials, attempts, workers, step_metrics, "
          "trial_summaries, events", kV1},
      {2, "attempts.simulated; indexes for recovery and per-trial reads; views "
          "trial_results and sweep_progress", kV2},
      {3, "steps stored as blocks (step_blocks); step_metrics a view with a row per step", kV3},
      {4, "calibrations: the run-to-run noise bakeoff calibrate measured per workload", kV4},
      {5, "workers.secret_sha256: a worker's name survives a restart only with its secret", kV5},
      {6, "step_metrics.turn: a lockstep trial's turn number per measured step", kV6},
      {7, "calibrations.sweep_order: the order (interleaved or lockstep) a calibration measured", kV7},
      {8, "attempt_live_sums: each attempt's live figures, summed as its steps are stored", kV8},
  };
  return migrations;
}

Result<int> ReadSchemaVersion(SqliteConnection& db) {
  Result<int64_t> version = db.QueryInt64("PRAGMA user_version");
  if (!version.ok()) return version.status();
  return static_cast<int>(*version);
}

namespace {

// InvalidArgument when `version` is newer than this build's schema.
Status CheckNotNewer(const SqliteConnection& db, int version) {
  if (version <= kLatestSchemaVersion) return Status::Ok();
  return Status::InvalidArgument(
      "results database " + db.path() + " has schema version " + std::to_string(version) +
      ", newer than this Bakeoff understands (" + std::to_string(kLatestSchemaVersion) +
      "); use a newer bakeoff or another file");
}

}  // namespace

Status MigrateSchema(SqliteConnection& db, double applied_at_s, int target_version) {
  assert(target_version >= 0 && target_version <= kLatestSchemaVersion);
  Result<int> before = ReadSchemaVersion(db);
  if (!before.ok()) return before.status();
  if (*before >= target_version && *before <= kLatestSchemaVersion) return Status::Ok();
  for (const Migration& migration : SchemaMigrations()) {
    if (migration.version > target_version) break;
    // Read the version inside the write transaction, so two processes opening the same
    // new file cannot both apply a migration.
    SqliteTransaction transaction(db);
    BAKEOFF_RETURN_IF_ERROR(transaction.begin_status());
    Result<int> current = ReadSchemaVersion(db);
    if (!current.ok()) return current.status();
    BAKEOFF_RETURN_IF_ERROR(CheckNotNewer(db, *current));
    if (*current >= migration.version) continue;
    if (*current != migration.version - 1) {
      return Status::Internal("results database " + db.path() + ": schema version " +
                              std::to_string(*current) + " skips migrations");
    }
    Status applied = db.Exec(migration.sql);
    if (!applied.ok()) {
      return applied.WithContext("applying schema migration " +
                                 std::to_string(migration.version));
    }
    Result<SqliteStatement> record = db.Prepare(
        "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)");
    if (!record.ok()) return record.status();
    record->BindAll(static_cast<int64_t>(migration.version), migration.description, applied_at_s);
    BAKEOFF_RETURN_IF_ERROR(record->Run());
    BAKEOFF_RETURN_IF_ERROR(
        db.Exec("PRAGMA user_version = " + std::to_string(migration.version)));
    BAKEOFF_RETURN_IF_ERROR(transaction.Commit());
  }
  Result<int> final_version = ReadSchemaVersion(db);
  if (!final_version.ok()) return final_version.status();
  return CheckNotNewer(db, *final_version);
}

}  // namespace bakeoff::metrics
