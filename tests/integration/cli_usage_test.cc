// Usage mistakes exit 2 (docs/cli.md, "Exit codes") before any server is asked: a token
// file that cannot be read, a --format the command does not print, a mistyped command or
// flag (named with the nearest one); `bakeoff help`; where the reading commands read.
#include <gtest/gtest.h>

#include <filesystem>

#include "metrics/store/results_store.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::ProcessGuard;

const std::string kBin = BAKEOFF_BINARY_DIR;

int RunBakeoff(const std::vector<std::string>& args, const std::filesystem::path& log) {
  std::vector<std::string> argv{kBin + "/bakeoff"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessGuard cli(argv, {}, log.string());
  return cli.WaitExit(30s).value_or(-1);
}

TEST(CliUsageTest, AMissingTokenFileIsAUsageErrorNotAnUnreachableCoordinator) {
  auto dir = testing::FreshTestDir("bakeoff-cli-usage");
  for (const std::string command : {"status", "workers"}) {
    EXPECT_EQ(RunBakeoff({command, "--coordinator", "http://127.0.0.1:9", "--token-file", (dir / "missing").string()},
                  dir / "out.log"),
              2)
        << command << ": " << testing::ReadFile(dir / "out.log");
    EXPECT_NE(testing::ReadFile(dir / "out.log").find("missing"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST(CliUsageTest, AFormatTheCommandDoesNotPrintIsRefused) {
  auto dir = testing::FreshTestDir("bakeoff-cli-usage");
  for (const std::string command : {"status", "workers", "cancel"}) {
    std::vector<std::string> args{command, "--format", "yaml", "--coordinator", "http://127.0.0.1:9"};
    if (command == "cancel") args.push_back("some-sweep");
    EXPECT_EQ(RunBakeoff(args, dir / "out.log"), 2) << command << ": " << testing::ReadFile(dir / "out.log");
    EXPECT_NE(testing::ReadFile(dir / "out.log").find("yaml"), std::string::npos) << command;
  }
  std::filesystem::remove_all(dir);
}

TEST(CliUsageTest, HelpPrintsTheCommandListOrOneCommandsFlags) {
  auto dir = testing::FreshTestDir("bakeoff-cli-usage");
  EXPECT_EQ(RunBakeoff({"help"}, dir / "out.log"), 0);
  const std::string all = testing::ReadFile(dir / "out.log");
  for (const char* command : {"local", "submit", "status", "report", "query", "calibrate"}) {
    EXPECT_NE(all.find(command), std::string::npos) << command << " missing from:\n" << all;
  }
  EXPECT_EQ(RunBakeoff({"help", "local"}, dir / "out.log"), 0);
  EXPECT_NE(testing::ReadFile(dir / "out.log").find("--workers"), std::string::npos) << testing::ReadFile(dir / "out.log");
  EXPECT_NE(testing::ReadFile(dir / "out.log").find("Usage: bakeoff local"), std::string::npos)
      << testing::ReadFile(dir / "out.log");
  EXPECT_EQ(RunBakeoff({"help", "lcoal"}, dir / "out.log"), 2);
  EXPECT_NE(testing::ReadFile(dir / "out.log").find("Did you mean 'local'?"), std::string::npos)
      << testing::ReadFile(dir / "out.log");
  std::filesystem::remove_all(dir);
}

TEST(CliUsageTest, AMistypedCommandOrFlagNamesTheNearestOne) {
  auto dir = testing::FreshTestDir("bakeoff-cli-usage");
  EXPECT_EQ(RunBakeoff({"loacl", "sweep.yaml"}, dir / "out.log"), 2);
  std::string out = testing::ReadFile(dir / "out.log");
  EXPECT_NE(out.find("'loacl' is not a bakeoff command. Did you mean 'local'?"), std::string::npos) << out;
  EXPECT_EQ(RunBakeoff({"validate", "--fromat", "json", (dir / "none.yaml").string()}, dir / "out.log"), 2);
  out = testing::ReadFile(dir / "out.log");
  EXPECT_NE(out.find("--fromat: Did you mean '--format'?"), std::string::npos) << out;
  EXPECT_NE(out.find("bakeoff help validate"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// What was typed is quoted back escaped, in CLI11's messages as in Bakeoff's own: an
// argument carrying a terminal control sequence is shown, not run by the terminal.
TEST(CliUsageTest, TypedTextInAUsageErrorIsEscaped) {
  auto dir = testing::FreshTestDir("bakeoff-cli-usage");
  const std::string hostile = "x\x1b]0;owned\x07y";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {hostile},                                   // not a command
           {"validate", "--" + hostile, "sweep.yaml"},  // not a flag (CLI11's ExtrasError)
           {"status", "--format", hostile},             // not a choice (CLI11's ValidationError)
           {"status", "--log-format", hostile},         // Bakeoff's own check
       }) {
    EXPECT_EQ(RunBakeoff(args, dir / "out.log"), 2) << args.back();
    const std::string out = testing::ReadFile(dir / "out.log");
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
    EXPECT_NE(out.find("x\\x1b]0;owned\\x07y"), std::string::npos) << out;
  }
  std::filesystem::remove_all(dir);
}

// Issue 29: status, report and query pick their results by one rule (cli/result_source.h)
// and say which on stderr when no flag named it.
TEST(CliUsageTest, ReadingCommandsPickTheirResultsByOneRuleAndSayWhich) {
  auto dir = testing::FreshTestDir("bakeoff-cli-usage");
  {
    metrics::StoreOptions options;
    options.path = (dir / "results.db").string();
    ASSERT_TRUE(metrics::ResultsStore::Open(options).ok());
  }
  auto in_dir = [&](const std::vector<std::string>& args) {
    std::string line = "cd '" + dir.string() + "' && exec '" + kBin + "/bakeoff'";
    for (const auto& a : args) line += " '" + a + "'";
    return std::vector<std::string>{"/bin/sh", "-c", line};
  };
  auto run = [&](const std::vector<std::string>& args, const std::string& coordinator_env) {
    ProcessGuard cli(in_dir(args), {"BAKEOFF_COORDINATOR=" + coordinator_env, "BAKEOFF_TOKEN="},
                     (dir / "out.log").string());
    return cli.WaitExit(30s).value_or(-1);
  };
  // ./results.db, no variable: the file, said so.
  EXPECT_EQ(run({"status"}, ""), 0) << testing::ReadFile(dir / "out.log");
  EXPECT_NE(testing::ReadFile(dir / "out.log").find("reading results database results.db (found in this directory"),
            std::string::npos)
      << testing::ReadFile(dir / "out.log");
  // $BAKEOFF_COORDINATOR wins over ./results.db, for all three (this one is unreachable: 3).
  for (const std::vector<std::string>& args : {std::vector<std::string>{"status"}, {"query", "SELECT 1"},
                                              {"report", "some-sweep"}}) {
    EXPECT_EQ(run(args, "http://127.0.0.1:9"), 3) << args[0] << ": " << testing::ReadFile(dir / "out.log");
    EXPECT_NE(testing::ReadFile(dir / "out.log").find("reading coordinator http://127.0.0.1:9 ($BAKEOFF_COORDINATOR)"),
              std::string::npos)
        << args[0] << ": " << testing::ReadFile(dir / "out.log");
  }
  // A flag names the source: nothing to say.
  EXPECT_EQ(run({"query", "SELECT 1", "--db", (dir / "results.db").string()}, "http://127.0.0.1:9"), 0);
  EXPECT_EQ(testing::ReadFile(dir / "out.log").find("reading"), std::string::npos) << testing::ReadFile(dir / "out.log");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bakeoff
