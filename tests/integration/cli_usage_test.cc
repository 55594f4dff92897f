// Usage mistakes exit 2 (docs/cli.md, "Exit codes") before any server is asked: a token
// file that cannot be read, and a --format the command does not print.
#include <gtest/gtest.h>

#include <filesystem>

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

}  // namespace
}  // namespace bakeoff
