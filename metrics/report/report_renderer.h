// Renders a computed Report (report_model.h) in the five formats of `bakeoff report`:
// a terminal table, Markdown, JSON, CSV (one row per variant) and one self-contained
// HTML page with inline SVG charts. Every text format draws the same sections
// (ReportSections), so a figure reads the same everywhere; JSON carries the full data.
// Each format lives in its own report_<format>.cc.
//
// Pure functions of the Report; no I/O. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/report/report_model.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

// "table" | "markdown" | "json" | "csv" | "html" (also "md", "text").
Result<ReportFormat> ParseReportFormat(const std::string& name);
const char* ReportFormatName(ReportFormat format);

// Renders in `format`.
std::string RenderReport(const Report& report, ReportFormat format);

std::string RenderReportTable(const Report& report);
std::string RenderReportMarkdown(const Report& report);
// `text` as Markdown that shows it as written and adds no markup (security review
// 2026-12-07, A13): a reason or a name is the trainer's or the submitter's text. The
// characters Markdown or HTML give a meaning are escaped: \ ` * _ [ ] | # ~ & with a
// backslash, < and > as &lt; and &gt;; a line break (CR, LF) becomes a space, so that the
// text stays in its table cell, heading or list item.
std::string MarkdownText(std::string_view text);
// As MarkdownText, for text that starts a line or a list item: a leading "-" or "+", or
// the "." or ")" after leading digits, followed by a space or the end (which would start
// a list there), is escaped too.
std::string MarkdownLine(std::string_view text);
nlohmann::json ReportToJson(const Report& report);
std::string RenderReportJson(const Report& report);
std::string RenderReportCsv(const Report& report);
std::string RenderReportHtml(const Report& report);

// One titled table of the report, already formatted as text cells.
struct ReportSection {
  std::string id;     // stable anchor: "verdicts", "memory", ...
  std::string title;
  std::string note;   // one sentence under the title (may be empty)
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // per column: right-aligned
};

// The report's lines above the sections: sweep, question, the answer ("Answer: ..."
// lines, AnswerSentences), baseline, progress, workers, fastest.
std::vector<std::string> ReportHeadline(const Report& report);
// One sentence per comparison, answering the sweep's question (report_answer.cc): each
// axis on its own when two or more baseline axes vary, else each variant against its
// baseline counterpart. Baselines and excluded variants have none.
std::vector<std::string> AnswerSentences(const Report& report);
// Verdicts first, then memory, warm-up, loss parity, outcomes, marginal effects, best
// configurations, iso-memory, evidence, noise and repeats, per-worker effects, trials.
// Sections with no rows are left out.
std::vector<ReportSection> ReportSections(const Report& report);

// The generic layouts behind the table, Markdown and HTML formats, for other reports
// made of sections (`bakeoff compare`). The HTML page is self-contained; `charts` is
// inserted verbatim (inline SVG) before the tables.
std::string RenderSectionsTable(const std::vector<std::string>& headline,
                                const std::vector<std::string>& callouts,
                                const std::vector<ReportSection>& sections);
std::string RenderSectionsMarkdown(const std::string& title, const std::vector<std::string>& headline,
                                   const std::vector<std::string>& callouts,
                                   const std::vector<ReportSection>& sections);
std::string RenderSectionsHtml(const std::string& title, const std::vector<std::string>& headline,
                               const std::vector<std::string>& callouts, const std::string& charts,
                               const std::vector<ReportSection>& sections,
                               const std::string& footer);

// One row of a ratio chart: a point with its interval whiskers, or a note when there
// is no ratio (not compared).
struct RatioChartRow {
  std::string label;
  std::optional<RatioFigure> ratio;
  bool no_difference = false;  // no verdict, or the interval contains 1: drawn grey
  std::string note;
};
// An inline SVG chart of ratios around 1.0x (green faster, red slower, grey unclear);
// the report's speedup chart and `bakeoff compare`'s change chart. "" without rows.
// `axis_label` titles the ratio axis (what is divided by what, and the unit "x").
std::string RenderRatioChartSvg(const std::string& id, const std::string& title,
                                const std::vector<RatioChartRow>& rows,
                                const std::string& axis_label = "ratio (x, 1.0x = no change)");

// One CSV field as RFC 4180 writes it: quoted (quotes doubled) when it holds a comma,
// a quote or a line break; as is otherwise. The report's, `bakeoff compare`'s and
// `bakeoff query`'s CSV.
std::string CsvField(const std::string& text);

// "3/4 ok, oom x1": succeeded of all trials, then each other outcome's count; "no
// trials" when none ran.
std::string OutcomeCounts(const VariantReport& variant);

// Formatting shared by the renderers (and `bakeoff compare`).
std::string FormatBytes(std::int64_t bytes);         // "1.5 GiB"
std::string FormatRatio(double ratio);               // "1.07x"
std::string FormatSignedPercent(double fraction);    // "+12.0%"
std::string FormatPercent(double fraction);          // "0.3%"
std::string FormatSeconds(double seconds);           // "212 s", "0.104 s"
std::string FormatSignedSeconds(double seconds);     // "+212 s"
std::string FormatNumber(double value, int significant = 4);  // "1234", "0.1024"
// "1.05-1.09" or "": two decimals, more while a bound not equal to 1 would read "1.00"
// or the two bounds would read alike (up to 6).
std::string FormatInterval(const RatioFigure& figure);
// FormatRatio with more decimals while the text would read exactly "1.00x" although the
// ratio is not 1 (beside "faster"/"slower").
std::string FormatRatioAwayFromOne(double ratio);

// One sentence for a variant's verdict: "1.07x faster (95% CI 1.05-1.09)",
// "no measurable difference: ...", "unclear: 6 repeats needed (1.04x, within-run only
// 95% CI 1.02-1.06)", or the comparison's note when it was not compared.
std::string VerdictSentence(const VariantReport& variant, double confidence);
// The same sentence from its parts (marginal effects, `bakeoff compare`).
std::string VerdictText(Verdict verdict, const RatioFigure& figure, IntervalMethod method,
                        const std::optional<int>& repeats_needed, double confidence);

}  // namespace bakeoff::metrics
