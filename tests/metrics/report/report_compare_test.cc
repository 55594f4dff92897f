#include "metrics/report/report_compare.h"

#include <gtest/gtest.h>

#include "metrics/report/report_renderer.h"
#include "tests/metrics/report/report_test_fixtures.h"

namespace bakeoff::metrics {
namespace {

using testing::AddTrials;
using testing::KeyOf;
using testing::TwoByTwoSweep;
using testing::Unsuccessful;

// Sweep B: jit,1 is 10% slower than in A, eager,4 now runs out of memory, the rest the
// same (with the same drift, so "no measurable change").
struct TwoSweeps {
  ReportInput a, b;
};

TwoSweeps MakeSweeps() {
  TwoSweeps s;
  s.a = TwoByTwoSweep();
  AddTrials(s.a, 3, 1.2);
  s.b = TwoByTwoSweep();
  s.b.sweep_id = "8";
  s.b.sweep_name = "compile-vs-eager-new-cluster";
  AddTrials(s.b, 3, 1.2);
  for (TrialInput& t : s.b.trials) {
    if (t.variant_key != KeyOf("jit", "1")) continue;
    for (RankSummary& r : t.ranks) *r.figures.tokens_per_s *= 0.9;
    for (StepSample& step : t.steps) step.step_s /= 0.9;
  }
  std::erase_if(s.b.trials, [](const TrialInput& t) { return t.variant_key == KeyOf("eager", "4"); });
  s.b.trials.push_back(Unsuccessful(KeyOf("eager", "4"), 0, "oom", "out of memory"));
  return s;
}

TEST(ReportCompareTest, RegressionsComeFirst) {
  TwoSweeps s = MakeSweeps();
  SweepComparison c = CompareSweeps(s.a, s.b, ReportOptions{});
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_EQ(c.rows[0].key, KeyOf("eager", "4"));
  EXPECT_EQ(c.rows[0].verdict, CompareRow::Verdict::kNowFails);
  EXPECT_EQ(c.rows[1].key, KeyOf("jit", "1"));
  EXPECT_EQ(c.rows[1].verdict, CompareRow::Verdict::kRegression);
  EXPECT_NEAR(c.rows[1].change.value, 0.9, 0.01);
  ASSERT_TRUE(c.rows[1].change.high);
  EXPECT_LT(*c.rows[1].change.high, 1.0);
  EXPECT_EQ(c.rows[1].method, IntervalMethod::kUnpairedRepeats);
  EXPECT_EQ(c.rows[1].trials_a, 3);
  EXPECT_EQ(c.rows[1].trials_b, 3);
  ASSERT_TRUE(c.rows[1].speedup_a && c.rows[1].speedup_b);
  EXPECT_NEAR(c.rows[1].speedup_a->value, 1.2, 0.01);
  EXPECT_NEAR(c.rows[1].speedup_b->value, 1.08, 0.01);
  for (std::size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(c.rows[i].verdict, CompareRow::Verdict::kNoChange) << c.rows[i].key;
    EXPECT_NEAR(c.rows[i].change.value, 1.0, 1e-9);
  }
  EXPECT_NE(c.callouts[0].find(KeyOf("eager", "4") + " ran in A"), std::string::npos);
  EXPECT_NE(c.callouts[1].find(KeyOf("jit", "1") + " is slower in B"), std::string::npos);
}

TEST(ReportCompareTest, VariantsInOnlyOneSweepAreListed) {
  TwoSweeps s = MakeSweeps();
  s.b.variants.pop_back();  // jit,4 not in B
  std::erase_if(s.b.trials, [](const TrialInput& t) { return t.variant_key == KeyOf("jit", "4"); });
  SweepComparison c = CompareSweeps(s.a, s.b, ReportOptions{});
  bool only_in_a = false;
  for (const CompareRow& row : c.rows) {
    if (row.key == KeyOf("jit", "4")) only_in_a = row.verdict == CompareRow::Verdict::kOnlyInA;
  }
  EXPECT_TRUE(only_in_a);
}

TEST(ReportCompareTest, RendersEveryFormat) {
  TwoSweeps s = MakeSweeps();
  SweepComparison c = CompareSweeps(s.a, s.b, ReportOptions{});
  nlohmann::json json = nlohmann::json::parse(RenderComparison(c, ReportFormat::kJson));
  EXPECT_EQ(json["format"], "bakeoff.compare/1");
  EXPECT_EQ(json["rows"].size(), 4u);
  EXPECT_EQ(json["rows"][1]["verdict"], "regression");
  std::string csv = RenderComparison(c, ReportFormat::kCsv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  std::string table = RenderComparison(c, ReportFormat::kTable);
  std::size_t rows = table.find("-----");  // the rule under the header
  ASSERT_NE(rows, std::string::npos);
  EXPECT_LT(table.find("now fails", rows), table.find("regression", rows));
  std::string md = RenderComparison(c, ReportFormat::kMarkdown);
  EXPECT_NE(md.find("| variant | verdict |"), std::string::npos);
  std::string html = RenderComparison(c, ReportFormat::kHtml);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
  // The change chart: one point for each variant that ran in both sweeps, a note else.
  const std::size_t chart = html.find("id=\"chart-change\"");
  ASSERT_NE(chart, std::string::npos);
  const std::string svg = html.substr(chart, html.find("</svg>", chart) - chart);
  int points = 0;
  for (std::size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++points;
  int compared = 0;
  for (const CompareRow& row : c.rows) compared += row.change.value > 0 ? 1 : 0;
  EXPECT_GT(compared, 0);
  EXPECT_EQ(points, compared);
  EXPECT_NE(svg.find("class=\"missing\""), std::string::npos);  // the variant that now fails
}

// One trial per variant in each sweep: a within-run interval only, so no verdict.
TEST(ReportCompareTest, OneRepeatIsUnclearNotAVerdict) {
  ReportInput a = TwoByTwoSweep(), b = TwoByTwoSweep();
  AddTrials(a, 1, 1.2);
  AddTrials(b, 1, 1.2);
  b.sweep_id = "8";
  for (TrialInput& t : b.trials) {
    for (RankSummary& r : t.ranks) *r.figures.tokens_per_s *= 0.8;  // B much slower
    for (StepSample& step : t.steps) step.step_s /= 0.8;
  }
  SweepComparison c = CompareSweeps(a, b, ReportOptions{});
  for (const CompareRow& row : c.rows) {
    EXPECT_EQ(row.verdict, CompareRow::Verdict::kUnclear) << row.key;
    EXPECT_EQ(row.method, IntervalMethod::kMeasuredSteps) << row.key;
    EXPECT_NE(row.note.find("repeats needed in each sweep"), std::string::npos) << row.note;
  }
  nlohmann::json json = ComparisonToJson(c);
  EXPECT_TRUE(json["rows"][0]["no_measurable_change"].is_null());
  EXPECT_EQ(json["rows"][0]["verdict"], "unclear");
  std::string table = RenderComparison(c, ReportFormat::kTable);
  EXPECT_NE(table.find("unclear: 6 repeats needed in each sweep"), std::string::npos);
  EXPECT_EQ(table.find("regression", table.find("-----")), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::metrics
