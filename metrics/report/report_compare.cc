#include "metrics/report/report_compare.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

const std::string kPrefixA = "A: ";
const std::string kPrefixB = "B: ";

std::string Describe(const ReportInput& input) {
  return input.sweep_id + " \"" + input.sweep_name + "\"";
}

std::optional<RatioFigure> OwnSpeedup(const Report& report, const std::string& key) {
  const VariantReport* v = report.FindVariant(key);
  if (v == nullptr || v->comparison.status != Comparison::Status::kCompared) return std::nullopt;
  return v->comparison.speedup;
}

int Rank(CompareRow::Verdict verdict) { return static_cast<int>(verdict); }

}  // namespace

const char* CompareVerdictName(CompareRow::Verdict verdict) {
  using V = CompareRow::Verdict;
  switch (verdict) {
    case V::kNowFails: return "now fails";
    case V::kRegression: return "regression";
    case V::kNoChange: return "no measurable change";
    case V::kUnclear: return "unclear";
    case V::kImprovement: return "improvement";
    case V::kNowRuns: return "now runs";
    case V::kNeitherRuns: return "fails in both";
    case V::kOnlyInA: return "only in A";
    case V::kOnlyInB: return "only in B";
    case V::kNotCompared: return "not compared";
  }
  return "not compared";
}

namespace {

// One sweep of both: A's variants as "A: key", each its own counterpart's baseline, and
// B's as "B: key" against A's, trials renumbered after A's. *keys: every key, in A's
// order then B's new ones.
ReportInput MergeComparedSweeps(const ReportInput& a, const ReportInput& b, std::vector<std::string>* keys) {
  std::map<std::string, const VariantInput*> in_a, in_b;
  for (const VariantInput& v : a.variants) {
    in_a[v.key] = &v;
    keys->push_back(v.key);
  }
  for (const VariantInput& v : b.variants) {
    in_b[v.key] = &v;
    if (!in_a.count(v.key)) keys->push_back(v.key);
  }
  ReportInput merged;
  merged.sweep_id = a.sweep_id + " vs " + b.sweep_id;
  merged.order = "sequential";  // repeats of two sweeps are not paired
  for (const std::string& key : *keys) {
    if (auto it = in_a.find(key); it != in_a.end()) {
      VariantInput v = *it->second;
      v.key = kPrefixA + key;
      v.counterpart_key = v.key;
      v.is_baseline = true;
      v.counterpart_excluded = false;
      merged.variants.push_back(std::move(v));
    }
    if (auto it = in_b.find(key); it != in_b.end()) {
      VariantInput v = *it->second;
      v.key = kPrefixB + key;
      v.counterpart_key = in_a.count(key) ? kPrefixA + key : "";
      v.is_baseline = false;
      v.counterpart_excluded = false;
      merged.variants.push_back(std::move(v));
    }
  }
  int offset = 0;
  for (const TrialInput& t : a.trials) {
    TrialInput copy = t;
    copy.variant_key = kPrefixA + t.variant_key;
    offset = std::max(offset, t.order_index + 1);
    merged.trials.push_back(std::move(copy));
  }
  for (const TrialInput& t : b.trials) {
    TrialInput copy = t;
    copy.variant_key = kPrefixB + t.variant_key;
    copy.order_index += offset;
    merged.trials.push_back(std::move(copy));
  }
  return merged;
}

// The row's verdict and change from B's comparison against A in the merged report.
void SetCompareVerdict(const Comparison& c, CompareRow& row) {
  using V = CompareRow::Verdict;
  using S = Comparison::Status;
  row.note = c.note;
  switch (c.status) {
    case S::kCompared:
      row.change = c.speedup;
      row.method = c.method;
      row.trials_a = c.counterpart_trials;
      row.trials_b = c.variant_trials;
      row.df = c.df;
      switch (c.verdict) {
        case Verdict::kUnclear: row.verdict = V::kUnclear; break;
        case Verdict::kNoMeasurableDifference: row.verdict = V::kNoChange; break;
        case Verdict::kFaster: row.verdict = V::kImprovement; break;
        case Verdict::kSlower: row.verdict = V::kRegression; break;
      }
      row.note.clear();
      if (row.verdict == V::kUnclear && c.repeats_needed) {
        row.note = std::to_string(*c.repeats_needed) + " repeats needed in each sweep" +
                   (c.method == IntervalMethod::kMeasuredSteps ? " (interval is within-run only)" : "");
      }
      break;
    case S::kVariantFailed: row.verdict = V::kNowFails; break;
    case S::kCounterpartFailed: row.verdict = V::kNowRuns; break;
    case S::kBothFailed: row.verdict = V::kNeitherRuns; break;
    default: row.verdict = V::kNotCompared; break;
  }
  row.memory_change = c.memory_relative;
  row.warmup_delta_s = c.warmup_delta_s;
  row.loss_deviation = c.loss_max_deviation;
  row.loss_flagged = c.loss_flagged;
  row.environment_difference = c.environment_difference;
}

// The row of `key`: each side's figures, and its verdict.
CompareRow CompareRowOf(const std::string& key, const Report& across, const Report& report_a,
                        const Report& report_b) {
  CompareRow row;
  row.key = key;
  const VariantReport* va = across.FindVariant(kPrefixA + key);
  const VariantReport* vb = across.FindVariant(kPrefixB + key);
  if (va != nullptr) {
    row.outcome_a = OutcomeCounts(*va);
    row.tokens_per_s_a = va->tokens_per_s;
    row.peak_a = va->peak_mem_bytes;
  }
  if (vb != nullptr) {
    row.outcome_b = OutcomeCounts(*vb);
    row.tokens_per_s_b = vb->tokens_per_s;
    row.peak_b = vb->peak_mem_bytes;
  }
  row.speedup_a = OwnSpeedup(report_a, key);
  row.speedup_b = OwnSpeedup(report_b, key);
  if (va == nullptr || vb == nullptr) {
    row.verdict = va == nullptr ? CompareRow::Verdict::kOnlyInB : CompareRow::Verdict::kOnlyInA;
  } else {
    SetCompareVerdict(vb->comparison, row);
  }
  return row;
}

// The call-outs, from the sorted rows: what now fails, regressions, loss curves that
// differ, environments that differ, or that there are no regressions.
std::vector<std::string> CompareCallouts(const std::vector<CompareRow>& rows) {
  using V = CompareRow::Verdict;
  std::vector<std::string> callouts;
  int now_fails = 0, regressions = 0, improvements = 0;
  for (const CompareRow& row : rows) {
    now_fails += row.verdict == V::kNowFails;
    regressions += row.verdict == V::kRegression;
    improvements += row.verdict == V::kImprovement;
    if (row.verdict == V::kNowFails) {
      callouts.push_back(row.key + " ran in A (" + row.outcome_a + ") but fails in B (" + row.outcome_b + ")");
    }
  }
  for (const CompareRow& row : rows) {
    if (row.verdict == V::kRegression) {
      callouts.push_back(row.key + " is slower in B: " + FormatRatioAwayFromOne(row.change.value) + " (CI " +
                         FormatInterval(row.change) + ")");
    }
  }
  for (const CompareRow& row : rows) {
    if (row.loss_flagged) {
      callouts.push_back(row.key + " loss curve differs between the sweeps by " + FormatPercent(*row.loss_deviation));
    }
  }
  std::map<std::string, std::vector<std::string>> keys_by_difference;
  for (const CompareRow& row : rows) {
    if (!row.environment_difference.empty()) keys_by_difference[row.environment_difference].push_back(row.key);
  }
  for (const auto& [difference, keys_with] : keys_by_difference) {
    callouts.push_back("A and B ran in different environments (" + difference + ") for " +
                       std::to_string(keys_with.size()) + " variant(s), e.g. " + keys_with.front() +
                       ": a change may come from the environment");
  }
  if (now_fails + regressions == 0) {
    callouts.push_back("no regressions (" + std::to_string(improvements) + " improvement(s))");
  }
  return callouts;
}

}  // namespace

SweepComparison CompareSweeps(const ReportInput& a, const ReportInput& b,
                              const ReportOptions& options) {
  SweepComparison comparison;
  comparison.sweep_a = Describe(a);
  comparison.sweep_b = Describe(b);
  comparison.options = options;
  std::vector<std::string> keys;
  const Report across = BuildReport(MergeComparedSweeps(a, b, &keys), options);
  const Report report_a = BuildReport(a, options);
  const Report report_b = BuildReport(b, options);
  for (const std::string& key : keys) comparison.rows.push_back(CompareRowOf(key, across, report_a, report_b));
  using V = CompareRow::Verdict;
  std::stable_sort(comparison.rows.begin(), comparison.rows.end(),
                   [](const CompareRow& x, const CompareRow& y) {
                     if (Rank(x.verdict) != Rank(y.verdict)) return Rank(x.verdict) < Rank(y.verdict);
                     if (x.verdict == V::kImprovement) return x.change.value > y.change.value;
                     return x.change.value < y.change.value;
                   });
  comparison.callouts = CompareCallouts(comparison.rows);
  return comparison;
}

nlohmann::json ComparisonToJson(const SweepComparison& comparison) {
  using nlohmann::json;
  auto opt = [](const auto& value) { return value ? json(*value) : json(nullptr); };
  auto figure = [](const RatioFigure& f) {
    return json{{"value", f.value},
                {"ci_low", f.low ? json(*f.low) : json(nullptr)},
                {"ci_high", f.high ? json(*f.high) : json(nullptr)}};
  };
  json rows = json::array();
  for (const CompareRow& r : comparison.rows) {
    bool compared = r.method != IntervalMethod::kNone || r.change.value > 0;
    rows.push_back({{"key", r.key},
                    {"verdict", CompareVerdictName(r.verdict)},
                    {"note", r.note},
                    {"outcome_a", r.outcome_a},
                    {"outcome_b", r.outcome_b},
                    {"tokens_per_s_a", opt(r.tokens_per_s_a)},
                    {"tokens_per_s_b", opt(r.tokens_per_s_b)},
                    {"change", compared ? figure(r.change) : json(nullptr)},
                    {"interval_method", IntervalMethodName(r.method)},
                    {"df", opt(r.df)},
                    {"no_measurable_change",
                     r.verdict == CompareRow::Verdict::kNoChange       ? json(true)
                     : r.verdict == CompareRow::Verdict::kRegression ||
                             r.verdict == CompareRow::Verdict::kImprovement
                         ? json(false)
                         : json(nullptr)},
                    {"trials_a", r.trials_a},
                    {"trials_b", r.trials_b},
                    {"speedup_a", r.speedup_a ? figure(*r.speedup_a) : json(nullptr)},
                    {"speedup_b", r.speedup_b ? figure(*r.speedup_b) : json(nullptr)},
                    {"peak_mem_bytes_a", opt(r.peak_a)},
                    {"peak_mem_bytes_b", opt(r.peak_b)},
                    {"memory_change", opt(r.memory_change)},
                    {"warmup_delta_s", opt(r.warmup_delta_s)},
                    {"loss_max_deviation", opt(r.loss_deviation)},
                    {"loss_flagged", r.loss_flagged},
                    {"environment_difference",
                     r.environment_difference.empty() ? json(nullptr) : json(r.environment_difference)}});
  }
  return {{"format", "bakeoff.compare/1"},
          {"sweep_a", comparison.sweep_a},
          {"sweep_b", comparison.sweep_b},
          {"callouts", comparison.callouts},
          {"rows", rows}};
}

namespace {

// The table of every row, for the text, markdown and HTML forms.
ReportSection CompareTableSection(const SweepComparison& comparison) {
  using V = CompareRow::Verdict;
  auto opt_ratio = [](const std::optional<RatioFigure>& f) {
    return f ? FormatRatio(f->value) : std::string("-");
  };
  ReportSection section{"compare", "Variants, regressions first", "",
                        {"variant", "verdict", "A", "B", "A tokens/s", "B tokens/s", "change", "CI",
                         "n (A vs B)", "speedup in A", "speedup in B", "A peak", "B peak",
                         "memory change", "warm-up delta", "loss dev"},
                        {},
                        {false, false, false, false, true, true, true, true, false, true, true,
                         true, true, true, true, true}};
  for (const CompareRow& r : comparison.rows) {
    const bool compared = r.verdict == V::kRegression || r.verdict == V::kImprovement ||
                          r.verdict == V::kNoChange || r.verdict == V::kUnclear;
    const bool away_from_one = r.verdict == V::kRegression || r.verdict == V::kImprovement;
    std::string loss = r.loss_deviation ? FormatPercent(*r.loss_deviation) + (r.loss_flagged ? " !" : "") : "-";
    section.rows.push_back(
        {r.key,
         r.verdict == V::kUnclear && !r.note.empty() ? std::string("unclear: ") + r.note
                                                     : std::string(CompareVerdictName(r.verdict)),
         r.outcome_a.empty() ? "-" : r.outcome_a,
         r.outcome_b.empty() ? "-" : r.outcome_b,
         r.tokens_per_s_a ? FormatNumber(*r.tokens_per_s_a) : "-",
         r.tokens_per_s_b ? FormatNumber(*r.tokens_per_s_b) : "-",
         compared ? (away_from_one ? FormatRatioAwayFromOne(r.change.value) : FormatRatio(r.change.value)) : "-",
         compared ? FormatInterval(r.change) : "",
         compared ? std::to_string(r.trials_a) + " vs " + std::to_string(r.trials_b) : "-",
         opt_ratio(r.speedup_a), opt_ratio(r.speedup_b), r.peak_a ? FormatBytes(*r.peak_a) : "-",
         r.peak_b ? FormatBytes(*r.peak_b) : "-",
         r.memory_change ? FormatSignedPercent(*r.memory_change) : "-",
         r.warmup_delta_s ? FormatSignedSeconds(*r.warmup_delta_s) : "-", loss});
  }
  return section;
}

// The HTML form's charts: the change of throughput and of peak memory, B over A.
std::string CompareChartsHtml(const SweepComparison& comparison) {
  std::vector<RatioChartRow> change_rows, memory_rows;
  for (const CompareRow& r : comparison.rows) {
    RatioChartRow change{r.key, std::nullopt,
                         r.verdict == CompareRow::Verdict::kNoChange || r.verdict == CompareRow::Verdict::kUnclear,
                         r.note};
    if (r.change.value > 0) change.ratio = r.change;
    if (change.note.empty()) change.note = CompareVerdictName(r.verdict);
    change_rows.push_back(std::move(change));
    if (r.memory_change) {
      memory_rows.push_back({r.key, RatioFigure{1.0 + *r.memory_change, std::nullopt, std::nullopt}, true, ""});
    }
  }
  std::string charts = "<section id=\"charts\">\n";
  std::string change_chart = RenderRatioChartSvg(
      "chart-change", "Throughput of B over A per variant, with interval whiskers", change_rows);
  if (!change_chart.empty()) {
    charts += "<h2>Throughput change B/A</h2>\n<p class=\"note\">Tokens/s of sweep B over sweep A; "
              "whiskers are the Welch interval; green: B faster, red: B slower, grey: no "
              "measurable change. The dashed line is 1.0x.</p>\n" + change_chart;
  }
  std::string memory_chart =
      RenderRatioChartSvg("chart-memory-change", "Peak memory of B over A per variant", memory_rows);
  if (!memory_chart.empty()) {
    charts += "<h2>Peak memory B/A</h2>\n<p class=\"note\">Largest rank's peak of sweep B over "
              "sweep A (below 1.0x: B uses less).</p>\n" + memory_chart;
  }
  return charts + "</section>\n";
}

std::string CompareCsv(const SweepComparison& comparison) {
  std::ostringstream out;
  out << "variant,verdict,outcome_a,outcome_b,tokens_per_s_a,tokens_per_s_b,change,ci_low,"
         "ci_high,trials_a,trials_b,peak_mem_bytes_a,peak_mem_bytes_b,memory_change,"
         "warmup_delta_s,loss_max_deviation\n";
  auto num = [](const auto& value) {
    if (!value) return std::string();
    std::ostringstream s;
    s.precision(10);
    s << *value;
    return s.str();
  };
  for (const CompareRow& r : comparison.rows) {
    std::ostringstream change;
    change.precision(10);
    if (r.change.value > 0) change << r.change.value;
    out << CsvField(r.key) << "," << CsvField(CompareVerdictName(r.verdict)) << "," << CsvField(r.outcome_a)
        << "," << CsvField(r.outcome_b) << "," << num(r.tokens_per_s_a) << "," << num(r.tokens_per_s_b)
        << "," << change.str() << "," << num(r.change.low) << "," << num(r.change.high) << ","
        << r.trials_a << "," << r.trials_b << "," << num(r.peak_a) << "," << num(r.peak_b) << ","
        << num(r.memory_change) << "," << num(r.warmup_delta_s) << "," << num(r.loss_deviation) << "\n";
  }
  return out.str();
}

}  // namespace

std::string RenderComparison(const SweepComparison& comparison, ReportFormat format) {
  if (format == ReportFormat::kJson) return ComparisonToJson(comparison).dump(2) + "\n";
  if (format == ReportFormat::kCsv) return CompareCsv(comparison);
  std::vector<std::string> headline = {
      "Comparing sweep A " + comparison.sweep_a + " with sweep B " + comparison.sweep_b,
      "Change = B tokens/s / A tokens/s per variant, with a " +
          FormatNumber(comparison.options.confidence * 100, 2) +
          "% Welch interval on log tokens/s (unpaired: the sweeps' repeats are independent); "
          "one trial on a side gives no verdict (unclear)"};
  std::vector<ReportSection> sections = {CompareTableSection(comparison)};
  std::string title = "Bakeoff comparison: " + comparison.sweep_a + " vs " + comparison.sweep_b;
  switch (format) {
    case ReportFormat::kMarkdown:
      return RenderSectionsMarkdown(title, headline, comparison.callouts, sections);
    case ReportFormat::kHtml:
      return RenderSectionsHtml(title, headline, comparison.callouts, CompareChartsHtml(comparison), sections,
                                "Generated by bakeoff compare; figures defined in docs/statistics.md.");
    default:
      return RenderSectionsTable(headline, comparison.callouts, sections);
  }
}

}  // namespace bakeoff::metrics
