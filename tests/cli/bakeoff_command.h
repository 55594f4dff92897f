// Runs the real `bakeoff` binary as a user does, for the CLI tests (report, compare,
// query, validate): no shell (each argument is passed as is), bounded to 60 s by
// timeout(1), stdout and stderr captured in files the caller names, the child always
// reaped. Skip a test with `if (!BakeoffBuilt()) GTEST_SKIP()` when it is not built.
// Thread-safety: a call is independent of others; give concurrent calls their own files.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace bakeoff::metrics::testing {

inline const std::string kBakeoffBinary = BAKEOFF_BINARY_DIR "/bakeoff";

inline bool BakeoffBuilt() { return std::filesystem::exists(kBakeoffBinary); }

struct CommandRun {
  int exit_code = -1;  // -1: not started, or killed by a signal
  std::string out;
  std::string err;
};

// The whole file, or "" when it cannot be read.
inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `bakeoff ARGS...`; stdout goes to `out_path`, stderr to `err_path` (both
// truncated first) and come back in the result.
inline CommandRun RunBakeoff(std::vector<std::string> args, const std::string& out_path,
                             const std::string& err_path) {
  std::vector<std::string> argv = {"timeout", "60", kBakeoffBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (std::string& arg : argv) raw.push_back(arg.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  int spawned = posix_spawnp(&pid, "timeout", &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  CommandRun run;
  if (spawned != 0) return run;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = Slurp(out_path);
  run.err = Slurp(err_path);
  return run;
}

}  // namespace bakeoff::metrics::testing
