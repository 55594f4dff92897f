// Issue 47 (docs/question.md H7): graph breaks, recompiles and compile-cache hits per
// variant in every format of the report, from the trials' summaries' `compile` evidence.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_renderer.h"
#include "tests/metrics/report/report_test_fixtures.h"

namespace bakeoff::metrics {
namespace {

using testing::AddTrials;
using testing::ExpectContains;
using testing::KeyOf;
using testing::TwoByTwoSweep;

// TwoByTwoSweep, 2 repeats; jit's trials report compile evidence: the first a cold
// compile (misses), the second a warm one (hits), 3 graph breaks each.
Report WithCompileEvidence() {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.2);
  for (TrialInput& t : input.trials) {
    if (t.variant_key != KeyOf("jit", "1")) continue;
    const bool cold = t.repeat == 0;
    t.compile = {{"graphs", 2},
                 {"graph_breaks", 3},
                 {"graph_break_reasons", {"data-dependent branch", "print() call"}},
                 {"recompiles", cold ? 1 : 0},
                 {"inductor_cache_hits", cold ? 0 : 2},
                 {"inductor_cache_misses", cold ? 2 : 0}};
  }
  return BuildReport(input, ReportOptions{});
}

TEST(ReportCompileEvidenceTest, AVariantsCompileEvidenceIsSummedOverItsTrials) {
  const Report report = WithCompileEvidence();
  const VariantReport* jit = report.FindVariant(KeyOf("jit", "1"));
  ASSERT_NE(jit, nullptr);
  ASSERT_TRUE(jit->compile.has_value());
  EXPECT_EQ(jit->compile->trials, 2);
  EXPECT_DOUBLE_EQ(jit->compile->graphs, 2);
  EXPECT_DOUBLE_EQ(jit->compile->graph_breaks, 3);
  EXPECT_DOUBLE_EQ(jit->compile->recompiles, 0.5);
  EXPECT_EQ(jit->compile->cache_hits, 2);
  EXPECT_EQ(jit->compile->cache_misses, 2);
  EXPECT_EQ(jit->compile->break_reasons, (std::vector<std::string>{"data-dependent branch", "print() call"}));
  // A variant whose trials reported none has none (eager, the native trainer).
  EXPECT_FALSE(report.FindVariant(KeyOf("eager", "1"))->compile.has_value());
}

TEST(ReportCompileEvidenceTest, TextHtmlAndJsonShowIt) {
  const Report report = WithCompileEvidence();
  const std::string text = RenderReportTable(report);
  ExpectContains(text, {"Compile evidence", "graph breaks", "recompiles", "cache hits", "data-dependent branch"});
  ExpectContains(RenderReportHtml(report), {"Compile evidence", "graph breaks", "cache misses"});
  const nlohmann::json json = nlohmann::json::parse(RenderReportJson(report));
  bool found = false;
  for (const auto& v : json["variants"]) {
    if (v["key"] != KeyOf("jit", "1")) continue;
    found = true;
    EXPECT_EQ(v["compile"]["graph_breaks"], 3.0);
    EXPECT_EQ(v["compile"]["cache_hits"], 2);
    EXPECT_EQ(v["compile"]["cache_misses"], 2);
    EXPECT_EQ(v["compile"]["trials"], 2);
  }
  EXPECT_TRUE(found);
}

TEST(ReportCompileEvidenceTest, NoEvidenceNoSection) {
  ReportInput input = TwoByTwoSweep();
  AddTrials(input, 2, 1.2);
  const Report report = BuildReport(input, ReportOptions{});
  EXPECT_EQ(RenderReportTable(report).find("Compile evidence"), std::string::npos);
}

// Review 2026-12-07, #8: users' scripts call the switch `compile`; like compile_mode it
// changes how a step is computed, not what, so the loss curves are expected to match.
TEST(ReportCompileEvidenceTest, AnAxisNamedCompileIsExpectedToKeepTheLossCurve) {
  ReportInput input;
  input.sweep_id = "1";
  input.sweep_name = "mine";
  input.order = "interleaved";
  input.baseline = {{"compile", "false"}};
  input.axes = {{"compile", {"false", "true"}}};
  for (const std::string on : {"false", "true"}) {
    VariantInput v;
    v.key = "compile=" + on;
    v.params = {{"compile", on}};
    v.counterpart_key = "compile=false";
    v.is_baseline = on == "false";
    input.variants.push_back(v);
  }
  for (int r = 0; r < 3; ++r) {
    for (const std::string on : {"false", "true"}) {
      testing::TrialSpec spec;
      spec.tokens_per_s = on == "true" ? 1200 + r : 1000 - r;
      input.trials.push_back(testing::Succeeded("compile=" + on, r, spec));
    }
  }
  const Report report = BuildReport(input, ReportOptions{});
  const Comparison& c = report.FindVariant("compile=true")->comparison;
  EXPECT_TRUE(c.loss_parity_expected) << c.loss_parity_note;
  EXPECT_EQ(c.loss_parity_note.find("not expected to match"), std::string::npos) << c.loss_parity_note;
}

}  // namespace
}  // namespace bakeoff::metrics
