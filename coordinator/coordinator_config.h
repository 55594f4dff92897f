// CoordinatorConfig: every setting of `bakeoff coordinator`, with the documented
// defaults (docs/cli.md, docs/protocol.md). Parsed once from flags by the CLI.
// Thread-safety: a value.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/slurm_config.h"
#include "coordinator/worker_quarantine.h"
#include "experiments/sweep/executor_catalog.h"
#include "protocol/frame_codec.h"

namespace bakeoff::coordinator {

struct CoordinatorConfig {
  std::string http_listen = "127.0.0.1:8080";    // HTTP API (port 0: pick a free one)
  std::string worker_listen = "127.0.0.1:7070";  // worker protocol (port 0: pick a free one)
  std::string db_path = "results.db";
  // Cap on the results database's size (0: none but the disk's). Reaching it, like a full
  // or read-only disk, makes the store unhealthy: the coordinator refuses new sweeps
  // (503) and keeps everything stored, and probes every `store_probe_interval` until a
  // write succeeds again.
  std::int64_t db_max_bytes = 0;
  // synchronous=FULL for the store's durable writes (true, the default). false runs every
  // commit with NORMAL: faster, but a power loss may lose acknowledged results
  // (`--store-synchronous normal`, for benchmarks measuring what FULL costs).
  bool store_durable = true;
  std::chrono::milliseconds store_probe_interval{5000};
  // Credentials (docs/security.md), three kinds, none standing in for another. Each
  // list holds the tokens accepted (several while one is rotated):
  //  - submit_tokens: HTTP API bearer tokens of the submit role (read + submit, cancel,
  //    drain); `--token-file` / BAKEOFF_TOKEN.
  //  - read_tokens: HTTP API bearer tokens of the read role (every GET, and POST
  //    /api/v1/query); `--read-token-file`.
  //  - worker_tokens: what a worker presents in `register`; `--worker-token-file`.
  // No API token at all: the API needs none; no worker token: registration needs none
  // (the CLI allows either only on loopback-only listeners, and requires worker tokens
  // whenever API tokens are set).
  std::vector<std::string> submit_tokens;
  std::vector<std::string> read_tokens;
  std::vector<std::string> worker_tokens;
  // GET /metrics answers without the token by default, like other exporters, so that
  // a Prometheus needs no secret for it (it reveals counts and sweep ids, never sweep
  // names or contents); true: it needs an API token (either role) as every other route
  // but /healthz does, and bakeoff_sweep_info also carries each sweep's name.
  bool metrics_require_token = false;
  // Routes of the read role answer without a token (`bakeoff local`, whose HTTP listener
  // is on loopback only: its page opens with no token to type). Submit routes still need
  // a submit token.
  bool open_reads = false;
  // Connections open at once on each listener. At the cap the oldest connection that
  // has not authenticated (registered, or shown a valid token) is shut down to make
  // room; one more is closed as soon as it is accepted only when all have
  // (docs/security.md, "Limits"). Keep their sum under the descriptor limit (`ulimit -n`):
  // past that, accept fails and the listeners back off 50-500 ms.
  std::size_t max_http_connections = 256;
  std::size_t max_worker_connections = 2048;
  // Unauthenticated connections from one address on each listener; one more from it
  // shuts its oldest down.
  std::size_t max_pending_connections_per_peer = 16;
  // What one worker may offer: a registration claiming more is refused (a worker that
  // claimed 1,000,000 slots took every trial; security review 2026-12-02, hole 2). Set
  // them to the largest node the cluster has.
  std::size_t max_worker_slots = 256;
  std::size_t max_worker_gpus = 16;
  // What the workers registered with one worker credential (one line of
  // --worker-token-file) may offer together, lost and gone workers not counted; 0: no cap
  // but the per-worker one (the default, since one shared credential for a whole cluster
  // is the common set-up). Give each node, or each party, a line of its own and set these
  // to what that party may hold: a registration that would take its credential past
  // either is refused for now (docs/security.md; security review 2026-12-07, A2: three
  // names under --max-worker-slots 4 still took every trial).
  std::size_t max_credential_slots = 0;
  std::size_t max_credential_gpus = 0;
  // Quarantine of a worker whose attempts end within seconds of starting
  // (worker_quarantine.h; docs/reliability.md, "Quarantine"): 3 in a row within 10 s keep
  // it from new placements for 5 minutes, doubling up to an hour.
  QuarantinePolicy quarantine;
  // TLS on both listeners (worker protocol and HTTP API) when set: the certificate chain
  // and private key, PEM (`--tls-cert`, `--tls-key`; docs/protocol.md "TLS").
  std::string tls_cert_path;
  std::string tls_key_path;

  // Workers send a heartbeat every interval; one silent for `heartbeat_timeout` is lost
  // and its attempts are requeued (issue 7: "heartbeat TTL").
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  // After a restart, attempts that were assigned or running wait this long for their
  // workers to reconnect and reclaim them; then they are requeued as lost.
  std::chrono::milliseconds recovery_grace{30000};
  // The coordinator's own deadline per attempt: trial_timeout plus this after it was
  // assigned, the attempt ends `timeout` and its workers are told to cancel it, whatever
  // they report (a worker that heartbeats but never ends an attempt holds nothing).
  std::chrono::milliseconds attempt_deadline_grace{60000};
  // Housekeeping period: expiry, grace deadlines, scheduling retries.
  std::chrono::milliseconds tick{100};
  // Group commit (docs/scale.md): the store writes of one event-loop turn are committed
  // together at its end; under load a turn grows, so a group open this long is committed
  // (with the scheduling it asked for) before the next frame is handled. Bounds how long
  // an ack or an assignment waits for its commit: under load the dispatch latency's
  // median is about this window plus one commit. Each FULL commit blocks the loop for its
  // fsync (1-2 ms on the benchmark VM): 5 ms is about 110 commits a second at 1,000 busy
  // workers, 15% of the loop (bench/README.md). 0: only at the end of a turn.
  std::chrono::milliseconds group_commit_window{5};

  std::size_t max_request_body_bytes = 1u << 20;  // POST bodies (a sweep's YAML)
  std::size_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
  std::size_t max_trials_per_sweep = 10000;
  // The command allowlist sweeps are checked against at submit (docs/executors.md):
  // `executor: command` sweeps must name one of its templates, or one a registered
  // worker offers, and their fields must be the template's. Empty: only the names the
  // workers offer (fields unchecked here; the worker's script checks them).
  spec::ExecutorCatalog executors;
  // Trainer events taken from one worker per second (0: no limit). Over it, that
  // worker's connection is read later, never dropped: the burst waits in TCP and in the
  // worker's bounded outbox (EventRateLimiter, docs/protocol.md).
  std::size_t max_worker_events_per_s = 20000;
  // POST /api/v1/query: a read-only SQL statement runs on its own connection off the
  // service's thread; a request may ask for less, never more.
  int64_t query_max_rows = 10000;
  std::chrono::milliseconds query_timeout{10000};
  // Also accept the HTTP API's bearer token absent on /healthz only (always true).
  // Workers from Slurm (docs/slurm.md); off unless slurm.partition is set.
  SlurmConfig slurm;
};

}  // namespace bakeoff::coordinator
