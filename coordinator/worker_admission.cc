#include "coordinator/worker_admission.h"

#include <algorithm>
#include <cctype>

#include "protocol/token.h"

namespace bakeoff::coordinator {

using nlohmann::json;

std::variant<AdmittedWorker, protocol::RejectedMessage> AdmitWorker(
    const protocol::RegisterMessage& message, const CoordinatorConfig& config, const WorkerRegistry& registry,
    const std::string& peer_address, const logging::Logger& log) {
  // The name goes into log lines and metric labels: checked before anything logs it, and
  // logged escaped when refused (a newline in it once forged a coordinator log line).
  if (!protocol::IsValidWorkerName(message.worker_name)) {
    log.Warning("rejected a worker registration: invalid name", {{"worker", message.worker_name.substr(0, 80)}});
    return protocol::RejectedMessage{
        "invalid worker name: use 1-64 letters, digits, '.', '_' or '-'"};
  }
  // The host is printed by `bakeoff workers` and the page, and logged: a host name or an
  // address only (A13: a host with terminal escapes reached an operator's terminal).
  if (!ValidWorkerHost(message.host)) {
    log.Warning("rejected a worker registration: invalid host",
                {{"worker", message.worker_name}, {"host", message.host.substr(0, 80)}});
    return protocol::RejectedMessage{"invalid host: use at most " + std::to_string(kMaxWorkerHostBytes) +
                                     " letters, digits, '.', '-', '_', ':', '[' or ']' (a host name or an address)"};
  }
  // Only the worker credential registers: an API token is refused like any other. The
  // credential it matched is the one its capacity counts against (below).
  const std::string credential = WorkerCredential(config, message.token);
  if (!config.worker_tokens.empty() && credential.empty()) {
    log.Warning("rejected a worker registration: wrong token", {{"worker", message.worker_name}});
    return protocol::RejectedMessage{
        "wrong worker token; give the coordinator's worker token (its --worker-token-file) in BAKEOFF_TOKEN or "
        "--token-file"};
  }
  if (Status identity = registry.CheckIdentity(message); !identity.ok()) {
    log.Warning("refused a worker registration: the name is held by a live worker", {{"worker", message.worker_name}});
    return protocol::RejectedMessage{identity.message(), config.heartbeat_timeout.count()};
  }
  // A worker's capacity is what its operator allows, not what it claims.
  if (message.resources.cpu_slots < 0 ||
      static_cast<std::size_t>(message.resources.cpu_slots) > config.max_worker_slots ||
      message.resources.cuda_devices.size() > config.max_worker_gpus) {
    log.Warning("rejected a worker registration: it offers more than one worker may",
                {{"worker", message.worker_name},
                 {"slots", message.resources.cpu_slots},
                 {"gpus", message.resources.cuda_devices.size()}});
    return protocol::RejectedMessage{
        "this worker offers " + std::to_string(message.resources.cpu_slots) + " CPU slots and " +
        std::to_string(message.resources.cuda_devices.size()) + " CUDA devices; this coordinator accepts at most " +
        std::to_string(config.max_worker_slots) + " and " + std::to_string(config.max_worker_gpus) +
        " per worker (its --max-worker-slots, --max-worker-gpus)"};
  }
  // The credential's workers together (A2: several names under one credential took every
  // trial). Refused rather than clamped: the worker's own view of its capacity would
  // then differ from the coordinator's (which GPUs would be left out?), `bakeoff workers`
  // would show what it does not have, and a party's silent shrinking hides the
  // misconfiguration; a refusal names the flag, and is temporary, so the worker gets in
  // once the credential's other workers leave.
  if (Status capped = CheckCredentialCapacity(message, credential, config, registry);
      !capped.ok()) {
    log.Warning("refused a worker registration: past its credential's cap",
                {{"worker", message.worker_name}, {"reason", capped.message()}});
    return protocol::RejectedMessage{capped.message(), config.heartbeat_timeout.count()};
  }
  if (message.protocol_version < protocol::kMinProtocolVersion ||
      message.protocol_version > protocol::kProtocolVersion) {
    return protocol::RejectedMessage{
        "protocol version " + std::to_string(message.protocol_version) + " is not supported; this coordinator speaks " +
        std::to_string(protocol::kMinProtocolVersion) + " to " + std::to_string(protocol::kProtocolVersion)};
  }
  // The scrape address goes verbatim into /api/v1/sd: never a link-local (cloud
  // metadata) address or something that is not a host.
  // A host name is scraped at the connection's own address (ScrapeAddress).
  AdmittedWorker admitted{message, credential};
  protocol::RegisterMessage& checked = admitted.message;
  if (message.metrics_port > 0) {
    const std::string& scrape_host = message.metrics_host.empty() ? message.host : message.metrics_host;
    auto scrape = protocol::ScrapeAddress(scrape_host, peer_address);
    if (!scrape.ok()) {
      log.Warning("rejected a worker registration: bad metrics host",
                  {{"worker", message.worker_name}, {"host", scrape_host}, {"error", scrape.status().message()}});
      return protocol::RejectedMessage{"metrics host: " + scrape.status().message()};
    }
    // /api/v1/sd publishes the connection's own address, never one the worker names
    // (A13: metadata and internal service addresses were published); the check above
    // still refuses a named address that could never be right.
    checked.metrics_host = peer_address.empty() ? *scrape : peer_address;
  }
  return admitted;
}

std::string WorkerCredential(const CoordinatorConfig& config, const std::string& token) {
  std::size_t matched = 0;  // 1-based; every token is compared, so the time says nothing
  for (std::size_t i = 0; i < config.worker_tokens.size(); ++i) {
    if (protocol::TokensEqual(config.worker_tokens[i], token) && matched == 0) matched = i + 1;
  }
  return matched == 0 ? std::string() : "worker-token-" + std::to_string(matched);
}

Status CheckCredentialCapacity(const protocol::RegisterMessage& message, const std::string& credential,
                               const CoordinatorConfig& config, const WorkerRegistry& registry) {
  if (config.max_credential_slots == 0 && config.max_credential_gpus == 0) return Status::Ok();
  std::size_t slots = static_cast<std::size_t>(std::max(0, message.resources.cpu_slots));
  std::size_t gpus = message.resources.cuda_devices.size();
  for (const auto& [id, info] : registry.workers()) {
    if (id == message.worker_name || info.departed() || info.credential != credential) continue;
    slots += static_cast<std::size_t>(std::max(0, info.resources.cpu_slots));
    gpus += info.resources.cuda_devices.size();
  }
  const std::string who = credential.empty() ? "the workers (no worker token)" : "the workers of " + credential;
  if (config.max_credential_slots > 0 && slots > config.max_credential_slots) {
    return Status::Unavailable(who + " would offer " + std::to_string(slots) + " CPU slots together; this coordinator "
                               "accepts at most " + std::to_string(config.max_credential_slots) +
                               " per worker credential (its --max-credential-slots); retrying once others leave");
  }
  if (config.max_credential_gpus > 0 && gpus > config.max_credential_gpus) {
    return Status::Unavailable(who + " would offer " + std::to_string(gpus) + " CUDA devices together; this "
                               "coordinator accepts at most " + std::to_string(config.max_credential_gpus) +
                               " per worker credential (its --max-credential-gpus); retrying once others leave");
  }
  return Status::Ok();
}

bool ValidWorkerHost(const std::string& host) {
  if (host.size() > kMaxWorkerHostBytes) return false;  // empty: not said
  for (unsigned char c : host) {
    if (!std::isalnum(c) && c != '.' && c != '-' && c != '_' && c != ':' && c != '[' && c != ']') return false;
  }
  return true;
}

metrics::WorkerRecord WorkerRecordOf(const protocol::RegisterMessage& message, const WorkerInfo& info) {
  metrics::WorkerRecord record;
  record.id = info.id;
  record.name = message.worker_name;
  record.host = message.host;
  record.resources = {{"cpu_slots", message.resources.cpu_slots},
                      {"cuda_devices", message.resources.cuda_devices},
                      {"simulate", message.simulate}};
  if (!message.resources.gpu_model.empty()) record.resources["gpu_model"] = message.resources.gpu_model;
  if (message.metrics_port > 0) {
    record.metrics_url = "http://" + info.metrics_host + ":" + std::to_string(message.metrics_port) + "/metrics";
  }
  record.state = message.running.empty() ? metrics::WorkerState::kIdle : metrics::WorkerState::kBusy;
  record.secret_sha256 = protocol::Sha256Hex(info.secret);
  return record;
}

protocol::RegisteredMessage RegisteredReply(const WorkerInfo& info, const CoordinatorConfig& config) {
  protocol::RegisteredMessage reply;
  reply.worker_id = info.id;
  reply.heartbeat_interval_ms = config.heartbeat_interval.count();
  reply.heartbeat_timeout_ms = config.heartbeat_timeout.count();
  reply.worker_secret = info.secret;
  return reply;
}

Status HoldAwaitedNames(const std::set<std::string>& awaited, metrics::ResultsStore& store,
                        WorkerRegistry& registry, Clock::TimePoint until) {
  if (awaited.empty()) return Status::Ok();
  Result<std::vector<metrics::WorkerRecord>> stored = store.Reader()->ListWorkers();
  if (!stored.ok()) return stored.status().WithContext("reading the workers' secrets");
  for (const auto& w : *stored) {
    if (awaited.count(w.id)) registry.HoldName(w.id, w.secret_sha256, until);
  }
  return Status::Ok();
}

}  // namespace bakeoff::coordinator
