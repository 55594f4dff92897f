// `bakeoff report` and `bakeoff compare` as a user runs them: the real binary on a
// results database written by the real store, in every format, with its exit codes
// (cli/command_registry.h). Skipped when the binary has not been built.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/bakeoff_command.h"
#include "tests/metrics/report/report_store_fixture.h"

namespace bakeoff::metrics {
namespace {

using testing::CommandRun;
using testing::Slurp;

class ReportCommandTest : public ReportStoreFixture {
 protected:
  void SetUp() override {
    if (!testing::BakeoffBuilt()) GTEST_SKIP() << testing::kBakeoffBinary << " not built";
    ReportStoreFixture::SetUp();
    sweep_id_ = CreateSweep();
    RunWholeSweep(sweep_id_);
  }

  // Runs `bakeoff ARGS...` (testing::RunBakeoff).
  CommandRun Bakeoff(std::vector<std::string> args) {
    return testing::RunBakeoff(std::move(args), dir_.File("cmd.out"), dir_.File("cmd.err"));
  }

  int64_t sweep_id_ = 0;
};

TEST_F(ReportCommandTest, TableIsTheDefaultAndLeadsWithTheMismatch) {
  CommandRun run = Bakeoff({"report", "loader-test", "--db", path_});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Sweep " + std::to_string(sweep_id_) + " \"loader-test\"", 0), 0u) << run.out;
  EXPECT_LT(run.out.find("Call-outs"), run.out.find("Verdicts"));
  EXPECT_NE(run.out.find("compile_mode=jit,micro_batch=4 fails where its counterpart succeeds"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("1.25x"), std::string::npos) << run.out;
}

TEST_F(ReportCommandTest, EveryFormatToStdoutOrAFile) {
  for (const std::string format : {"markdown", "json", "csv", "html"}) {
    CommandRun run = Bakeoff({"report", std::to_string(sweep_id_), "--db", path_, "--format", format});
    ASSERT_EQ(run.exit_code, 0) << format << ": " << run.err;
    EXPECT_GT(run.out.size(), 500u) << format;
  }
  std::string output = dir_.File("report.html");
  CommandRun run = Bakeoff({"report", "loader-test", "--db", path_, "--format", "html", "--output", output});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.empty());
  std::string html = Slurp(output);
  EXPECT_NE(html.find("id=\"chart-speedup\""), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
}

TEST_F(ReportCommandTest, MemoryBudgetNamesTheFastestThatFits) {
  CommandRun run = Bakeoff({"report", "loader-test", "--db", path_, "--format", "json",
                            "--memory-budget", "1.1MB"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["options"]["memory_budget_bytes"], 1'100'000);
  EXPECT_EQ(report["best"]["fastest"], "compile_mode=jit,micro_batch=1");
  EXPECT_EQ(report["best"]["fastest_within_budget"], "compile_mode=eager,micro_batch=1");
  CommandRun bad = Bakeoff({"report", "loader-test", "--db", path_, "--memory-budget", "lots"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("4GiB"), std::string::npos) << bad.err;
}

TEST_F(ReportCommandTest, ExitCodesNameTheProblem) {
  CommandRun missing_db = Bakeoff({"report", "loader-test", "--db", dir_.File("absent.db")});
  EXPECT_EQ(missing_db.exit_code, 3);
  EXPECT_NE(missing_db.err.find("absent.db"), std::string::npos) << missing_db.err;
  CommandRun unknown = Bakeoff({"report", "no-such-sweep", "--db", path_});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no-such-sweep"), std::string::npos) << unknown.err;
  CommandRun bad_format = Bakeoff({"report", "loader-test", "--db", path_, "--format", "pdf"});
  EXPECT_EQ(bad_format.exit_code, 2);
  // Nothing listens on port 1 of the loopback address.
  CommandRun unreachable = Bakeoff({"report", "loader-test", "--coordinator", "http://127.0.0.1:1"});
  EXPECT_EQ(unreachable.exit_code, 3) << unreachable.err;
}

TEST_F(ReportCommandTest, CompareTwoSweepsOfTwoFiles) {
  // B: the same sweep in a second results file.
  std::string first_db = path_;
  int64_t a = sweep_id_;
  path_ = dir_.File("results-b.db");
  StoreOptions options;
  options.path = path_;
  auto second = ResultsStore::Open(options);
  ASSERT_TRUE(second.ok());
  store_ = std::move(second).value();
  int64_t b = CreateSweep();
  RunWholeSweep(b);
  CommandRun run = Bakeoff({"compare", std::to_string(a), std::to_string(b), "--db", first_db, "--db-b",
                            path_, "--format", "json", "--fail-on-regression"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json comparison = nlohmann::json::parse(run.out);
  EXPECT_EQ(comparison["rows"].size(), 4u);
  for (const auto& row : comparison["rows"]) {
    EXPECT_NE(row["verdict"], "regression") << row.dump();
  }
  CommandRun table = Bakeoff({"compare", std::to_string(a), std::to_string(b), "--db", first_db,
                              "--db-b", path_});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Variants, regressions first"), std::string::npos) << table.out;
  CommandRun missing = Bakeoff({"compare", "1", "2", "--db", dir_.File("absent.db")});
  EXPECT_EQ(missing.exit_code, 3);
}

}  // namespace
}  // namespace bakeoff::metrics
