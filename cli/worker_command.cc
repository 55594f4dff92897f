// `bakeoff worker`: the node agent. Registers with the coordinator, runs the trials it
// is given as trainer processes, and reconnects with backoff until SIGINT/SIGTERM.
// Inside a Slurm job it takes its name, host and GPUs from the allocation, and SIGUSR1
// (sbatch --signal) or SIGTERM (time limit, preemption, scancel) preempt it: its running
// trials are reported lost and requeued by the coordinator (docs/slurm.md).
#include <sys/stat.h>
#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "protocol/token.h"
#include "worker/slurm_allocation.h"
#include "worker/worker_agent.h"

namespace bakeoff::cli {
namespace {

struct WorkerFlags {
  worker::WorkerConfig config;
  std::string token_file;
  std::string store_ports = "29500-29999";
  std::vector<int> cuda_devices;
  std::string cpus;  // --cpus LIST; "" = this process's affinity
  std::string rank_uids;  // --rank-uids FIRST-LAST; "" = ranks run as the worker's user
  int simulate_step_ms = 10;
  // Scale benchmarks: this many simulated workers in this one process (--simulate only).
  int simulated_workers = 1;
  // SIGTERM: "requeue" hands the running attempts back (lost, retried elsewhere), as a
  // node drained by Kubernetes or Slurm needs; "cancel" ends them cancelled; "auto" is
  // requeue inside a Slurm job, else cancel.
  std::string on_sigterm = "auto";
  std::string argv0;
  worker::ExplicitWorkerFlags given;  // what the allocation must not override
  bool slots_given = false;
};

Status ParsePortRange(const std::string& text, protocol::PortRange* range) {
  auto dash = text.find('-');
  try {
    if (dash == std::string::npos) {
      range->first = range->last = std::stoi(text);
    } else {
      range->first = std::stoi(text.substr(0, dash));
      range->last = std::stoi(text.substr(dash + 1));
    }
  } catch (const std::exception&) {
    return Status::InvalidArgument("--store-ports '" + text + "': expected FIRST-LAST, e.g. 29500-29999");
  }
  return Status::Ok();
}

// How `bakeoff worker` refuses what it was given before it starts: one line, exit 2.
int RefuseUsage(const Status& status) {
  std::cerr << "bakeoff worker: " << EscapeControlCharacters(status.message()) << "\n";
  return kExitUsage;
}

// Ranks under uids of their own are there so that a training script cannot read the
// worker's credential: a token file that others may read would defeat them, so it is
// refused with them.
Status ParseRankUids(WorkerFlags& flags) {
  if (flags.rank_uids.empty()) return Status::Ok();
  protocol::PortRange uids;
  if (Status s = ParsePortRange(flags.rank_uids, &uids); !s.ok() || uids.first <= 0 || uids.last < uids.first) {
    return Status::InvalidArgument("--rank-uids '" + flags.rank_uids + "': expected FIRST-LAST, e.g. 61000-61015");
  }
  flags.config.rank_uid_first = static_cast<unsigned>(uids.first);
  flags.config.rank_uid_count = uids.last - uids.first + 1;
  // Ranks must not read the credential: the file open to its owner alone.
  struct stat st{};
  if (!flags.token_file.empty() && stat(flags.token_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    std::ostringstream mode;
    mode << std::oct << (st.st_mode & 0777);
    return Status::InvalidArgument("--token-file " + flags.token_file + " is open to other users (mode " + mode.str() +
                                   "), whom --rank-uids' ranks are; chmod 600 it");
  }
  return Status::Ok();
}

// The flags that arrive as text (the token file, ranges, CPU lists) become the config's
// typed fields, so that the allocation and Finalize work on one struct.
Status ParseFlagsIntoConfig(WorkerFlags& flags) {
  auto token = protocol::LoadToken(flags.token_file);
  if (!token.ok()) return token.status();
  flags.config.token = *token;
  BAKEOFF_RETURN_IF_ERROR(ParsePortRange(flags.store_ports, &flags.config.store_ports));
  BAKEOFF_RETURN_IF_ERROR(ParseRankUids(flags));
  flags.config.cuda_devices = flags.cuda_devices;
  if (!flags.cpus.empty()) {
    auto cpus = worker::ParseCpuList(flags.cpus);
    if (!cpus.ok()) return cpus.status().WithContext("--cpus");
    flags.config.cpus = *cpus;
  }
  return Status::Ok();
}

// Inside a Slurm job the allocation knows the node, its GPUs and the job's ports (what
// the flags named still wins); the line tells the operator where each value came from.
Status ApplySlurmJob(WorkerFlags& flags) {
  auto slurm = worker::ReadSlurmAllocation([](const char* name) { return std::getenv(name); });
  if (!slurm.ok()) return slurm.status();
  worker::ApplySlurmAllocation(*slurm, flags.given, flags.slots_given, flags.config);
  if (!slurm->present()) return Status::Ok();
  const worker::WorkerConfig& config = flags.config;
  std::cerr << "bakeoff worker: in Slurm job " << slurm->job_id << " on node "
            << (slurm->node_name.empty() ? "?" : slurm->node_name) << ": name " << config.name << ", host "
            << config.advertise_host << ", " << config.cuda_devices.size() << " GPU(s)"
            << (slurm->gpus_source.empty() ? "" : " from " + slurm->gpus_source) << ", store ports "
            << config.store_ports.first << "-" << config.store_ports.last << " from "
            << (flags.given.store_ports ? std::string("--store-ports") : slurm->store_ports_source)
            << "; SIGUSR1/SIGTERM requeue its trials\n";
  return Status::Ok();
}

// What Finalize settled about the ranks (pinning, ports, uids, address), said once at the
// start, since a misplaced rank only shows later as a slow or failed trial.
void TellHowRanksRun(const worker::WorkerConfig& config) {
  if (config.cores.pinned()) {
    std::cerr << "bakeoff worker: " << config.cores.slot_count() << " CPU slot(s) of "
              << config.cores.cores_per_slot() << " core(s) each, ranks pinned (CPUs "
              << worker::FormatCpuList(config.cpus) << "), store ports " << config.store_ports.first << "-"
              << config.store_ports.last << (config.cores.note().empty() ? "" : "; " + config.cores.note()) << "\n";
  } else {
    if (!config.cores.note().empty()) std::cerr << "bakeoff worker: warning: " << config.cores.note() << "\n";
    std::cerr << "bakeoff worker: ranks not pinned, store ports " << config.store_ports.first << "-"
              << config.store_ports.last << "\n";
  }
  if (config.rank_uid_count == 0 && !config.simulate) {
    std::cerr << "bakeoff worker: warning: ranks run as this worker's own user" << (geteuid() == 0 ? " (root)" : "")
              << ": a command template's code can read the worker's credential and other trials' files; "
                 "as root, give them uids of their own with --rank-uids FIRST-LAST (docs/security.md)\n";
  } else if (config.rank_uid_count > 0) {
    std::cerr << "bakeoff worker: ranks run as uids " << config.rank_uid_first << "-"
              << config.rank_uid_first + config.rank_uid_count - 1 << ", one per attempt\n";
  }
  if (std::string warning = config.RankAddressWarning(); !warning.empty()) {
    std::cerr << "bakeoff worker: warning: " << warning << "\n";
  }
}

// One agent normally; with --simulated-workers N, N agents on this one io_context, each
// a worker of its own to the coordinator (name NAME-i, own connection, own outbox),
// without /metrics endpoints (N listening ports would measure nothing of interest).
std::vector<std::shared_ptr<worker::WorkerAgent>> MakeAgents(boost::asio::io_context& io, const WorkerFlags& flags) {
  std::vector<std::shared_ptr<worker::WorkerAgent>> agents;
  for (int i = 0; i < flags.simulated_workers; ++i) {
    worker::WorkerConfig config = flags.config;
    if (flags.simulated_workers > 1) {
      config.name += "-" + std::to_string(i);
      config.metrics_listen = "off";
    }
    agents.push_back(std::make_shared<worker::WorkerAgent>(io.get_executor(), std::move(config)));
  }
  return agents;
}

// Why a signal preempted the agents, as the coordinator records it for the requeued trials.
std::string PreemptReason(int signal, const std::string& slurm_job) {
  return std::string(signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM") + " to the worker" +
         (slurm_job.empty() ? std::string(" (node drained, pod deleted or preempted)")
                            : " of Slurm job " + slurm_job + " (time limit, preemption or scancel)") +
         ": requeued";
}

// Inside a Slurm job, SIGTERM comes from Slurm (time limit, preemption, scancel) and
// SIGUSR1 from `sbatch --signal=USR1@N`; on Kubernetes SIGTERM is a pod deleted or a
// node drained. The trials did nothing wrong, so with --on-sigterm requeue (auto in a
// Slurm job) they are requeued, not finished cancelled. Otherwise SIGTERM stops as
// SIGINT does. REQUIRES: `agents` outlives the wait.
void PreemptOrStopOnSignal(boost::asio::signal_set& signals,
                           const std::vector<std::shared_ptr<worker::WorkerAgent>>& agents, const WorkerFlags& flags) {
  const std::string slurm_job = flags.config.slurm_job_id;
  const bool requeue_on_term = flags.on_sigterm == "requeue" || (flags.on_sigterm == "auto" && !slurm_job.empty());
  signals.async_wait([&agents, slurm_job, requeue_on_term](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    for (auto& agent : agents) {
      if (signal == SIGUSR1 || (signal == SIGTERM && requeue_on_term)) {
        agent->Preempt(PreemptReason(signal, slurm_job));
      } else {
        agent->Stop();
      }
    }
  });
}

// The process ends when its last agent does, whether a signal stopped them or one gave
// up on the coordinator; the first failure among them is the process's.
Status RunAgentsToTheirEnd(boost::asio::io_context& io, const std::vector<std::shared_ptr<worker::WorkerAgent>>& agents,
                           const WorkerFlags& flags) {
  Status result = Status::Ok();
  std::size_t running = agents.size();
  for (auto& agent : agents) {
    boost::asio::co_spawn(io, agent->Run(), [&](std::exception_ptr e, Status s) {
      Status ended = e ? Status::Internal("worker crashed") : s;
      if (result.ok() && !ended.ok()) result = ended;
      if (--running == 0) io.stop();
    });
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGUSR1);
  PreemptOrStopOnSignal(signals, agents, flags);
  io.run();
  return result;
}

int RunWorker(WorkerFlags& flags) {
  if (Status s = ParseFlagsIntoConfig(flags); !s.ok()) return RefuseUsage(s);
  if (Status s = ApplySlurmJob(flags); !s.ok()) return RefuseUsage(s);
  flags.config.simulate_step = std::chrono::milliseconds(flags.simulate_step_ms);
  std::string address = flags.config.coordinator_address;
  if (address.rfind("tcp://", 0) == 0) flags.config.coordinator_address = address.substr(6);
  if (Status s = flags.config.Finalize(flags.argv0); !s.ok()) {
    std::cerr << "bakeoff " << EscapeControlCharacters(s.message()) << "\n";
    return s.code() == Status::Code::kNotFound ? kExitFailure : kExitUsage;
  }
  TellHowRanksRun(flags.config);
  if (flags.simulated_workers < 1 || (flags.simulated_workers > 1 && !flags.config.simulate)) {
    std::cerr << "bakeoff worker: --simulated-workers needs --simulate and a count of at least 1\n";
    return kExitUsage;
  }
  if (flags.config.simulate) {
    std::cerr << "bakeoff worker: SIMULATED workload: no trainer runs; results are marked simulated "
                 "(for scale benchmarks only)\n";
  }
  boost::asio::io_context io;
  const std::vector<std::shared_ptr<worker::WorkerAgent>> agents = MakeAgents(io, flags);
  if (Status ended = RunAgentsToTheirEnd(io, agents, flags); !ended.ok()) {
    std::cerr << "bakeoff " << EscapeControlCharacters(ended.message()) << "\n";
    return ExitCodeFor(ended);
  }
  return kExitOk;
}

// The flags are added in groups, in the order --help lists them. An option whose --help
// shows its default:
template <typename T>
CLI::Option* AddWithDefault(CLI::App* cmd, const std::string& name, T& value, const std::string& help) {
  return cmd->add_option(name, value, help)->capture_default_str();
}

// The options whose presence, not only value, matters after parsing: inside a Slurm job
// the allocation fills only what the command line left out.
struct GivenOptions {
  CLI::Option* slots = nullptr;
  CLI::Option* cuda = nullptr;
  CLI::Option* name = nullptr;
  CLI::Option* host = nullptr;
  CLI::Option* store_ports = nullptr;
};

// Where the coordinator is and what this worker offers it.
void AddOfferFlags(CLI::App* cmd, WorkerFlags* flags, GivenOptions* given) {
  cmd->add_option("--coordinator", flags->config.coordinator_address,
                  "the coordinator's worker address HOST:PORT")
      ->required();
  given->slots = AddWithDefault(cmd, "--slots", flags->config.cpu_slots, "ranks run at once on CPU");
  cmd->add_option("--cpus", flags->cpus,
                  "logical CPUs this worker's CPU slots share out, e.g. 0-7 (default: its affinity mask); "
                  "each slot gets whole physical cores and each CPU rank is pinned to its slot's");
  cmd->add_flag("--share-cores", flags->config.share_cores,
                "allow more slots than CPUs: ranks are then not pinned and may share cores (recorded in "
                "each trial's threads decision)");
  given->cuda = cmd->add_option("--cuda-devices", flags->cuda_devices,
                                "CUDA device ordinals to offer, e.g. 0,1 (inside a Slurm job: the allocation's GPUs)")
                    ->delimiter(',');
}

// The credential, the ranks' uids and TLS: what keeps trials and the worker apart.
void AddSecurityFlags(CLI::App* cmd, WorkerFlags* flags) {
  cmd->add_option("--token-file", flags->token_file, "file holding the worker token (else $BAKEOFF_TOKEN)");
  cmd->add_option("--rank-uids", flags->rank_uids,
                  "FIRST-LAST: run each attempt's ranks as a uid of this range of its own (needs root; at least "
                  "slots + CUDA devices uids; none may be a real user's), so a training script cannot read the "
                  "worker's credential or other trials' files; every process of the uid ends with its attempt "
                  "(docs/security.md)");
  cmd->add_flag("--tls", flags->config.tls,
                "connect with TLS (the coordinator runs with --tls-cert); its certificate is verified "
                "against the system's trust store unless --tls-ca is given");
  cmd->add_option("--tls-ca", flags->config.tls_ca_path,
                  "PEM file of the CA(s) that signed the coordinator's certificate (implies --tls)");
}

// The worker's name and the addresses and ports its ranks use.
void AddAddressFlags(CLI::App* cmd, WorkerFlags* flags, GivenOptions* given) {
  given->name = cmd->add_option("--name", flags->config.name,
                                "stable worker name (default HOSTNAME-PID; inside a Slurm job NODE-JOBID)");
  given->host = AddWithDefault(cmd, "--host", flags->config.advertise_host,
                               "address other workers reach this one at (rank 0's rendezvous store; inside a "
                               "Slurm job default SLURMD_NODENAME)");
  cmd->add_option("--rank-address", flags->config.rank_address,
                  "address of this host that ranks bind their collectives to (default: the --host "
                  "address, or the --rank-interface's); each rank gets it as BAKEOFF_RANK_ADDR");
  cmd->add_option("--rank-interface", flags->config.rank_interface,
                  "network interface ranks bind their collectives to, e.g. eth1 (default: the one holding "
                  "the rank address); also NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME unless already set");
  given->store_ports = AddWithDefault(cmd, "--store-ports", flags->store_ports,
                                      "ports rank 0 may bind, FIRST-LAST (inside a Slurm job: SLURM_STEP_RESV_PORTS, "
                                      "else 10 ports chosen by the job id)");
}

// What a trial runs and where its files go.
void AddTrialFlags(CLI::App* cmd, WorkerFlags* flags) {
  cmd->add_option("--trainer", flags->config.trainer_path,
                  "trainer executable (default: bakeoff-trainer next to this binary)");
  cmd->add_option("--work-dir", flags->config.work_dir, "trial directories (default: a new temp dir)");
  cmd->add_option("--data-root", flags->config.data_root,
                  "the only directory sweeps' token files (dataset: NAME) are read from (default: none, "
                  "file datasets refused)");
  cmd->add_flag("--keep-trial-dirs", flags->config.keep_trial_dirs,
                "keep every trial directory (default: a succeeded attempt's is removed once it ended, a "
                "failed one's kept until --keep-failed-trials newer failed ones exist)");
  AddWithDefault(cmd, "--keep-failed-trials", flags->config.keep_failed_trials,
                 "failed attempts' directories (config, rank logs, outputs) kept for inspection")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--executors", flags->config.executors_path,
                  "the command allowlist: YAML of templates this worker may run for executor: command "
                  "(default: $BAKEOFF_EXECUTORS, else the shipped experiments/executors.yaml; \"none\": no commands)");
  cmd->add_option("--cache-dir", flags->config.cache_dir,
                  "{cache} of the command templates: torch.compile and DeepSpeed build caches "
                  "(default: $BAKEOFF_CACHE, else ~/.cache/bakeoff; with --rank-uids /var/cache/bakeoff)");
}

// Bounds on what the worker keeps, and what it measures.
void AddLimitAndMetricsFlags(CLI::App* cmd, WorkerFlags* flags) {
  AddWithDefault(cmd, "--max-buffered-events", flags->config.max_buffered_events,
                 "events kept while the coordinator is unreachable");
  AddWithDefault(cmd, "--max-rank-log-bytes", flags->config.max_rank_log_bytes,
                 "cap of each rank's log (rank-R.log); past it the log keeps its head and tail and marks the "
                 "dropped middle");
  cmd->add_option("--metrics-listen", flags->config.metrics_listen,
                  "serve GET /metrics on HOST:PORT (default: the --host address, port 0 = a free port "
                  "that the coordinator lists in /api/v1/sd); \"off\" disables it");
  AddWithDefault(cmd, "--nvml-library", flags->config.nvml_library,
                 "NVML shared library for the GPU series and the GPU model (\"\" = none)");
  cmd->add_option("--gpu-model", flags->config.gpu_model,
                  "the model of the --cuda-devices, matched by a sweep's resources.gpu_type (default: the "
                  "name NVML gives the first device)");
}

// How the worker ends (SIGTERM), and the simulated workload of scale benchmarks.
void AddLifecycleFlags(CLI::App* cmd, WorkerFlags* flags) {
  AddWithDefault(cmd, "--on-sigterm", flags->on_sigterm,
                 "what SIGTERM does to running attempts: requeue (handed back, retried elsewhere: for "
                 "Kubernetes and Slurm), cancel, or auto (requeue inside a Slurm job, else cancel)")
      ->check(CLI::IsMember({"auto", "requeue", "cancel"}));
  cmd->add_flag("--simulate", flags->config.simulate,
                "scale benchmarks only: emit simulated events instead of running the trainer");
  AddWithDefault(cmd, "--simulate-step-ms", flags->simulate_step_ms, "simulated step time");
  AddWithDefault(cmd, "--simulated-workers", flags->simulated_workers,
                 "with --simulate: run N simulated workers in this process (names NAME-0..NAME-N-1, one "
                 "connection each, no /metrics)")
      ->check(CLI::PositiveNumber);
}

void SetupWorker(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<WorkerFlags>();
  auto* cmd = root.add_subcommand("worker", "Run a worker agent that executes trials for a coordinator");
  GivenOptions given;
  AddOfferFlags(cmd, flags.get(), &given);
  AddSecurityFlags(cmd, flags.get());
  AddAddressFlags(cmd, flags.get(), &given);
  AddTrialFlags(cmd, flags.get());
  AddLimitAndMetricsFlags(cmd, flags.get());
  AddLifecycleFlags(cmd, flags.get());
  cmd->callback([flags, exit_code, &root, given]() {
    flags->argv0 = root.get_name();
    flags->given = {given.name->count() > 0, given.host->count() > 0, given.cuda->count() > 0,
                    given.store_ports->count() > 0};
    flags->slots_given = given.slots->count() > 0;
    *exit_code = RunWorker(*flags);
  });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("worker", SetupWorker);

}  // namespace bakeoff::cli
