// TestHosts: N test "hosts" on this machine, each a network namespace with its own
// address, bridged: a bridge in the root namespace holds 10.231.S.1/24 (S picked from the
// pid among the /24s no interface here uses), and host i (1..N) is namespace
// "<prefix>-h<i>" whose "eth0" (one end of a veth pair; the other, "<prefix>-v<i>", is on
// the bridge) holds 10.231.S.(i+1). A process started through Launcher(i) (`ip netns exec`)
// sees only that host's interfaces, so a worker there binds, and is reached, at its own
// address. Cutting a host off is a link down on its veth, not a proxy.
//
// Cleanup: the destructor kills every process left in the namespaces and deletes the
// namespaces, links and the bridge, whatever assertion failed. Every name starts with
// kTestHostsPrefix and the owning test process's pid, so the constructor of a later run
// also removes what a crashed run left (namespaces, their processes, links) when that pid
// is gone.
//
// Needs root and iproute2 (`ip netns`); otherwise available() is false and skip_reason()
// says why, for GTEST_SKIP. Thread-safety: one owner.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace bakeoff::testing {

// The family of names every TestHosts uses: "<prefix><pid>-...". Short, because an
// interface name has at most 15 characters.
inline constexpr const char* kTestHostsPrefix = "bkmh";

class TestHosts {
 public:
  explicit TestHosts(int count) : count_(count), prefix_(kTestHostsPrefix + std::to_string(getpid())) {
    if (geteuid() != 0) {
      skip_reason_ = "needs root to create network namespaces (CI runs as root)";
      return;
    }
    for (const char* candidate : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (access(candidate, X_OK) == 0) {
        ip_ = candidate;
        break;
      }
    }
    if (ip_.empty()) {
      skip_reason_ = "iproute2's `ip` is not installed";
      return;
    }
    RemoveLeftovers();
    if (!PickSubnet()) {
      skip_reason_ = "no free 10.231.x.0/24 for the test hosts";
      return;
    }
    // Bridge first, so a host's veth can join it.
    if (!Ip({"link", "add", Bridge(), "type", "bridge"})) {
      skip_reason_ = "cannot create a bridge: " + last_output_;
      Teardown();
      return;
    }
    created_bridge_ = true;
    if (!Ip({"addr", "add", bridge_address() + "/24", "dev", Bridge()}) || !Ip({"link", "set", Bridge(), "up"})) {
      skip_reason_ = "cannot configure the bridge: " + last_output_;
      Teardown();
      return;
    }
    for (int i = 1; i <= count_; ++i) {
      if (!Ip({"netns", "add", Namespace(i)})) {
        skip_reason_ = "`ip netns add` failed (no network namespaces here?): " + last_output_;
        Teardown();
        return;
      }
      ++created_hosts_;
      const bool ok = Ip({"link", "add", Veth(i), "type", "veth", "peer", "name", "eth0", "netns", Namespace(i)}) &&
                      Ip({"link", "set", Veth(i), "master", Bridge(), "up"}) &&
                      Ip({"netns", "exec", Namespace(i), ip_, "addr", "add", address(i) + "/24", "dev", "eth0"}) &&
                      Ip({"netns", "exec", Namespace(i), ip_, "link", "set", "eth0", "up"}) &&
                      Ip({"netns", "exec", Namespace(i), ip_, "link", "set", "lo", "up"});
      if (!ok) {
        skip_reason_ = "cannot wire test host " + std::to_string(i) + ": " + last_output_;
        Teardown();
        return;
      }
    }
  }
  ~TestHosts() { Teardown(); }
  TestHosts(const TestHosts&) = delete;
  TestHosts& operator=(const TestHosts&) = delete;

  bool available() const { return skip_reason_.empty(); }
  const std::string& skip_reason() const { return skip_reason_; }
  int count() const { return count_; }

  // The root namespace's address on the bridge (where the coordinator listens).
  std::string bridge_address() const { return Address(1); }
  // Host i's own address (1 <= i <= count).
  std::string address(int i) const { return Address(i + 1); }
  // The argument vector prefix that runs a command on host i.
  std::vector<std::string> Launcher(int i) const { return {ip_, "netns", "exec", Namespace(i)}; }

  // Brings host i's link to the bridge down (cut off) or up again. False on failure.
  bool SetLink(int i, bool up) { return Ip({"link", "set", Veth(i), up ? "up" : "down"}); }

  // The last `ip` command's output (for failure messages).
  const std::string& last_output() const { return last_output_; }

 private:
  // 10.231.<subnet>.<last>.
  std::string Address(int last) const {
    std::string out = "10.231.";
    out += std::to_string(subnet_);
    out += '.';
    out += std::to_string(last);
    return out;
  }
  std::string Namespace(int i) const { return prefix_ + "-h" + std::to_string(i); }
  std::string Veth(int i) const { return prefix_ + "-v" + std::to_string(i); }
  std::string Bridge() const { return prefix_ + "-br"; }

  // Runs `ip ARGS...` (no shell) and keeps its output; true when it exited 0.
  bool Ip(const std::vector<std::string>& args) { return Run(args, &last_output_); }
  bool Run(const std::vector<std::string>& args, std::string* output) const {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    std::vector<std::string> all = {ip_};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buffer[4096];
    ssize_t n;
    while ((n = read(fds[0], buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
    if (output) *output = out;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::vector<std::string> Lines(const std::vector<std::string>& args) const {
    std::string out;
    Run(args, &out);
    std::vector<std::string> lines;
    std::stringstream in(out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  // Kills what runs in namespace `name`, then deletes it (its veth end goes with it).
  void RemoveNamespace(const std::string& name) {
    for (const auto& pid : Lines({"netns", "pids", name})) {
      const int p = std::atoi(pid.c_str());
      if (p > 1 && p != getpid()) kill(p, SIGKILL);
    }
    Run({"netns", "del", name}, nullptr);
  }

  // The pid in a name of our family ("bkmh123-h1" -> 123), or -1 for other names.
  static int OwnerPid(const std::string& name) {
    const std::string family = kTestHostsPrefix;
    if (name.rfind(family, 0) != 0) return -1;
    const auto dash = name.find('-', family.size());
    if (dash == std::string::npos || dash == family.size()) return -1;
    const std::string digits = name.substr(family.size(), dash - family.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::atoi(digits.c_str());
  }
  // A process that exists and is not a zombie (a test process just killed may be one
  // until its parent reaps it).
  static bool Alive(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');
    if (stat.empty() || paren == std::string::npos || paren + 2 >= stat.size()) return false;
    return stat[paren + 2] != 'Z' && stat[paren + 2] != 'X';
  }

  // Namespaces and links of our family whose test process is gone: a crashed run's.
  void RemoveLeftovers() {
    for (const auto& line : Lines({"netns", "list"})) {
      const std::string name = line.substr(0, line.find(' '));
      const int owner = OwnerPid(name);
      if (owner > 0 && owner != getpid() && !Alive(owner)) RemoveNamespace(name);
    }
    for (const auto& line : Lines({"-o", "link", "show"})) {
      // "12: bkmh123-v1@if11: <...>"
      const auto colon = line.find(": ");
      if (colon == std::string::npos) continue;
      std::string name = line.substr(colon + 2);
      name = name.substr(0, name.find_first_of("@:"));
      const int owner = OwnerPid(name);
      if (owner > 0 && owner != getpid() && !Alive(owner)) Run({"link", "del", name}, nullptr);
    }
  }

  // A 10.231.x.0/24 that no address here is in, starting from one derived from the pid.
  bool PickSubnet() {
    std::string addresses;
    Run({"-o", "addr", "show"}, &addresses);
    for (int k = 0; k < 250; ++k) {
      const int candidate = 1 + (getpid() + k) % 250;
      if (addresses.find(" 10.231." + std::to_string(candidate) + ".") == std::string::npos) {
        subnet_ = candidate;
        return true;
      }
    }
    return false;
  }

  void Teardown() {
    for (int i = created_hosts_; i >= 1; --i) {
      RemoveNamespace(Namespace(i));
      Run({"link", "del", Veth(i)}, nullptr);  // normally gone with its peer
    }
    created_hosts_ = 0;
    if (created_bridge_) Run({"link", "del", Bridge()}, nullptr);
    created_bridge_ = false;
  }

  const int count_;
  const std::string prefix_;
  std::string ip_;
  int subnet_ = 0;
  int created_hosts_ = 0;
  bool created_bridge_ = false;
  std::string skip_reason_;
  std::string last_output_;
};

}  // namespace bakeoff::testing
