#include "worker/rank_process.h"
#include "protocol/token.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

extern char** environ;

namespace bakeoff::worker {
namespace {

// This process's children that it started on purpose (rank processes not yet reaped),
// and the strays it killed and has not reaped yet. The mutex is held across fork, so
// that a sweep never sees a new rank before it is listed here.
std::mutex g_children_mutex;
std::set<pid_t> g_ranks;
std::set<pid_t> g_killed_strays;

// Every process's children, from each /proc/PID/stat's ppid field.
std::map<pid_t, std::vector<pid_t>> ChildrenByParent() {
  std::map<pid_t, std::vector<pid_t>> children;
  if (DIR* procs = opendir("/proc")) {
    while (const dirent* entry = readdir(procs)) {
      const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (pid <= 0) continue;
      std::ifstream in(std::string("/proc/") + entry->d_name + "/stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto close = stat.rfind(')');  // the name may hold spaces and parentheses
      if (close == std::string::npos || close + 4 >= stat.size()) continue;
      const pid_t ppid = static_cast<pid_t>(std::atol(stat.c_str() + close + 4));  // ") S PPID"
      children[ppid].push_back(pid);
    }
    closedir(procs);
  }
  return children;
}

// This process's children now: /proc/self/task/*/children (CONFIG_PROC_CHILDREN), or a
// scan of every process's parent where the kernel has no such file.
std::vector<pid_t> ChildrenOfThisProcess() {
  std::vector<pid_t> children;
  bool have_children_files = false;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (const dirent* task = readdir(tasks)) {
      if (task->d_name[0] == '.') continue;
      std::ifstream in(std::string("/proc/self/task/") + task->d_name + "/children");
      if (!in) continue;
      have_children_files = true;
      for (pid_t pid; in >> pid;) children.push_back(pid);
    }
    closedir(tasks);
  }
  if (have_children_files) return children;
  return ChildrenByParent()[getpid()];
}

// Ends `root` (our child) and every process below it, however fast they fork: the tree
// is stopped (SIGSTOP) from the top, walked again until no new member appears (a stopped
// process forks no more), then killed whole. So a chain of processes each forking its
// successor and exiting (security review 2026-12-07, A7) ends at once, not one link
// per sweep. Returns how many processes below `root` were killed.
std::size_t KillProcessTree(pid_t root) {
  kill(root, SIGSTOP);
  std::set<pid_t> stopped;
  for (int round = 0; round < 64; ++round) {
    const auto by_parent = ChildrenByParent();
    std::vector<pid_t> frontier{root};
    bool fresh = false;
    std::set<pid_t> seen{root};
    while (!frontier.empty()) {
      const pid_t at = frontier.back();
      frontier.pop_back();
      auto it = by_parent.find(at);
      if (it == by_parent.end()) continue;
      for (pid_t child : it->second) {
        if (!seen.insert(child).second) continue;
        frontier.push_back(child);
        if (stopped.insert(child).second) {
          kill(child, SIGSTOP);
          fresh = true;
        }
      }
    }
    if (!fresh) break;
  }
  kill(root, SIGKILL);
  for (pid_t pid : stopped) kill(pid, SIGKILL);
  return stopped.size();
}

std::string ProcessName(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

namespace {

// The descriptors between the worker and a rank: its stdout (the events, or the events
// fd), its stderr when captured, its turn socket when it takes turns; -1 where none.
struct RankPipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int turn[2] = {-1, -1};

  void CloseAll() {
    for (int* pair : {out, err, turn}) {
      for (int i = 0; i < 2; ++i) {
        if (pair[i] >= 0) close(pair[i]);
        pair[i] = -1;
      }
    }
  }
};

Result<RankPipes> OpenRankPipes(const SpawnRequest& request) {
  RankPipes pipes;
  if (pipe2(pipes.out, O_CLOEXEC) != 0) {
    return Status::IoError(std::string("cannot create a pipe for the trainer's stdout: ") + strerror(errno));
  }
  if (request.capture_stderr && pipe2(pipes.err, O_CLOEXEC) != 0) {
    const int err = errno;
    pipes.CloseAll();
    return Status::IoError(std::string("cannot create a pipe for the trainer's stderr: ") + strerror(err));
  }
  // The turn socket: the child's end is moved above the descriptors the child dup2s
  // onto (0-4), so that placing the events pipe cannot overwrite it.
  if (request.turn_channel) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pipes.turn) != 0) {
      const int err = errno;
      pipes.CloseAll();
      return Status::IoError(std::string("cannot create the rank's turn socket: ") + strerror(err));
    }
    const int high = fcntl(pipes.turn[1], F_DUPFD_CLOEXEC, 10);
    close(pipes.turn[1]);
    pipes.turn[1] = high;
  }
  return pipes;
}

// Everything the child needs, built before fork: no allocation happens after it.
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  pid_t group = 0;
  cpu_set_t affinity;
  bool pin = false;
  pid_t worker_pid = 0;
  bool switch_uid = false;
  uid_t uid = 0;
  const char* private_shm = nullptr;
  const char* private_tmp = nullptr;
  const char* working_dir = nullptr;
  bool events_on_separate_fd = false;
};

ChildPlan PlanChild(const SpawnRequest& request) {
  ChildPlan plan;
  plan.argv.push_back(const_cast<char*>(request.executable.c_str()));
  for (const auto& a : request.args) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);
  for (const auto& e : request.environment) plan.envp.push_back(const_cast<char*>(e.c_str()));
  plan.envp.push_back(nullptr);
  plan.group = request.process_group;
  CPU_ZERO(&plan.affinity);
  for (int cpu : request.cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &plan.affinity);
  }
  plan.pin = !request.cpus.empty();
  plan.worker_pid = getpid();
  plan.switch_uid = request.run_as.has_value();
  plan.uid = request.run_as.value_or(0);
  plan.private_shm = request.private_shm_dir.empty() ? nullptr : request.private_shm_dir.c_str();
  plan.private_tmp = request.private_tmp_dir.empty() ? nullptr : request.private_tmp_dir.c_str();
  plan.working_dir = request.working_dir.empty() ? nullptr : request.working_dir.c_str();
  plan.events_on_separate_fd = request.events_on_separate_fd;
  return plan;
}

// The child, between fork and exec: only async-signal-safe calls, no allocation. Each
// failure exits with its own code (121 mounts, 122 turn fd, 123 uid, 124 affinity, 125
// the worker gone, 126 working directory, 127 exec).
[[noreturn]] void RunChild(const ChildPlan& plan, const RankPipes& pipes) {
  setpgid(0, plan.group);
  // Before the uid switch, which drops the capability. Private propagation first, so
  // that the binds never reach the worker's own namespace.
  if ((plan.private_shm != nullptr || plan.private_tmp != nullptr) &&
      (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
       (plan.private_shm != nullptr && mount(plan.private_shm, "/dev/shm", nullptr, MS_BIND, nullptr) != 0) ||
       (plan.private_tmp != nullptr && mount(plan.private_tmp, "/tmp", nullptr, MS_BIND, nullptr) != 0))) {
    _exit(121);
  }
  // Groups first: after setuid the child may not change them. Then no way back.
  if (plan.switch_uid && (setgroups(0, nullptr) != 0 || setgid(plan.uid) != 0 || setuid(plan.uid) != 0)) _exit(123);
  // A rank outlives its worker for nothing (the attempt is lost and runs again
  // elsewhere) and would hold the node's CPUs and GPU memory: die with the worker.
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
  if (getppid() != plan.worker_pid) _exit(125);  // the worker died before prctl
  // Default signal dispositions and mask: the worker's own handlers must not leak.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  // Before exec, so that the program's first look at its affinity (thread pools) sees it.
  if (plan.pin && sched_setaffinity(0, sizeof plan.affinity, &plan.affinity) != 0) _exit(124);
  if (pipes.err[1] >= 0) dup2(pipes.err[1], STDERR_FILENO);
  if (plan.events_on_separate_fd) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    if (pipes.out[1] == kEventsFd) {
      fcntl(kEventsFd, F_SETFD, 0);  // dup2 onto itself would keep O_CLOEXEC
    } else {
      dup2(pipes.out[1], kEventsFd);
    }
  } else {
    dup2(pipes.out[1], STDOUT_FILENO);
  }
  if (pipes.turn[1] >= 0 && dup2(pipes.turn[1], kTurnFd) < 0) _exit(122);  // dup2 clears O_CLOEXEC
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  if (plan.working_dir != nullptr && chdir(plan.working_dir) != 0) _exit(126);
  execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  const char msg[] = "bakeoff worker: exec of the rank's program failed\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
  _exit(127);
}

// The worker's side after fork: the child's ends closed, the worker's non-blocking.
SpawnedProcess AdoptChild(pid_t pid, pid_t group, RankPipes& pipes) {
  // Also in the parent, so that the group exists before we might signal it.
  setpgid(pid, group == 0 ? pid : group);
  close(pipes.out[1]);
  fcntl(pipes.out[0], F_SETFL, fcntl(pipes.out[0], F_GETFL) | O_NONBLOCK);
  SpawnedProcess spawned;
  spawned.pid = pid;
  spawned.process_group = group == 0 ? pid : group;
  spawned.stdout_fd = pipes.out[0];
  if (pipes.err[0] >= 0) {
    close(pipes.err[1]);
    fcntl(pipes.err[0], F_SETFL, fcntl(pipes.err[0], F_GETFL) | O_NONBLOCK);
    spawned.stderr_fd = pipes.err[0];
  }
  if (pipes.turn[0] >= 0) {
    close(pipes.turn[1]);
    spawned.turn_fd = pipes.turn[0];
  }
  return spawned;
}

}  // namespace

Result<SpawnedProcess> SpawnRankProcess(const SpawnRequest& request) {
  auto pipes = OpenRankPipes(request);
  if (!pipes.ok()) return pipes.status();
  const ChildPlan plan = PlanChild(request);
  std::lock_guard<std::mutex> listed(g_children_mutex);  // until the child is in g_ranks
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    pipes->CloseAll();
    return Status::ResourceExhausted(std::string("fork failed: ") + strerror(err));
  }
  if (pid == 0) RunChild(plan, *pipes);
  g_ranks.insert(pid);
  return AdoptChild(pid, plan.group, *pipes);
}

Status RemoveEntriesOwnedBy(uid_t uid, const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) return Status::Ok();  // no such directory: nothing to remove
  std::string failed;
  for (; it != end; it.increment(ec)) {
    struct stat info;
    if (lstat(it->path().c_str(), &info) != 0 || info.st_uid != uid) continue;
    std::error_code removed;
    std::filesystem::remove_all(it->path(), removed);  // links are removed, not followed
    if (removed) failed = it->path().string() + ": " + removed.message();
  }
  if (!failed.empty()) return Status::IoError("cannot remove what uid " + std::to_string(uid) + " left: " + failed);
  return Status::Ok();
}

bool PrivateMountsAvailable() {
  static const bool available = [] {
    // A child tries what SpawnRankProcess's child does, on a directory of its own.
    char dir[] = "/tmp/bakeoff-mount-probe-XXXXXX";
    if (mkdtemp(dir) == nullptr) return false;
    const pid_t pid = fork();
    if (pid == 0) {
      const bool ok = unshare(CLONE_NEWNS) == 0 && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                      mount(dir, "/dev/shm", nullptr, MS_BIND, nullptr) == 0;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    bool ok = false;
    if (pid > 0) {
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    rmdir(dir);
    return ok;
  }();
  return available;
}

Result<std::optional<ProcessExit>> TryReap(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Status::Internal("waitpid(" + std::to_string(pid) + "): " + strerror(errno));
  if (r == 0) return std::optional<ProcessExit>();
  {
    std::lock_guard<std::mutex> lock(g_children_mutex);
    g_ranks.erase(pid);
  }
  ProcessExit exit;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return std::optional<ProcessExit>(exit);
}

std::vector<KilledStray> KillStrayChildren() {
  std::lock_guard<std::mutex> lock(g_children_mutex);
  for (auto it = g_killed_strays.begin(); it != g_killed_strays.end();) {
    // 0: not ended yet; the pid, or -1 (not our child any more): done with it.
    it = waitpid(*it, nullptr, WNOHANG) == 0 ? std::next(it) : g_killed_strays.erase(it);
  }
  std::vector<KilledStray> killed;
  for (pid_t child : ChildrenOfThisProcess()) {
    if (g_ranks.count(child) != 0 || g_killed_strays.count(child) != 0) continue;
    // Our child, not yet reaped: the pid cannot have been reused by another process.
    KilledStray stray{child, ProcessName(child)};
    if (kill(child, 0) != 0) continue;
    stray.descendants = KillProcessTree(child);
    if (waitpid(child, nullptr, WNOHANG) != child) g_killed_strays.insert(child);  // reaped next sweep
    killed.push_back(std::move(stray));
  }
  return killed;
}

Status KillEveryProcessOf(uid_t uid) {
  if (uid == 0 || uid == getuid()) return Status::InvalidArgument("refusing to kill every process of uid " + std::to_string(uid));
  std::lock_guard<std::mutex> lock(g_children_mutex);  // the helper is no stray
  const pid_t helper = fork();
  if (helper < 0) return Status::ResourceExhausted(std::string("fork failed: ") + strerror(errno));
  if (helper == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(2);
    // kill(-1) reaches every process this uid may signal, never the caller. It is one
    // pass under the kernel's task list lock: a fork either finished before it (the child
    // is killed too) or sees the pending SIGKILL and fails. Killed processes stay as
    // zombies until their parent (or this worker, their subreaper) reaps them.
    if (kill(-1, SIGKILL) != 0 && errno != ESRCH) _exit(3);
    _exit(0);
  }
  int status = 0;
  while (waitpid(helper, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Internal("could not end every process of uid " + std::to_string(uid) + " (helper status " +
                            std::to_string(status) + ")");
  }
  return Status::Ok();
}

Status ChownTree(const std::string& path, uid_t uid, gid_t gid) {
  if (lchown(path.c_str(), uid, gid) != 0) return Status::IoError("cannot chown " + path + ": " + strerror(errno));
  std::error_code ec;
  // The iterator does not follow directory links (no follow_directory_symlink).
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (lchown(it->path().c_str(), uid, gid) != 0 && errno != ENOENT) {
      return Status::IoError("cannot chown " + it->path().string() + ": " + strerror(errno));
    }
  }
  if (ec) return Status::IoError("cannot walk " + path + ": " + ec.message());
  return Status::Ok();
}

void SignalProcessGroup(pid_t process_group, int signal) {
  if (process_group > 1) kill(-process_group, signal);
}

std::vector<std::string> EnvironmentWith(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  auto key_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    // The worker's credential never reaches a rank: a workload is not the worker.
    if (key_of(kv) == protocol::kTokenEnvVar) continue;
    bool replaced = false;
    for (const auto& o : overrides) {
      if (key_of(o) == key_of(kv)) replaced = true;
    }
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

}  // namespace bakeoff::worker
