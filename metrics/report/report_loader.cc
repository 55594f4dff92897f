#include "metrics/report/report_loader.h"

#include <algorithm>
#include <map>
#include <set>

#include "experiments/sweep/calibration_sweep.h"
#include "experiments/sweep/expanded_sweep.h"
#include "experiments/sweep/sweep_spec.h"
#include "metrics/store/store_records.h"

namespace bakeoff::metrics {
namespace {

using nlohmann::json;

// A stored axis value as it appears in variant keys.
std::string ValueText(const json& value) { return spec::CanonicalValue(value); }

// The stored sweep's design: order, adaptive repeats, baseline, the calibration of its
// workload, and the axes that vary (random axes get their values from the variants).
Status ReadDesign(ResultsReader& reader, const json& stored_spec, ReportInput& input) {
  // Read back through the spec library, which wrote it (spec::ToJson).
  auto stored = spec::SweepSpecFromJson(stored_spec);
  if (!stored.ok()) return stored.status();
  input.order = spec::OrderName(stored->order);
  if (stored->adaptive) {
    input.adaptive = AdaptiveDesignInput{stored->adaptive->min, stored->adaptive->max,
                                         stored->adaptive->ci_half_width};
  }
  for (const auto& [axis, value] : stored->baseline) input.baseline[axis] = ValueText(value);
  // The noise of the sweep's own order: lockstep pairs and whole-trial pairs differ.
  auto calibration = reader.LatestCalibration(spec::CalibrationKey(*stored),
                                              stored->order == spec::Order::kLockstep ? "lockstep" : "interleaved");
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
    input.axes.push_back(std::move(axis));
  }
  return Status::Ok();
}

VariantInput ToVariantInput(const VariantRecord& record) {
  VariantInput v;
  v.key = record.key;
  if (record.params.is_object()) {
    for (const auto& [name, value] : record.params.items()) v.params[name] = ValueText(value);
  }
  v.counterpart_key = record.counterpart_key;
  v.is_baseline = record.is_baseline;
  v.counterpart_excluded = record.counterpart_excluded;
  const json& size = record.trainer_config.is_object() ? record.trainer_config.value("world_size", json())
                                                       : json();
  if (size.is_number_integer() && size.get<std::int64_t>() >= 1) v.world_size = static_cast<int>(size.get<std::int64_t>());
  return v;
}

RankSummary ToRankSummary(const SummaryRecord& summary) {
  RankSummary r;
  r.rank = static_cast<int>(summary.rank);
  r.figures = summary.figures;
  return r;
}

// A trial as the report reads it: where it stands, where its final attempt ran and for
// how long, and (once it succeeded) its ranks' figures; `applied` and `environment` are
// rank 0's, else the first rank's.
TrialInput ToTrialInput(const TrialResult& result, const std::map<std::string, std::string>& worker_names) {
  const TrialRecord& trial = result.trial;
  TrialInput t;
  t.id = trial.id;
  t.variant_key = trial.variant_key;
  t.repeat = static_cast<int>(trial.repeat);
  t.order_index = static_cast<int>(trial.order_index);
  t.outcome.outcome = trial.outcome;
  if (!trial.outcome) t.outcome.state = TrialStateName(trial.state);
  t.reason = trial.reason;
  if (const auto& attempt = result.attempt) {
    auto name = worker_names.find(attempt->worker_id);
    t.worker = name != worker_names.end() && !name->second.empty() ? name->second : attempt->worker_id;
    if (attempt->started_at && attempt->ended_at && *attempt->ended_at - *attempt->started_at >= 0) {
      t.duration_s = *attempt->ended_at - *attempt->started_at;
    }
  }
  for (const SummaryRecord& summary : result.summaries) {
    const bool first_choice = summary.rank == 0;
    if (summary.figures.applied && (t.applied.is_null() || first_choice)) t.applied = *summary.figures.applied;
    if (summary.figures.environment && (t.environment.is_null() || first_choice)) {
      t.environment = *summary.figures.environment;
    }
    if (auto c = summary.body.find("compile");
        c != summary.body.end() && c->is_object() && !c->empty() && (t.compile.is_null() || first_choice)) {
      t.compile = *c;
    }
    // Only succeeded trials' summaries count (a summary may precede a late failure).
    if (t.outcome.Succeeded()) t.ranks.push_back(ToRankSummary(summary));
  }
  return t;
}

}  // namespace

Result<ReportInput> LoadReportInputFromFile(const std::string& db_path,
                                            const std::string& sweep_id_or_name) {
  auto reader = ResultsReader::Open(db_path);
  if (!reader.ok()) return reader.status();
  return LoadReportInput(**reader, sweep_id_or_name);
}

Result<ReportInput> LoadReportInput(ResultsReader& reader, const std::string& sweep_id_or_name) {
  // One read transaction, so the tables agree with each other while the coordinator writes.
  ResultsReader::Snapshot snapshot = reader.BeginSnapshot();
  Result<SweepRecord> sweep = reader.FindSweep(sweep_id_or_name, ResultsReader::Counts::kSkip);
  if (!sweep.ok()) return sweep.status();
  ReportInput input;
  input.sweep_id = std::to_string(sweep->id);
  input.sweep_name = sweep->name;
  input.question = sweep->question;
  const bool has_spec = sweep->spec.is_object();
  if (has_spec) BAKEOFF_RETURN_IF_ERROR(ReadDesign(reader, sweep->spec, input));

  auto variants = reader.ListVariants(sweep->id);
  if (!variants.ok()) return variants.status().WithContext("reading variants");
  for (const VariantRecord& v : *variants) input.variants.push_back(ToVariantInput(v));
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
  if (!has_spec) {
    // No stored spec: the baseline is what every baseline variant agrees on.
    for (const AxisInput& axis : input.axes) {
      std::set<std::string> values;
      for (const VariantInput& v : input.variants) {
        if (v.is_baseline && v.params.count(axis.name)) values.insert(v.params.at(axis.name));
      }
      // An axis outside the baseline spans several values among baseline variants.
      if (values.size() == 1 && axis.values.size() > 1) input.baseline[axis.name] = *values.begin();
    }
  }

  auto workers = reader.ListWorkers();
  if (!workers.ok()) return workers.status().WithContext("reading workers");
  std::map<std::string, std::string> worker_names;
  for (const WorkerRecord& w : *workers) worker_names[w.id] = w.name;
  auto trials = reader.ListTrialResults(sweep->id);
  if (!trials.ok()) return trials.status().WithContext("reading trials");
  std::map<std::int64_t, std::size_t> trial_index;
  int simulated = 0;
  for (const TrialResult& result : *trials) {
    simulated += result.attempt && result.attempt->simulated ? 1 : 0;
    trial_index[result.trial.id] = input.trials.size();
    input.trials.push_back(ToTrialInput(result, worker_names));
  }
  if (simulated > 0) {
    input.notes.push_back(std::to_string(simulated) +
                          " trial(s) ran the simulated workload (benchmarks only): their "
                          "figures are not measurements of training");
  }

  auto steps = reader.MeasuredSteps(sweep->id);
  if (!steps.ok()) return steps.status().WithContext("reading step metrics");
  for (const MeasuredStep& step : *steps) {
    auto it = trial_index.find(step.trial_id);
    if (it != trial_index.end()) input.trials[it->second].steps.push_back({step.step, step.step_s, step.loss, step.tokens, step.turn});
  }
  return input;
}

}  // namespace bakeoff::metrics
