// SlurmCluster: a real, private Slurm on this machine for the `slurm` tests: munged
// with its own key and socket, slurmctld and slurmd with their own slurm.conf, state and
// spool directories in a fresh short directory /tmp/bks-XXXXXX (slurmstepd's Unix
// sockets live in the spool directory and their paths must stay under 108 bytes;
// removed at the end unless BAKEOFF_KEEP_SLURM_DIR is set), ports picked free, every address
// 127.0.0.1, one node (this host, by its name), ProctrackType=proctrack/linuxproc and
// TaskPlugin=task/none (no cgroups). Clients reach it through SLURM_CONF (Env()).
// The destructor cancels every job, waits (bounded) until squeue is empty, then stops
// the daemons (SIGTERM, then SIGKILL through their ProcessGuards) and reaps them,
// whatever the test did. Slurm 22.05 has no bind address: slurmctld and slurmd listen
// on their ports on every interface; nothing is sent to another host.
// Thread-safety: one owner.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "coordinator/process_slurm_client.h"
#include "tests/integration/loopback_port.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff::testing {

class SlurmCluster {
 public:
  // "" when a Slurm can be started here, else why not (for GTEST_SKIP).
  static std::string WhyNot() {
    if (geteuid() != 0) return "the Slurm tests run slurmd, which needs root";
    for (const char* bin : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"}) {
      if (access(bin, X_OK) != 0) {
        return std::string(bin) + " is missing: apt-get install slurm-wlm munge (scripts/setup does)";
      }
    }
    for (const char* bin : {"sbatch", "squeue", "scancel", "sinfo"}) {
      if (!coordinator::RunCommand({"sh", "-c", std::string("command -v ") + bin}, std::chrono::seconds(10)).ok()) {
        return std::string(bin) + " is missing: apt-get install slurm-client";
      }
    }
    return "";
  }

  // `cpus`: what the node declares (config_overrides: more than the machine has is fine,
  // so that several one-CPU worker jobs share it).
  explicit SlurmCluster(int cpus = 4) : cpus_(cpus) {
    char dir[] = "/tmp/bks-XXXXXX";
    if (mkdtemp(dir) != nullptr) dir_ = dir;
  }

  ~SlurmCluster() {
    if (slurmctld_) {
      // Every job first, so that no worker outlives the cluster.
      Run({"scancel", "--full", "--partition=test"});
      WaitFor([&] { return AllJobsGone(); }, std::chrono::seconds(60));
    }
    for (auto* guard : {&slurmd_, &slurmctld_, &munged_}) {
      if (*guard) {
        (*guard)->Signal(SIGTERM);
        (*guard)->WaitExit(std::chrono::seconds(15));
        guard->reset();  // SIGKILLs what is left of its group and reaps it
      }
    }
    std::error_code ec;
    if (!dir_.empty() && std::getenv("BAKEOFF_KEEP_SLURM_DIR") == nullptr) std::filesystem::remove_all(dir_, ec);
  }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // Starts munged, slurmctld and slurmd and waits until the node is idle. False (with a
  // test failure naming the log) when it did not come up.
  bool Start() {
    if (dir_.empty()) {
      ADD_FAILURE() << "cannot create a directory in /tmp for Slurm";
      return false;
    }
    const auto munge = dir_ / "munge";
    std::filesystem::create_directories(munge);
    std::filesystem::permissions(munge, std::filesystem::perms::owner_all);
    for (const char* d : {"state", "spool", "log"}) std::filesystem::create_directories(dir_ / d);
    {
      std::ofstream key(munge / "key", std::ios::binary);
      std::random_device rd;
      for (int i = 0; i < 1024; ++i) key.put(static_cast<char>(rd()));
    }
    std::filesystem::permissions(munge / "key", std::filesystem::perms::owner_read);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    node_ = host;
    node_ = node_.substr(0, node_.find('.'));  // slurmd and slurmctld go by the short name
    const int ctld_port = FreeLoopbackPort(), slurmd_port = FreeLoopbackPort();
    std::ofstream conf(conf_path());
    conf << "ClusterName=bakeofftest\n"
         << "SlurmctldHost=" << node_ << "(127.0.0.1)\n"
         << "SlurmctldPort=" << ctld_port << "\n"
         << "SlurmdPort=" << slurmd_port << "\n"
         << "SlurmUser=root\nSlurmdUser=root\n"
         << "AuthType=auth/munge\nCredType=cred/munge\n"
         << "AuthInfo=socket=" << (munge / "socket").string() << "\n"
         << "StateSaveLocation=" << (dir_ / "state").string() << "\n"
         << "SlurmdSpoolDir=" << (dir_ / "spool").string() << "\n"
         << "SlurmctldPidFile=" << (dir_ / "slurmctld.pid").string() << "\n"
         << "SlurmdPidFile=" << (dir_ / "slurmd.pid").string() << "\n"
         << "SlurmctldLogFile=" << (dir_ / "log" / "slurmctld.log").string() << "\n"
         << "SlurmdLogFile=" << (dir_ / "log" / "slurmd.log").string() << "\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
         << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nSchedulerType=sched/builtin\n"
         << "SlurmdParameters=config_overrides\n"
         << "ReturnToService=2\nMpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n"
         << "AccountingStorageType=accounting_storage/none\nSwitchType=switch/none\n"
         << "KillWait=5\nInactiveLimit=0\nMinJobAge=2\n"
         << "NodeName=" << node_ << " NodeAddr=127.0.0.1 CPUs=" << cpus_ << " State=UNKNOWN\n"
         << "PartitionName=test Nodes=" << node_ << " Default=YES MaxTime=INFINITE State=UP\n";
    conf.close();
    munged_ = std::make_unique<ProcessGuard>(
        std::vector<std::string>{"/usr/sbin/munged", "--foreground", "--force", "--socket=" + (munge / "socket").string(),
                                 "--key-file=" + (munge / "key").string(), "--pid-file=" + (munge / "pid").string(),
                                 "--log-file=" + (munge / "log").string(), "--seed-file=" + (munge / "seed").string()},
        Env(), (dir_ / "log" / "munged.out").string());
    if (!WaitFor([&] { return std::filesystem::exists(munge / "socket"); }, std::chrono::seconds(20))) {
      ADD_FAILURE() << "munged did not start: " << ReadFile(munge / "log") << ReadFile(dir_ / "log" / "munged.out");
      return false;
    }
    slurmctld_ = std::make_unique<ProcessGuard>(
        std::vector<std::string>{"/usr/sbin/slurmctld", "-D", "-i", "-f", conf_path()}, Env(),
        (dir_ / "log" / "slurmctld.out").string());
    slurmd_ = std::make_unique<ProcessGuard>(
        std::vector<std::string>{"/usr/sbin/slurmd", "-D", "-f", conf_path()}, Env(),
        (dir_ / "log" / "slurmd.out").string());
    if (!WaitFor([&] { return NodeState() == "idle"; }, std::chrono::seconds(60))) {
      ADD_FAILURE() << "the Slurm node did not become idle (state '" << NodeState()
                    << "'): " << ReadFile(dir_ / "log" / "slurmctld.log") << ReadFile(dir_ / "log" / "slurmd.log");
      return false;
    }
    return true;
  }

  std::string conf_path() const { return (dir_ / "slurm.conf").string(); }
  // What a client of this Slurm needs in its environment.
  std::vector<std::string> Env() const { return {"SLURM_CONF=" + conf_path()}; }
  const std::string& node() const { return node_; }
  std::filesystem::path log_dir() const { return dir_ / "log"; }

  // Runs a Slurm client command against this cluster (SLURM_CONF set in this process).
  coordinator::CommandResult Run(std::vector<std::string> argv) {
    setenv("SLURM_CONF", conf_path().c_str(), 1);
    auto r = coordinator::RunCommand(argv, std::chrono::seconds(30));
    return r.ok() ? *r : coordinator::CommandResult{};
  }
  // The jobs squeue lists (all names), as ProcessSlurmClient parses them.
  std::vector<coordinator::SlurmQueueEntry> Jobs() {
    auto r = Run({"squeue", "--noheader", "--format=%i|%T|%D|%r"});
    return r.exit_code == 0 ? coordinator::ProcessSlurmClient::ParseQueue(r.out)
                            : std::vector<coordinator::SlurmQueueEntry>{};
  }
  bool AllJobsGone() {
    auto r = Run({"squeue", "--noheader", "--format=%i"});
    return r.exit_code == 0 && r.out.find_first_not_of(" \n") == std::string::npos;
  }
  std::string NodeState() {
    auto r = Run({"sinfo", "--noheader", "--format=%T"});
    std::string s = r.out.substr(0, r.out.find('\n'));
    return s;
  }

 private:
  std::filesystem::path dir_;
  int cpus_;
  std::string node_;
  std::unique_ptr<ProcessGuard> munged_, slurmctld_, slurmd_;
};

}  // namespace bakeoff::testing
