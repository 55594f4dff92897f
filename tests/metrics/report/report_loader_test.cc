// The loader against a real results database: the sweep is parsed and expanded by the
// spec code and stored by the ResultsStore exactly as the coordinator does, trials are
// run through the store's transitions with step metrics and summaries, and the report
// is read back read-only.
#include "metrics/report/report_loader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_renderer.h"
#include "metrics/report/report_service.h"
#include "tests/metrics/report/report_store_fixture.h"

namespace bakeoff::metrics {
namespace {

class ReportLoaderTest : public ReportStoreFixture {};

// Order of the expansion: variants eager/1, eager/4, jit/1, jit/4 (compile_mode is the
// first axis), trials interleaved: repeat 0 of every variant, then repeat 1.
TEST_F(ReportLoaderTest, ReadsTheSweepAsStored) {
  int64_t sweep_id = CreateSweep();
  ASSERT_EQ(trial_ids_.size(), 8u);
  auto input = LoadReportInputFromFile(path_, std::to_string(sweep_id));
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  EXPECT_EQ(input->sweep_name, "loader-test");
  EXPECT_EQ(input->question, "How much faster is jit, and at what memory cost?");
  EXPECT_EQ(input->order, "interleaved");
  EXPECT_EQ(input->baseline.at("compile_mode"), "eager");
  ASSERT_EQ(input->axes.size(), 2u);  // world_size is fixed: not an axis
  EXPECT_EQ(input->axes[0].name, "compile_mode");
  EXPECT_EQ(input->axes[1].values, (std::vector<std::string>{"1", "4"}));
  ASSERT_EQ(input->variants.size(), 4u);
  for (const VariantInput& v : input->variants) {
    EXPECT_EQ(v.is_baseline, v.params.at("compile_mode") == "eager") << v.key;
    EXPECT_EQ(v.counterpart_key, "compile_mode=eager,micro_batch=" + v.params.at("micro_batch"));
  }
  ASSERT_EQ(input->trials.size(), 8u);
  for (const TrialInput& t : input->trials) {
    EXPECT_EQ(t.outcome.Text(), "queued");
    EXPECT_TRUE(t.ranks.empty());
  }
}

TEST_F(ReportLoaderTest, ReadsSummariesStepsWorkersAndOnlyTheCurrentAttempt) {
  int64_t sweep_id = CreateSweep();
  auto variants = store_->Reader()->ListVariants(sweep_id);
  auto trials = store_->Reader()->ListTrials(sweep_id);
  ASSERT_TRUE(trials.ok());
  // Trial 0: lost on w-2 once (its metrics must not count), then succeeded on w-1.
  int64_t first = trials->at(0).id;
  int64_t lost_attempt = Assign(first, 0, "w-2");
  StepRecord stale;
  stale.trial_id = first;
  stale.attempt = lost_attempt;
  stale.row.step = 1;
  stale.row.step_s = 99;
  ASSERT_TRUE(store_->AppendStepMetrics({stale}).ok());
  ASSERT_TRUE(store_->RequeueTrial(first, lost_attempt, Outcome::kLost, "worker lost").ok());
  {
    int64_t attempt = Assign(first, 1, "w-1");
    MetricsBatch batch;
    for (int step = 1; step <= 3; ++step) {
      for (int rank = 0; rank < 2; ++rank) {
        StepRecord m;
        m.trial_id = first;
        m.attempt = attempt;
        m.rank = rank;
        m.row.step = step;
        m.row.step_s = rank == 0 ? 0.1 : 0.12;
        if (rank == 0) m.row.loss = 3.0 - step * 0.1;
        if (rank == 1) m.row.tokens = 512;  // tokens are global: one rank's suffice
        m.row.turn = 2 * step + 1;          // a lockstep side's turn, shared by its ranks
        batch.steps.push_back(m);
      }
    }
    TrialSummary summary{first, attempt, 0,
                         {{"tokens_per_s", 9000.0}, {"peak_mem_bytes", 777}, {"tokens_per_step", 512},
                          {"applied", {{"compile_mode", "eager"}}}}};
    batch.summaries.push_back(ReadSummaryRecord(summary).value());
    ASSERT_TRUE(store_->AppendBatch(batch).ok());
    ASSERT_TRUE(store_->FinishTrial(first, attempt, Outcome::kSucceeded, "").ok());
  }
  // Trial 1: out of memory.
  int64_t second = trials->at(1).id;
  int64_t attempt = Assign(second, 0, "w-2");
  ASSERT_TRUE(store_->FinishTrial(second, attempt, Outcome::kOom, "out of memory at step 0").ok());

  auto input = LoadReportInputFromFile(path_, "loader-test");
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  const TrialInput& t0 = input->trials[0];
  EXPECT_EQ(t0.id, first);
  EXPECT_EQ(t0.outcome.outcome, protocol::Outcome::kSucceeded);
  EXPECT_EQ(t0.worker, "node-a");
  ASSERT_EQ(t0.ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(*t0.ranks[0].figures.tokens_per_s, 9000.0);
  EXPECT_EQ(t0.ranks[0].figures.peak_mem_bytes, 777);
  EXPECT_EQ(t0.applied["compile_mode"], "eager");
  ASSERT_EQ(t0.steps.size(), 3u);  // the lost attempt's 99 s step is not there
  EXPECT_DOUBLE_EQ(t0.steps[0].step_s, 0.12);  // the slowest rank
  ASSERT_TRUE(t0.steps[0].loss);
  EXPECT_DOUBLE_EQ(*t0.steps[0].loss, 2.9);
  EXPECT_EQ(t0.steps[0].tokens, 512);
  EXPECT_EQ(t0.steps[0].turn, 3);
  EXPECT_EQ(t0.steps[2].turn, 7);
  EXPECT_EQ(t0.ranks[0].figures.tokens_per_step, 512.0);
  const TrialInput& t1 = input->trials[1];
  EXPECT_EQ(t1.outcome.outcome, protocol::Outcome::kOom);
  EXPECT_EQ(t1.reason, "out of memory at step 0");
  EXPECT_EQ(t1.worker, "node-b");
  EXPECT_FALSE(input->trials[2].outcome.Finished());
  EXPECT_EQ(input->trials[2].outcome.state, "queued");
}

TEST_F(ReportLoaderTest, RendersAFinishedSweepInEveryFormat) {
  int64_t sweep_id = CreateSweep();
  RunWholeSweep(sweep_id);
  // The coordinator's writer stays open while the report reads.
  ReportOptions options;
  for (ReportFormat format : {ReportFormat::kTable, ReportFormat::kMarkdown, ReportFormat::kJson,
                              ReportFormat::kCsv, ReportFormat::kHtml}) {
    options.format = format;
    auto text = RenderSweepReport(path_, "loader-test", options);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_GT(text->size(), 500u) << ReportFormatName(format);
  }
  options.format = ReportFormat::kJson;
  auto json_text = RenderSweepReport(path_, std::to_string(sweep_id), options);
  ASSERT_TRUE(json_text.ok());
  nlohmann::json report = nlohmann::json::parse(*json_text);
  EXPECT_EQ(report["progress"]["finished"], 8);
  bool found = false;
  for (const auto& v : report["variants"]) {
    if (v["key"] != "compile_mode=jit,micro_batch=1") continue;
    found = true;
    EXPECT_EQ(v["comparison"]["status"], "compared");
    EXPECT_NEAR(v["comparison"]["speedup"]["value"].get<double>(), 1.25, 0.02);
    EXPECT_EQ(v["comparison"]["interval_method"], "paired repeats");
    EXPECT_NEAR(v["comparison"]["memory"]["relative"].get<double>(), 0.2, 1e-6);
    EXPECT_NEAR(v["comparison"]["warmup"]["warmup_delta_s"].get<double>(), 3.5, 1e-9);
    EXPECT_EQ(v["comparison"]["loss_parity"]["common_steps"], 6);
    EXPECT_EQ(v["workers"], (nlohmann::json{"node-a", "node-b"}));
  }
  EXPECT_TRUE(found);
  EXPECT_NE(report["callouts"][0].get<std::string>().find("compile_mode=jit,micro_batch=4"),
            std::string::npos);
  EXPECT_TRUE(report["iso_memory"]["applicable"]);
}

TEST_F(ReportLoaderTest, NamesWhatIsMissing) {
  CreateSweep();
  auto unknown = LoadReportInputFromFile(path_, "no-such-sweep");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
  EXPECT_NE(unknown.status().message().find("no-such-sweep"), std::string::npos);
  auto no_file = LoadReportInputFromFile(dir_.File("absent.db"), "1");
  ASSERT_FALSE(no_file.ok());
  EXPECT_EQ(no_file.status().code(), Status::Code::kNotFound);
  EXPECT_NE(no_file.status().message().find("absent.db"), std::string::npos);
  std::string other = dir_.File("other.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto not_ours = LoadReportInputFromFile(other, "1");
  ASSERT_FALSE(not_ours.ok());
  EXPECT_EQ(not_ours.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(not_ours.status().message().find("not a Bakeoff results database"), std::string::npos);
}

TEST_F(ReportLoaderTest, TheNewestSweepOfANameWins) {
  CreateSweep();
  int64_t second = CreateSweep();
  auto input = LoadReportInputFromFile(path_, "loader-test");
  ASSERT_TRUE(input.ok());
  EXPECT_EQ(input->sweep_id, std::to_string(second));
}

TEST(ParseByteSizeTest, AcceptsBytesAndUnits) {
  EXPECT_EQ(*ParseByteSize("4000"), 4000);
  EXPECT_EQ(*ParseByteSize("4GiB"), 4LL << 30);
  EXPECT_EQ(*ParseByteSize("4 gib"), 4LL << 30);
  EXPECT_EQ(*ParseByteSize("1.5GB"), 1'500'000'000);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512LL << 20);
  EXPECT_FALSE(ParseByteSize("lots").ok());
  EXPECT_FALSE(ParseByteSize("4 parsecs").ok());
  EXPECT_FALSE(ParseByteSize("-1GB").ok());
}

// The route parses what `bakeoff report --coordinator` writes, through one pair of
// functions: every option survives the trip exactly, defaults are left out.
TEST(ReportQueryTest, WhatTheCliWritesTheRouteReadsBackExactly) {
  ReportOptions options;
  options.format = ReportFormat::kJson;
  options.memory_budget_bytes = 8LL << 30;
  options.loss_parity_threshold = 0.1 / 3;  // not exact in 6 digits
  options.noisy_cv_threshold = 0.25;
  options.seed = 9007199254740991ULL;
  options.bootstrap_resamples = 5000;
  const std::string query = ReportQuery(options);
  std::map<std::string, std::string> params;
  std::stringstream in(query);
  for (std::string pair; std::getline(in, pair, '&');) {
    params[pair.substr(0, pair.find('='))] = pair.substr(pair.find('=') + 1);
  }
  auto parsed = ParseReportQuery(params);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->format, ReportFormat::kJson);
  EXPECT_EQ(parsed->memory_budget_bytes, options.memory_budget_bytes);
  EXPECT_EQ(parsed->loss_parity_threshold, options.loss_parity_threshold);
  EXPECT_EQ(parsed->noisy_cv_threshold, options.noisy_cv_threshold);
  EXPECT_EQ(parsed->seed, options.seed);
  EXPECT_EQ(parsed->bootstrap_resamples, options.bootstrap_resamples);
  EXPECT_EQ(parsed->max_bootstrap_draws, kMaxBootstrapDraws) << "the route caps the bootstrap work";
  EXPECT_EQ(ReportQuery(ReportOptions{}), "format=table") << "defaults travel as nothing";
}

TEST(ReportQueryTest, ABadOrUnknownParameterIsRefusedNamingIt) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"format", "pdf"}}, "pdf"},
      {{{"resamples", "50"}}, "query parameter resamples=50: expected a whole number in [100, 100000]"},
      {{{"seed", "1.5"}}, "query parameter seed=1.5"},
      {{{"loss_threshold", "0"}}, "query parameter loss_threshold=0"},
      {{{"memory_budget", "lots"}}, "query parameter memory_budget"},
      {{{"colour", "red"}}, "unknown query parameter 'colour'"}};
  for (const auto& [params, expected] : cases) {
    auto parsed = ParseReportQuery(params);
    ASSERT_FALSE(parsed.ok()) << expected;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(expected), std::string::npos) << parsed.status().message();
  }
}

}  // namespace
// The trainer's summary carries an `environment`; it is stored with the summary, read
// back per trial, shown per variant, and compared trials that ran in different
// environments are called out.
TEST_F(ReportLoaderTest, EnvironmentsAreReadShownAndDifferencesCalledOut) {
  environment_by_worker_["w-1"] = {{"host", "node-a"},        {"cpu_model", "EPYC 9654"},
                                   {"cpu_flags", {"avx2", "avx512f", "avx512_bf16"}},
                                   {"torch_version", "2.4.1"}, {"cuda_version", nullptr},
                                   {"blas", "openblas"},       {"gpu_model", nullptr},
                                   {"gpu_driver", nullptr},    {"bakeoff_version", "0.9.0"}};
  environment_by_worker_["w-2"] = environment_by_worker_["w-1"];
  environment_by_worker_["w-2"]["host"] = "node-b";
  environment_by_worker_["w-2"]["torch_version"] = "2.5.0";
  environment_by_worker_["w-2"]["cpu_flags"] = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"};
  int64_t sweep_id = CreateSweep();
  RunWholeSweep(sweep_id);  // repeat 0 on w-1, repeat 1 on w-2
  auto input = LoadReportInputFromFile(path_, std::to_string(sweep_id));
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  for (const TrialInput& t : input->trials) {
    if (!t.outcome.Succeeded()) continue;
    ASSERT_TRUE(t.environment.is_object()) << t.id;
    EXPECT_EQ(t.environment["torch_version"], t.repeat == 0 ? "2.4.1" : "2.5.0");
  }
  Report report = BuildReport(*input, ReportOptions{});
  const VariantReport* jit = report.FindVariant("compile_mode=jit,micro_batch=1");
  ASSERT_NE(jit, nullptr);
  EXPECT_EQ(jit->environments.size(), 2u);
  const std::string& difference = jit->comparison.environment_difference;
  EXPECT_NE(difference.find("torch_version 2.4.1 vs 2.5.0"), std::string::npos) << difference;
  EXPECT_NE(difference.find("cpu_flags not on every host: amx_bf16"), std::string::npos) << difference;
  EXPECT_EQ(difference.find("cpu_model"), std::string::npos) << difference;  // the same
  EXPECT_EQ(difference.find("hosts"), std::string::npos) << difference;  // both sides on both
  bool called_out = false;
  for (const std::string& c : report.callouts) {
    called_out |= c.find("compile_mode=jit,micro_batch=1 and its counterpart") == 0 &&
                  c.find("ran in different environments") != std::string::npos;
  }
  EXPECT_TRUE(called_out);
  std::string table = RenderReportTable(report);
  EXPECT_NE(table.find("\nEnvironment\n"), std::string::npos);
  EXPECT_NE(table.find("2.4.1 | 2.5.0"), std::string::npos);
  nlohmann::json json = nlohmann::json::parse(RenderReportJson(report));
  EXPECT_EQ(json["variants"][0]["environments"].size(), 2u);
}

TEST_F(ReportLoaderTest, OneEnvironmentIsNoDifference) {
  environment_by_worker_["w-1"] = {{"host", "node-a"}, {"cpu_model", "EPYC 9654"}, {"torch_version", "2.4.1"}};
  environment_by_worker_["w-2"] = {{"host", "node-b"}, {"cpu_model", "EPYC 9654"}, {"torch_version", "2.4.1"}};
  int64_t sweep_id = CreateSweep();
  RunWholeSweep(sweep_id);
  auto input = LoadReportInputFromFile(path_, std::to_string(sweep_id));
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  Report report = BuildReport(*input, ReportOptions{});
  for (const VariantReport& v : report.variants) EXPECT_EQ(v.comparison.environment_difference, "") << v.key;
  for (const std::string& c : report.callouts) EXPECT_EQ(c.find("environments"), std::string::npos) << c;
}

}  // namespace bakeoff::metrics
