// WorkerConfig: everything a worker agent needs, with documented defaults (docs/cli.md
// lists the flags that set them). Parsed once by `bakeoff worker` / `bakeoff local`
// and completed and checked here (Finalize). Thread-safety: a value; read-only after
// Finalize.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experiments/sweep/executor_catalog.h"
#include "protocol/messages.h"
#include "protocol/status.h"
#include "worker/core_partition.h"
#include "worker/host_claims.h"

namespace bakeoff::worker {

struct WorkerConfig {
  // host:port of the coordinator's worker listener (`bakeoff coordinator --worker-listen`).
  std::string coordinator_address;
  // TLS to the worker listener (`bakeoff coordinator --tls-cert`): the coordinator's
  // certificate is verified against the CA certificates in `tls_ca_path` (PEM), or the
  // system's trust store when it is empty, and must name coordinator_address's host.
  // A CA implies TLS (--tls, --tls-ca).
  bool tls = false;
  std::string tls_ca_path;
  // Shared worker token (from --token-file or BAKEOFF_TOKEN; never a flag).
  std::string token;
  // Stable identity across reconnects; default "<hostname>-<pid>" ("<node>-<job>" inside
  // a Slurm job: worker/slurm_allocation.h).
  std::string name;
  // The Slurm job this worker runs in ("" = none), reported at registration.
  std::string slurm_job_id;
  // Address other workers reach this one at (rank 0's TCPStore); default 127.0.0.1.
  std::string advertise_host = "127.0.0.1";
  // Where this worker's ranks bind their collectives (docs/distributed.md, "Addresses"):
  // every rank gets BAKEOFF_RANK_ADDR=rank_address and, when known,
  // BAKEOFF_RANK_IFACE=rank_interface (plus NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME
  // unless this worker's own environment sets them). Finalize fills them: rank_address
  // defaults to the address of rank_interface when that is given, else advertise_host;
  // rank_interface to the interface holding rank_address ("" when it is no address of
  // this host: RankAddressWarning() then says why the ranks will not bind).
  std::string rank_address;
  std::string rank_interface;
  // Ranks run at once on CPU. Each rank is one trainer process.
  int cpu_slots = 1;
  // CUDA device ordinals offered, one rank each (empty on CPU-only nodes).
  std::vector<int> cuda_devices;
  // Their model, which a sweep's resources.gpu_type must be part of (--gpu-model);
  // Finalize fills it from NVML (`nvml_library`, the first device) when CUDA devices are
  // offered and it is empty, and trims it to protocol::kMaxGpuModelBytes.
  std::string gpu_model;
  // Isolation (docs/sweep.md, "Isolation"): the logical CPUs this worker gives its CPU
  // ranks (empty: its own affinity mask); Finalize deals their physical cores out to the
  // `cpu_slots` slots into `cores`, and each CPU rank is pinned to one slot's CPUs. With
  // fewer CPUs than slots the worker is refused unless `share_cores` (then no pinning).
  std::vector<int> cpus;
  bool share_cores = false;
  CorePartition cores;
  // Ports rank 0 may bind for a trial's TCPStore; the coordinator picks one. Finalize
  // narrows the range to a window of it that no other worker on this host holds.
  protocol::PortRange store_ports{29500, 29999};
  // Host-wide claims (worker/host_claims.h): Finalize claims `cpus` (all of them when
  // the operator named them; else the free ones of the affinity mask) and the store-port
  // window against every other Bakeoff worker on this host, in `host_lock_dir` (default
  // HostClaims::DefaultDirectory(); "off": no claims). Held while any copy of this
  // config lives. Simulated workers run no ranks and claim nothing.
  std::string host_lock_dir;
  std::shared_ptr<const HostClaims> claims;
  // The trainer executable; default: `bakeoff-trainer` next to the running binary.
  std::string trainer_path;
  // A missing trainer is no error (`bakeoff local` for a sweep whose variants all run
  // command templates: the main job needs no trainer build). Finalize sets has_trainer;
  // a native trial on a worker without one fails at its start, naming the path.
  bool trainer_optional = false;
  bool has_trainer = true;
  // Trial directories (config.json, per-rank stderr logs, outputs/); default: a fresh
  // temp dir.
  std::string work_dir;
  // The only directory a sweep's token files (`dataset: NAME`) are read from; "" = this
  // worker takes no file datasets. A sweep names files inside it, never a path
  // (docs/sweep.md, "Files"); outputs (`adapters_out`) go to the trial's outputs/.
  std::string data_root;
  // The command allowlist (docs/executors.md): an `executor: command` trial runs only a
  // template of this file, never a program a sweep names. "" = the default
  // (spec::DefaultExecutorCatalogPath(): BAKEOFF_EXECUTORS, else the shipped
  // experiments/executors.yaml); "none" = this worker runs no commands. Finalize loads it.
  std::string executors_path;
  spec::ExecutorCatalog executors;
  // Ranks under uids of their own (docs/security.md, "Ranks under uids of their own"):
  // count > 0 runs each attempt's ranks as one uid of first..first+count-1 (gid the same
  // number, no supplementary groups), which cannot read the worker's credential or other
  // attempts' directories; every process of that uid is killed when the attempt ends.
  // Needs root; count >= the attempts that run at once (slots + CUDA devices). 0: ranks
  // run as the worker's own user.
  unsigned rank_uid_first = 0;
  int rank_uid_count = 0;
  // {cache} of the templates (torch.compile's and DeepSpeed's build caches); default
  // $BAKEOFF_CACHE, else $HOME/.cache/bakeoff.
  std::string cache_dir;
  // Trial directories are removed once their attempt has ended and been handed to the
  // outbox (its results travel from memory): a succeeded attempt's at once, a failed
  // one's when more than `keep_failed_trials` newer failed ones exist (their rank logs
  // are what a reason points to). keep_trial_dirs keeps every one (debugging, tests).
  bool keep_trial_dirs = false;
  int keep_failed_trials = 20;
  // Extra arguments appended to every trainer command line (e.g. "--threads", "1").
  std::vector<std::string> trainer_extra_args;

  // Live metrics (docs/metrics.md): GET /metrics served on this HOST:PORT. Empty: the
  // advertise host (every interface when it is a host name, not an IP) with port 0, a
  // free port that the worker tells the coordinator and /api/v1/sd lists. "off": none.
  std::string metrics_listen;
  // NVML, loaded at run time for the GPU series; absent or "" -> no GPU series.
  std::string nvml_library = "libnvidia-ml.so.1";
  // Where node CPU and memory figures are read from (tests point it elsewhere).
  std::string proc_root = "/proc";

  // Connection: first delay, cap, and ±jitter fraction of the reconnect backoff.
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{10000};
  double backoff_jitter = 0.2;
  // Give up after this many failed connection attempts in a row (0 = never).
  int max_connect_attempts = 0;

  // Event forwarding: a batch is sent at most every `flush_interval`.
  std::chrono::milliseconds flush_interval{100};
  std::size_t max_events_per_frame = 500;
  // Frames sent and not yet acknowledged; the rest waits in the outbox (flow control
  // against a coordinator that reads slowly: see worker/outbox.h).
  std::size_t max_frames_in_flight = 16;
  // Events held while disconnected or unacknowledged (see worker/outbox.h).
  std::size_t max_buffered_events = 100000;
  // Longest trainer stdout line accepted; longer lines are dropped and counted.
  std::size_t max_event_line_bytes = 1u << 20;
  // Cap of each rank's log (rank-R.log: its stderr, a command's stdout too). Past it the
  // log keeps the first half and the last quarter to half of the output, with a marker
  // line where the middle was dropped (worker/rank_log.h). At least 64 KiB.
  std::uint64_t max_rank_log_bytes = 16u << 20;

  // Scale benchmarks only: run the simulated workload instead of the trainer. Every
  // event it emits carries "simulated": true and the coordinator stores the attempt as
  // simulated. `simulate_step` is the time per simulated step.
  bool simulate = false;
  std::chrono::milliseconds simulate_step{10};

  // Fills defaults (name, trainer_path, work_dir, cache_dir, rank_address,
  // rank_interface), loads `executors` from executors_path, and checks values (the
  // name, slots, store ports, data_root, the trainer being executable). `argv0` locates
  // the trainer next to the binary.
  Status Finalize(const std::string& argv0);

  // The checks of --rank-uids (root, range, every path ranks need open to other users);
  // makes the work and cache directories 0711. Part of Finalize.
  Status CheckRankUids() const;

  // After Finalize: a warning for the operator when rank_address is no address of this
  // host (multi-host trials would fail to bind), else "".
  std::string RankAddressWarning() const;
};

// The directory of the running executable (from /proc/self/exe), "" when unknown.
std::string ExecutableDir();

}  // namespace bakeoff::worker
