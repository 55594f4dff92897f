// The report's sections as formatted cells, shared by the table, Markdown and HTML
// renderers (declared in report_renderer.h).
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

constexpr const char* kNone = "-";

std::string OutcomeCell(const VariantReport& v) {
  return v.excluded ? "excluded" : OutcomeCounts(v);
}

std::string EvidenceCell(const VariantReport& v) {
  if (v.fell_back) return "FELL BACK: " + v.fallback_reason;
  if (v.applied.is_null() || (v.applied.is_object() && v.applied.empty())) return "no evidence";
  if (!v.applied.is_object()) return v.applied.dump();
  std::string out;
  for (const auto& [name, value] : v.applied.items()) {
    out += (out.empty() ? "" : " ") + name + "=" +
           (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

std::string Optional(const std::optional<double>& value, std::string (*format)(double)) {
  return value ? format(*value) : kNone;
}

// A comparison's warm-up delta and break-even cells: one figure, or one per compile-cache
// state ("cold +25.1 s, warm +4.2 s") so that a cold and a warm compile never read as one.
// `text` formats either figure of a CompileCost, or of the comparison itself when it has
// no per-state costs (a Comparison carries the same two fields).
template <typename Text>
std::string PerCacheCell(const Comparison& c, Text text) {
  if (c.compile_costs.empty()) return text(c.warmup_delta_s, c.break_even);
  std::string out;
  for (const CompileCost& cost : c.compile_costs) {
    out += (out.empty() ? "" : ", ") + cost.cache + " " + text(cost.warmup_delta_s, cost.break_even);
    if (!cost.warmup_delta_s && !cost.note.empty()) out += " (counterpart: no " + cost.cache + " trial)";
  }
  return out;
}

std::string WarmupDeltaCell(const Comparison& c) {
  return PerCacheCell(c, [](const std::optional<double>& delta, const std::optional<std::string>&) {
    return Optional(delta, FormatSignedSeconds);
  });
}

std::string BreakEvenCell(const Comparison& c) {
  return PerCacheCell(c, [](const std::optional<double>&, const std::optional<std::string>& break_even) {
    return break_even.value_or(kNone);
  });
}

std::string BytesOr(const std::optional<std::int64_t>& bytes) {
  return bytes ? FormatBytes(*bytes) : kNone;
}

std::string Tps(double x) { return FormatNumber(x, 4); }

bool Compared(const VariantReport& v) { return v.comparison.status == Comparison::Status::kCompared; }

std::string SpeedupCell(const VariantReport& v) {
  using S = Comparison::Status;
  switch (v.comparison.status) {
    case S::kCompared:
      return v.comparison.verdict == Verdict::kFaster || v.comparison.verdict == Verdict::kSlower
                 ? FormatRatioAwayFromOne(v.comparison.speedup.value)
                 : FormatRatio(v.comparison.speedup.value);
    case S::kIsBaseline: return "baseline";
    default: return kNone;
  }
}

std::string VerdictCell(const VariantReport& v) {
  const Comparison& c = v.comparison;
  using S = Comparison::Status;
  switch (c.status) {
    case S::kCompared:
      if (!c.worker_confound.empty()) return "confounded with workers";
      if (c.verdict == Verdict::kUnclear) {
        return c.repeats_needed ? "unclear: " + std::to_string(*c.repeats_needed) + " repeats needed"
                                : std::string("unclear");
      }
      return VerdictName(c.verdict);
    case S::kIsBaseline: return "baseline";
    case S::kExcluded: return "excluded";
    case S::kNoCounterpart: return "no counterpart";
    case S::kCounterpartExcluded: return "counterpart excluded";
    case S::kVariantFailed: return "FAILS, counterpart ok";
    case S::kCounterpartFailed: return "OK, counterpart fails";
    case S::kBothFailed: return "both fail";
    case S::kPending: return "pending";
    case S::kFellBack: return "FELL BACK: not compared";
    case S::kCounterpartFellBack: return "counterpart fell back";
  }
  return kNone;
}

std::string TrialsCell(const VariantReport& v) {
  const Comparison& c = v.comparison;
  if (!Compared(v)) return std::to_string(v.succeeded);
  std::string cell = std::to_string(c.variant_trials) + " vs " + std::to_string(c.counterpart_trials);
  if (c.method == IntervalMethod::kPairedRepeats) cell += " (" + std::to_string(c.pairs) + " pairs)";
  if (c.method == IntervalMethod::kLockstepPairs) {
    cell += " (" + std::to_string(c.pairs) + " lockstep pairs";
    if (c.pairs_in_lockstep < c.pairs) cell += ", " + std::to_string(c.pairs - c.pairs_in_lockstep) + " on whole trials";
    cell += ")";
  }
  if (c.method == IntervalMethod::kMeasuredSteps) cell += " (within-run only)";
  return cell;
}

std::string JoinParams(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [name, value] : params) out += (out.empty() ? "" : " ") + name + "=" + value;
  return out;
}

}  // namespace

std::vector<std::string> ReportHeadline(const Report& report) {
  std::vector<std::string> lines;
  lines.push_back("Sweep " + report.sweep_id + " \"" + report.sweep_name + "\"");
  if (!report.question.empty()) lines.push_back("Question: " + report.question);
  for (const std::string& sentence : AnswerSentences(report)) lines.push_back("Answer: " + sentence);
  std::string baseline;
  for (const auto& [axis, value] : report.baseline) baseline += (baseline.empty() ? "" : ",") + axis + "=" + value;
  lines.push_back("Baseline: " + (baseline.empty() ? std::string("none") : baseline) + "; order " +
                  report.order + "; " + std::to_string(report.trials_finished) + " of " +
                  std::to_string(report.trials_total) + " trials finished");
  std::string workers;
  for (const std::string& w : report.workers) workers += (workers.empty() ? "" : ", ") + w;
  lines.push_back("Workers: " + (workers.empty() ? std::string("none recorded") : workers) +
                  (report.spread_across_workers ? " (effects stratified by worker below)" : ""));
  if (report.adaptive) {
    const AdaptiveSavings& a = *report.adaptive;
    std::string saved = std::to_string(a.trials_not_run) + " of " + std::to_string(a.trials_max) +
                        " trials not run";
    if (a.device_seconds_not_run) saved += ", about " + FormatSeconds(*a.device_seconds_not_run) + " device time";
    lines.push_back("Adaptive repeats: " + std::to_string(a.design.min_pairs) + " to " +
                    std::to_string(a.design.max_pairs) + " pairs, until an interval excludes 1 or is within +-" +
                    FormatPercent(a.design.ci_half_width) + "; saved " + saved +
                    " against running every variant to " + std::to_string(a.design.max_pairs) +
                    " (intervals at " + FormatNumber(a.look_confidence * 100, 4) + "% per look)");
  }
  if (report.fastest_key) {
    const VariantReport* v = report.FindVariant(*report.fastest_key);
    lines.push_back("Fastest: " + *report.fastest_key + " at " + Tps(*v->tokens_per_s) + " tokens/s");
  } else if (report.fastest_unbacked_key) {
    const VariantReport* v = report.FindVariant(*report.fastest_unbacked_key);
    lines.push_back("Fastest: no verdict backs one (highest tokens/s: " + *report.fastest_unbacked_key + " at " +
                    Tps(*v->tokens_per_s) + " tokens/s)");
  }
  if (report.options.memory_budget_bytes) {
    std::string budget = FormatBytes(*report.options.memory_budget_bytes);
    if (report.fastest_within_budget_key) {
      const VariantReport* v = report.FindVariant(*report.fastest_within_budget_key);
      lines.push_back("Fastest within " + budget + ": " + *report.fastest_within_budget_key + " at " +
                      Tps(*v->tokens_per_s) + " tokens/s, peak " + BytesOr(v->peak_mem_bytes));
    } else {
      lines.push_back("Fastest within " + budget + ": none fits");
    }
  }
  return lines;
}

namespace {

// The interval column's name, at the report's confidence ("95% CI").
std::string CiName(const Report& report) { return FormatNumber(report.options.confidence * 100, 2) + "% CI"; }

// A section with no rows is left out rather than printed as an empty table.
std::optional<ReportSection> UnlessEmpty(ReportSection section) {
  if (section.rows.empty()) return std::nullopt;
  return section;
}

// Always shown, even before a trial finished: the answer the report is for.
ReportSection VerdictsSection(const Report& report, const std::string& ci_name) {
  ReportSection verdicts{"verdicts", "Verdicts",
                         "Each variant against its baseline counterpart (same axes, baseline values "
                         "substituted). tokens/s = the geometric mean of its succeeded trials' tokens/s (each the slowest "
                         "rank's global tokens per step / median step time, as the page shows it); speedup = the "
                         "tokens/s ratio as docs/statistics.md estimates it; n = succeeded trials behind it.",
                         {"variant", "outcome", "tokens/s", "speedup", ci_name, "verdict", "n",
                          "peak mem", "mem vs cp", "warm-up delta", "break-even", "loss dev",
                          "took effect"},
                         {},
                         {false, false, true, true, true, false, false, true, true, true, true, true,
                          false}};
  for (const VariantReport& v : report.variants) {
    const Comparison& c = v.comparison;
    std::string loss = c.loss_max_deviation ? FormatPercent(*c.loss_max_deviation) : kNone;
    if (c.loss_flagged) loss += " !";
    std::string effect = v.fell_back ? "NO (fell back)" : (v.applied.is_null() ? kNone : "yes");
    verdicts.rows.push_back({v.key, OutcomeCell(v), v.tokens_per_s ? Tps(*v.tokens_per_s) : kNone,
                             SpeedupCell(v), Compared(v) ? FormatInterval(c.speedup) : "",
                             VerdictCell(v), TrialsCell(v), BytesOr(v.peak_mem_bytes),
                             Optional(c.memory_relative, FormatSignedPercent), WarmupDeltaCell(c),
                             BreakEvenCell(c), loss, effect});
  }
  return verdicts;
}

// Each axis with the others held: what one setting does on its own, apart from the
// variant's other axes.
std::optional<ReportSection> AxisEffectsSection(const Report& report, const std::string& ci_name) {
  if (report.axis_comparisons.empty()) return std::nullopt;
  ReportSection axes{"axis_effects", "Each axis on its own",
                     "Each axis against its baseline value with every other axis held: the "
                     "variant against the same variant with only that axis changed.",
                     {"axis", "with", "variant", "counterpart", "speedup", ci_name, "verdict",
                      "mem vs cp", "warm-up delta", "break-even"},
                     {},
                     {false, false, false, false, true, true, false, true, true, true}};
  for (const AxisComparison& a : report.axis_comparisons) {
    const Comparison& c = a.comparison;
    bool compared = c.status == Comparison::Status::kCompared;
    axes.rows.push_back({a.axis + "=" + a.value, a.held.empty() ? kNone : a.held, a.variant_key,
                         a.counterpart_key,
                         compared ? FormatRatio(c.speedup.value) : kNone,
                         compared ? FormatInterval(c.speedup) : "",
                         compared ? (c.worker_confound.empty() ? VerdictName(c.verdict)
                                                               : "confounded with workers")
                                  : c.note,
                         Optional(c.memory_relative, FormatSignedPercent), WarmupDeltaCell(c),
                         BreakEvenCell(c)});
  }
  return axes;
}

// Adaptive sweeps only: why each variant stopped, and why its intervals are wider than
// the report's confidence alone would make them.
std::optional<ReportSection> AdaptiveRepeatsSection(const Report& report, const std::string& ci_name) {
  if (!report.adaptive) return std::nullopt;
  ReportSection adaptive{"adaptive", "Adaptive repeats",
                         "Each variant stopped by the sequential rule (docs/statistics.md): its "
                         "intervals above are at " +
                             FormatNumber(report.adaptive->look_confidence * 100, 4) +
                             "% per look, so that the whole procedure keeps " + ci_name + ".",
                         {"variant", "adaptive", "trials not run"},
                         {},
                         {false, false, true}};
  for (const VariantReport& v : report.variants) {
    if (!v.adaptive) continue;
    const AdaptiveVariant& a = *v.adaptive;
    std::string cell = (a.stopped ? "stopped after " : "running, ") + std::to_string(a.pairs) + " of " +
                       std::to_string(a.max_pairs) + " pairs";
    if (a.comparisons.size() > 1) {
      // The variant's pairs and reason are its last comparison's: name each, so that a
      // reason is never read as the verdict of another comparison in the table.
      cell += a.stopped ? ", when the last of its " + std::to_string(a.comparisons.size()) + " comparisons stopped"
                        : ", until all " + std::to_string(a.comparisons.size()) + " of its comparisons stop";
      std::string sep = ": ";
      for (const AdaptiveComparison& c : a.comparisons) {
        cell += sep + "against " + c.against + (c.held.empty() ? "" : " with " + c.held) +
                (c.stopped ? " stopped after " + std::to_string(c.pairs) + " (" + c.reason + ")"
                           : " running (" + std::to_string(c.pairs) + " pairs)");
        sep = "; ";
      }
    } else if (a.stopped) {
      cell += " (" + a.reason + ")";
    }
    adaptive.rows.push_back({v.key, "adaptive: " + cell, std::to_string(a.trials_not_run)});
  }
  return UnlessEmpty(std::move(adaptive));
}

// Peak memory and the trainer's held bytes by kind: where a memory saving comes from.
std::optional<ReportSection> MemorySection(const Report& report) {
  ReportSection memory{"memory", "Memory",
                       "Peak bytes of the largest rank. Compression = counterpart peak / variant peak. "
                       "Held bytes by kind are the trainer's own, on that rank.",
                       {"variant", "peak", "vs counterpart", "compression", "frozen", "trainable",
                        "gradients", "optimizer"},
                       {},
                       {false, true, true, true, true, true, true, true}};
  for (const VariantReport& v : report.variants) {
    if (!v.peak_mem_bytes) continue;
    const Comparison& c = v.comparison;
    memory.rows.push_back({v.key, BytesOr(v.peak_mem_bytes),
                           Optional(c.memory_relative, FormatSignedPercent),
                           Optional(c.compression_ratio, FormatRatio), BytesOr(v.frozen_bytes),
                           BytesOr(v.trainable_bytes), BytesOr(v.grad_bytes),
                           BytesOr(v.optimizer_bytes)});
  }
  return UnlessEmpty(std::move(memory));
}

// A compiled variant's rows, one per compile-cache state, each with that state's own
// warm-up cost against the counterpart.
std::vector<std::vector<std::string>> WarmupRowsByCache(const VariantReport& v) {
  const Comparison& c = v.comparison;
  std::vector<std::vector<std::string>> rows;
  for (const CacheWarmup& w : v.by_cache) {
    const CompileCost* cost = nullptr;
    for (const CompileCost& k : c.compile_costs) {
      if (k.cache == w.cache) cost = &k;
    }
    std::string delta = cost ? Optional(cost->warmup_delta_s, FormatSignedSeconds) : kNone;
    if (cost && !cost->warmup_delta_s && !cost->note.empty()) delta += " (counterpart: no " + w.cache + " trial)";
    rows.push_back({v.key, w.cache + " x" + std::to_string(w.trials),
                    Optional(w.first_step_s, FormatSeconds), Optional(w.warmup_s, FormatSeconds),
                    kNone, delta,
                    Optional(c.step_saving_s, FormatSignedSeconds),
                    cost ? cost->break_even.value_or(kNone) : kNone});
  }
  return rows;
}

// What a variant costs before it pays off: the warm-up it adds against the time it
// saves per step.
std::optional<ReportSection> WarmupSection(const Report& report) {
  ReportSection warmup{"warmup", "Warm-up and break-even",
                       "Break-even steps = warm-up difference / per-step saving: \"never\" when the "
                       "variant is not faster, \"immediately\" when its warm-up is not longer.",
                       {"variant", "first step", "warm-up", "first step delta", "warm-up delta",
                        "saving/step", "break-even"},
                       {},
                       {false, true, true, true, true, true, true}};
  bool any_cache = false;
  for (const VariantReport& v : report.variants) any_cache = any_cache || !v.by_cache.empty();
  if (any_cache) {
    // A cold compile (empty cache) and a warm one (a cache an earlier trial filled) are
    // different costs: one row each, never their average (docs/statistics.md).
    warmup.note += " A compiled variant has one row per compile-cache state: cold (every graph "
                   "compiled), warm (every graph from Inductor's cache), mixed; its warm-up delta is "
                   "against the counterpart's trials in the same state when the counterpart compiles too.";
    warmup.header.insert(warmup.header.begin() + 1, "compile cache");
    warmup.numeric.insert(warmup.numeric.begin() + 1, false);
  }
  for (const VariantReport& v : report.variants) {
    if (!v.first_step_s && !v.warmup_s) continue;
    const Comparison& c = v.comparison;
    if (v.by_cache.empty()) {
      std::vector<std::string> row{v.key, Optional(v.first_step_s, FormatSeconds),
                                   Optional(v.warmup_s, FormatSeconds),
                                   Optional(c.first_step_delta_s, FormatSignedSeconds),
                                   Optional(c.warmup_delta_s, FormatSignedSeconds),
                                   Optional(c.step_saving_s, FormatSignedSeconds),
                                   c.break_even.value_or(kNone)};
      if (any_cache) row.insert(row.begin() + 1, kNone);
      warmup.rows.push_back(std::move(row));
      continue;
    }
    for (auto& row : WarmupRowsByCache(v)) warmup.rows.push_back(std::move(row));
  }
  return UnlessEmpty(std::move(warmup));
}

// A speedup that changes the math is not the same training: the loss curves side by side.
std::optional<ReportSection> LossParitySection(const Report& report) {
  ReportSection loss{"loss", "Loss parity",
                     "Largest relative deviation between the mean loss curves (moving mean over " +
                         std::to_string(report.options.loss_smoothing_window) +
                         " steps) over their common measured steps; checked only where the axes "
                         "that differ keep the math (compile mode and scope, ZeRO, offload, "
                         "checkpointing, world size at the same global batch, executors, "
                         "allocator, bf16 matmul), flagged (!) above " +
                         FormatPercent(report.options.loss_parity_threshold) + ".",
                     {"variant", "common steps", "max deviation", "at step", "parity"},
                     {},
                     {false, true, true, true, false}};
  for (const VariantReport& v : report.variants) {
    const Comparison& c = v.comparison;
    if (!c.loss_max_deviation) continue;
    loss.rows.push_back({v.key, std::to_string(c.loss_common_steps),
                         FormatPercent(*c.loss_max_deviation), std::to_string(c.loss_at_step),
                         !c.loss_parity_expected ? c.loss_parity_note
                         : c.loss_flagged        ? "DEVIATES !"
                                                 : "matches"});
  }
  return UnlessEmpty(std::move(loss));
}

// Failures, the one-sided ones first: a variant that fails where its counterpart runs
// (or the reverse) is a result in itself.
std::optional<ReportSection> OutcomesSection(const Report& report) {
  ReportSection outcomes{"outcomes", "Outcomes",
                         "Variants that did not always succeed; a variant failing where its "
                         "counterpart succeeds (or the reverse) is listed first.",
                         {"variant", "outcomes", "vs counterpart", "reasons"},
                         {},
                         {false, false, false, false}};
  std::vector<std::vector<std::string>> mismatched, other;
  for (const VariantReport& v : report.variants) {
    if (v.succeeded == v.trials && !v.excluded) continue;
    std::string reasons;
    for (const std::string& r : v.reasons) reasons += (reasons.empty() ? "" : "; ") + r;
    bool mismatch = v.comparison.status == Comparison::Status::kVariantFailed ||
                    v.comparison.status == Comparison::Status::kCounterpartFailed;
    (mismatch ? mismatched : other)
        .push_back({v.key, OutcomeCell(v), VerdictCell(v), reasons.empty() ? kNone : reasons});
  }
  for (auto& row : mismatched) outcomes.rows.push_back(std::move(row));
  for (auto& row : other) outcomes.rows.push_back(std::move(row));
  return UnlessEmpty(std::move(outcomes));
}

// Each axis value over every pair of variants that differs only there: one figure per
// value across the whole sweep.
std::optional<ReportSection> MarginalEffectsSection(const Report& report, const std::string& ci_name) {
  ReportSection marginals{"marginals", "Marginal effect of each axis value",
                          "Geometric-mean speedup over all pairs of variants that differ only in "
                          "that axis (against the baseline value, or the axis's first value); "
                          "t interval over repeats (paired by repeat when interleaved).",
                          {"axis value", "against", "speedup", ci_name, "verdict", "pairs",
                           "pair range"},
                          {},
                          {false, false, true, true, false, true, true}};
  for (const MarginalEffect& m : report.marginals) {
    bool decided = m.verdict == Verdict::kFaster || m.verdict == Verdict::kSlower;
    marginals.rows.push_back({m.axis + "=" + m.value, m.axis + "=" + m.reference,
                              decided ? FormatRatioAwayFromOne(m.speedup.value)
                                      : FormatRatio(m.speedup.value),
                              FormatInterval(m.speedup),
                              m.worker_confound.empty() ? VerdictName(m.verdict) : "confounded with workers",
                              std::to_string(m.pairs),
                              FormatRatio(m.min_pair) + " .. " + FormatRatio(m.max_pair)});
  }
  return UnlessEmpty(std::move(marginals));
}

// Sweeps with a micro-batch axis only: a setting that saves memory may win by running a
// larger micro-batch, which a same-micro-batch comparison never shows.
std::optional<ReportSection> IsoMemorySection(const Report& report, const std::string& ci_name) {
  if (!report.iso_memory_applicable || report.iso_memory.empty()) return std::nullopt;
  ReportSection iso{"iso_memory", "Iso-memory view",
                    "Each setting at its own largest micro-batch that did not run out of memory, "
                    "against its baseline setting at that setting's largest.",
                    {"setting", "micro_batch", "tokens/s", "against", "its micro_batch",
                     "speedup", ci_name},
                    {},
                    {false, true, true, false, true, true, true}};
  for (const IsoMemoryRow& row : report.iso_memory) {
    iso.rows.push_back({row.setting.empty() ? "(all)" : row.setting, row.micro_batch,
                        Tps(row.tokens_per_s),
                        row.counterpart_setting == row.setting ? "(baseline)" : row.counterpart_setting,
                        row.counterpart_micro_batch.empty() ? kNone : row.counterpart_micro_batch,
                        row.speedup ? FormatRatio(row.speedup->value) : kNone,
                        row.speedup ? FormatInterval(*row.speedup) : ""});
  }
  return iso;
}

// A setting the trainer could not apply would compare the baseline with itself: what
// was asked for beside what the trainer says it ran.
std::optional<ReportSection> EvidenceSection(const Report& report) {
  ReportSection evidence{"evidence", "Did it take effect",
                         "The trainer's own evidence (\"applied\") beside what the variant asked "
                         "for; a variant whose evidence shows a fallback is flagged, not compared.",
                         {"variant", "requested", "applied"},
                         {},
                         {false, false, false}};
  for (const VariantReport& v : report.variants) {
    if (v.succeeded == 0) continue;
    evidence.rows.push_back({v.key, JoinParams(v.params), EvidenceCell(v)});
  }
  return UnlessEmpty(std::move(evidence));
}

// A mean per trial as it reads best: whole numbers as integers, else one decimal.
std::string PerTrial(double value) {
  if (value == std::floor(value)) return std::to_string(static_cast<std::int64_t>(value));
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << value;
  return out.str();
}

// What torch.compile did, per variant (docs/question.md H7): graphs, graph breaks and
// recompiles are what the script's compile_evidence() reported (the mean per trial),
// the cache lookups are summed over its trials.
std::optional<ReportSection> CompileSection(const Report& report) {
  ReportSection compile{"compile", "Compile evidence",
                        "What torch.compile did in each variant's succeeded trials (compile_evidence()): "
                        "graphs, graph breaks and recompiles per trial (the mean), Inductor FX-graph cache "
                        "hits and misses over the trials (a miss compiles; a warm cache hits).",
                        {"variant", "trials", "graphs", "graph breaks", "recompiles", "cache hits",
                         "cache misses", "break reasons"},
                        {},
                        {false, true, true, true, true, true, true, false}};
  for (const VariantReport& v : report.variants) {
    if (!v.compile) continue;
    const CompileEvidence& c = *v.compile;
    std::string reasons;
    for (const auto& r : c.break_reasons) reasons += (reasons.empty() ? "" : "; ") + r;
    compile.rows.push_back({v.key, std::to_string(c.trials), PerTrial(c.graphs), PerTrial(c.graph_breaks),
                            PerTrial(c.recompiles), std::to_string(c.cache_hits), std::to_string(c.cache_misses),
                            reasons.empty() ? kNone : reasons});
  }
  return UnlessEmpty(std::move(compile));
}

// One field of the environments a variant's trials ran in: its distinct values, in the
// order first seen, separated by " | ".
std::string EnvironmentCell(const std::vector<nlohmann::json>& environments, const char* key) {
  std::vector<std::string> values;
  for (const nlohmann::json& env : environments) {
    auto it = env.find(key);
    std::string text = kNone;
    if (it != env.end() && it->is_string()) text = it->get<std::string>();
    if (it != env.end() && it->is_array()) {
      text.clear();
      for (const auto& f : *it) text += (text.empty() ? "" : " ") + (f.is_string() ? f.get<std::string>() : f.dump());
    }
    if (std::find(values.begin(), values.end(), text) == values.end()) values.push_back(text);
  }
  std::string cell;
  for (const std::string& value : values) cell += (cell.empty() ? "" : " | ") + value;
  return cell;
}

// Where each variant ran: a speedup measured across different machines or libraries is
// not the variant's alone.
std::optional<ReportSection> EnvironmentSection(const Report& report) {
  ReportSection environment{"environment", "Environment",
                            "Where each variant's succeeded trials ran, from the trainer's summary; "
                            "alternatives are separated by \" | \". A comparison whose trials ran "
                            "in different environments is called out.",
                            {"variant", "host", "cpu", "cpu flags", "torch", "cuda", "blas", "gpu",
                             "driver", "bakeoff"},
                            {},
                            {false, false, false, false, false, false, false, false, false, false}};
  for (const VariantReport& v : report.variants) {
    if (v.environments.empty()) continue;
    std::vector<std::string> row = {v.key};
    for (const char* key : {"host", "cpu_model", "cpu_flags", "torch_version", "cuda_version", "blas",
                            "gpu_model", "gpu_driver", "bakeoff_version"}) {
      row.push_back(EnvironmentCell(v.environments, key));
    }
    environment.rows.push_back(std::move(row));
  }
  return UnlessEmpty(std::move(environment));
}

// How much to trust each interval, and how many repeats an unclear one would need.
std::optional<ReportSection> NoiseSection(const Report& report) {
  ReportSection noise{"noise", "Noise and repeats",
                      "How each interval was obtained; sd of the per-repeat log ratio; repeats per "
                      "variant that would resolve a " +
                          FormatPercent(report.options.resolve_difference) +
                          " difference (5% two-sided test, 80% power); noisy trials have a "
                          "step-time CV above " +
                          FormatPercent(report.options.noisy_cv_threshold) + ".",
                      {"variant", "interval from", "sd log ratio", "repeats needed", "ran",
                       "noisy trials"},
                      {},
                      {false, false, true, true, true, true}};
  bool any_lockstep = false;
  for (const VariantReport& v : report.variants) any_lockstep = any_lockstep || !v.comparison.lockstep_pairs.empty();
  if (any_lockstep) {
    // The step-to-step noise inside a lockstep pair, which its median sees, beside the
    // pair-to-pair noise the interval is made of (docs/statistics.md, "Lockstep pairs").
    noise.note += " Within-pair IQR: the median over lockstep pairs of the interquartile range of "
                  "their per-step log ratios.";
    noise.header.insert(noise.header.begin() + 3, "within-pair IQR");
    noise.numeric.insert(noise.numeric.begin() + 3, true);
  }
  for (const VariantReport& v : report.variants) {
    if (!Compared(v)) continue;
    const Comparison& c = v.comparison;
    const VariantReport* cp = report.FindVariant(v.counterpart_key);
    std::string needed = c.repeats_needed ? std::to_string(*c.repeats_needed) : kNone;
    if (c.repeats_needed_assumed) needed += " (assumed noise)";
    if (c.needs_more_repeats) needed += " (more needed)";
    std::vector<std::string> row{v.key, IntervalMethodName(c.method),
                                 c.sd_log_ratio ? FormatNumber(*c.sd_log_ratio, 3) : kNone, needed,
                                 std::to_string(std::min(v.trials, cp != nullptr ? cp->trials : 0)),
                                 std::to_string(v.noisy_trials)};
    if (any_lockstep) row.insert(row.begin() + 3, c.within_pair_iqr ? FormatNumber(*c.within_pair_iqr, 3) : kNone);
    noise.rows.push_back(std::move(row));
  }
  return UnlessEmpty(std::move(noise));
}

// Lockstep sweeps: every repeat's pair of each comparison, with what its estimate stands
// on, so that a pair that fell back to its whole trials, or lost its partner, says why.
std::optional<ReportSection> LockstepPairsSection(const Report& report) {
  ReportSection pairs{"lockstep", "Lockstep pairs",
                      "Each pair's ratio is the median of its per-step tokens/s ratios (steps whose "
                      "turns were adjacent); a pair whose steps did not pair stands on its whole "
                      "trials, and a pair whose partner did not succeed is left out of the interval.",
                      {"variant", "repeat", "ratio", "from", "steps paired", "step IQR", "note"},
                      {},
                      {false, true, true, false, true, true, false}};
  for (const VariantReport& v : report.variants) {
    for (const LockstepPair& p : v.comparison.lockstep_pairs) {
      pairs.rows.push_back({v.key, std::to_string(p.repeat), Optional(p.ratio, FormatRatio),
                            LockstepBasisName(p.basis),
                            p.basis == LockstepPair::Basis::kUnpaired
                                ? kNone
                                : std::to_string(p.paired_steps) + " of " +
                                      std::to_string(p.paired_steps + p.unpaired_steps),
                            p.step_iqr ? FormatNumber(*p.step_iqr, 3) : kNone, p.note.empty() ? kNone : p.note});
    }
  }
  return UnlessEmpty(std::move(pairs));
}

// Sweeps spread across workers only: the speedup on each worker alone, so that a
// difference between machines does not pass for the variant's effect.
std::optional<ReportSection> ByWorkerSection(const Report& report) {
  if (!report.spread_across_workers) return std::nullopt;
  ReportSection workers{"by_worker", "Effects by worker",
                        "Speedup computed from trials on one worker only (both sides there).",
                        {"variant", "worker", "speedup", "trials (variant vs counterpart)"},
                        {},
                        {false, false, true, true}};
  for (const VariantReport& v : report.variants) {
    if (!Compared(v)) continue;
    for (const WorkerEffect& w : v.comparison.by_worker) {
      workers.rows.push_back({v.key, w.worker, FormatRatio(w.speedup),
                              std::to_string(w.variant_trials) + " vs " +
                                  std::to_string(w.counterpart_trials)});
    }
    // Shown exactly when it matters most: no worker ran both sides.
    if (v.comparison.by_worker.empty()) {
      workers.rows.push_back({v.key, "none ran both sides", kNone, v.comparison.worker_confound});
    }
  }
  return workers;
}

// Every trial in run order, the evidence behind every figure above.
std::optional<ReportSection> TrialsSection(const Report& report) {
  ReportSection trials{"trials", "Trials",
                       "Every trial in run order, with its worker; * marks a noisy trial.",
                       {"trial", "variant", "repeat", "worker", "outcome", "tokens/s", "median step",
                        "step CV", "peak mem", "reason"},
                       {},
                       {true, false, true, false, false, true, true, true, true, false}};
  bool any_trial_cache = false;
  for (const TrialView& t : report.trials) any_trial_cache = any_trial_cache || !t.compile_cache.empty();
  if (any_trial_cache) {  // which trials paid a cold compile and which found the cache warm
    trials.header.insert(trials.header.end() - 1, "compile cache");
    trials.numeric.insert(trials.numeric.end() - 1, false);
  }
  for (const TrialView& t : report.trials) {
    std::string cv = t.step_cv ? FormatPercent(*t.step_cv) + (t.noisy ? " *" : "") : kNone;
    std::string reason = t.fell_back ? "fell back: " + t.fallback_reason : t.reason;
    std::vector<std::string> row{std::to_string(t.id), t.variant_key, std::to_string(t.repeat),
                                 t.worker.empty() ? kNone : t.worker, t.outcome.Text(),
                                 t.tokens_per_s ? Tps(*t.tokens_per_s) : kNone,
                                 Optional(t.step_s_median, FormatSeconds), cv,
                                 BytesOr(t.peak_mem_bytes), reason.empty() ? kNone : reason};
    if (any_trial_cache) row.insert(row.end() - 1, t.compile_cache.empty() ? kNone : t.compile_cache);
    trials.rows.push_back(std::move(row));
  }
  return UnlessEmpty(std::move(trials));
}

}  // namespace

std::vector<ReportSection> ReportSections(const Report& report) {
  const std::string ci_name = CiName(report);
  std::vector<ReportSection> sections;
  // Each section decides whether it is shown; the order is the reading order.
  auto add = [&sections](std::optional<ReportSection> section) {
    if (section) sections.push_back(std::move(*section));
  };
  add(VerdictsSection(report, ci_name));
  add(AxisEffectsSection(report, ci_name));
  add(AdaptiveRepeatsSection(report, ci_name));
  add(MemorySection(report));
  add(WarmupSection(report));
  add(CompileSection(report));
  add(LossParitySection(report));
  add(OutcomesSection(report));
  add(MarginalEffectsSection(report, ci_name));
  add(IsoMemorySection(report, ci_name));
  add(EvidenceSection(report));
  add(EnvironmentSection(report));
  add(NoiseSection(report));
  add(LockstepPairsSection(report));
  add(ByWorkerSection(report));
  add(TrialsSection(report));
  return sections;
}

std::string OutcomeCounts(const VariantReport& v) {
  if (v.trials == 0) return "no trials";
  std::ostringstream out;
  out << v.succeeded << "/" << v.trials << " ok";
  for (const auto& [outcome, count] : v.outcome_counts) {
    if (outcome != protocol::OutcomeName(protocol::Outcome::kSucceeded)) out << ", " << outcome << " x" << count;
  }
  return out.str();
}

}  // namespace bakeoff::metrics
