// The JSON rendering of a report: every computed figure, machine-readable
// (report_renderer.h). Absent figures are null; ratios are plain numbers.
#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

using nlohmann::json;

template <typename T>
json OrNull(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json FigureJson(const RatioFigure& figure) {
  return {{"value", figure.value}, {"ci_low", OrNull(figure.low)}, {"ci_high", OrNull(figure.high)}};
}

json ComparisonJson(const Comparison& c) {
  json out = {
      {"status", ComparisonStatusName(c.status)},
      {"note", c.note},
  };
  if (c.status == Comparison::Status::kCompared) {
    out["speedup"] = FigureJson(c.speedup);
    out["interval_method"] = IntervalMethodName(c.method);
    out["variant_trials"] = c.variant_trials;
    out["counterpart_trials"] = c.counterpart_trials;
    out["pairs"] = c.pairs;
    out["df"] = OrNull(c.df);
    out["verdict"] = VerdictName(c.verdict);
    out["no_measurable_difference"] = OrNull(c.no_measurable_difference);
  }
  out["memory"] = {{"variant_peak_bytes", OrNull(c.variant_peak_bytes)},
                   {"counterpart_peak_bytes", OrNull(c.counterpart_peak_bytes)},
                   {"relative", OrNull(c.memory_relative)},
                   {"compression_ratio", OrNull(c.compression_ratio)}};
  out["warmup"] = {{"first_step_delta_s", OrNull(c.first_step_delta_s)},
                   {"warmup_delta_s", OrNull(c.warmup_delta_s)},
                   {"step_saving_s", OrNull(c.step_saving_s)},
                   {"break_even", OrNull(c.break_even)},
                   {"break_even_steps", OrNull(c.break_even_steps)}};
  json costs = json::array();
  for (const CompileCost& cost : c.compile_costs) {
    costs.push_back({{"compile_cache", cost.cache},
                     {"trials", cost.trials},
                     {"counterpart_trials", cost.counterpart_trials},
                     {"warmup_delta_s", OrNull(cost.warmup_delta_s)},
                     {"note", cost.note.empty() ? json(nullptr) : json(cost.note)},
                     {"break_even", OrNull(cost.break_even)},
                     {"break_even_steps", OrNull(cost.break_even_steps)}});
  }
  out["warmup"]["by_compile_cache"] = std::move(costs);
  out["loss_parity"] = {{"common_steps", c.loss_common_steps},
                        {"max_relative_deviation", OrNull(c.loss_max_deviation)},
                        {"at_step", c.loss_max_deviation ? json(c.loss_at_step) : json(nullptr)},
                        {"expected", c.loss_parity_expected},
                        {"note", c.loss_parity_note},
                        {"flagged", c.loss_flagged}};
  if (c.lockstep_pairs.empty()) {
    out["lockstep"] = nullptr;
  } else {
    json pairs = json::array();
    for (const LockstepPair& p : c.lockstep_pairs) {
      pairs.push_back({{"repeat", p.repeat},
                       {"basis", LockstepBasisName(p.basis)},
                       {"ratio", OrNull(p.ratio)},
                       {"paired_steps", p.paired_steps},
                       {"unpaired_steps", p.unpaired_steps},
                       {"step_log_ratio_iqr", OrNull(p.step_iqr)},
                       {"note", p.note.empty() ? json(nullptr) : json(p.note)}});
    }
    out["lockstep"] = {{"pairs_in_lockstep", c.pairs_in_lockstep},
                       {"within_pair_iqr", OrNull(c.within_pair_iqr)},
                       {"pairs", std::move(pairs)}};
  }
  out["repeats"] = {{"sd_log_ratio", OrNull(c.sd_log_ratio)},
                    {"needed", OrNull(c.repeats_needed)},
                    {"needed_from_assumed_sd", c.repeats_needed_assumed},
                    {"more_needed", c.needs_more_repeats}};
  json workers = json::array();
  for (const WorkerEffect& w : c.by_worker) {
    workers.push_back({{"worker", w.worker}, {"speedup", w.speedup},
                       {"variant_trials", w.variant_trials},
                       {"counterpart_trials", w.counterpart_trials}});
  }
  out["by_worker"] = std::move(workers);
  out["environment_difference"] = c.environment_difference.empty() ? json(nullptr) : json(c.environment_difference);
  out["worker_confound"] = c.worker_confound.empty() ? json(nullptr) : json(c.worker_confound);
  return out;
}

json AdaptiveJson(const AdaptiveVariant& a) {
  json comparisons = json::array();
  for (const AdaptiveComparison& c : a.comparisons) {
    comparisons.push_back(
        {{"against", c.against}, {"held", c.held}, {"stopped", c.stopped}, {"pairs", c.pairs}, {"reason", c.reason}});
  }
  return {{"stopped", a.stopped},
          {"pairs", a.pairs},
          {"max_pairs", a.max_pairs},
          {"reason", a.reason},
          {"trials_not_run", a.trials_not_run},
          {"comparisons", comparisons}};
}

json VariantJson(const VariantReport& v, double confidence) {
  json loss = json::array();
  for (const auto& [step, value] : v.loss_curve) loss.push_back({step, value});
  json steps = nullptr;
  if (v.step_times.count > 0) {
    const StepDistribution& d = v.step_times;
    steps = {{"count", d.count}, {"min", d.min}, {"p10", d.p10}, {"p25", d.p25}, {"p50", d.p50},
             {"p75", d.p75},     {"p90", d.p90}, {"max", d.max}};
  }
  return {
      {"key", v.key},
      {"params", v.params},
      {"counterpart_key", v.counterpart_key},
      {"is_baseline", v.is_baseline},
      {"counterpart_excluded", v.counterpart_excluded},
      {"excluded", v.excluded},
      {"trials", v.trials},
      {"succeeded", v.succeeded},
      {"unfinished", v.unfinished},
      {"outcomes", v.outcome_counts},
      {"reasons", v.reasons},
      {"tokens_per_s", OrNull(v.tokens_per_s)},
      {"step_s_median", OrNull(v.step_s_median)},
      {"first_step_s", OrNull(v.first_step_s)},
      {"warmup_s", OrNull(v.warmup_s)},
      {"peak_mem_bytes", OrNull(v.peak_mem_bytes)},
      {"held_bytes",
       {{"frozen", OrNull(v.frozen_bytes)},
        {"trainable", OrNull(v.trainable_bytes)},
        {"gradients", OrNull(v.grad_bytes)},
        {"optimizer", OrNull(v.optimizer_bytes)}}},
      {"mfu", OrNull(v.mfu)},
      {"comm_s_per_step", OrNull(v.comm_s_per_step)},
      {"step_times", steps},
      {"loss_curve", loss},
      {"applied", v.applied},
      {"compile", v.compile ? json{{"trials", v.compile->trials},
                                   {"graphs", v.compile->graphs},
                                   {"graph_breaks", v.compile->graph_breaks},
                                   {"recompiles", v.compile->recompiles},
                                   {"cache_hits", v.compile->cache_hits},
                                   {"cache_misses", v.compile->cache_misses},
                                   {"graph_break_reasons", v.compile->break_reasons}}
                            : json(nullptr)},
      {"environments", v.environments},
      {"fell_back", v.fell_back},
      {"fallback_reason", v.fallback_reason},
      {"noisy_trials", v.noisy_trials},
      {"workers", v.workers},
      {"verdict", VerdictSentence(v, confidence)},
      {"comparison", ComparisonJson(v.comparison)},
      {"adaptive", v.adaptive ? AdaptiveJson(*v.adaptive) : json(nullptr)},
  };
}

}  // namespace

nlohmann::json ReportToJson(const Report& report) {
  json variants = json::array();
  for (const VariantReport& v : report.variants) variants.push_back(VariantJson(v, report.options.confidence));
  json axes = json::array();
  for (const AxisInput& a : report.axes) axes.push_back({{"name", a.name}, {"values", a.values}});
  json axis_comparisons = json::array();
  for (const AxisComparison& a : report.axis_comparisons) {
    axis_comparisons.push_back({{"axis", a.axis}, {"value", a.value}, {"reference", a.reference},
                                {"held", a.held}, {"variant", a.variant_key},
                                {"counterpart", a.counterpart_key},
                                {"comparison", ComparisonJson(a.comparison)}});
  }
  json marginals = json::array();
  for (const MarginalEffect& m : report.marginals) {
    marginals.push_back({{"axis", m.axis}, {"value", m.value}, {"reference", m.reference},
                         {"speedup", FigureJson(m.speedup)},
                         {"interval_method", IntervalMethodName(m.method)}, {"df", OrNull(m.df)},
                         {"verdict", VerdictName(m.verdict)}, {"pairs", m.pairs},
                         {"min_pair", m.min_pair}, {"max_pair", m.max_pair},
                         {"worker_confound", m.worker_confound.empty() ? json(nullptr) : json(m.worker_confound)}});
  }
  json iso = json::array();
  for (const IsoMemoryRow& row : report.iso_memory) {
    iso.push_back({{"setting", row.setting},
                   {"variant_key", row.variant_key},
                   {"micro_batch", row.micro_batch},
                   {"tokens_per_s", row.tokens_per_s},
                   {"counterpart_setting", row.counterpart_setting},
                   {"counterpart_variant_key", row.counterpart_variant_key},
                   {"counterpart_micro_batch", row.counterpart_micro_batch},
                   {"speedup", row.speedup ? FigureJson(*row.speedup) : json(nullptr)}});
  }
  json trials = json::array();
  for (const TrialView& t : report.trials) {
    trials.push_back({{"id", t.id},
                      {"variant_key", t.variant_key},
                      {"repeat", t.repeat},
                      {"order_index", t.order_index},
                      {"worker", t.worker},
                      {"outcome", t.outcome.Text()},
                      {"reason", t.reason},
                      {"tokens_per_s", OrNull(t.tokens_per_s)},
                      {"step_s_median", OrNull(t.step_s_median)},
                      {"step_cv", OrNull(t.step_cv)},
                      {"noisy", t.noisy},
                      {"peak_mem_bytes", OrNull(t.peak_mem_bytes)},
                      {"first_step_s", OrNull(t.first_step_s)},
                      {"warmup_s", OrNull(t.warmup_s)},
                      {"applied", t.applied},
                      {"environment", t.environment},
                      {"fell_back", t.fell_back},
                      {"fallback_reason", t.fallback_reason}});
  }
  const ReportOptions& o = report.options;
  return {
      {"format", "bakeoff.report/1"},
      // The answer first, as in every other format (AnswerSentences).
      {"headline", AnswerSentences(report)},
      {"sweep", {{"id", report.sweep_id}, {"name", report.sweep_name}, {"question", report.question},
                 {"order", report.order}, {"baseline", report.baseline}, {"axes", axes}}},
      {"options", {{"confidence", o.confidence},
                   {"assumed_sd_log_ratio", o.assumed_sd_log_ratio},
                   {"bootstrap_resamples", o.bootstrap_resamples},
                   {"seed", o.seed},
                   {"loss_parity_threshold", o.loss_parity_threshold},
                   {"noisy_cv_threshold", o.noisy_cv_threshold},
                   {"resolve_difference", o.resolve_difference},
                   {"memory_budget_bytes", OrNull(o.memory_budget_bytes)}}},
      {"progress", {{"trials", report.trials_total}, {"finished", report.trials_finished}}},
      {"adaptive", report.adaptive
                       ? json{{"min_pairs", report.adaptive->design.min_pairs},
                              {"max_pairs", report.adaptive->design.max_pairs},
                              {"ci_half_width", report.adaptive->design.ci_half_width},
                              {"look_confidence", report.adaptive->look_confidence},
                              {"trials_max", report.adaptive->trials_max},
                              {"trials_not_run", report.adaptive->trials_not_run},
                              {"device_seconds_not_run", OrNull(report.adaptive->device_seconds_not_run)}}
                       : json(nullptr)},
      {"calibration", report.calibration
                          ? json{{"id", report.calibration->id},
                                 {"calibrated_sweep", report.calibration->calibrated_sweep},
                                 {"host", report.calibration->host},
                                 {"pairs", report.calibration->pairs},
                                 {"sd_log_ratio", report.calibration->sd_log_ratio},
                                 {"created_at", report.calibration->created_at},
                                 {"repeats_to_resolve", OrNull(report.calibration_repeats_needed)}}
                          : json(nullptr)},
      {"workers", report.workers},
      {"spread_across_workers", report.spread_across_workers},
      {"callouts", report.callouts},
      {"variants", variants},
      {"axis_comparisons", axis_comparisons},
      {"marginals", marginals},
      {"best", {{"fastest", OrNull(report.fastest_key)},
                {"highest_without_verdict", OrNull(report.fastest_unbacked_key)},
                {"fastest_within_budget", OrNull(report.fastest_within_budget_key)}}},
      {"iso_memory", {{"applicable", report.iso_memory_applicable}, {"rows", iso}}},
      {"trials", trials},
  };
}

std::string RenderReportJson(const Report& report) { return ReportToJson(report).dump(2) + "\n"; }

}  // namespace bakeoff::metrics
