// A bakeoff-trainer child process for tests (or another program, e.g. torchrun starting
// trainers): stdout captured line by line, stderr dropped, its own process group, killed
// and reaped by the destructor if still running.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/loopback_port.h"

namespace bakeoff::testing {

class TrainerProcess {
 public:
  // `program` empty: build/bakeoff-trainer with `args`; else `program` with `args`.
  explicit TrainerProcess(const std::vector<std::string>& args, const std::string& program = "") {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(fds[1], STDOUT_FILENO);
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, STDERR_FILENO);
      close(fds[0]);
      std::vector<std::string> all = {program.empty() ? std::string(BAKEOFF_BINARY_DIR) + "/bakeoff-trainer" : program};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
  }
  ~TrainerProcess() {
    if (pid_ > 0 && exit_code_ < 0) {
      kill(-pid_, SIGKILL);
      Wait(std::chrono::seconds(30));
    }
    if (out_ >= 0) close(out_);
  }
  TrainerProcess(const TrainerProcess&) = delete;
  TrainerProcess& operator=(const TrainerProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Reads events until one satisfies `pred` or the deadline passes; true if found.
  template <typename Pred>
  bool WaitForEvent(Pred pred, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t seen = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      for (; seen < events_.size(); ++seen) {
        if (pred(events_[seen])) return true;
      }
      if (!ReadSome(deadline)) return false;
    }
    return false;
  }

  // Reads to end of stream and reaps; returns the exit code (128 + signal when killed,
  // -1 on timeout).
  int Wait(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (ReadSome(deadline)) {
    }
    while (exit_code_ < 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      usleep(10000);
    }
    return exit_code_;
  }

  const std::vector<nlohmann::json>& events() const { return events_; }

 private:
  // Reads what is available before `deadline`; false at end of stream or timeout.
  bool ReadSome(std::chrono::steady_clock::time_point deadline) {
    if (out_ < 0) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{out_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) return true;
    if (ready <= 0) return false;
    char buffer[65536];
    ssize_t n = read(out_, buffer, sizeof(buffer));
    if (n <= 0) {
      close(out_);
      out_ = -1;
      return false;
    }
    partial_.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = partial_.find('\n')) != std::string::npos) {
      auto json = nlohmann::json::parse(partial_.substr(0, newline), nullptr, false);
      if (!json.is_discarded()) events_.push_back(json);
      partial_.erase(0, newline + 1);
    }
    return true;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int exit_code_ = -1;
  std::string partial_;
  std::vector<nlohmann::json> events_;
};

}  // namespace bakeoff::testing
