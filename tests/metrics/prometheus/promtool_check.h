// PromtoolCheckMetrics: runs Prometheus' own linter (`promtool check metrics`, from the
// prometheus package, scripts/setup) on a text exposition, so tests hold the /metrics
// output to the format and naming rules Prometheus itself applies.
// Thread-safety: one call per test; uses a temp file named after the process id.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace bakeoff::testing {

struct PromtoolResult {
  int exit_code = -1;  // 0: valid and lint-clean; 127: promtool not installed
  std::string output;
};

inline PromtoolResult PromtoolCheckMetrics(const std::string& exposition) {
  static int counter = 0;
  const auto path = std::filesystem::temp_directory_path() /
                    ("bakeoff-promtool-" + std::to_string(getpid()) + "-" + std::to_string(++counter) + ".prom");
  std::ofstream(path) << exposition;
  PromtoolResult result;
  // A fixed command and a path this process made: nothing from outside reaches the shell.
  FILE* pipe = popen(("promtool check metrics < " + path.string() + " 2>&1").c_str(), "r");
  if (pipe) {
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::filesystem::remove(path);
  return result;
}

}  // namespace bakeoff::testing
