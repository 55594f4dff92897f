#include "metrics/report/report_loader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "experiments/spec/expanded_sweep.h"
#include "experiments/spec/sweep_spec.h"
#include "protocol/trainer_event.h"

namespace bakeoff::metrics {
namespace {

using nlohmann::json;

// One prepared statement that finalizes itself; throws nothing.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Status status(const std::string& what) const {
    if (rc_ == SQLITE_OK || rc_ == SQLITE_ROW || rc_ == SQLITE_DONE) return Status::Ok();
    return Status::IoError("reading " + what + " from the results database: " + sqlite3_errmsg(db_));
  }
  void Bind(int index, std::int64_t value) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_int64(stmt_, index, value);
  }
  void Bind(int index, const std::string& value) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_text(stmt_, index, value.c_str(), -1, SQLITE_TRANSIENT);
  }
  // True while a row is available; check status() afterwards.
  bool Step() {
    if (rc_ != SQLITE_OK && rc_ != SQLITE_ROW) return false;
    rc_ = sqlite3_step(stmt_);
    if (rc_ == SQLITE_ROW) return true;
    if (rc_ == SQLITE_DONE) rc_ = SQLITE_OK;
    return false;
  }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const {
    const unsigned char* text = sqlite3_column_text(stmt_, col);
    return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

json ParseJson(const std::string& text) {
  if (text.empty()) return nullptr;
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? json(nullptr) : value;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

Result<std::int64_t> ResolveSweep(sqlite3* db, const std::string& sweep) {
  if (AllDigits(sweep) && sweep.size() < 18) {
    Statement by_id(db, "SELECT id FROM sweeps WHERE id = ?");
    by_id.Bind(1, static_cast<std::int64_t>(std::stoll(sweep)));
    if (by_id.Step()) return by_id.Int(0);
    BAKEOFF_RETURN_IF_ERROR(by_id.status("sweeps"));
  }
  Statement by_name(db, "SELECT id FROM sweeps WHERE name = ? ORDER BY id DESC LIMIT 1");
  by_name.Bind(1, sweep);
  if (by_name.Step()) return by_name.Int(0);
  BAKEOFF_RETURN_IF_ERROR(by_name.status("sweeps"));
  return Status::NotFound("no sweep with id or name '" + sweep +
                          "' in the results database; list them with "
                          "`bakeoff query \"SELECT id, name, state FROM sweeps\"`");
}

// A stored axis value as it appears in variant keys.
std::string ValueText(const json& value) { return spec::CanonicalValue(value); }

}  // namespace

Result<ReadOnlyDatabase> ReadOnlyDatabase::Open(const std::string& db_path) {
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) {
    return Status::NotFound("results database " + db_path +
                            " does not exist; pass --db FILE (the coordinator's --db) or run "
                            "`bakeoff local` to create one");
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status::IoError("cannot open results database " + db_path + " read-only: " + message);
  }
  sqlite3_busy_timeout(db, 5000);
  ReadOnlyDatabase database(db, db_path);
  Statement check(db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                      "('sweeps', 'variants', 'trials', 'attempts', 'trial_summaries', "
                      "'step_metrics')");
  if (!check.Step() || check.Int(0) != 6) {
    Status status = check.status("the schema");
    if (!status.ok()) return status.WithContext(db_path);
    return Status::InvalidArgument(db_path + " is not a Bakeoff results database (no sweeps, "
                                   "variants and trials tables); pass the coordinator's --db file");
  }
  return database;
}

ReadOnlyDatabase::ReadOnlyDatabase(ReadOnlyDatabase&& other) noexcept
    : db_(other.db_), path_(std::move(other.path_)) {
  other.db_ = nullptr;
}

ReadOnlyDatabase& ReadOnlyDatabase::operator=(ReadOnlyDatabase&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = other.db_;
    path_ = std::move(other.path_);
    other.db_ = nullptr;
  }
  return *this;
}

ReadOnlyDatabase::~ReadOnlyDatabase() { sqlite3_close(db_); }

Result<ReportInput> LoadReportInputFromFile(const std::string& db_path,
                                            const std::string& sweep_id_or_name) {
  Result<ReadOnlyDatabase> db = ReadOnlyDatabase::Open(db_path);
  if (!db.ok()) return db.status();
  return LoadReportInput(db->handle(), sweep_id_or_name);
}

Result<ReportInput> LoadReportInput(sqlite3* db, const std::string& sweep_id_or_name) {
  // One read transaction, so the tables agree with each other while the coordinator
  // writes; a caller's open transaction is left alone.
  const bool own_transaction = sqlite3_get_autocommit(db) != 0 &&
                               sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK;
  struct EndRead {
    sqlite3* db;
    bool active;
    ~EndRead() {
      if (active) sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    }
  } end_read{db, own_transaction};

  Result<std::int64_t> sweep_id = ResolveSweep(db, sweep_id_or_name);
  if (!sweep_id.ok()) return sweep_id.status();
  ReportInput input;
  input.sweep_id = std::to_string(*sweep_id);

  json spec;
  {
    Statement s(db, "SELECT name, question, spec_json FROM sweeps WHERE id = ?");
    s.Bind(1, *sweep_id);
    if (s.Step()) {
      input.sweep_name = s.Text(0);
      input.question = s.Text(1);
      spec = ParseJson(s.Text(2));
    }
    BAKEOFF_RETURN_IF_ERROR(s.status("the sweep"));
  }
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
    for (const auto& parameter : stored->parameters) {
      if (!parameter.Varies()) continue;
      AxisInput axis;
      axis.name = parameter.name;
      for (const json& v : parameter.values) axis.values.push_back(ValueText(v));
      input.axes.push_back(std::move(axis));  // random axes get their values below
    }
  }

  {
    Statement s(db,
                "SELECT key, params_json, counterpart_key, is_baseline, counterpart_excluded, "
                "trainer_config_json FROM variants WHERE sweep_id = ? ORDER BY ordinal");
    s.Bind(1, *sweep_id);
    while (s.Step()) {
      VariantInput v;
      v.key = s.Text(0);
      json params = ParseJson(s.Text(1));
      if (params.is_object()) {
        for (const auto& [name, value] : params.items()) v.params[name] = ValueText(value);
      }
      v.counterpart_key = s.Text(2);
      v.is_baseline = s.Int(3) != 0;
      v.counterpart_excluded = s.Int(4) != 0;
      json config = ParseJson(s.Text(5));
      if (config.is_object() && config.contains("world_size") && config["world_size"].is_number_integer() &&
          config["world_size"].get<std::int64_t>() >= 1) {
        v.world_size = static_cast<int>(config["world_size"].get<std::int64_t>());
      }
      input.variants.push_back(std::move(v));
    }
    BAKEOFF_RETURN_IF_ERROR(s.status("variants"));
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
    Statement s(db,
                "SELECT t.id, t.variant_key, t.repeat, t.order_index, t.state, t.outcome, t.reason, "
                "COALESCE(NULLIF(w.name, ''), a.worker_id, ''), COALESCE(a.simulated, 0), "
                "a.ended_at - a.started_at "
                "FROM trials t "
                "LEFT JOIN attempts a ON a.trial_id = t.id AND a.attempt = t.attempts_used "
                "LEFT JOIN workers w ON w.id = a.worker_id "
                "WHERE t.sweep_id = ? ORDER BY t.order_index");
    s.Bind(1, *sweep_id);
    while (s.Step()) {
      TrialInput t;
      t.id = s.Int(0);
      t.variant_key = s.Text(1);
      t.repeat = static_cast<int>(s.Int(2));
      t.order_index = static_cast<int>(s.Int(3));
      t.outcome = s.IsNull(5) ? s.Text(4) : s.Text(5);
      t.reason = s.Text(6);
      t.worker = s.Text(7);
      simulated += s.Int(8) != 0 ? 1 : 0;
      if (!s.IsNull(9) && s.Real(9) >= 0) t.duration_s = s.Real(9);
      trial_index[t.id] = input.trials.size();
      input.trials.push_back(std::move(t));
    }
    BAKEOFF_RETURN_IF_ERROR(s.status("trials"));
  }
  if (simulated > 0) {
    input.notes.push_back(std::to_string(simulated) +
                          " trial(s) ran the simulated workload (benchmarks only): their "
                          "figures are not measurements of training");
  }

  {
    Statement s(db,
                "SELECT m.trial_id, m.rank, m.startup_s, m.first_step_s, m.warmup_s, "
                "m.step_s_median, m.step_s_p10, m.step_s_p90, m.tokens_per_s, m.flops_per_s, "
                "m.mfu, m.peak_mem_bytes, m.frozen_bytes, m.trainable_bytes, m.grad_bytes, "
                "m.optimizer_bytes, m.comm_s_per_step, m.comm_bytes_per_step, m.applied_json, "
                "m.summary_json "
                "FROM trial_summaries m JOIN trials t "
                "ON t.id = m.trial_id AND m.attempt = t.attempts_used "
                "WHERE t.sweep_id = ? ORDER BY m.trial_id, m.rank");
    s.Bind(1, *sweep_id);
    while (s.Step()) {
      auto it = trial_index.find(s.Int(0));
      if (it == trial_index.end()) continue;
      TrialInput& t = input.trials[it->second];
      RankSummary r;
      r.rank = static_cast<int>(s.Int(1));
      r.startup_s = s.Real(2);
      r.first_step_s = s.Real(3);
      r.warmup_s = s.Real(4);
      r.step_s_median = s.Real(5);
      r.step_s_p10 = s.Real(6);
      r.step_s_p90 = s.Real(7);
      r.tokens_per_s = s.Real(8);
      r.flops_per_s = s.Real(9);
      r.mfu = s.Real(10);
      r.peak_mem_bytes = s.Int(11);
      auto held = [&](int column) { return s.IsNull(column) ? std::nullopt : std::optional<std::int64_t>(s.Int(column)); };
      r.frozen_bytes = held(12);
      r.trainable_bytes = held(13);
      r.grad_bytes = held(14);
      r.optimizer_bytes = held(15);
      r.comm_s_per_step = s.Real(16);
      r.comm_bytes_per_step = s.Real(17);
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
      if (t.outcome == "succeeded") t.ranks.push_back(r);
    }
    BAKEOFF_RETURN_IF_ERROR(s.status("trial summaries"));
  }

  {
    // Per step: the slowest rank's time (ranks wait for each other) and rank 0's loss
    // (the global mean, the same on every rank).
    Statement s(db,
                "SELECT m.trial_id, m.step, MAX(m.step_s), "
                "(SELECT z.loss FROM step_metrics z WHERE z.trial_id = m.trial_id AND "
                " z.attempt = m.attempt AND z.phase = 'measure' AND z.step = m.step "
                " AND z.loss IS NOT NULL ORDER BY z.rank LIMIT 1) "
                "FROM step_metrics m JOIN trials t "
                "ON t.id = m.trial_id AND m.attempt = t.attempts_used "
                "WHERE t.sweep_id = ? AND m.phase = 'measure' "
                "GROUP BY m.trial_id, m.step ORDER BY m.trial_id, m.step");
    s.Bind(1, *sweep_id);
    while (s.Step()) {
      auto it = trial_index.find(s.Int(0));
      if (it == trial_index.end()) continue;
      StepSample sample;
      sample.step = s.Int(1);
      sample.step_s = s.Real(2);
      if (!s.IsNull(3)) sample.loss = s.Real(3);
      input.trials[it->second].steps.push_back(sample);
    }
    BAKEOFF_RETURN_IF_ERROR(s.status("step metrics"));
  }
  return input;
}

}  // namespace bakeoff::metrics
