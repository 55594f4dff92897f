#include "metrics/report/report_loader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "experiments/spec/calibration_sweep.h"
#include "experiments/spec/expanded_sweep.h"
#include "experiments/spec/sweep_spec.h"
#include "metrics/store/store_records.h"
#include "metrics/store/calibrations.h"
#include "metrics/store/sqlite_statement.h"
#include "protocol/trainer_event.h"

namespace bakeoff::metrics {
namespace {

using nlohmann::json;

// Runs `sql` with `key` bound to its one parameter and calls `row` for each row.
// `what` names the rows in an error ("trial summaries").
template <typename Key, typename Row>
Status ForEachRow(SqliteConnection& db, const char* sql, const Key& key, const std::string& what, Row row) {
  Result<SqliteStatement> s = db.Prepare(sql);
  if (!s.ok()) return s.status().WithContext("reading " + what);
  s->Bind(1, key);
  while (true) {
    Result<bool> more = s->Step();
    if (!more.ok()) return more.status().WithContext("reading " + what);
    if (!*more) return Status::Ok();
    row(*s);
  }
}

json ParseJson(const std::string& text) {
  if (text.empty()) return nullptr;
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? json(nullptr) : value;
}

Result<std::int64_t> ResolveSweep(SqliteConnection& db, const std::string& sweep) {
  std::optional<std::int64_t> id;
  auto take = [&](const SqliteStatement& s) { id = s.Int64(0); };
  if (std::optional<std::int64_t> try_id = SweepIdToTry(sweep)) {
    BAKEOFF_RETURN_IF_ERROR(ForEachRow(db, "SELECT id FROM sweeps WHERE id = ?", *try_id, "sweeps", take));
    if (id) return *id;
  }
  BAKEOFF_RETURN_IF_ERROR(ForEachRow(db, "SELECT id FROM sweeps WHERE name = ? ORDER BY id DESC LIMIT 1",
                                     sweep, "sweeps", take));
  if (id) return *id;
  return Status::NotFound("no sweep with id or name '" + sweep +
                          "' in the results database; list them with "
                          "`bakeoff query \"SELECT id, name, state FROM sweeps\"`");
}

// A stored axis value as it appears in variant keys.
std::string ValueText(const json& value) { return spec::CanonicalValue(value); }

}  // namespace

Result<std::unique_ptr<SqliteConnection>> OpenResultsReadOnly(const std::string& db_path) {
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) {
    return Status::NotFound("results database " + db_path +
                            " does not exist; pass --db FILE (the coordinator's --db) or run "
                            "`bakeoff local` to create one");
  }
  auto db = SqliteConnection::Open(db_path, SQLITE_OPEN_READONLY);
  if (!db.ok()) return db.status();
  BAKEOFF_RETURN_IF_ERROR((*db)->Exec("PRAGMA busy_timeout = 5000"));
  Result<std::int64_t> tables =
      (*db)->QueryInt64("SELECT COUNT(*) FROM sqlite_master WHERE type IN ('table', 'view') AND "
                        "name IN ('sweeps', 'variants', 'trials', 'attempts', 'trial_summaries', "
                        "'step_metrics')");  // step_metrics: a view from schema version 3
  if (!tables.ok()) return tables.status();
  if (*tables != 6) {
    return Status::InvalidArgument(db_path + " is not a Bakeoff results database (no sweeps, "
                                   "variants and trials tables); pass the coordinator's --db file");
  }
  return std::move(*db);
}

Result<ReportInput> LoadReportInputFromFile(const std::string& db_path,
                                            const std::string& sweep_id_or_name) {
  auto db = OpenResultsReadOnly(db_path);
  if (!db.ok()) return db.status();
  return LoadReportInput(**db, sweep_id_or_name);
}

Result<ReportInput> LoadReportInput(SqliteConnection& db, const std::string& sweep_id_or_name) {
  // One read transaction, so the tables agree with each other while the coordinator
  // writes; a caller's open transaction is left alone.
  struct EndRead {
    SqliteConnection& db;
    bool active;
    ~EndRead() {
      if (active) static_cast<void>(db.Exec("COMMIT"));
    }
  } end_read{db, !db.InTransaction() && db.Exec("BEGIN").ok()};

  Result<std::int64_t> sweep_id = ResolveSweep(db, sweep_id_or_name);
  if (!sweep_id.ok()) return sweep_id.status();
  ReportInput input;
  input.sweep_id = std::to_string(*sweep_id);

  json spec;
  BAKEOFF_RETURN_IF_ERROR(ForEachRow(db, "SELECT name, question, spec_json FROM sweeps WHERE id = ?",
                                     *sweep_id, "the sweep", [&](const SqliteStatement& s) {
                                       input.sweep_name = s.Text(0);
                                       input.question = s.Text(1);
                                       spec = ParseJson(s.Text(2));
                                     }));
  if (spec.is_object()) {
    // Read back through the spec library, which wrote it (spec::ToJson).
    auto stored = spec::SweepSpecFromJson(spec);
    if (!stored.ok()) return stored.status();
    input.order = spec::OrderName(stored->order);
    if (stored->adaptive) {
      AdaptiveDesignInput design;
      design.min_pairs = stored->adaptive->min;
      design.max_pairs = stored->adaptive->max;
      design.ci_half_width = stored->adaptive->ci_half_width;
      input.adaptive = design;
    }
    for (const auto& [axis, value] : stored->baseline) input.baseline[axis] = ValueText(value);
    auto calibration = LatestCalibration(db, spec::CalibrationKey(*stored));
    if (!calibration.ok()) return calibration.status().WithContext("reading calibrations");
    if (*calibration) {
      const CalibrationRecord& c = **calibration;
      input.calibration = CalibrationInput{c.id, c.created_at, c.calibrated_sweep, c.host,
                                           static_cast<int>(c.pairs), c.sd_log_ratio};
    }
    for (const auto& parameter : stored->parameters) {
      if (!parameter.Varies()) continue;
      AxisInput axis;
      axis.name = parameter.name;
      for (const json& v : parameter.values) axis.values.push_back(ValueText(v));
      input.axes.push_back(std::move(axis));  // random axes get their values below
    }
  }

  {
    const char* sql =
        "SELECT key, params_json, counterpart_key, is_baseline, counterpart_excluded, "
        "trainer_config_json FROM variants WHERE sweep_id = ? ORDER BY ordinal";
    BAKEOFF_RETURN_IF_ERROR(ForEachRow(db, sql, *sweep_id, "variants", [&](const SqliteStatement& s) {
      VariantInput v;
      v.key = s.Text(0);
      json params = ParseJson(s.Text(1));
      if (params.is_object()) {
        for (const auto& [name, value] : params.items()) v.params[name] = ValueText(value);
      }
      v.counterpart_key = s.Text(2);
      v.is_baseline = s.Int64(3) != 0;
      v.counterpart_excluded = s.Int64(4) != 0;
      json config = ParseJson(s.Text(5));
      if (config.is_object() && config.contains("world_size") && config["world_size"].is_number_integer() &&
          config["world_size"].get<std::int64_t>() >= 1) {
        v.world_size = static_cast<int>(config["world_size"].get<std::int64_t>());
      }
      input.variants.push_back(std::move(v));
    }));
  }
  // Axes not described by the spec (no spec_json, or random draws): their values as
  // they occur in the variants, in order.
  if (input.axes.empty() && !input.variants.empty()) {
    for (const auto& [name, value] : input.variants.front().params) input.axes.push_back({name, {}});
  }
  for (AxisInput& axis : input.axes) {
    if (!axis.values.empty()) continue;
    for (const VariantInput& v : input.variants) {
      auto it = v.params.find(axis.name);
      if (it != v.params.end() &&
          std::find(axis.values.begin(), axis.values.end(), it->second) == axis.values.end()) {
        axis.values.push_back(it->second);
      }
    }
  }
  if (!spec.is_object()) {
    // No stored spec: the baseline is what every baseline variant agrees on.
    for (const AxisInput& axis : input.axes) {
      std::set<std::string> values;
      for (const VariantInput& v : input.variants) {
        if (v.is_baseline && v.params.count(axis.name)) values.insert(v.params.at(axis.name));
      }
      // An axis outside the baseline spans several values among baseline variants.
      if (values.size() == 1 && axis.values.size() > 1) {
        input.baseline[axis.name] = *values.begin();
      }
    }
  }

  std::map<std::int64_t, std::size_t> trial_index;
  int simulated = 0;
  {
    const char* sql =
        "SELECT t.id, t.variant_key, t.repeat, t.order_index, t.state, t.outcome, t.reason, "
        "COALESCE(NULLIF(w.name, ''), a.worker_id, ''), COALESCE(a.simulated, 0), "
        "a.ended_at - a.started_at "
        "FROM trials t "
        "LEFT JOIN attempts a ON a.trial_id = t.id AND a.attempt = t.attempts_used "
        "LEFT JOIN workers w ON w.id = a.worker_id "
        "WHERE t.sweep_id = ? ORDER BY t.order_index";
    BAKEOFF_RETURN_IF_ERROR(ForEachRow(db, sql, *sweep_id, "trials", [&](const SqliteStatement& s) {
      TrialInput t;
      t.id = s.Int64(0);
      t.variant_key = s.Text(1);
      t.repeat = static_cast<int>(s.Int64(2));
      t.order_index = static_cast<int>(s.Int64(3));
      t.outcome = TrialStanding::FromText(s.IsNull(5) ? s.Text(4) : s.Text(5));
      t.reason = s.Text(6);
      t.worker = s.Text(7);
      simulated += s.Int64(8) != 0 ? 1 : 0;
      if (!s.IsNull(9) && s.Double(9) >= 0) t.duration_s = s.Double(9);
      trial_index[t.id] = input.trials.size();
      input.trials.push_back(std::move(t));
    }));
  }
  // Rows whose first column is a trial id: `row` gets that trial (others are skipped).
  auto for_each_trial_row = [&](const char* sql, const std::string& what, auto row) {
    return ForEachRow(db, sql, *sweep_id, what, [&](const SqliteStatement& s) {
      auto it = trial_index.find(s.Int64(0));
      if (it != trial_index.end()) row(input.trials[it->second], s);
    });
  };
  if (simulated > 0) {
    input.notes.push_back(std::to_string(simulated) +
                          " trial(s) ran the simulated workload (benchmarks only): their "
                          "figures are not measurements of training");
  }

  {
    const char* sql =
        "SELECT m.trial_id, m.rank, m.startup_s, m.first_step_s, m.warmup_s, "
        "m.step_s_median, m.step_s_p10, m.step_s_p90, m.tokens_per_s, m.flops_per_s, "
        "m.mfu, m.peak_mem_bytes, m.frozen_bytes, m.trainable_bytes, m.grad_bytes, "
        "m.optimizer_bytes, m.comm_s_per_step, m.comm_bytes_per_step, m.applied_json, "
        "m.summary_json "
        "FROM trial_summaries m JOIN trials t "
        "ON t.id = m.trial_id AND m.attempt = t.attempts_used "
        "WHERE t.sweep_id = ? ORDER BY m.trial_id, m.rank";
    BAKEOFF_RETURN_IF_ERROR(for_each_trial_row(sql, "trial summaries", [&](TrialInput& t, const SqliteStatement& s) {
      RankSummary r;
      r.rank = static_cast<int>(s.Int64(1));
      r.startup_s = s.Double(2);
      r.first_step_s = s.Double(3);
      r.warmup_s = s.Double(4);
      r.step_s_median = s.Double(5);
      r.step_s_p10 = s.Double(6);
      r.step_s_p90 = s.Double(7);
      r.tokens_per_s = s.Double(8);
      r.flops_per_s = s.Double(9);
      r.mfu = s.Double(10);
      r.peak_mem_bytes = s.Int64(11);
      r.frozen_bytes = s.OptionalInt64(12);
      r.trainable_bytes = s.OptionalInt64(13);
      r.grad_bytes = s.OptionalInt64(14);
      r.optimizer_bytes = s.OptionalInt64(15);
      r.comm_s_per_step = s.Double(16);
      r.comm_bytes_per_step = s.Double(17);
      if (t.applied.is_null() || r.rank == 0) {
        json applied = ParseJson(s.Text(18));
        if (!applied.is_null()) t.applied = std::move(applied);
      }
      // The summary is kept whole; its `environment` (rank 0's, else the first rank's)
      // says where the trial ran.
      if (t.environment.is_null() || r.rank == 0) {
        // Read as the protocol defines a summary (it was checked so when stored).
        auto summary = protocol::ReadSummaryEvent(ParseJson(s.Text(19)));
        if (summary.ok() && summary->environment) t.environment = *summary->environment;
      }
      // Only succeeded trials' summaries count (a summary may precede a late failure).
      if (t.outcome.Succeeded()) t.ranks.push_back(r);
    }));
  }

  {
    // Per step: the slowest rank's time (ranks wait for each other) and rank 0's loss
    // (the global mean, the same on every rank).
    // One pass over the rows, in step and rank order (a correlated lookup per step cost
    // a scan of the trial's steps per step on the step_metrics view).
    const char* sql =
        "SELECT m.trial_id, m.step, m.step_s, m.loss "
        "FROM step_metrics m JOIN trials t "
        "ON t.id = m.trial_id AND m.attempt = t.attempts_used "
        "WHERE t.sweep_id = ? AND m.phase = 'measure' "
        "ORDER BY m.trial_id, m.step, m.rank";
    BAKEOFF_RETURN_IF_ERROR(for_each_trial_row(sql, "step metrics", [&](TrialInput& t, const SqliteStatement& s) {
      const std::int64_t step = s.Int64(1);
      if (t.steps.empty() || t.steps.back().step != step) t.steps.push_back(StepSample{step, s.Double(2), {}});
      StepSample& sample = t.steps.back();
      sample.step_s = std::max(sample.step_s, s.Double(2));
      if (!sample.loss && !s.IsNull(3)) sample.loss = s.Double(3);
    }));
  }
  return input;
}

}  // namespace bakeoff::metrics
