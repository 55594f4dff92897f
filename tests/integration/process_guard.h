// ProcessGuard: starts a command (argument vector, no shell) in its own process group
// and, in its destructor, kills the whole group and reaps the child, so that a test
// never leaves processes behind whatever assertion fails; the child also gets SIGKILL
// when the test process dies (a crash skips destructors). Thread-safety: one owner.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace bakeoff::testing {

class ProcessGuard {
 public:
  // env entries are KEY=VALUE added to (or replacing in) this process's environment.
  ProcessGuard(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
               const std::string& log_path = "") {
    std::vector<std::string> environment;
    for (char** e = environ; e && *e; ++e) {
      std::string kv(*e);
      bool replaced = false;
      for (const auto& o : env) replaced = replaced || o.substr(0, o.find('=')) == kv.substr(0, kv.find('='));
      if (!replaced) environment.push_back(kv);
    }
    environment.insert(environment.end(), env.begin(), env.end());
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      // Dies with the test process even when that crashes before the destructor runs.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (!log_path.empty()) {
        FILE* log = fopen(log_path.c_str(), "w");
        if (log) {
          dup2(fileno(log), STDOUT_FILENO);
          dup2(fileno(log), STDERR_FILENO);
        }
      }
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    if (pid_ > 0) setpgid(pid_, pid_);
  }
  ~ProcessGuard() { Kill(SIGKILL); }
  ProcessGuard(const ProcessGuard&) = delete;
  ProcessGuard& operator=(const ProcessGuard&) = delete;

  pid_t pid() const { return pid_; }

  // Sends `signal` to the group without waiting (SIGSTOP, SIGCONT).
  void Signal(int signal) {
    if (pid_ > 0 && !exited_) kill(-pid_, signal);
  }

  // Sends `signal` to the group and reaps the child (waits for it).
  void Kill(int signal) {
    if (pid_ <= 0 || exited_) return;
    kill(-pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    exited_ = true;
    status_ = status;
  }

  // The exit status once the child ended by itself within `timeout`.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exited_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        status_ = status;
        kill(-pid_, SIGKILL);  // anything it left in its group
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// Polls `condition` every 50 ms until it holds or `timeout` passes.
template <typename F>
bool WaitFor(F condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

}  // namespace bakeoff::testing
