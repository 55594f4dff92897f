#include "cli/local_run.h"

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

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

}  // namespace

LocalRun RunSweepLocally(const std::string& yaml, const std::string& source, const LocalRunFlags& flags) {
  const std::string who = "bakeoff " + flags.command + ": ";
  LocalRun result;
  auto Failed = [&result](int code) {
    result.exit_code = code;
    return result;
  };
  if (flags.workers < 1 || flags.slots < 1) {
    std::cerr << who << "--workers and --slots must be >= 1\n";
    return Failed(kExitUsage);
  }
  const std::string log_path = flags.log_file.empty() ? DefaultLogPath(flags.db) : flags.log_file;
  LogToFile log_to_file;
  // The screen shows the coordinator's and workers' lines (-v) only after the page's
  // address, which is the first line.
  if (Status s = log_to_file.Open(log_path, /*verbose=*/false); !s.ok()) {
    std::cerr << who << "--log-file: " << s.message() << "\n";
    return Failed(kExitUsage);
  }
  // The API token from BAKEOFF_TOKEN (to reach this run's API), else a random one; the
  // workers, in this process, get a credential of their own that nobody else knows.
  auto env_token = protocol::LoadToken("");
  const std::string token = env_token.ok() && !env_token->empty() ? *env_token : protocol::RandomToken();
  const std::string worker_token = protocol::RandomToken();

  coordinator::CoordinatorConfig config;
  config.http_listen = "127.0.0.1:0";
  config.open_reads = true;  // loopback only: the page opens without a token
  config.worker_listen = "127.0.0.1:0";
  config.db_path = flags.db;
  config.submit_tokens = {token};
  config.worker_tokens = {worker_token};
  {
    const std::string path = flags.executors.empty() ? spec::DefaultExecutorCatalogPath() : flags.executors;
    if (!path.empty() && path != "none") {
      auto catalog = spec::LoadExecutorCatalog(path);
      if (!catalog.ok()) {
        std::cerr << who << "--executors: " << catalog.status().message() << "\n";
        return Failed(kExitUsage);
      }
      config.executors = std::move(*catalog);
    }
  }
  config.heartbeat_interval = std::chrono::milliseconds(500);
  config.heartbeat_timeout = std::chrono::milliseconds(10000);
  config.recovery_grace = std::chrono::milliseconds(2000);

  asio::io_context io;
  coordinator::CoordinatorNode node(io.get_executor(), config);
  if (Status s = node.Start(); !s.ok()) {
    std::cerr << who << s.message() << "\n";
    return Failed(ExitCodeFor(s));
  }
  // First, so that a user can open it while the rest starts.
  std::cerr << who << "watch it at http://127.0.0.1:" << node.http_port() << "/ (this machine only)\n";
  std::cerr << who << "logs in " << log_path << (flags.verbose ? "" : " (-v shows them here too)") << "\n";
  if (flags.verbose) logging::SetStderr(true);
  // Worker settings are checked before the sweep is stored, so that a missing trainer
  // does not leave a sweep behind that nobody runs.
  std::vector<worker::WorkerConfig> worker_configs;
  // Isolation: the workers share this machine, so its cores are dealt out over all their
  // slots at once, and each worker gets its slots' CPUs (docs/sweep.md, "Isolation").
  worker::CorePartition host_cores;
  {
    auto partition = worker::CorePartition::Make(worker::ReadHostCpuTopology(worker::AllowedCpus()),
                                                 flags.workers * flags.slots, flags.share_cores);
    if (!partition.ok()) {
      std::cerr << who << flags.workers << " worker(s) x " << flags.slots << " slot(s): "
                << partition.status().message() << "\n";
      return Failed(kExitUsage);
    }
    host_cores = std::move(partition).value();
    if (!host_cores.note().empty()) std::cerr << who << "warning: " << host_cores.note() << "\n";
  }
  // The sweep, read once here for what its workers need and whether they can place it;
  // a sweep that does not parse or expand is the submission's to refuse, with its error.
  Result<spec::SweepSpec> parsed = spec::ParseSweepText(yaml, source);
  std::optional<spec::ExpandedSweep> expanded;
  if (parsed.ok()) {
    if (auto e = spec::Expand(*parsed); e.ok()) expanded = std::move(e).value();
  }
  // A sweep whose variants all run command templates (the main job: the Python stack)
  // needs no trainer: its workers start without one (only `bakeoff` is built).
  const bool needs_trainer =
      !expanded || std::any_of(expanded->variants.begin(), expanded->variants.end(), [](const spec::Variant& v) {
        return !v.config["command_template"].is_string();
      });
  for (int i = 0; i < flags.workers; ++i) {
    worker::WorkerConfig wc;
    wc.coordinator_address = "127.0.0.1:" + std::to_string(node.worker_port());
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
    if (Status s = wc.Finalize(flags.argv0); !s.ok()) {
      std::cerr << who << s.message() << "\n";
      return Failed(s.code() == Status::Code::kNotFound ? kExitFailure : kExitUsage);
    }
    worker_configs.push_back(wc);
  }
  // A trial that none of the workers started here can ever place would wait forever:
  // refuse the sweep now, with the reason.
  if (parsed.ok()) {
    bool any_cuda = false;
    for (const auto& wc : worker_configs) any_cuda = any_cuda || !wc.cuda_devices.empty();
    if (parsed->resources.device == "cuda" && !any_cuda) {
      std::cerr << who << source << ": resources.device is cuda, but `bakeoff local` starts "
                << "CPU workers only, so no trial could ever be placed; run it on a coordinator with CUDA "
                << "workers (`bakeoff worker` on a GPU node), or set resources: {device: cpu}\n";
      return Failed(kExitUsage);
    }
    if (expanded) {
      int widest = 1;
      for (const auto& v : expanded->variants) widest = std::max(widest, v.world_size);
      if (widest > flags.workers * flags.slots) {
        std::cerr << who << source << ": a trial needs " << widest << " ranks but "
                  << flags.workers << " worker(s) x " << flags.slots
                  << " slot(s) offer fewer; raise --workers or --slots\n";
        return Failed(kExitUsage);
      }
    }
  }
  auto submitted = node.service().SubmitSweep(yaml);
  if (auto* error = std::get_if<coordinator::ApiError>(&submitted)) {
    std::cerr << who << source << ": " << error->message << "\n";
    return Failed(error->http_status == 503 ? kExitUnavailable : kExitUsage);
  }
  const auto created = std::get<nlohmann::json>(submitted);
  const std::int64_t sweep_id = created.value("id", std::int64_t{0});
  result.sweep_id = sweep_id;
  std::cerr << who << "sweep " << sweep_id << " (" << created.value("name", "") << "): "
            << created.value("trial_count", 0) << " trials on " << flags.workers << " worker(s) x "
            << flags.slots << " slot(s); results in " << flags.db << "; HTTP API on 127.0.0.1:" << node.http_port()
            << "\n";

  std::vector<std::shared_ptr<worker::WorkerAgent>> agents;
  for (const auto& wc : worker_configs) {
    auto agent = std::make_shared<worker::WorkerAgent>(io.get_executor(), wc);
    asio::co_spawn(io, agent->Run(), [who](std::exception_ptr, Status s) {
      if (!s.ok()) std::cerr << who << "worker stopped: " << s.message() << "\n";
    });
    agents.push_back(agent);
  }

  const bool tty = isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  metrics::SweepRecord& final_state = result.final_state;
  bool& interrupted = result.interrupted;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    interrupted = true;
    std::cerr << "\n" << who << "interrupted; cancelling the sweep\n";
    node.service().CancelSweep(std::to_string(sweep_id));
  });
  ProgressEta eta;
  long last_printed = -1;  // without a TTY: one line per 10 s of elapsed time
  asio::steady_timer poll(io);
  std::function<void()> watch = [&]() {
    poll.expires_after(std::chrono::milliseconds(500));
    poll.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      auto sweep = node.store().GetSweep(sweep_id);
      if (sweep.ok()) {
        const auto& c = sweep->counts;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ProgressFigures figures;
        figures.done = c.finished;
        figures.total = sweep->trial_count;
        figures.running = c.running + c.assigned;
        figures.queued = c.queued;
        figures.elapsed_s = elapsed;
        figures.remaining_s = eta.Update(c.finished, sweep->trial_count, elapsed);
        // The answer's comparisons and why queued trials cannot start, as `status` and the
        // API say them (same thread as the service: the io_context runs both).
        const coordinator::CoordinatorState state = node.service().State();
        if (auto answered = coordinator::AnsweredComparisons(state, sweep_id)) {
          figures.comparisons = ProgressFigures::Answered{answered->first, answered->second};
        }
        figures.waiting = coordinator::WaitingReason(state, sweep_id);
        const std::string text = FormatProgressLine(figures);
        if (tty) {
          std::cerr << "\r\033[K" << text << std::flush;
        } else if (static_cast<long>(elapsed) / 10 != last_printed ||
                   sweep->state != metrics::SweepState::kRunning) {
          last_printed = static_cast<long>(elapsed) / 10;
          std::cerr << text << "\n";
        }
        if (sweep->state != metrics::SweepState::kRunning) {
          final_state = *sweep;
          if (tty) std::cerr << "\n";
          for (auto& a : agents) a->Stop(std::chrono::milliseconds(1000));
          // An open page gets the final state and the report before the server goes.
          const bool linger = node.pages_served() > 0 && flags.linger_s > 0 && !interrupted;
          if (linger) {
            std::cerr << who << "the page stays up " << flags.linger_s << " s more (Ctrl-C ends it now)\n";
          }
          signals.cancel();
          auto end = std::make_shared<asio::steady_timer>(io);
          auto finish = [&io, &node, end]() {
            node.Stop();
            // Let the agents deliver their last frames, then end.
            end->expires_after(std::chrono::milliseconds(200));
            end->async_wait([&io, end](const boost::system::error_code&) { io.stop(); });
          };
          if (!linger) {
            finish();
            return;
          }
          end->expires_after(std::chrono::seconds(flags.linger_s));
          end->async_wait([finish](const boost::system::error_code& ec) {
            if (!ec) finish();
          });
          signals.async_wait([end, finish](const boost::system::error_code& ec, int) {
            if (ec) return;
            end->cancel();
            finish();
          });
          return;
        }
      }
      watch();
    });
  };
  watch();
  io.run();

  result.exit_code = kExitOk;
  return result;
}

void AddLocalRunFlags(CLI::App* cmd, LocalRunFlags* flags) {
  // The program's path as invoked: the default trainer is the one next to it.
  cmd->preparse_callback([cmd, flags](std::size_t) { flags->argv0 = cmd->get_parent()->get_name(); });
  cmd->add_option("--workers", flags->workers, "workers to start")->capture_default_str();
  cmd->add_option("--slots", flags->slots, "CPU slots (ranks at once) per worker")->capture_default_str();
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
