// `bakeoff query` as a user runs it: the real binary on a results database written by
// the real store, in every format, with its read-only refusal and exit codes
// (cli/command_registry.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/bakeoff_command.h"
#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

using namespace testing;  // the store's test helpers and RunBakeoff

class QueryCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!BakeoffBuilt()) GTEST_SKIP() << kBakeoffBinary << " not built";
    StoreOptions options;
    options.path = db_path_;
    Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    testing::SampleSweep sample = MakeSampleSweep("cli-sweep");
    Result<CreatedSweep> created = (*store)->CreateSweep(sample.sweep, sample.variants, sample.trials);
    ASSERT_TRUE(created.ok());
    trial_ = created->trial_ids[0];
    ASSERT_TRUE((*store)->AssignTrial(trial_, 0, Placement("w1", "node-a"))->applied);
    std::vector<StepRecord> steps;
    for (int step = 0; step < 5; ++step) steps.push_back(Step(trial_, 1, 0, step));
    ASSERT_TRUE((*store)->AppendStepMetrics(steps).ok());
    ASSERT_TRUE((*store)->FinishTrial(trial_, 1, Outcome::kOom, "CUDA out of memory, \"tried\" 2 GiB")->applied);
  }

  // Runs `bakeoff query ARGS...` (no shell: SQL is passed as one argument).
  CommandRun Query(std::vector<std::string> args) {
    args.insert(args.begin(), "query");
    return RunBakeoff(std::move(args), dir_.File("query.out"), dir_.File("query.err"));
  }

  TempDir dir_;
  std::string db_path_ = dir_.File("results.db");
  int64_t trial_ = 0;
};

TEST_F(QueryCommandTest, TablePrintsHeaderRowsAndCount) {
  CommandRun run = Query({"SELECT variant_key, outcome FROM trials ORDER BY id", "--db", db_path_});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("variant_key"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("compile_mode=eager  oom"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("(4 rows)"), std::string::npos) << run.out;
}

TEST_F(QueryCommandTest, JsonHasColumnsAndTypedRows) {
  CommandRun run = Query({"SELECT step, loss, reason FROM step_metrics JOIN trials ON trials.id = trial_id "
                          "ORDER BY step", "--db", db_path_, "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json parsed = nlohmann::json::parse(run.out);
  EXPECT_EQ(parsed["columns"], nlohmann::json({"step", "loss", "reason"}));
  ASSERT_EQ(parsed["rows"].size(), 5u);
  EXPECT_EQ(parsed["rows"][4][0], 4);
  EXPECT_DOUBLE_EQ(parsed["rows"][0][1].get<double>(), 10.0);
  EXPECT_EQ(parsed["rows"][0][2], "CUDA out of memory, \"tried\" 2 GiB");
  EXPECT_EQ(parsed["truncated"], false);
}

TEST_F(QueryCommandTest, CsvQuotesFieldsAndOutputGoesToFile) {
  std::string output = dir_.File("out.csv");
  CommandRun run = Query({"SELECT id, reason FROM trials WHERE outcome = 'oom'", "--db", db_path_,
                          "--format", "csv", "--output", output});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.empty());
  EXPECT_EQ(Slurp(output), "id,reason\r\n" + std::to_string(trial_) +
                               ",\"CUDA out of memory, \"\"tried\"\" 2 GiB\"\r\n");
}

TEST_F(QueryCommandTest, WriteStatementIsRefusedWithUsageExitCode) {
  CommandRun run = Query({"DELETE FROM trials", "--db", db_path_});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("read-only"), std::string::npos) << run.err;
  CommandRun count = Query({"SELECT COUNT(*) FROM trials", "--db", db_path_, "--format", "csv"});
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(count.out, "COUNT(*)\r\n4\r\n");
}

TEST_F(QueryCommandTest, MaxRowsCutsAndWarnsOnStderr) {
  CommandRun run = Query({"SELECT id FROM trials", "--db", db_path_, "--max-rows", "2",
                          "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json parsed = nlohmann::json::parse(run.out);
  EXPECT_EQ(parsed["rows"].size(), 2u);
  EXPECT_EQ(parsed["truncated"], true);
  EXPECT_NE(run.err.find("--max-rows"), std::string::npos) << run.err;
}

TEST_F(QueryCommandTest, MissingDatabaseExitsUnavailable) {
  CommandRun run = Query({"SELECT 1", "--db", dir_.File("absent.db")});
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_NE(run.err.find("absent.db"), std::string::npos) << run.err;
}

TEST_F(QueryCommandTest, EndlessQueryStopsAtTimeout) {
  CommandRun run = Query({"WITH RECURSIVE f(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM f) "
                          "SELECT COUNT(*) FROM f", "--db", db_path_, "--timeout", "0.3"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("limit"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace bakeoff::metrics
