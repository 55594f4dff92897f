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

Status WorkerConfig::Finalize(const std::string& argv0) {
  if (coordinator_address.empty()) {
    return Status::InvalidArgument("worker: no coordinator address; pass --coordinator HOST:PORT");
  }
  if (!tls_ca_path.empty()) tls = true;
  if (name.empty()) {
    char host[HOST_NAME_MAX + 1] = {0};
    gethostname(host, sizeof(host) - 1);
    name = std::string(host) + "-" + std::to_string(getpid());
  }
  if (!protocol::IsValidWorkerName(name)) {
    return Status::InvalidArgument("worker: --name \"" + name + "\": use 1-64 letters, digits, '.', '_' or '-'");
  }
  if (cpu_slots < 0) return Status::InvalidArgument("worker: --slots must be >= 0");
  if (cpu_slots == 0 && cuda_devices.empty()) {
    return Status::InvalidArgument("worker: offers nothing; give --slots N (N >= 1) or CUDA devices");
  }
  if (store_ports.first <= 0 || store_ports.last < store_ports.first || store_ports.last > 65535) {
    return Status::InvalidArgument("worker: store port range " + std::to_string(store_ports.first) + "-" +
                                   std::to_string(store_ports.last) + " is invalid; expected FIRST-LAST within 1-65535");
  }
  if (max_rank_log_bytes < RankLog::kMinMaxBytes) {
    return Status::InvalidArgument("worker: --max-rank-log-bytes " + std::to_string(max_rank_log_bytes) +
                                   " is too small; give at least " + std::to_string(RankLog::kMinMaxBytes));
  }
  if (trainer_path.empty()) {
    std::string dir = ExecutableDir();
    if (dir.empty()) dir = std::filesystem::path(argv0).parent_path().string();
    trainer_path = (std::filesystem::path(dir) / "bakeoff-trainer").string();
  }
  has_trainer = simulate || access(trainer_path.c_str(), X_OK) == 0;
  if (!has_trainer && !trainer_optional) {
    return Status::NotFound("worker: the trainer '" + trainer_path +
                            "' is not an executable file; build it (target bakeoff-trainer) or pass --trainer PATH");
  }
  if (work_dir.empty()) {
    std::error_code ec;
    auto base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "bakeoff-worker-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return Status::IoError("worker: cannot create a work directory under " + base.string());
    }
    work_dir = pattern;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(work_dir, ec);
    if (ec) return Status::IoError("worker: cannot create the work directory '" + work_dir + "': " + ec.message());
  }
  if (!data_root.empty()) {
    std::error_code ec;
    auto absolute = std::filesystem::canonical(data_root, ec);
    if (ec || !std::filesystem::is_directory(absolute)) {
      return Status::NotFound("worker: --data-root '" + data_root + "' is not a directory");
    }
    data_root = absolute.string();  // the trainer runs in the trial directory
  }
  if (executors_path.empty()) executors_path = spec::DefaultExecutorCatalogPath();
  if (!executors_path.empty() && executors_path != "none") {
    auto catalog = spec::LoadExecutorCatalog(executors_path);
    if (!catalog.ok()) return Status::InvalidArgument("worker: --executors: " + catalog.status().message());
    executors = std::move(*catalog);
  }
  if (cache_dir.empty()) {
    const char* env = std::getenv("BAKEOFF_CACHE");
    const char* home = std::getenv("HOME");
    // Under --rank-uids the worker is root, whose home other uids cannot enter.
    const std::string fallback = rank_uid_count > 0 ? "/var/cache/bakeoff"
                                 : std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.cache/bakeoff";
    cache_dir = env != nullptr && *env != '\0' ? env : fallback;
  }
  if (!rank_interface.empty() && rank_address.empty()) {
    auto address = protocol::InterfaceAddress(rank_interface);
    if (!address.ok()) return Status::InvalidArgument("worker: --rank-interface: " + address.status().message());
    rank_address = *address;
  }
  if (rank_address.empty()) rank_address = advertise_host;
  if (rank_interface.empty()) rank_interface = protocol::InterfaceHolding(rank_address);
  if (metrics_listen.empty()) {
    // The advertised address when it is an IP literal; a host name cannot be bound, so
    // then every interface (the coordinator's /api/v1/sd still lists the host name).
    in6_addr v6{};
    in_addr v4{};
    if (inet_pton(AF_INET6, advertise_host.c_str(), &v6) == 1) {
      metrics_listen = "[" + advertise_host + "]:0";
    } else if (inet_pton(AF_INET, advertise_host.c_str(), &v4) == 1) {
      metrics_listen = advertise_host + ":0";
    } else {
      metrics_listen = "0.0.0.0:0";
    }
  }
  if (metrics_listen != "off") {
    auto split = protocol::SplitHostPort(metrics_listen, "--metrics-listen");
    if (!split.ok()) return split.status().WithContext("worker");
  }
  if (!cuda_devices.empty() && gpu_model.empty() && !nvml_library.empty()) {
    if (auto nvml = NvmlLibrary::Load(nvml_library); nvml.ok() && (*nvml)->DeviceCount() > 0) {
      if (auto sample = (*nvml)->Sample(0); sample.ok()) gpu_model = sample->name;
    }
  }
  if (gpu_model.size() > protocol::kMaxGpuModelBytes) gpu_model.resize(protocol::kMaxGpuModelBytes);
  for (char& c : gpu_model) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (backoff_initial.count() <= 0 || backoff_max < backoff_initial) {
    return Status::InvalidArgument("worker: backoff must satisfy 0 < initial <= max");
  }
  if (rank_uid_count > 0 && !simulate) {
    if (Status s = CheckRankUids(); !s.ok()) return s;
  }
  {
    const std::vector<int> allowed = AllowedCpus();
    const bool named = !cpus.empty();
    if (cpus.empty()) cpus = allowed;
    for (int cpu : cpus) {
      if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) {
        return Status::InvalidArgument("worker: --cpus names CPU " + std::to_string(cpu) +
                                       ", which this process may not run on (allowed: " + FormatCpuList(allowed) + ")");
      }
    }
    if (!simulate) {
      // Two workers on one host must not pin ranks to the same cores nor pick the same
      // store port: each claims its own, host-wide (worker/host_claims.h).
      if (host_lock_dir.empty()) host_lock_dir = HostClaims::DefaultDirectory();
      auto host = std::make_shared<HostClaims>(host_lock_dir);
      if (rank_uid_count > 0) {
        if (Status s = host->ClaimUids(rank_uid_first, rank_uid_count); !s.ok()) return s.WithContext("worker");
      }
      if (cpu_slots > 0) {
        if (Status s = host->ClaimCpus(&cpus, named, share_cores); !s.ok()) return s.WithContext("worker");
      }
      const int ports = std::max(HostClaims::kPortBlock, 2 * (cpu_slots + static_cast<int>(cuda_devices.size())));
      if (Status s = host->ClaimStorePorts(&store_ports, ports); !s.ok()) return s.WithContext("worker");
      claims = std::move(host);
    }
    auto partition = CorePartition::Make(ReadHostCpuTopology(cpus), cpu_slots, share_cores);
    if (!partition.ok()) return partition.status();
    cores = std::move(partition).value();
  }
  return Status::Ok();
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
