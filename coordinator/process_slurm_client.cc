#include "coordinator/process_slurm_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <sstream>

#include <boost/asio/post.hpp>

namespace bakeoff::coordinator {
namespace asio = boost::asio;

Result<CommandResult> RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                 const Clock& clock) {
  if (argv.empty()) return Status::InvalidArgument("RunCommand: no command");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return Status::Unavailable(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a timeout kills whatever it started too
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvp(args[0], args.data());
    dprintf(STDERR_FILENO, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);
  CommandResult result;
  const auto deadline = clock.Now() + timeout;
  bool timed_out = false;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.Now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    int ready = poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[i].fd, buffer, sizeof(buffer));
      if (got > 0) {
        std::string& sink = i == 0 ? result.out : result.err;
        if (sink.size() < kMaxCommandOutputBytes) {
          sink.append(buffer, std::min<std::size_t>(got, kMaxCommandOutputBytes - sink.size()));
        }
      } else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  // The pipes closed: the command is exiting; a timeout killed it. Either way this is short.
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Status::Unavailable(argv[0] + " did not finish within " + std::to_string(timeout.count()) +
                               " ms and was killed");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (result.exit_code == 127 && result.err.rfind("cannot run ", 0) == 0) {
    return Status::Unavailable(result.err.substr(0, result.err.find('\n')) + " (is Slurm's client installed and in PATH?)");
  }
  return result;
}

ProcessSlurmClient::ProcessSlurmClient(asio::any_io_executor executor, std::string sbatch, std::string squeue,
                                       std::string scancel, std::chrono::milliseconds timeout, const Env& env)
    : executor_(std::move(executor)),
      sbatch_(std::move(sbatch)),
      squeue_(std::move(squeue)),
      scancel_(std::move(scancel)),
      timeout_(timeout),
      env_(env) {}

ProcessSlurmClient::~ProcessSlurmClient() { pool_.join(); }

void ProcessSlurmClient::Run(std::vector<std::string> argv, std::function<void(Result<CommandResult>)> done) {
  auto home = executor_;
  const auto timeout = timeout_;
  asio::post(pool_, [home, timeout, &clock = env_.clock(), argv = std::move(argv), done = std::move(done)]() mutable {
    auto result = std::make_shared<Result<CommandResult>>(RunCommand(argv, timeout, clock));
    asio::post(home, [result, done = std::move(done)]() { done(std::move(*result)); });
  });
}

namespace {

// "sbatch exited 1: sbatch: error: invalid partition specified: gpu" from a result.
std::string Failure(const std::string& command, const CommandResult& r) {
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  if (err.size() > 500) err = err.substr(0, 500) + "...";
  return command + " exited " + std::to_string(r.exit_code) + (err.empty() ? "" : ": " + err);
}

}  // namespace

void ProcessSlurmClient::Submit(const SlurmSubmitRequest& request, std::function<void(Result<std::string>)> done) {
  std::vector<std::string> argv{sbatch_, "--parsable"};
  argv.insert(argv.end(), request.sbatch_args.begin(), request.sbatch_args.end());
  argv.push_back(request.script_path);
  Run(std::move(argv), [done = std::move(done)](Result<CommandResult> r) {
    if (!r.ok()) return done(r.status());
    if (r->exit_code != 0) return done(Status::Unavailable(Failure("sbatch", *r)));
    std::string id = ParseJobId(r->out);
    if (id.empty()) return done(Status::Internal("sbatch printed no job id: '" + r->out.substr(0, 200) + "'"));
    done(id);
  });
}

void ProcessSlurmClient::Query(const std::string& job_name,
                               std::function<void(Result<std::vector<SlurmQueueEntry>>)> done) {
  // --me: only this user's jobs of that name; another user's job of the default name is
  // not adopted, counted or cancelled (security review, hole 12).
  std::vector<std::string> argv{squeue_, "--me", "--noheader", "--name=" + job_name, "--format=%i|%T|%D|%r"};
  Run(std::move(argv), [done = std::move(done)](Result<CommandResult> r) {
    if (!r.ok()) return done(r.status());
    if (r->exit_code != 0) return done(Status::Unavailable(Failure("squeue", *r)));
    done(ParseQueue(r->out));
  });
}

void ProcessSlurmClient::Cancel(const std::vector<std::string>& job_ids, std::function<void(Status)> done) {
  std::vector<std::string> argv{scancel_};
  argv.insert(argv.end(), job_ids.begin(), job_ids.end());
  Run(std::move(argv), [done = std::move(done)](Result<CommandResult> r) {
    if (!r.ok()) return done(r.status());
    if (r->exit_code != 0) return done(Status::Unavailable(Failure("scancel", *r)));
    done(Status::Ok());
  });
}

std::vector<SlurmQueueEntry> ProcessSlurmClient::ParseQueue(const std::string& text) {
  std::vector<SlurmQueueEntry> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::size_t start = 0;
    for (int i = 0; i < 3; ++i) {
      std::size_t bar = line.find('|', start);
      if (bar == std::string::npos) break;
      f.push_back(line.substr(start, bar - start));
      start = bar + 1;
    }
    if (f.size() != 3) continue;
    f.push_back(line.substr(start));
    SlurmQueueEntry e;
    e.id = f[0];
    if (e.id.empty() || e.id.find_first_not_of("0123456789_") != std::string::npos) continue;
    e.state = f[1];
    try {
      e.nodes = std::stoi(f[2]);
    } catch (const std::exception&) {
      e.nodes = 1;
    }
    e.reason = f[3];
    out.push_back(std::move(e));
  }
  return out;
}

std::string ProcessSlurmClient::ParseJobId(const std::string& text) {
  std::string id = text.substr(0, text.find_first_of(";\n\r"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) return "";
  return id;
}

}  // namespace bakeoff::coordinator
