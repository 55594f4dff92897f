// Files shared by the integration suites: a fresh per-test directory, reading a file
// whole (and looking for text in it), and the trainer binary the real-trainer tests run. Thread-safety: functions.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

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

// Whether `part` occurs in `text`.
inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace bakeoff::testing
