// `bakeoff coordinator`: runs the coordinator (HTTP API + worker listener + results
// store) until SIGINT/SIGTERM. Credentials come from files or BAKEOFF_TOKEN only, never
// flags' values (docs/security.md): --token-file (submit role, else BAKEOFF_TOKEN),
// --read-token-file (read role), --worker-token-file (workers).
#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <fstream>
#include <iostream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/slurm_flags.h"
#include "coordinator/coordinator_node.h"
#include "experiments/sweep/duration.h"
#include "metrics/report/report_service.h"
#include "experiments/sweep/executor_catalog.h"
#include "protocol/token.h"

namespace bakeoff::cli {
namespace {

struct CoordinatorFlags {
  coordinator::CoordinatorConfig config;
  std::string token_file;
  std::string executors_path;
  std::string read_token_file;
  std::string worker_token_file;
  std::string heartbeat_timeout = "10s";
  std::string db_max_size;  // empty: no cap
  std::string recovery_grace = "30s";
  std::string group_commit_window = "5ms";
  std::string ports_file;
  SlurmFlags slurm;  // --slurm-* (cli/slurm_flags.h)
};

bool IsLoopback(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address.rfind("[::1]", 0) == 0 || address.rfind("localhost:", 0) == 0;
}

// The three credential lists (coordinator_config.h) from their files, and the rules
// between them: no token of one kind may be one of another kind; API tokens need a
// worker token (the API token no longer registers workers); no token is only for
// loopback-only listeners.
Status LoadCredentials(CoordinatorFlags& flags) {
  auto& config = flags.config;
  if (!flags.token_file.empty()) {
    auto tokens = protocol::LoadTokenList(flags.token_file);
    if (!tokens.ok()) return tokens.status();
    config.submit_tokens = *tokens;
  } else if (auto env = protocol::LoadToken(""); env.ok() && !env->empty()) {
    config.submit_tokens = {*env};
  }
  for (auto [file, list] : {std::pair{&flags.read_token_file, &config.read_tokens},
                            std::pair{&flags.worker_token_file, &config.worker_tokens}}) {
    if (file->empty()) continue;
    auto tokens = protocol::LoadTokenList(*file);
    if (!tokens.ok()) return tokens.status();
    *list = *tokens;
  }
  for (const auto& token : config.worker_tokens) {
    if (protocol::TokenInList(config.submit_tokens, token) || protocol::TokenInList(config.read_tokens, token)) {
      return Status::InvalidArgument("the worker token (--worker-token-file) is also an API token: give workers "
                                     "a credential of their own");
    }
  }
  for (const auto& token : config.read_tokens) {
    if (protocol::TokenInList(config.submit_tokens, token)) {
      return Status::InvalidArgument("a read token (--read-token-file) is also a submit token (--token-file)");
    }
  }
  const bool api_tokens = !config.submit_tokens.empty() || !config.read_tokens.empty();
  if (api_tokens && config.submit_tokens.empty()) {
    return Status::InvalidArgument("--read-token-file needs a submit token too (--token-file or BAKEOFF_TOKEN): "
                                   "nobody could submit");
  }
  if (api_tokens && config.worker_tokens.empty()) {
    return Status::InvalidArgument("no worker token: give --worker-token-file FILE (a token of its own, for "
                                   "`bakeoff worker --token-file`); the API token does not register workers");
  }
  const bool loopback = IsLoopback(config.http_listen) && IsLoopback(config.worker_listen);
  if ((!api_tokens || config.worker_tokens.empty()) && !loopback) {
    return Status::InvalidArgument("no token: set --token-file (or BAKEOFF_TOKEN) and --worker-token-file before "
                                   "listening on a non-loopback address");
  }
  if (!api_tokens) std::cerr << "bakeoff coordinator: warning: no token set; anyone on this machine can use the API\n";
  if (config.worker_tokens.empty()) {
    std::cerr << "bakeoff coordinator: warning: no worker token set; anyone on this machine can register a worker\n";
  }
  return Status::Ok();
}

int RunCoordinator(CoordinatorFlags& flags) {
  if (flags.config.tls_cert_path.empty() != flags.config.tls_key_path.empty()) {
    std::cerr << "bakeoff coordinator: --tls-cert and --tls-key go together (TLS needs the certificate and its key)\n";
    return kExitUsage;
  }
  if (Status s = LoadCredentials(flags); !s.ok()) {
    std::cerr << "bakeoff coordinator: " << EscapeControlCharacters(s.message()) << "\n";
    return kExitUsage;
  }
  const std::string catalog_path =
      flags.executors_path.empty() ? spec::DefaultExecutorCatalogPath() : flags.executors_path;
  if (!catalog_path.empty() && catalog_path != "none") {
    auto catalog = spec::LoadExecutorCatalog(catalog_path);
    if (!catalog.ok()) {
      std::cerr << "bakeoff coordinator: --executors: " << EscapeControlCharacters(catalog.status().message()) << "\n";
      return kExitUsage;
    }
    flags.config.executors = std::move(*catalog);
  }
  auto hb = spec::ParseDuration(flags.heartbeat_timeout);
  auto grace = spec::ParseDuration(flags.recovery_grace);
  auto window = spec::ParseDurationMs(flags.group_commit_window);
  if (!hb.ok() || !grace.ok() || !window.ok()) {
    std::cerr << "bakeoff coordinator: "
              << (!hb.ok() ? hb.status() : !grace.ok() ? grace.status() : window.status()).message() << "\n";
    return kExitUsage;
  }
  flags.config.group_commit_window = *window;
  flags.config.heartbeat_timeout = *hb;
  flags.config.heartbeat_interval = std::max(std::chrono::milliseconds(100), flags.config.heartbeat_timeout / 10);
  flags.config.recovery_grace = *grace;
  if (!flags.db_max_size.empty()) {
    auto bytes = metrics::ParseByteSize(flags.db_max_size);
    if (!bytes.ok() || *bytes < 1 << 20) {
      std::cerr << "bakeoff coordinator: --db-max-size " << flags.db_max_size
                << ": expected a size of at least 1MiB, such as 512MiB or 20GiB\n";
      return kExitUsage;
    }
    flags.config.db_max_bytes = *bytes;
  }

  if (Status s = FinishSlurmFlags(flags.slurm, flags.worker_token_file, flags.config); !s.ok()) {
    std::cerr << "bakeoff coordinator: " << EscapeControlCharacters(s.message()) << "\n";
    return kExitUsage;
  }
  boost::asio::io_context io;
  coordinator::CoordinatorNode node(io.get_executor(), flags.config);
  Status started = node.Start();
  if (!started.ok()) {
    std::cerr << "bakeoff coordinator: " << EscapeControlCharacters(started.message()) << "\n";
    return ExitCodeFor(started);
  }
  std::cerr << "bakeoff coordinator: " << (node.tls() ? "HTTPS" : "HTTP") << " API on port " << node.http_port()
            << ", workers on port " << node.worker_port() << (node.tls() ? " (TLS)" : "") << ", results in "
            << flags.config.db_path << "\n";
  if (!flags.ports_file.empty()) {
    // Written whole then renamed, so a reader never sees half a file.
    const std::string tmp = flags.ports_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << nlohmann::json{{"http_port", node.http_port()}, {"worker_port", node.worker_port()}}.dump() << "\n";
    }
    std::rename(tmp.c_str(), flags.ports_file.c_str());
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    std::cerr << "bakeoff coordinator: shutting down\n";
    node.Stop();
    io.stop();
  });
  io.run();
  return kExitOk;
}

// The coordinator's --max-* limits, each shown with its default (CoordinatorConfig's).
struct Limit {
  const char* flag;
  std::size_t coordinator::CoordinatorConfig::*field;
  const char* help;
};
constexpr Limit kLimits[] = {
    {"--max-trials", &coordinator::CoordinatorConfig::max_trials_per_sweep, "largest sweep accepted (trials)"},
    {"--max-worker-events-per-s", &coordinator::CoordinatorConfig::max_worker_events_per_s,
     "trainer events taken from one worker per second; over it the worker is read later, nothing is dropped "
     "(0: no limit)"},
    {"--max-http-connections", &coordinator::CoordinatorConfig::max_http_connections,
     "HTTP connections open at once; at the cap the oldest without a valid token is shut down, else one more "
     "is closed at once"},
    {"--max-worker-connections", &coordinator::CoordinatorConfig::max_worker_connections,
     "worker-protocol connections open at once; at the cap the oldest unregistered one is shut down, else one "
     "more is closed at once"},
    {"--max-pending-per-peer", &coordinator::CoordinatorConfig::max_pending_connections_per_peer,
     "connections one address may hold on each listener before it authenticates; one more shuts its oldest "
     "down"},
    {"--max-worker-slots", &coordinator::CoordinatorConfig::max_worker_slots,
     "CPU slots one worker may offer; a registration claiming more is refused"},
    {"--max-worker-gpus", &coordinator::CoordinatorConfig::max_worker_gpus,
     "CUDA devices one worker may offer; a registration claiming more is refused"},
    {"--max-credential-slots", &coordinator::CoordinatorConfig::max_credential_slots,
     "CPU slots the workers of one worker credential (a line of --worker-token-file) may offer together; a "
     "registration past it is refused until others leave (0: no cap)"},
    {"--max-credential-gpus", &coordinator::CoordinatorConfig::max_credential_gpus,
     "CUDA devices the workers of one worker credential may offer together; a registration past it is refused "
     "until others leave (0: no cap)"},
};

void SetupCoordinator(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<CoordinatorFlags>();
  auto* cmd = root.add_subcommand("coordinator", "Run the coordinator: HTTP API, worker listener, results database");
  cmd->add_option("--listen", flags->config.http_listen, "HTTP API address HOST:PORT (port 0 picks a free port)")
      ->capture_default_str();
  cmd->add_option("--worker-listen", flags->config.worker_listen, "worker protocol address HOST:PORT")
      ->capture_default_str();
  cmd->add_option("--db", flags->config.db_path, "results database (SQLite)")->capture_default_str();
  cmd->add_option_function<std::string>(
         "--store-synchronous",
         [flags](const std::string& mode) { flags->config.store_durable = mode == "full"; },
         "full (default): results survive power loss once acknowledged; normal: benchmarks only, a power "
         "loss may lose the last acknowledged results")
      ->check(CLI::IsMember({"full", "normal"}));
  cmd->add_option("--executors", flags->executors_path,
                  "command allowlist that executor: command sweeps are checked against at submit (default: "
                  "$BAKEOFF_EXECUTORS, else the shipped experiments/executors.yaml; \"none\": only the "
                  "templates workers offer)");
  cmd->add_option("--token-file", flags->token_file,
                  "file of API tokens with the submit role, one per line (else $BAKEOFF_TOKEN)");
  cmd->add_option("--read-token-file", flags->read_token_file,
                  "file of API tokens with the read role (status, report, query), one per line");
  cmd->add_option("--worker-token-file", flags->worker_token_file,
                  "file of worker tokens, one per line: the only credential that registers workers "
                  "(required with API tokens)");
  cmd->add_option("--tls-cert", flags->config.tls_cert_path,
                  "PEM certificate chain: serve HTTPS and TLS to workers on both listeners (with --tls-key)");
  cmd->add_option("--tls-key", flags->config.tls_key_path, "PEM private key of --tls-cert (unencrypted)");
  cmd->add_option("--heartbeat-timeout", flags->heartbeat_timeout,
                  "a worker silent this long is lost and its trials requeued")
      ->capture_default_str();
  cmd->add_option("--recovery-grace", flags->recovery_grace,
                  "after a restart, how long running trials wait for their workers")
      ->capture_default_str();
  cmd->add_option("--group-commit-window", flags->group_commit_window,
                  "under load, a group of store writes open this long is committed before the next frame is "
                  "read (docs/scale.md)")
      ->capture_default_str();
  cmd->add_option("--db-max-size", flags->db_max_size,
                  "cap on the results database (e.g. 20GiB); at the cap new sweeps are refused (503) "
                  "and everything stored is kept");
  for (const auto& limit : kLimits) {
    cmd->add_option(limit.flag, flags->config.*limit.field, limit.help)->capture_default_str();
  }
  cmd->add_option("--quarantine-after", flags->config.quarantine.attempts,
                  "attempts in a row a worker ends within 10 s of their assignment (not succeeded, not cancelled) "
                  "before it gets no new placements for 5 min, doubling up to 1 h (0: never)")
      ->capture_default_str();
  cmd->add_option("--ports-file", flags->ports_file, "write the bound ports as JSON to this file");
  cmd->add_flag("--metrics-require-token", flags->config.metrics_require_token,
                "GET /metrics needs the bearer token too (default: open, like /healthz)");
  AddSlurmFlags(cmd, &flags->slurm);
  cmd->callback([flags, exit_code]() { *exit_code = RunCoordinator(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("coordinator", SetupCoordinator);

}  // namespace bakeoff::cli
