#include "metrics/report/report_renderer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "metrics/report/report_builder.h"
#include "tests/metrics/report/report_test_fixtures.h"

namespace bakeoff::metrics {
namespace {

using testing::AddTrials;
using testing::ExpectContains;
using testing::KeyOf;
using testing::TwoByTwoSweep;
using testing::Unsuccessful;

// A sweep with a bit of everything: a faster variant, an out-of-memory one, a quoted
// reason with a comma, a fallback-free evidence, two workers.
Report RichReport() {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.15);
  std::erase_if(input.trials, [](const TrialInput& t) { return t.variant_key == KeyOf("jit", "4"); });
  input.trials.push_back(Unsuccessful(KeyOf("jit", "4"), 0, "oom", "CUDA out of memory, tried 2 GiB"));
  input.trials.push_back(Unsuccessful(KeyOf("jit", "4"), 1, "oom", "CUDA out of memory, tried 2 GiB"));
  for (TrialInput& t : input.trials) t.worker = t.repeat % 2 ? "node-b" : "node-a";
  ReportOptions options;
  options.memory_budget_bytes = 2'000'000'000;
  return BuildReport(input, options);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Issue 33: the first lines of every format answer the question, one sentence per
// comparison, in QUESTION.md's form; a break-even only for a significant speedup.
TEST(ReportRendererTest, TheAnswerComesFirstInEveryFormat) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.25);
  input.trials.erase(std::remove_if(input.trials.begin(), input.trials.end(),
                                    [](const TrialInput& t) { return t.variant_key == KeyOf("jit", "4"); }),
                     input.trials.end());
  input.trials.push_back(Unsuccessful(KeyOf("jit", "4"), 0, "oom", "out of memory"));
  Report report = BuildReport(input, ReportOptions{});
  std::vector<std::string> answer = AnswerSentences(report);
  ASSERT_EQ(answer.size(), 2u);
  EXPECT_TRUE(std::regex_match(
      answer[0], std::regex("With micro_batch=1, compile_mode=jit is 1\\.2[0-9]x \\(95% CI 1\\.[0-9]+-1\\.[0-9]+\\) "
                            "the tokens/s of compile_mode=eager: faster, uses the same peak memory, "
                            "spends 10\\.0 s more in warm-up, and pays that back after [0-9]+ steps\\. "
                            "Its loss curve matches compile_mode=eager within [0-9.]+%\\.")))
      << answer[0];
  EXPECT_EQ(answer[1], "With micro_batch=4, compile_mode=jit runs out of memory; compile_mode=eager does not.");

  std::vector<std::string> table = Lines(RenderReportTable(report));
  ASSERT_GE(table.size(), 4u);
  EXPECT_EQ(table[1], "Question: " + input.question);
  EXPECT_EQ(table[2], "Answer: " + answer[0]);
  EXPECT_EQ(table[3], "Answer: " + answer[1]);
  std::string markdown = RenderReportMarkdown(report);
  EXPECT_LT(markdown.find("- Answer: " + MarkdownText(answer[0])), markdown.find("- Baseline:"));
  EXPECT_NE(RenderReportHtml(report).find("<li class=\"answer\">" + answer[0] + "</li>"), std::string::npos);
  EXPECT_EQ(ReportToJson(report)["headline"], nlohmann::json(answer));

  // No measurable difference: the figures, and no break-even.
  ReportInput same = TwoByTwoSweep();
  AddTrials(same, 5, 1.0);
  std::string flat = AnswerSentences(BuildReport(same, ReportOptions{}))[0];
  EXPECT_NE(flat.find(": no measurable difference, "), std::string::npos) << flat;
  EXPECT_EQ(flat.find("pays that back"), std::string::npos) << flat;
}

// Issue 33: with several workers the per-worker section is shown, and a comparison no
// worker ran both sides of says so there instead of vanishing from it.
TEST(ReportRendererTest, TheWorkerSectionShowsAComparisonNoWorkerRanBothSidesOf) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 4, 1.3);
  for (TrialInput& t : input.trials) t.worker = t.variant_key.find("jit") != std::string::npos ? "node-b" : "node-a";
  std::vector<ReportSection> sections = ReportSections(BuildReport(input, ReportOptions{}));
  auto it = std::find_if(sections.begin(), sections.end(), [](const ReportSection& s) { return s.id == "by_worker"; });
  ASSERT_NE(it, sections.end());
  ASSERT_EQ(it->rows.size(), 2u);
  EXPECT_EQ(it->rows[0][1], "none ran both sides");
  EXPECT_EQ(it->rows[0][3], "variant on node-b x4; counterpart on node-a x4");
}

TEST(ReportRendererTest, ParsesFormatNames) {
  EXPECT_EQ(*ParseReportFormat("table"), ReportFormat::kTable);
  EXPECT_EQ(*ParseReportFormat("markdown"), ReportFormat::kMarkdown);
  EXPECT_EQ(*ParseReportFormat("md"), ReportFormat::kMarkdown);
  EXPECT_EQ(*ParseReportFormat("json"), ReportFormat::kJson);
  EXPECT_EQ(*ParseReportFormat("csv"), ReportFormat::kCsv);
  EXPECT_EQ(*ParseReportFormat("html"), ReportFormat::kHtml);
  Result<ReportFormat> bad = ParseReportFormat("pdf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("table, markdown, json, csv, html"), std::string::npos);
}

TEST(ReportRendererTest, FormatsNumbersForPeople) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(3LL << 30), "3.0 GiB");
  EXPECT_EQ(FormatRatio(1.0712), "1.07x");
  EXPECT_EQ(FormatSignedPercent(0.12), "+12.0%");
  EXPECT_EQ(FormatSignedPercent(-0.031), "-3.1%");
  EXPECT_EQ(FormatPercent(0.003), "0.3%");
  EXPECT_EQ(FormatSeconds(212.4), "212 s");
  EXPECT_EQ(FormatSignedSeconds(-1.25), "-1.2 s");
  EXPECT_EQ(FormatNumber(1234.5678), "1235");
  EXPECT_EQ(FormatNumber(0.10241), "0.1024");
  RatioFigure f{1.07, 1.05, 1.09};
  EXPECT_EQ(FormatInterval(f), "1.05-1.09");
  EXPECT_EQ(FormatInterval(RatioFigure{1.0, std::nullopt, std::nullopt}), "");
}

TEST(ReportRendererTest, BoundsNeverReadOneNextToAVerdict) {
  // A bound that is not 1 never prints as "1.00"; distinct bounds never print alike.
  EXPECT_EQ(FormatInterval(RatioFigure{1.006, 1.0031, 1.0089}), "1.003-1.009");
  EXPECT_EQ(FormatInterval(RatioFigure{0.98, 0.9612, 0.9996}), "0.9612-0.9996");
  EXPECT_EQ(FormatInterval(RatioFigure{1.0001, 1.00004, 1.00016}), "1.00004-1.00016");
  EXPECT_EQ(FormatInterval(RatioFigure{1.0, 0.99, 1.0}), "0.99-1.00");  // exactly 1: as is
  EXPECT_EQ(FormatRatioAwayFromOne(1.004), "1.004x");
  EXPECT_EQ(FormatRatioAwayFromOne(1.07), "1.07x");
  // Through the sentence: a tiny but certain speedup.
  VariantReport v;
  v.comparison.status = Comparison::Status::kCompared;
  v.comparison.speedup = RatioFigure{1.0042, 1.0021, 1.0063};
  v.comparison.method = IntervalMethod::kPairedRepeats;
  v.comparison.verdict = Verdict::kFaster;
  std::string sentence = VerdictSentence(v, 0.95);
  EXPECT_EQ(sentence, "1.004x faster (95% CI 1.002-1.006)");
  EXPECT_EQ(sentence.find("1.00-"), std::string::npos);
}

TEST(ReportRendererTest, NoVerdictIsUnclearEverywhere) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 1, 1.3);  // one repeat: within-run interval only
  Report report = BuildReport(input, ReportOptions{});
  const VariantReport& v = *report.FindVariant(KeyOf("jit", "1"));
  std::string sentence = VerdictSentence(v, 0.95);
  EXPECT_EQ(sentence.rfind("unclear: 6 repeats needed (1.29x, within-run only 95% CI ", 0), 0u)
      << sentence;
  nlohmann::json json = nlohmann::json::parse(RenderReportJson(report));
  const nlohmann::json& jit = json["variants"][1];
  ASSERT_EQ(jit["key"], KeyOf("jit", "1"));
  EXPECT_TRUE(jit["comparison"]["no_measurable_difference"].is_null());
  EXPECT_EQ(jit["comparison"]["verdict"], "unclear");
  EXPECT_EQ(jit["comparison"]["interval_method"], "measured steps (within-run only)");
  std::string table = RenderReportTable(report);
  EXPECT_NE(table.find("unclear: 6 repeats needed"), std::string::npos);
  EXPECT_NE(table.find("(within-run only)"), std::string::npos);
  std::size_t row = table.find(KeyOf("jit", "1") + " ", table.find("\nVerdicts\n"));
  ASSERT_NE(row, std::string::npos);
  std::string line = table.substr(row, table.find('\n', row) - row);
  EXPECT_EQ(line.find("faster"), std::string::npos) << line;
  // One trial and one step each: no interval at all, still "unclear", never a verdict.
  for (TrialInput& t : input.trials) t.steps.resize(1);
  Report bare = BuildReport(input, ReportOptions{});
  const Comparison& c = bare.FindVariant(KeyOf("jit", "1"))->comparison;
  EXPECT_EQ(c.method, IntervalMethod::kNone);
  EXPECT_EQ(c.verdict, Verdict::kUnclear);
  EXPECT_FALSE(c.no_measurable_difference);
  EXPECT_EQ(VerdictSentence(*bare.FindVariant(KeyOf("jit", "1")), 0.95),
            "unclear: 6 repeats needed (1.29x, no interval)");
}

TEST(ReportRendererTest, JsonParsesAndHoldsTheFigures) {
  Report report = RichReport();
  nlohmann::json json = nlohmann::json::parse(RenderReportJson(report));
  EXPECT_EQ(json["format"], "bakeoff.report/1");
  EXPECT_EQ(json["sweep"]["name"], "compile-vs-eager");
  EXPECT_EQ(json["sweep"]["axes"].size(), 2u);
  ASSERT_EQ(json["variants"].size(), 4u);
  const nlohmann::json* jit = nullptr;
  for (const auto& v : json["variants"]) {
    if (v["key"] == KeyOf("jit", "1")) jit = &v;
  }
  ASSERT_NE(jit, nullptr);
  const auto& c = (*jit)["comparison"];
  EXPECT_EQ(c["status"], "compared");
  EXPECT_NEAR(c["speedup"]["value"].get<double>(), 1.15, 0.01);
  EXPECT_TRUE(c["speedup"]["ci_low"].is_number());
  EXPECT_TRUE(c["speedup"]["ci_high"].is_number());
  EXPECT_EQ(c["interval_method"], "paired repeats");
  EXPECT_EQ(c["variant_trials"], 3);
  EXPECT_TRUE(c["memory"]["compression_ratio"].is_number());
  EXPECT_TRUE(c["warmup"]["break_even"].is_string());
  EXPECT_TRUE(c["loss_parity"]["max_relative_deviation"].is_number());
  EXPECT_EQ(c["by_worker"].size(), 2u);
  EXPECT_TRUE((*jit)["loss_curve"].is_array());
  EXPECT_EQ((*jit)["step_times"]["count"], 30);
  EXPECT_EQ(json["callouts"][0].get<std::string>().find(KeyOf("jit", "4")), 0u);
  EXPECT_TRUE(json["best"]["fastest"].is_null()) << "its comparison failed: no verdict backs it";
  EXPECT_EQ(json["best"]["highest_without_verdict"], KeyOf("eager", "4"));
  EXPECT_EQ(json["best"]["fastest_within_budget"], KeyOf("eager", "4"));
  EXPECT_EQ(json["trials"].size(), 11u);
  EXPECT_EQ(json["options"]["memory_budget_bytes"], 2'000'000'000);
}

// Splits one CSV record (RFC 4180, no embedded newlines in these fixtures).
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  fields.push_back(field);
  return fields;
}

TEST(ReportRendererTest, CsvHasAHeaderAndOneRowPerVariant) {
  Report report = RichReport();
  std::vector<std::string> lines = Lines(RenderReportCsv(report));
  ASSERT_EQ(lines.size(), 1u + report.variants.size());
  std::vector<std::string> header = CsvFields(lines[0]);
  EXPECT_EQ(header[0], "sweep_id");
  EXPECT_EQ(header[1], "variant");
  EXPECT_EQ(header.back(), "param_micro_batch");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> row = CsvFields(lines[i]);
    ASSERT_EQ(row.size(), header.size()) << lines[i];
    EXPECT_EQ(row[1], report.variants[i - 1].key);
  }
  auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  std::vector<std::string> oom = CsvFields(lines[4]);  // jit,4
  EXPECT_EQ(oom[column("status")], "variant_failed");
  EXPECT_NE(oom[column("note")].find("CUDA out of memory, tried 2 GiB"), std::string::npos);
  std::vector<std::string> jit = CsvFields(lines[2]);
  EXPECT_NEAR(std::stod(jit[column("speedup")]), 1.15, 0.01);
  EXPECT_EQ(jit[column("interval_method")], "paired repeats");
}

TEST(ReportRendererTest, MarkdownTablesAreWellFormed) {
  std::string md = RenderReportMarkdown(RichReport());
  EXPECT_EQ(md.rfind("# Bakeoff report: compile-vs-eager", 0), 0u);
  ExpectContains(md, {"## Call-outs", "## Verdicts", "## Marginal effect of each axis value"});
  std::vector<std::string> lines = Lines(md);
  int tables = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("|", 0) != 0 || (i > 0 && lines[i - 1].rfind("|", 0) == 0)) continue;
    // A table starts here: header, delimiter row, then rows with the same cell count.
    ++tables;
    auto cells = [](const std::string& line) {
      int count = 0;
      for (std::size_t k = 0; k < line.size(); ++k) {
        if (line[k] == '|' && (k == 0 || line[k - 1] != '\\')) ++count;
      }
      return count - 1;
    };
    int width = cells(lines[i]);
    ASSERT_LT(i + 1, lines.size());
    EXPECT_TRUE(std::regex_match(lines[i + 1], std::regex(R"(\|( -{3}:? \|)+)"))) << lines[i + 1];
    EXPECT_EQ(cells(lines[i + 1]), width);
    for (std::size_t k = i + 2; k < lines.size() && lines[k].rfind("|", 0) == 0; ++k) {
      EXPECT_EQ(cells(lines[k]), width) << lines[k];
    }
  }
  EXPECT_GE(tables, 6);
}

// A13: the markdown report printed a reason's markup as written, so a reason could add
// an image, a link or HTML to a rendered report, or break its table. A reason with HTML,
// pipes, a newline and emphasis in a table cell, and (the second way in) a callout and the
// question, which are not in a table,
// are shown as text: no raw tag, no unescaped markup, the table's cell count kept.
TEST(ReportRendererTest, MarkdownShowsAReasonsMarkupAsText) {
  const std::string reason = "<img src=x onerror=alert(1)> <b>bold</b> | cell\n## heading [link](http://x) `code` *em* _u_ \\";
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.15);
  testing::OnlyUnsuccessful(input, KeyOf("jit", "4"), "failed", reason);
  input.notes.push_back("<script>x</script> **loud** 1. list");  // a callout
  input.question = "- 1. <i>is it</i>?";                           // a headline line
  const std::string md = RenderReportMarkdown(BuildReport(input, ReportOptions{}));
  for (const char* raw : {"<img", "<b>", "<script>", "<i>", "[link](", "*em*", "_u_", "`code`", "**loud**", "\n## heading"}) {
    EXPECT_EQ(md.find(raw), std::string::npos) << raw << " in:\n" << md;
  }
  ExpectContains(md, {"&lt;img src=x onerror=alert(1)&gt; &lt;b&gt;bold&lt;/b&gt; \\| cell \\#\\# heading "
                      "\\[link\\](http://x) \\`code\\` \\*em\\* \\_u\\_ \\\\",
                      "- **&lt;script&gt;x&lt;/script&gt; \\*\\*loud\\*\\* 1. list**",
                      "- Question: - 1. &lt;i&gt;is it&lt;/i&gt;?"});
  // The reason's row has as many cells as its header.
  std::vector<std::string> lines = Lines(md);
  auto cells = [](const std::string& line) {
    int count = 0;
    for (std::size_t k = 0; k < line.size(); ++k) count += line[k] == '|' && (k == 0 || line[k - 1] != '\\');
    return count;
  };
  bool found = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("onerror") == std::string::npos || lines[i].rfind("|", 0) != 0) continue;
    found = true;
    std::size_t header = i;
    while (header > 0 && lines[header - 1].rfind("|", 0) == 0) --header;
    EXPECT_EQ(cells(lines[i]), cells(lines[header])) << lines[i];
  }
  EXPECT_TRUE(found) << md;
}

TEST(ReportRendererTest, MarkdownTextEscapesWhatMarkdownAndHtmlGiveAMeaning) {
  EXPECT_EQ(MarkdownText("compile_mode=jit"), "compile\\_mode=jit");
  EXPECT_EQ(MarkdownText("a|b\nc\rd"), "a\\|b c d");
  EXPECT_EQ(MarkdownText("<x> & [y] ~z~ #"), "&lt;x&gt; \\& \\[y\\] \\~z\\~ \\#");
  EXPECT_EQ(MarkdownText("1.49x"), "1.49x") << "a cell's number stays as it is";
  EXPECT_EQ(MarkdownLine("- item"), "\\- item");
  EXPECT_EQ(MarkdownLine("12. item"), "12\\. item");
  EXPECT_EQ(MarkdownLine("3) item"), "3\\) item");
  EXPECT_EQ(MarkdownLine("-"), "\\-");
  EXPECT_EQ(MarkdownLine("1.49x faster"), "1.49x faster") << "no space after the dot: no list";
  EXPECT_EQ(MarkdownLine("-3% memory"), "-3% memory");
}

TEST(ReportRendererTest, TableLeadsWithCalloutsAndAlignsColumns) {
  std::string text = RenderReportTable(RichReport());
  std::vector<std::string> lines = Lines(text);
  EXPECT_EQ(lines[0], "Sweep 7 \"compile-vs-eager\"");
  std::size_t callouts = text.find("Call-outs");
  std::size_t verdicts = text.find("\nVerdicts");
  ASSERT_NE(callouts, std::string::npos);
  ASSERT_NE(verdicts, std::string::npos);
  EXPECT_LT(callouts, verdicts);
  EXPECT_NE(text.find("fails where its counterpart succeeds"), std::string::npos);
  EXPECT_NE(text.find("Fastest within 1.9 GiB: " + KeyOf("eager", "4")), std::string::npos);
  // Header, rule and rows of the verdict table have their columns at the same offsets.
  std::size_t at = 0;
  for (; at < lines.size(); ++at) {
    if (lines[at] == "Verdicts") break;
  }
  ASSERT_LT(at + 3, lines.size());
  const std::string& header = lines[at + 2];
  const std::string& rule = lines[at + 3];
  EXPECT_EQ(header.find("outcome"), rule.find("  -", 3) + 2);
}

TEST(ReportRendererTest, HtmlIsSelfContainedWithItsCharts) {
  std::string html = RenderReportHtml(RichReport());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  ExpectContains(html, {"id=\"chart-speedup\"", "id=\"chart-memory\"", "id=\"chart-steps\"",
                        "class=\"chart loss-chart\""});
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  // Tags balance: every opened element of these kinds is closed.
  for (const std::string tag : {"svg", "table", "section", "tr", "td", "th", "figure", "text",
                                "ul", "li", "title", "style"}) {
    std::regex open("<" + tag + "[ >]"), close("</" + tag + ">");
    auto count = [&](const std::regex& re) {
      return std::distance(std::sregex_iterator(html.begin(), html.end(), re), std::sregex_iterator());
    };
    EXPECT_EQ(count(open), count(close)) << tag;
  }
  // No raw angle brackets leak from data into text (escaped as entities).
  ReportInput input = TwoByTwoSweep();
  input.sweep_name = "<b>bold</b> & more";
  AddTrials(input, 2, 1.1);
  std::string escaped = RenderReportHtml(BuildReport(input, ReportOptions{}));
  EXPECT_EQ(escaped.find("<b>bold"), std::string::npos);
  EXPECT_NE(escaped.find("&lt;b&gt;bold&lt;/b&gt; &amp; more"), std::string::npos);
}

// The <svg ...>...</svg> element whose opening tag contains `marker`, or "".
std::string SvgWith(const std::string& html, const std::string& marker) {
  std::size_t at = html.find(marker);
  if (at == std::string::npos) return "";
  std::size_t begin = html.rfind("<svg", at);
  std::size_t end = html.find("</svg>", at);
  return html.substr(begin, end + 6 - begin);
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int Attribute(const std::string& svg, const std::string& name) {
  std::smatch m;
  std::regex_search(svg, m, std::regex(" " + name + "=\"([0-9]+)\""));
  return m.empty() ? -1 : std::stoi(m[1].str());
}

// The largest tick value on the step-time axis (ticks read "0.0100 s").
double LargestTick(const std::string& svg) {
  double largest = 0;
  static const std::regex kTick(R"(class="tick">([0-9.e+-]+) s<)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kTick); it != std::sregex_iterator(); ++it) {
    largest = std::max(largest, std::stod((*it)[1].str()));
  }
  return largest;
}

TEST(ReportRendererTest, StepTimeAxisClipsOneStalledStepAndMarksIt) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 3, 1.15);
  // One step of one trial stalls: 40 times the trial's step time.
  TrialInput& stalled = input.trials.front();
  const double typical = stalled.steps[4].step_s;
  stalled.steps[4].step_s = typical * 40;
  std::string svg = SvgWith(RenderReportHtml(BuildReport(input, ReportOptions{})), "id=\"chart-steps\"");
  ASSERT_FALSE(svg.empty());
  // Exactly that max is clipped: a marker with its true value, and the axis ends well below it.
  EXPECT_EQ(Count(svg, "class=\"clipped\""), 1) << svg;
  EXPECT_NE(svg.find("<title>max " + FormatSeconds(typical * 40) + " per step, beyond the axis"), std::string::npos)
      << svg;
  EXPECT_GT(LargestTick(svg), 0);
  EXPECT_LT(LargestTick(svg), typical * 10);
  EXPECT_NE(svg.find("1 point lies beyond the axis"), std::string::npos);

  // Without the stall nothing is clipped and the axis reaches the largest step.
  ReportInput calm = TwoByTwoSweep();
  AddTrials(calm, 3, 1.15);
  std::string calm_svg = SvgWith(RenderReportHtml(BuildReport(calm, ReportOptions{})), "id=\"chart-steps\"");
  EXPECT_EQ(Count(calm_svg, "class=\"clipped\""), 0);
  EXPECT_EQ(calm_svg.find("beyond the axis:"), std::string::npos);
}

TEST(ReportRendererTest, EveryChartLabelsItsAxesWithUnits) {
  std::string html = RenderReportHtml(RichReport());
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"id=\"chart-speedup\"", {"speedup: tokens/s of the variant over its counterpart (x)"}},
      {"id=\"chart-memory\"", {"peak memory, largest rank (GiB)"}},
      {"id=\"chart-steps\"", {"seconds per step (s)"}},
      {"class=\"chart loss-chart\"", {">step<", "loss (mean over trials)"}},
  };
  for (const auto& [marker, labels] : expected) {
    std::string svg = SvgWith(html, marker);
    ASSERT_FALSE(svg.empty()) << marker;
    EXPECT_EQ(Count(svg, "class=\"axis-label\""), static_cast<int>(labels.size())) << marker;
    for (const auto& label : labels) EXPECT_NE(svg.find(label), std::string::npos) << marker << ": " << label;
  }
  // Every chart on the page has at least one labelled axis.
  EXPECT_GE(Count(html, "<svg class=\"chart"), 4);
  for (std::size_t at = html.find("<svg class=\"chart"); at != std::string::npos;
       at = html.find("<svg class=\"chart", at + 1)) {
    std::string svg = html.substr(at, html.find("</svg>", at) - at);
    EXPECT_GE(Count(svg, "class=\"axis-label\""), 1) << svg.substr(0, 200);
  }
  // The y axis of the loss chart is written upwards.
  EXPECT_NE(SvgWith(html, "class=\"chart loss-chart\"").find("transform=\"rotate(-90"), std::string::npos);
}

TEST(ReportRendererTest, LossChartIsAsWideAsTheOtherChartsAndTallEnoughToRead) {
  std::string html = RenderReportHtml(RichReport());
  std::string loss = SvgWith(html, "class=\"chart loss-chart\"");
  ASSERT_FALSE(loss.empty());
  EXPECT_GE(Attribute(loss, "height"), 280);
  for (const std::string id : {"chart-speedup", "chart-memory", "chart-steps"}) {
    std::string other = SvgWith(html, "id=\"" + id + "\"");
    ASSERT_FALSE(other.empty()) << id;
    EXPECT_GE(Attribute(loss, "width"), Attribute(other, "width")) << id;
  }
}

TEST(ReportRendererTest, EveryFormatRendersAReportWithNoSucceededTrial) {
  ReportInput input = TwoByTwoSweep();
  for (const VariantInput& v : input.variants) input.trials.push_back(Unsuccessful(v.key, 0, "oom", "oom"));
  Report report = BuildReport(input, ReportOptions{});
  for (ReportFormat format : {ReportFormat::kTable, ReportFormat::kMarkdown, ReportFormat::kJson,
                              ReportFormat::kCsv, ReportFormat::kHtml}) {
    std::string out = RenderReport(report, format);
    EXPECT_FALSE(out.empty()) << ReportFormatName(format);
  }
  EXPECT_NO_THROW(nlohmann::json::parse(RenderReportJson(report)));
}

TEST(ReportRendererTest, VerdictSentenceSaysWhatWasFound) {
  Report report = RichReport();
  std::string faster = VerdictSentence(*report.FindVariant(KeyOf("jit", "1")), 0.95);
  EXPECT_NE(faster.find("faster (95% CI "), std::string::npos) << faster;
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 5, 1.0);
  Report same = BuildReport(input, ReportOptions{});
  EXPECT_EQ(VerdictSentence(*same.FindVariant(KeyOf("jit", "1")), 0.95).rfind("no measurable difference", 0), 0u);
}

}  // namespace
}  // namespace bakeoff::metrics
