// Who may register as a worker, and on what terms (docs/security.md): a valid name (it
// goes into log lines and metric labels), the worker credential (an API token is
// refused like any other), a name no live worker holds, at most the capacity the
// operator allows (--max-worker-slots, --max-worker-gpus), a protocol version this
// coordinator speaks, and a scrape address that is a host and never link-local (it goes
// verbatim into /api/v1/sd). Each refusal is logged and says what to do.
// Thread-safety: pure but for the log; call on the coordinator's executor (the registry).
#pragma once

#include <set>
#include <string>
#include <variant>

#include "coordinator/coordinator_config.h"
#include "coordinator/worker_registry.h"
#include "metrics/store/results_store.h"
#include "metrics/store/store_records.h"
#include "protocol/clock.h"
#include "protocol/messages.h"
#include "protocol/log.h"

namespace bakeoff::coordinator {

// A worker's `host` as it registers: at most this many bytes.
inline constexpr std::size_t kMaxWorkerHostBytes = 253;
// Whether `host` is at most kMaxWorkerHostBytes letters, digits, '.', '-', '_', ':', '['
// or ']' (empty: not said): a host name or an address, nothing a terminal or a log line
// would interpret.
bool ValidWorkerHost(const std::string& host);

// The worker credential `token` is, as the coordinator names it in logs and the API:
// "worker-token-N" for the Nth token of config.worker_tokens (one line of
// --worker-token-file, 1-based), "" when no worker token is configured (or none matches).
// Each token is compared in constant time.
std::string WorkerCredential(const CoordinatorConfig& config, const std::string& token);

// Whether the workers of `credential` may together offer what `message` offers besides
// what they offer now (the registering name itself, and lost or gone workers, not
// counted): refused with kUnavailable, naming the flag, past config.max_credential_slots
// or max_credential_gpus (0: no cap). A refusal is temporary: the capacity frees as the
// credential's other workers leave.
Status CheckCredentialCapacity(const protocol::RegisterMessage& message, const std::string& credential,
                               const CoordinatorConfig& config, const WorkerRegistry& registry);

// A registration as admitted: the message as checked, and the credential it matched
// (WorkerCredential), which the registry keeps and its capacity counts against.
struct AdmittedWorker {
  protocol::RegisterMessage message;
  std::string credential;
};

// The registration as admitted, or the reply that refuses it. Its host must be
// ValidWorkerHost; its metrics host, when it has a metrics port, is checked by
// protocol::ScrapeAddress and then replaced by `peer_address`, the connection's own
// address (when known): /api/v1/sd publishes nothing else. A refusal is logged to `log`.
std::variant<AdmittedWorker, protocol::RejectedMessage> AdmitWorker(
    const protocol::RegisterMessage& message, const CoordinatorConfig& config, const WorkerRegistry& registry,
    const std::string& peer_address, const logging::Logger& log);

// The `registered` reply to an admitted worker: its id and secret, and the heartbeat
// interval and timeout it keeps to.
protocol::RegisteredMessage RegisteredReply(const WorkerInfo& info, const CoordinatorConfig& config);

// The worker's row in the store: its resources, scrape URL, busy when it re-registers
// with running attempts, and the SHA-256 of the secret it was given (never the secret).
metrics::WorkerRecord WorkerRecordOf(const protocol::RegisterMessage& message, const WorkerInfo& info);

// After a restart: every name in `awaited` (workers whose attempts await reclaim) is held
// until `until` for the worker whose secret the store keeps (WorkerRegistry::HoldName),
// so that no one else can reclaim, forge or lose those attempts by registering first.
Status HoldAwaitedNames(const std::set<std::string>& awaited, metrics::ResultsStore& store,
                        WorkerRegistry& registry, Clock::TimePoint until);

}  // namespace bakeoff::coordinator
