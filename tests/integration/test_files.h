// Files shared by the integration suites: a fresh per-test directory, reading a file
// whole (and looking for text in it), running the CLI with its output in a file, and the
// trainer binary the real-trainer tests run. Thread-safety: functions.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/integration/process_guard.h"

namespace bakeoff::testing {

// An empty directory /tmp/<prefix>-<pid>-<test name>, removed first if it exists.
inline std::filesystem::path FreshTestDir(const std::string& prefix) {
  auto dir = std::filesystem::temp_directory_path() /
             (prefix + "-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The file's whole content ("" when it cannot be read).
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// bakeoff-trainer next to the tests, or $BAKEOFF_TEST_TRAINER (a trainer built
// elsewhere, e.g. by a trainer-only build).
inline std::string RealTrainerPath() {
  const char* override_path = std::getenv("BAKEOFF_TEST_TRAINER");
  return override_path ? override_path : std::string(BAKEOFF_BINARY_DIR) + "/bakeoff-trainer";
}

// Runs `bakeoff ARGS` (the binary next to the tests) to its end with no BAKEOFF_TOKEN,
// `env` added, its output in `log`; its exit code, or -1 (and a failure) when it did not
// exit within 60 s.
inline int RunBakeoffCli(std::vector<std::string> args, const std::string& log, std::vector<std::string> env = {}) {
  args.insert(args.begin(), std::string(BAKEOFF_BINARY_DIR) + "/bakeoff");
  env.push_back("BAKEOFF_TOKEN=");
  ProcessGuard cli(args, env, log);
  auto code = cli.WaitExit(std::chrono::seconds(60));
  EXPECT_TRUE(code.has_value()) << log << ": the command did not exit";
  return code.value_or(-1);
}

// Whether `part` occurs in `text`.
inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace bakeoff::testing
