#include "worker/worker_config.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "protocol/frame_connection.h"
#include "protocol/host_network.h"
#include "worker/nvml_library.h"
#include "worker/rank_log.h"

namespace bakeoff::worker {

std::string ExecutableDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return exe.parent_path().string();
}

namespace {

// The steps of Finalize, in its order: each fills what the flags left out or refuses what
// a worker could not run with, before anything is claimed on this host.

// A worker must say where it connects and under which name, since the coordinator keys
// everything (placement, reconnects, lost trials) on the name; a CA means TLS.
Status CheckCoordinatorAndName(WorkerConfig& config) {
  if (config.coordinator_address.empty()) {
    return Status::InvalidArgument("worker: no coordinator address; pass --coordinator HOST:PORT");
  }
  if (!config.tls_ca_path.empty()) config.tls = true;
  if (config.name.empty()) {
    char host[HOST_NAME_MAX + 1] = {0};
    gethostname(host, sizeof(host) - 1);
    config.name = std::string(host) + "-" + std::to_string(getpid());
  }
  if (!protocol::IsValidWorkerName(config.name)) {
    return Status::InvalidArgument("worker: --name \"" + config.name +
                                   "\": use 1-64 letters, digits, '.', '_' or '-'");
  }
  return Status::Ok();
}

// A worker that offers nothing, or bounds no rank could live within, would register and
// then never run a trial: refuse it at the start, naming the flag.
Status CheckCapacityAndBounds(const WorkerConfig& config) {
  if (config.cpu_slots < 0) return Status::InvalidArgument("worker: --slots must be >= 0");
  if (config.cpu_slots == 0 && config.cuda_devices.empty()) {
    return Status::InvalidArgument("worker: offers nothing; give --slots N (N >= 1) or CUDA devices");
  }
  const protocol::PortRange& ports = config.store_ports;
  if (ports.first <= 0 || ports.last < ports.first || ports.last > 65535) {
    return Status::InvalidArgument("worker: store port range " + std::to_string(ports.first) + "-" +
                                   std::to_string(ports.last) + " is invalid; expected FIRST-LAST within 1-65535");
  }
  if (config.max_rank_log_bytes < RankLog::kMinMaxBytes) {
    return Status::InvalidArgument("worker: --max-rank-log-bytes " + std::to_string(config.max_rank_log_bytes) +
                                   " is too small; give at least " + std::to_string(RankLog::kMinMaxBytes));
  }
  return Status::Ok();
}

// The trainer ships next to `bakeoff`; a missing one is refused now unless the worker may
// go without (then a native trial fails at its start, naming the path).
Status LocateTrainer(WorkerConfig& config, const std::string& argv0) {
  if (config.trainer_path.empty()) {
    std::string dir = ExecutableDir();
    if (dir.empty()) dir = std::filesystem::path(argv0).parent_path().string();
    config.trainer_path = (std::filesystem::path(dir) / "bakeoff-trainer").string();
  }
  config.has_trainer = config.simulate || access(config.trainer_path.c_str(), X_OK) == 0;
  if (!config.has_trainer && !config.trainer_optional) {
    return Status::NotFound("worker: the trainer '" + config.trainer_path +
                            "' is not an executable file; build it (target bakeoff-trainer) or pass --trainer PATH");
  }
  return Status::Ok();
}

// Trial directories are made under it from the io thread: it must exist before the first
// trial, and a fresh temp dir keeps workers on one host apart when none was named.
Status MakeWorkDir(WorkerConfig& config) {
  std::error_code ec;
  if (!config.work_dir.empty()) {
    std::filesystem::create_directories(config.work_dir, ec);
    if (ec) {
      return Status::IoError("worker: cannot create the work directory '" + config.work_dir + "': " + ec.message());
    }
    return Status::Ok();
  }
  auto base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "bakeoff-worker-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return Status::IoError("worker: cannot create a work directory under " + base.string());
  }
  config.work_dir = pattern;
  return Status::Ok();
}

// Made absolute because the trainer runs in the trial directory, where a relative path
// would name something else.
Status ResolveDataRoot(WorkerConfig& config) {
  if (config.data_root.empty()) return Status::Ok();
  std::error_code ec;
  auto absolute = std::filesystem::canonical(config.data_root, ec);
  if (ec || !std::filesystem::is_directory(absolute)) {
    return Status::NotFound("worker: --data-root '" + config.data_root + "' is not a directory");
  }
  config.data_root = absolute.string();
  return Status::Ok();
}

// Loaded once here, so that a bad allowlist stops the worker before it registers rather
// than failing every command trial it is given.
Status LoadExecutors(WorkerConfig& config) {
  if (config.executors_path.empty()) config.executors_path = spec::DefaultExecutorCatalogPath();
  if (config.executors_path.empty() || config.executors_path == "none") return Status::Ok();
  auto catalog = spec::LoadExecutorCatalog(config.executors_path);
  if (!catalog.ok()) return Status::InvalidArgument("worker: --executors: " + catalog.status().message());
  config.executors = std::move(*catalog);
  return Status::Ok();
}

// {cache} must name one directory for every trial of this worker, whoever runs it.
void FillCacheDir(WorkerConfig& config) {
  if (!config.cache_dir.empty()) return;
  const char* env = std::getenv("BAKEOFF_CACHE");
  const char* home = std::getenv("HOME");
  // Under --rank-uids the worker is root, whose home other uids cannot enter.
  const std::string fallback = config.rank_uid_count > 0
                                   ? "/var/cache/bakeoff"
                                   : std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.cache/bakeoff";
  config.cache_dir = env != nullptr && *env != '\0' ? env : fallback;
}

// Ranks of a trial that spans hosts bind their collectives to this address and interface;
// either one given implies the other (RankAddressWarning says when neither fits).
Status ResolveRankAddress(WorkerConfig& config) {
  if (!config.rank_interface.empty() && config.rank_address.empty()) {
    auto address = protocol::InterfaceAddress(config.rank_interface);
    if (!address.ok()) return Status::InvalidArgument("worker: --rank-interface: " + address.status().message());
    config.rank_address = *address;
  }
  if (config.rank_address.empty()) config.rank_address = config.advertise_host;
  if (config.rank_interface.empty()) config.rank_interface = protocol::InterfaceHolding(config.rank_address);
  return Status::Ok();
}

// Checked here so that a bad --metrics-listen is a usage error, not a failed bind later.
Status ResolveMetricsListen(WorkerConfig& config) {
  if (config.metrics_listen.empty()) {
    // The advertised address when it is an IP literal; a host name cannot be bound, so
    // then every interface (the coordinator's /api/v1/sd still lists the host name).
    const std::string& host = config.advertise_host;
    in6_addr v6{};
    in_addr v4{};
    if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
      config.metrics_listen = "[" + host + "]:0";
    } else if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
      config.metrics_listen = host + ":0";
    } else {
      config.metrics_listen = "0.0.0.0:0";
    }
  }
  if (config.metrics_listen == "off") return Status::Ok();
  auto split = protocol::SplitHostPort(config.metrics_listen, "--metrics-listen");
  if (!split.ok()) return split.status().WithContext("worker");
  return Status::Ok();
}

// Sweeps match resources.gpu_type against it, and it travels in the register frame:
// asked of NVML when not given, then bounded and made printable.
void FillGpuModel(WorkerConfig& config) {
  std::string& model = config.gpu_model;
  if (!config.cuda_devices.empty() && model.empty() && !config.nvml_library.empty()) {
    if (auto nvml = NvmlLibrary::Load(config.nvml_library); nvml.ok() && (*nvml)->DeviceCount() > 0) {
      if (auto sample = (*nvml)->Sample(0); sample.ok()) model = sample->name;
    }
  }
  if (model.size() > protocol::kMaxGpuModelBytes) model.resize(protocol::kMaxGpuModelBytes);
  for (char& c : model) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
}

// Ranks are pinned to these CPUs, so each must be one this process may run on; none
// named means the whole affinity mask.
Status CheckCpus(WorkerConfig& config) {
  const std::vector<int> allowed = AllowedCpus();
  if (config.cpus.empty()) config.cpus = allowed;
  for (int cpu : config.cpus) {
    if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) {
      return Status::InvalidArgument("worker: --cpus names CPU " + std::to_string(cpu) +
                                     ", which this process may not run on (allowed: " + FormatCpuList(allowed) + ")");
    }
  }
  return Status::Ok();
}

// Two workers on one host must not pin ranks to the same cores nor pick the same store
// port: each claims its own, host-wide (worker/host_claims.h). `named`: the operator
// listed the CPUs, so all of them are claimed, not only the free ones.
Status ClaimOnThisHost(WorkerConfig& config, bool named) {
  if (config.host_lock_dir.empty()) config.host_lock_dir = HostClaims::DefaultDirectory();
  auto host = std::make_shared<HostClaims>(config.host_lock_dir);
  if (config.rank_uid_count > 0) {
    if (Status s = host->ClaimUids(config.rank_uid_first, config.rank_uid_count); !s.ok()) {
      return s.WithContext("worker");
    }
  }
  if (config.cpu_slots > 0) {
    if (Status s = host->ClaimCpus(&config.cpus, named, config.share_cores); !s.ok()) return s.WithContext("worker");
  }
  const int ports =
      std::max(HostClaims::kPortBlock, 2 * (config.cpu_slots + static_cast<int>(config.cuda_devices.size())));
  if (Status s = host->ClaimStorePorts(&config.store_ports, ports); !s.ok()) return s.WithContext("worker");
  config.claims = std::move(host);
  return Status::Ok();
}

// Each slot gets whole physical cores of the CPUs this worker holds.
Status PartitionCores(WorkerConfig& config) {
  auto partition = CorePartition::Make(ReadHostCpuTopology(config.cpus), config.cpu_slots, config.share_cores);
  if (!partition.ok()) return partition.status();
  config.cores = std::move(partition).value();
  return Status::Ok();
}

}  // namespace

Status WorkerConfig::Finalize(const std::string& argv0) {
  BAKEOFF_RETURN_IF_ERROR(CheckCoordinatorAndName(*this));
  BAKEOFF_RETURN_IF_ERROR(CheckCapacityAndBounds(*this));
  BAKEOFF_RETURN_IF_ERROR(LocateTrainer(*this, argv0));
  BAKEOFF_RETURN_IF_ERROR(MakeWorkDir(*this));
  BAKEOFF_RETURN_IF_ERROR(ResolveDataRoot(*this));
  BAKEOFF_RETURN_IF_ERROR(LoadExecutors(*this));
  FillCacheDir(*this);
  BAKEOFF_RETURN_IF_ERROR(ResolveRankAddress(*this));
  BAKEOFF_RETURN_IF_ERROR(ResolveMetricsListen(*this));
  FillGpuModel(*this);
  if (backoff_initial.count() <= 0 || backoff_max < backoff_initial) {
    return Status::InvalidArgument("worker: backoff must satisfy 0 < initial <= max");
  }
  // Last of the checks: it needs the trainer, executors, work and cache paths above.
  if (rank_uid_count > 0 && !simulate) BAKEOFF_RETURN_IF_ERROR(CheckRankUids());
  const bool cpus_named = !cpus.empty();
  BAKEOFF_RETURN_IF_ERROR(CheckCpus(*this));
  // Simulated workers run no ranks, so they hold nothing on the host.
  if (!simulate) BAKEOFF_RETURN_IF_ERROR(ClaimOnThisHost(*this, cpus_named));
  return PartitionCores(*this);
}

namespace {

// Every directory from / down to `path` lets others through (o+x), and `path` itself
// lets them read (o+r) or, for a directory, through: a rank under another uid reaches it.
Status OthersCanReach(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(path, ec);
  std::filesystem::path at = absolute.root_path();
  for (const auto& part : absolute.relative_path()) {
    at /= part;
    struct stat st{};
    if (stat(at.c_str(), &st) != 0) return Status::NotFound("worker: " + what + " " + at.string() + " does not exist");
    const bool last = at == absolute;
    const mode_t need = S_ISDIR(st.st_mode) ? S_IXOTH : (last ? S_IROTH : S_IXOTH);
    if ((st.st_mode & need) == 0) {
      char mode[8];
      snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return Status::InvalidArgument("worker: --rank-uids: ranks run as other users, but " + at.string() +
                                     " (on the way to the " + what + ") is closed to them (mode " + mode + "); chmod o+" +
                                     (need == S_IROTH ? "r" : "x") + " it, or pick paths under a readable directory");
    }
  }
  return Status::Ok();
}

}  // namespace

Status WorkerConfig::CheckRankUids() const {
  if (geteuid() != 0) {
    return Status::InvalidArgument("worker: --rank-uids needs root: the worker switches each attempt's ranks to a "
                                   "uid of the range (or run the worker without it; docs/security.md)");
  }
  const unsigned long last = static_cast<unsigned long>(rank_uid_first) + static_cast<unsigned long>(rank_uid_count) - 1;
  if (rank_uid_first == 0 || last >= 4294967295ul) {
    return Status::InvalidArgument("worker: --rank-uids must lie within 1-4294967294");
  }
  if (getuid() >= rank_uid_first && getuid() <= last) {
    return Status::InvalidArgument("worker: --rank-uids holds the worker's own uid " + std::to_string(getuid()));
  }
  const int concurrent = cpu_slots + static_cast<int>(cuda_devices.size());
  if (rank_uid_count < concurrent) {
    return Status::InvalidArgument("worker: --rank-uids has " + std::to_string(rank_uid_count) + " uid(s) for up to " +
                                   std::to_string(concurrent) + " attempts at once (slots + CUDA devices); give at "
                                   "least that many");
  }
  if (has_trainer) {
    if (Status s = OthersCanReach(trainer_path, "trainer"); !s.ok()) return s;
  }
  if (!executors.dir.empty()) {
    if (Status s = OthersCanReach(executors.dir, "executors' directory"); !s.ok()) return s;
  }
  // The work directory is the worker's: others pass through it (o+x) into the
  // directory of their own attempt, and list nothing.
  if (Status s = OthersCanReach(std::filesystem::path(work_dir).parent_path(), "work directory's parent"); !s.ok()) {
    return s;
  }
  if (chmod(work_dir.c_str(), 0711) != 0) return Status::IoError("worker: cannot chmod the work directory " + work_dir);
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec || chmod(cache_dir.c_str(), 0711) != 0) {
    return Status::IoError("worker: cannot create or chmod the cache directory " + cache_dir);
  }
  if (Status s = OthersCanReach(std::filesystem::path(cache_dir).parent_path(), "cache directory's parent"); !s.ok()) {
    return s;
  }
  return Status::Ok();
}

std::string WorkerConfig::RankAddressWarning() const {
  if (!rank_interface.empty()) return "";
  return "rank address " + rank_address + " is no address of this host: ranks of trials that span hosts "
         "cannot bind their collectives to it; give --host (or --rank-address) an address of this host, "
         "or --rank-interface IFACE";
}

}  // namespace bakeoff::worker
