#include "cli/local_run.h"

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cli/exit_codes.h"
#include "cli/coordinator_client.h"
#include "cli/progress_eta.h"
#include "cli/sweep_file.h"
#include "coordinator/coordinator_node.h"
#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"
#include "protocol/env.h"
#include "protocol/log.h"
#include "protocol/token.h"
#include "worker/worker_agent.h"

namespace bakeoff::cli {
namespace {
namespace asio = boost::asio;

// The coordinator's and workers' log lines go to a file beside the results database
// (results.db -> results.log), and to the screen only with -v: the screen is the
// progress line's. Restores stderr-only logging when the run ends.
class LogToFile {
 public:
  LogToFile() = default;
  LogToFile(const LogToFile&) = delete;
  LogToFile& operator=(const LogToFile&) = delete;
  ~LogToFile() {
    logging::CloseFile();
    logging::SetStderr(true);
  }
  Status Open(const std::string& path, bool verbose) {
    if (Status s = logging::OpenFile(path); !s.ok()) return s;
    logging::SetStderr(verbose);
    return Status::Ok();
  }
};

std::string DefaultLogPath(const std::string& db) {
  std::filesystem::path path(db);
  path.replace_extension(".log");
  return path.string();
}

using Agents = std::vector<std::shared_ptr<worker::WorkerAgent>>;

// The API token from BAKEOFF_TOKEN (to reach this run's API), else a random one; the
// workers, in this process, get a credential of their own that nobody else knows.
struct Credentials {
  std::string token;
  std::string worker_token;
};

Credentials MakeCredentials() {
  auto env_token = protocol::LoadToken("");
  const std::string token = env_token.ok() && !env_token->empty() ? *env_token : protocol::RandomToken();
  const std::string worker_token = protocol::RandomToken();
  return {token, worker_token};
}

// A coordinator for this machine alone: it listens on loopback at free ports, so the page
// can open without a token, and knows the workers' command allowlist, so that a sweep
// naming a template they would not run is refused at submission.
Result<coordinator::CoordinatorConfig> LoopbackCoordinatorConfig(const LocalRunFlags& flags,
                                                                 const Credentials& credentials) {
  coordinator::CoordinatorConfig config;
  config.http_listen = "127.0.0.1:0";
  config.open_reads = true;  // loopback only: the page opens without a token
  config.worker_listen = "127.0.0.1:0";
  config.db_path = flags.db;
  config.submit_tokens = {credentials.token};
  config.worker_tokens = {credentials.worker_token};
  const std::string path = flags.executors.empty() ? spec::DefaultExecutorCatalogPath() : flags.executors;
  if (!path.empty() && path != "none") {
    auto catalog = spec::LoadExecutorCatalog(path);
    if (!catalog.ok()) return Status::InvalidArgument("--executors: " + catalog.status().message());
    config.executors = std::move(*catalog);
  }
  // The person who starts `bakeoff local` is this machine's operator: a sweep may name
  // its own command (docs/your-script.md). A coordinator started otherwise refuses one.
  config.executors.own_commands = spec::ExecutorCatalog::OwnCommands::kRun;
  config.heartbeat_interval = std::chrono::milliseconds(500);
  config.heartbeat_timeout = std::chrono::milliseconds(10000);
  config.recovery_grace = std::chrono::milliseconds(2000);
  return config;
}

// The page's address comes first, so that a user can open it while the rest starts; the
// coordinator's and workers' lines reach the screen (-v) only after it.
void AnnounceThePage(int http_port, const std::string& log_path, const LocalRunFlags& flags, const std::string& who) {
  std::cerr << who << "watch it at http://127.0.0.1:" << http_port << "/ (this machine only)\n";
  std::cerr << who << "logs in " << log_path << (flags.verbose ? "" : " (-v shows them here too)") << "\n";
  if (flags.verbose) logging::SetStderr(true);
}

// Isolation: the workers share this machine, so its cores are dealt out over all their
// slots at once, and each worker gets its slots' CPUs (docs/sweep.md, "Isolation").
Result<worker::CorePartition> PartitionHostCores(const LocalRunFlags& flags, const std::string& who) {
  auto partition = worker::CorePartition::Make(worker::ReadHostCpuTopology(worker::AllowedCpus()),
                                               flags.workers * flags.slots, flags.share_cores);
  if (!partition.ok()) {
    return Status::InvalidArgument(std::to_string(flags.workers) + " worker(s) x " + std::to_string(flags.slots) +
                                   " slot(s): " + partition.status().message());
  }
  if (!partition->note().empty()) std::cerr << who << "warning: " << partition->note() << "\n";
  return partition;
}

// The sweep, read once here for what its workers need and whether they can place it;
// a sweep that does not parse or expand is the submission's to refuse, with its error.
struct SweepPreview {
  Result<spec::SweepSpec> parsed;
  std::optional<spec::ExpandedSweep> expanded;
};

SweepPreview PreviewSweep(const std::string& yaml, const std::string& source, const spec::ExecutorCatalog* catalog) {
  SweepPreview preview{spec::ParseSweepText(yaml, source, {}, catalog), std::nullopt};
  if (preview.parsed.ok()) {
    if (auto e = spec::Expand(*preview.parsed); e.ok()) preview.expanded = std::move(e).value();
  }
  return preview;
}

// Why the sweep cannot run at all (it does not parse or expand), or "": said before
// anything is started or created (no database, no log, no page).
std::string SweepProblem(const std::string& yaml, const std::string& source, const spec::ExecutorCatalog& catalog) {
  auto parsed = spec::ParseSweepText(yaml, source, {}, &catalog);
  if (!parsed.ok()) return parsed.status().message();
  auto expanded = spec::Expand(*parsed);
  return expanded.ok() ? "" : expanded.status().message();
}

// The program `name` as the shell would find it on PATH, or "".
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate)) {
      return std::filesystem::absolute(candidate).lexically_normal().string();
    }
    start = end + 1;
  }
  return "";
}

// The sweep's own command as this run's workers run it: the program found on PATH (or
// relative to the sweep file), relative file arguments that exist next to the sweep file
// made absolute (the ranks start in their trial's directory), {dir} the sweep file's
// directory, and this process's environment passed on (this is the operator's own run),
// less BAKEOFF_* variables, which are the worker's.
Result<spec::ExecutorTemplate> OwnCommandForWorkers(spec::ExecutorTemplate own, const std::string& source) {
  std::error_code ec;
  const std::filesystem::path sweep_dir = std::filesystem::absolute(source, ec).parent_path();
  auto absolute_if_there = [&](std::string& item) {
    if (item.empty() || item.front() == '-' || item.front() == '/' || item.find('{') != std::string::npos) return;
    const std::filesystem::path next_to_sweep = sweep_dir / item;
    if (std::filesystem::exists(next_to_sweep, ec)) item = next_to_sweep.lexically_normal().string();
  };
  for (auto& item : own.argv) {
    for (std::size_t at; (at = item.find("{dir}")) != std::string::npos;) item.replace(at, 5, sweep_dir.string());
  }
  for (auto& [name, value] : own.env_set) {
    for (std::size_t at; (at = value.find("{dir}")) != std::string::npos;) value.replace(at, 5, sweep_dir.string());
  }
  std::string& program = own.argv.front();
  if (program == "{python}") program = "python3";  // your command's Python: the one on PATH
  if (program.find('{') == std::string::npos) {
    if (program.find('/') == std::string::npos) {
      const std::string found = FindOnPath(program);
      if (found.empty()) {
        return Status::InvalidArgument(source + ": workload.command.argv[0]: " + program +
                                       " is not a program on PATH; give its path, or activate the environment "
                                       "that has it");
      }
      program = found;
    } else if (program.front() != '/') {
      program = (sweep_dir / program).lexically_normal().string();
    }
  }
  for (std::size_t i = 1; i < own.argv.size(); ++i) absolute_if_there(own.argv[i]);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (name.empty() || name.rfind("BAKEOFF_", 0) == 0) continue;
    own.env_pass.push_back(name);
  }
  own.env_set.emplace("PYTHONUNBUFFERED", "1");
  // The ranks get a private /tmp (docs/security.md), where Inductor keeps its cache by
  // default: one in {cache}, unless the user's environment names its own, lets a second
  // compile find what the first one compiled (a warm compile, as the report splits it).
  for (const auto& [name, dir] : {std::pair<const char*, const char*>{"TORCHINDUCTOR_CACHE_DIR", "{cache}/inductor"},
                                  {"TRITON_CACHE_DIR", "{cache}/triton"}}) {
    const char* set = std::getenv(name);
    if (set == nullptr || *set == '\0') own.env_set.emplace(name, dir);
  }
  // A variable the sweep sets is not also passed from the environment.
  own.env_pass.erase(std::remove_if(own.env_pass.begin(), own.env_pass.end(),
                                    [&own](const std::string& n) { return own.env_set.count(n) > 0; }),
                     own.env_pass.end());
  return own;
}

// A sweep whose variants all run command templates (the main job: the Python stack)
// needs no trainer: its workers start without one (only `bakeoff` is built).
bool NeedsTrainer(const SweepPreview& preview) {
  const auto& expanded = preview.expanded;
  return !expanded || std::any_of(expanded->variants.begin(), expanded->variants.end(), [](const spec::Variant& v) {
           return !v.config["command_template"].is_string();
         });
}

// Worker settings are checked (Finalize) before the sweep is stored, so that a missing
// trainer does not leave a sweep behind that nobody runs. Each worker gets its slots'
// CPUs of `host_cores` and a store-port range of its own.
Status ConfigureWorkers(const LocalRunFlags& flags, int worker_port, const std::string& worker_token,
                        const worker::CorePartition& host_cores, bool needs_trainer,
                        const std::optional<spec::ExecutorTemplate>& own_command,
                        std::vector<worker::WorkerConfig>* configs) {
  for (int i = 0; i < flags.workers; ++i) {
    worker::WorkerConfig wc;
    wc.coordinator_address = "127.0.0.1:" + std::to_string(worker_port);
    wc.token = worker_token;
    wc.name = "local-" + std::to_string(i + 1);
    wc.cpu_slots = flags.slots;
    wc.share_cores = flags.share_cores;
    if (host_cores.pinned()) {
      for (int k = 0; k < flags.slots; ++k) {
        const auto& mine = host_cores.SlotCpus(static_cast<std::size_t>(i * flags.slots + k));
        wc.cpus.insert(wc.cpus.end(), mine.begin(), mine.end());
      }
    }
    wc.trainer_path = flags.trainer;
    wc.trainer_optional = !needs_trainer;
    wc.store_ports = {29500 + 100 * i, 29599 + 100 * i};
    if (!flags.work_dir.empty()) wc.work_dir = flags.work_dir + "/" + wc.name;
    wc.data_root = flags.data_root;
    wc.executors_path = flags.executors;
    wc.cache_dir = flags.cache_dir;
    wc.keep_trial_dirs = !flags.work_dir.empty();  // a directory the user named is theirs to inspect
    wc.max_connect_attempts = 20;
    BAKEOFF_RETURN_IF_ERROR(wc.Finalize(flags.argv0));
    // These workers, in this process, run the sweep's own command; `bakeoff worker`
    // never holds it (no catalog file may define the name).
    wc.executors.own_commands = spec::ExecutorCatalog::OwnCommands::kRun;
    if (own_command) wc.executors.templates[spec::kSweepCommandName] = *own_command;
    configs->push_back(wc);
  }
  return Status::Ok();
}

// A trial that none of the workers started here can ever place would wait forever:
// refuse the sweep now, with the reason.
Status CheckTheWorkersCanPlaceIt(const SweepPreview& preview, const std::vector<worker::WorkerConfig>& configs,
                                 const LocalRunFlags& flags, const std::string& source) {
  if (!preview.parsed.ok()) return Status::Ok();
  bool any_cuda = false;
  for (const auto& wc : configs) any_cuda = any_cuda || !wc.cuda_devices.empty();
  if (preview.parsed->resources.device == "cuda" && !any_cuda) {
    return Status::InvalidArgument(
        source + ": resources.device is cuda, but `bakeoff local` starts " +
        "CPU workers only, so no trial could ever be placed; run it on a coordinator with CUDA " +
        "workers (`bakeoff worker` on a GPU node), or set resources: {device: cpu}");
  }
  if (!preview.expanded) return Status::Ok();
  int widest = 1;
  for (const auto& v : preview.expanded->variants) widest = std::max(widest, v.world_size);
  if (widest > flags.workers * flags.slots) {
    return Status::InvalidArgument(source + ": a trial needs " + std::to_string(widest) + " ranks but " +
                                   std::to_string(flags.workers) + " worker(s) x " + std::to_string(flags.slots) +
                                   " slot(s) offer fewer; raise --workers or --slots");
  }
  return Status::Ok();
}

// One line that says what runs where, and where its results go.
void AnnounceTheSweep(const nlohmann::json& created, std::int64_t sweep_id, const LocalRunFlags& flags, int http_port,
                      const std::string& who) {
  std::cerr << who << "sweep " << sweep_id << " (" << created.value("name", "") << "): "
            << created.value("trial_count", 0) << " trials on " << flags.workers << " worker(s) x "
            << flags.slots << " slot(s); results in " << flags.db << "; HTTP API on 127.0.0.1:" << http_port
            << "\n";
}

// The workers run on the coordinator's io thread; one that stops early says why, and the
// others go on.
Agents StartWorkers(asio::io_context& io, const std::vector<worker::WorkerConfig>& configs, const std::string& who) {
  Agents agents;
  for (const auto& wc : configs) {
    auto agent = std::make_shared<worker::WorkerAgent>(io.get_executor(), wc);
    asio::co_spawn(io, agent->Run(), [who](std::exception_ptr, Status s) {
      if (!s.ok()) std::cerr << who << "worker stopped: " << EscapeControlCharacters(s.message()) << "\n";
    });
    agents.push_back(agent);
  }
  return agents;
}

// Runs the io_context until the sweep has ended and everything has stopped: a progress
// line every 500 ms, Ctrl-C or SIGTERM cancelling the sweep (which then ends as
// cancelled), and at the end the workers stopped and, after the page's linger, the
// coordinator. Fills result->final_state and result->interrupted.
// REQUIRES: everything passed outlives Run(). One thread: the io_context's.
class SweepWatch {
 public:
  SweepWatch(asio::io_context& io, coordinator::CoordinatorNode& node, const Agents& agents,
             const LocalRunFlags& flags, const std::string& who, LocalRun* result)
      : io_(io), node_(node), agents_(agents), flags_(flags), who_(who), result_(result),
        tty_(isatty(STDERR_FILENO)), start_(node.service().env().clock().Now()), signals_(io, SIGINT, SIGTERM),
        poll_(io) {}

  void Run() {
    CancelTheSweepOnSignal();
    PollSoon();
    io_.run();
  }

 private:
  // Ctrl-C keeps what finished: the sweep is cancelled, not the process killed, and the
  // watch then ends as for any other end of the sweep.
  void CancelTheSweepOnSignal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      result_->interrupted = true;
      std::cerr << "\n" << who_ << "interrupted; cancelling the sweep\n";
      node_.service().CancelSweep(std::to_string(result_->sweep_id));
    });
  }

  // The line is drawn from the store, the same record that `status` and the page read,
  // every 500 ms until the sweep has ended.
  void PollSoon() {
    poll_.expires_after(std::chrono::milliseconds(500));
    poll_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      auto sweep = node_.store().Reader()->GetSweep(result_->sweep_id);
      if (sweep.ok()) {
        ShowProgress(*sweep);
        if (sweep->state != metrics::SweepState::kRunning) {
          WindDown(*sweep);
          return;
        }
      }
      PollSoon();
    });
  }

  ProgressFigures FiguresOf(const metrics::SweepRecord& sweep, double elapsed) {
    const auto& c = sweep.counts;
    ProgressFigures figures;
    figures.done = c.finished;
    figures.total = sweep.trial_count;
    figures.running = c.running + c.assigned;
    figures.queued = c.queued;
    figures.elapsed_s = elapsed;
    figures.remaining_s = eta_.Update(c.finished, sweep.trial_count, elapsed);
    // The answer's comparisons and why queued trials cannot start, as `status` and the
    // API say them (same thread as the service: the io_context runs both).
    const coordinator::CoordinatorState state = node_.service().State();
    if (auto answered = coordinator::AnsweredComparisons(state, result_->sweep_id)) {
      figures.comparisons = ProgressFigures::Answered{answered->first, answered->second};
    }
    figures.waiting = coordinator::WaitingReason(state, result_->sweep_id);
    return figures;
  }

  // A TTY gets one line redrawn in place; a log or a pipe one line per 10 s of elapsed
  // time and the last, so that it stays readable.
  void ShowProgress(const metrics::SweepRecord& sweep) {
    const double elapsed = std::chrono::duration<double>(node_.service().env().clock().Now() - start_).count();
    const std::string text = FormatProgressLine(FiguresOf(sweep, elapsed));
    if (tty_) {
      std::cerr << "\r\033[K" << text << std::flush;
    } else if (static_cast<long>(elapsed) / 10 != last_printed_ || sweep.state != metrics::SweepState::kRunning) {
      last_printed_ = static_cast<long>(elapsed) / 10;
      std::cerr << text << "\n";
    }
  }

  // An open page gets the final state and the report before the server goes: the
  // coordinator stays up flags.linger_s more, or until the next Ctrl-C.
  void WindDown(const metrics::SweepRecord& sweep) {
    result_->final_state = sweep;
    if (tty_) std::cerr << "\n";
    for (auto& a : agents_) a->Stop(std::chrono::milliseconds(1000));
    // The report is the user's answer: it comes now, not after the page's linger.
    if (flags_.on_sweep_end) flags_.on_sweep_end(*result_);
    const bool linger = node_.pages_served() > 0 && flags_.linger_s > 0 && !result_->interrupted;
    if (linger) {
      std::cerr << who_ << "the page stays up " << flags_.linger_s << " s more (Ctrl-C ends it now)\n";
    }
    signals_.cancel();
    auto end = std::make_shared<asio::steady_timer>(io_);
    auto finish = [&io = io_, &node = node_, end]() {
      node.Stop();
      // Let the agents deliver their last frames, then end.
      end->expires_after(std::chrono::milliseconds(200));
      end->async_wait([&io, end](const boost::system::error_code&) { io.stop(); });
    };
    if (!linger) {
      finish();
      return;
    }
    end->expires_after(std::chrono::seconds(flags_.linger_s));
    end->async_wait([finish](const boost::system::error_code& ec) {
      if (!ec) finish();
    });
    signals_.async_wait([end, finish](const boost::system::error_code& ec, int) {
      if (ec) return;
      end->cancel();
      finish();
    });
  }

  asio::io_context& io_;
  coordinator::CoordinatorNode& node_;
  const Agents& agents_;
  const LocalRunFlags& flags_;
  const std::string& who_;
  LocalRun* result_;
  const bool tty_;
  const Clock::TimePoint start_;  // on the coordinator's Env
  asio::signal_set signals_;
  ProgressEta eta_;
  long last_printed_ = -1;
  asio::steady_timer poll_;
};

}  // namespace

// A lockstep sweep's groups run whole on one worker (docs/lockstep.md): unless the user
// chose, slots as wide as its widest trial, and as many such workers as this machine's
// CPUs hold (at least one).
LocalRunFlags WithLockstepTopology(LocalRunFlags flags, const SweepPreview& preview) {
  if (!preview.parsed.ok() || !preview.expanded || preview.parsed->order != spec::Order::kLockstep) return flags;
  if (flags.slots_given) return flags;
  int widest = 1;
  for (const auto& v : preview.expanded->variants) widest = std::max(widest, v.world_size);
  flags.slots = widest;
  if (!flags.workers_given) {
    flags.workers = std::max<int>(1, static_cast<int>(worker::AllowedCpus().size()) / widest);
  }
  return flags;  // the sweep's announcement line shows the workers and slots chosen
}

LocalRun RunSweepLocally(const std::string& yaml, const std::string& source, const LocalRunFlags& given) {
  const std::string who = "bakeoff " + given.command + ": ";
  LocalRun result;
  // What stops the run before the sweep runs: one line on stderr, and the exit code.
  auto Refuse = [&who, &result](const std::string& message, int code) {
    std::cerr << who << EscapeControlCharacters(message) << "\n";
    result.exit_code = code;
    return result;
  };
  // Everything that can refuse the sweep itself comes before anything is created: an
  // invalid sweep leaves no database, no log and no page behind.
  const Credentials credentials = MakeCredentials();
  Result<coordinator::CoordinatorConfig> config = LoopbackCoordinatorConfig(given, credentials);
  if (!config.ok()) return Refuse(config.status().message(), kExitUsage);
  if (std::string problem = SweepProblem(yaml, source, config->executors); !problem.empty()) {
    return Refuse(problem, kExitUsage);
  }
  const SweepPreview preview = PreviewSweep(yaml, source, &config->executors);
  const LocalRunFlags flags = WithLockstepTopology(given, preview);
  if (flags.workers < 1 || flags.slots < 1) return Refuse("--workers and --slots must be >= 1", kExitUsage);
  std::optional<spec::ExecutorTemplate> own_command;
  if (preview.parsed.ok() && preview.parsed->workload.own_command) {
    auto resolved = OwnCommandForWorkers(*preview.parsed->workload.own_command, source);
    if (!resolved.ok()) return Refuse(resolved.status().message(), kExitUsage);
    own_command = std::move(resolved).value();
  }
  const std::string log_path = flags.log_file.empty() ? DefaultLogPath(flags.db) : flags.log_file;
  LogToFile log_to_file;
  // The screen shows the coordinator's and workers' lines (-v) only after the page's
  // address, which is the first line.
  if (Status s = log_to_file.Open(log_path, /*verbose=*/false); !s.ok()) {
    return Refuse(s.message(), kExitUsage);  // names the log file, and what to do
  }

  asio::io_context io;
  coordinator::CoordinatorNode node(io.get_executor(), *config);
  if (Status s = node.Start(); !s.ok()) return Refuse(s.message(), ExitCodeFor(s));
  AnnounceThePage(node.http_port(), log_path, flags, who);
  Result<worker::CorePartition> host_cores = PartitionHostCores(flags, who);
  if (!host_cores.ok()) return Refuse(host_cores.status().message(), kExitUsage);
  std::vector<worker::WorkerConfig> worker_configs;
  if (Status s = ConfigureWorkers(flags, node.worker_port(), credentials.worker_token, *host_cores,
                                  NeedsTrainer(preview), own_command, &worker_configs);
      !s.ok()) {
    return Refuse(s.message(), s.code() == Status::Code::kNotFound ? kExitFailure : kExitUsage);
  }
  if (Status s = CheckTheWorkersCanPlaceIt(preview, worker_configs, flags, source); !s.ok()) {
    return Refuse(s.message(), kExitUsage);
  }

  auto submitted = node.service().SubmitSweep(yaml);
  if (auto* error = std::get_if<coordinator::ApiError>(&submitted)) {
    return Refuse(source + ": " + error->message, error->http_status == 503 ? kExitUnavailable : kExitUsage);
  }
  const auto& created = std::get<nlohmann::json>(submitted);
  result.sweep_id = created.value("id", std::int64_t{0});
  AnnounceTheSweep(created, result.sweep_id, flags, node.http_port(), who);

  const Agents agents = StartWorkers(io, worker_configs, who);
  SweepWatch(io, node, agents, flags, who, &result).Run();
  result.exit_code = kExitOk;
  return result;
}

void AddLocalRunFlags(CLI::App* cmd, LocalRunFlags* flags) {
  // The program's path as invoked: the default trainer is the one next to it.
  cmd->preparse_callback([cmd, flags](std::size_t) { flags->argv0 = cmd->get_parent()->get_name(); });
  cmd->add_option("--workers", flags->workers,
                  "workers to start (order: lockstep: this machine's CPUs / --slots, unless given)")
      ->each([flags](const std::string&) { flags->workers_given = true; })
      ->capture_default_str();
  cmd->add_option("--slots", flags->slots,
                  "CPU slots (ranks at once) per worker (order: lockstep: the widest trial's ranks, unless given)")
      ->each([flags](const std::string&) { flags->slots_given = true; })
      ->capture_default_str();
  cmd->add_option("--db", flags->db, "results database to create or extend")->capture_default_str();
  cmd->add_option("--trainer", flags->trainer, "trainer executable (default: bakeoff-trainer next to this binary)");
  cmd->add_option("--linger", flags->linger_s,
                  "seconds the web page stays up after the sweep ends, when it was opened (0: none)")
      ->capture_default_str();
  cmd->add_option("--work-dir", flags->work_dir, "trial directories (default: new temp dirs)");
  cmd->add_option("--data-root", flags->data_root,
                  "the only directory sweeps' token files (dataset: NAME) are read from (default: none)");
  cmd->add_option("--executors", flags->executors,
                  "command allowlist for executor: command sweeps (default: $BAKEOFF_EXECUTORS, else the "
                  "shipped experiments/executors.yaml)");
  cmd->add_flag("-v,--verbose", flags->verbose, "also show the coordinator's and workers' log lines here");
  cmd->add_option("--log-file", flags->log_file,
                  "where the coordinator's and workers' log lines go (default: the --db path with .log)");
  cmd->add_flag("--share-cores", flags->share_cores,
                "allow more slots in all than CPUs: ranks are then not pinned and may share cores");
  cmd->add_option("--cache-dir", flags->cache_dir,
                  "{cache} of the command templates (default: $BAKEOFF_CACHE, else ~/.cache/bakeoff)");
}

}  // namespace bakeoff::cli
