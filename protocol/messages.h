// The messages of the worker protocol (docs/protocol.md), as plain structs with JSON
// conversion. Every frame is a JSON object with a "type" field. Parsing validates types
// and required fields and returns a Status naming the message and field, so a peer's
// malformed message is an error value, never an exception escaping into the caller.
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/status.h"
#include "protocol/trainer_event.h"

namespace bakeoff::protocol {

// 2: events frames carry a rank's steps as step blocks (docs/protocol.md). A coordinator
// of version 2 also takes workers of version 1 (their steps are single events); one of
// version 1 refuses a version 2 worker, whose steps it would not read.
inline constexpr int kProtocolVersion = 2;
inline constexpr int kMinProtocolVersion = 1;

// A worker name: 1-64 letters, digits, '.', '_' or '-' (it appears in log lines, metric
// labels and the database). The coordinator refuses a registration with any other.
bool IsValidWorkerName(const std::string& name);
inline constexpr std::size_t kMaxWorkerNameBytes = 64;
// The most attempts one lockstep group may hold (a pair group: a baseline trial and its
// variants at one repeat); its sides share one set of cores and devices, taking turns.
inline constexpr int kMaxLockstepSides = 16;

// The address Prometheus scrapes a worker at, from the host it advertises (its
// metrics_host, else its host; it goes verbatim into Prometheus service discovery):
// - `peer_address` itself (the address the worker's connection comes from, an IP
//   literal; "" when unknown) is always taken;
// - another IP literal is taken unless it is loopback (127.0.0.0/8, ::1: the
//   coordinator's own services), link-local (169.254.0.0/16, fe80::/10: cloud metadata),
//   unspecified or multicast;
// - a DNS host name (labels of letters, digits and '-', at most 63 bytes each and 253
//   in all, the last not all digits) is never published: names are not resolved here,
//   and one could resolve to a metadata address, so the worker is scraped at
//   `peer_address` instead (InvalidArgument when that is unknown).
// InvalidArgument saying why otherwise.
Result<std::string> ScrapeAddress(const std::string& host, const std::string& peer_address);

// Message type names (the "type" field).
inline constexpr const char* kTypeRegister = "register";
inline constexpr const char* kTypeRegistered = "registered";
inline constexpr const char* kTypeRejected = "rejected";
inline constexpr const char* kTypeHeartbeat = "heartbeat";
inline constexpr const char* kTypeAssign = "assign";
inline constexpr const char* kTypeCancel = "cancel";
inline constexpr const char* kTypeDrain = "drain";
inline constexpr const char* kTypeGoodbye = "goodbye";
inline constexpr const char* kTypeEvents = "events";
inline constexpr const char* kTypeAttemptFinished = "attempt_finished";
inline constexpr const char* kTypeAck = "ack";

// One attempt of one trial: the unit every message about work refers to. A message
// whose attempt is not the trial's current one is stale and ignored by the receiver.
struct AttemptRef {
  std::int64_t trial_id = 0;
  int attempt = 0;
  bool operator==(const AttemptRef&) const = default;
  auto operator<=>(const AttemptRef&) const = default;
};

struct Resources {
  int cpu_slots = 0;               // ranks this worker runs at once on CPU
  std::vector<int> cuda_devices;   // CUDA device ordinals it owns (one rank each)
  // The model of those devices as the driver names it ("NVIDIA H100 80GB HBM3"; "" when
  // unknown): a sweep's resources.gpu_type must be part of it. At most
  // kMaxGpuModelBytes printable ASCII characters.
  std::string gpu_model;
};

inline constexpr std::size_t kMaxGpuModelBytes = 128;

// Whether a worker whose GPUs are `gpu_model` serves a sweep asking for `gpu_type`
// ("A100", "h100"): any model when gpu_type is empty; else gpu_type, ignoring case, is
// part of the model (an unknown model serves no named type).
bool GpuTypeMatches(const std::string& gpu_model, const std::string& gpu_type);

struct PortRange {
  int first = 0;  // inclusive
  int last = 0;   // inclusive
};

// worker -> coordinator, first frame of every connection.
struct RegisterMessage {
  std::string token;
  std::string worker_name;  // stable across reconnects: identifies the worker
  // The secret the coordinator issued to this worker in `registered` (absent on its
  // first registration). Replacing a live worker of the same name needs it.
  std::string worker_secret;
  std::string host;         // address other workers reach this one at (rendezvous)
  Resources resources;
  PortRange store_ports;    // ports rank 0 may bind for the trial's TCPStore
  std::vector<AttemptRef> running;  // attempts still running here (reclaim after restart)
  int metrics_port = 0;     // 0 = no /metrics endpoint
  // Host Prometheus scrapes metrics_port at; "" = `host` (frames from workers before
  // this field existed decode that way).
  std::string metrics_host;
  bool simulate = false;    // runs the simulated workload instead of the trainer
  // The command templates this worker's allowlist offers (docs/executors.md), at most
  // kMaxExecutorNames names of [A-Za-z0-9._-]; empty = native trainer only.
  std::vector<std::string> executors;
  // The Slurm job this worker runs in (SLURM_JOB_ID, digits, at most 32 of [0-9_]); ""
  // = not started by Slurm. The coordinator's Slurm provisioner maps workers to the
  // jobs it submitted by it (docs/slurm.md).
  std::string slurm_job_id;
  int protocol_version = kProtocolVersion;
};

inline constexpr std::size_t kMaxExecutorNames = 64;

// coordinator -> worker: registration accepted.
struct RegisteredMessage {
  std::string worker_id;
  std::int64_t heartbeat_interval_ms = 1000;
  std::int64_t heartbeat_timeout_ms = 10000;
  // Proves on a re-registration that this is the worker registered under this name
  // (docs/protocol.md, "Worker identity"); kept by the worker until it is rejected.
  std::string worker_secret;
};

// coordinator -> worker: registration refused (bad token, bad version, a name in use by
// a live worker); then closed.
struct RejectedMessage {
  std::string reason;
  // > 0: the refusal is temporary (the name is held by a live worker until it is lost
  // or gone); the worker may register again after about this long. 0: final.
  std::int64_t retry_after_ms = 0;
};

// worker -> coordinator, every heartbeat_interval_ms.
struct HeartbeatMessage {
  std::vector<AttemptRef> running;
};

struct RankSlot {
  int rank = 0;        // global rank
  int local_rank = 0;  // index on this worker
  std::vector<int> cuda_devices;  // CUDA_VISIBLE_DEVICES of this rank (empty on CPU)
};

// order: lockstep (docs/lockstep.md): the attempt is side `side` of a group of `sides`
// attempts that run at once on this worker, on the same cores and devices, and take
// turns one measured step at a time in side order. `group` names the group on this
// worker (unique among its running groups).
struct LockstepSide {
  std::string group;
  int side = 0;   // 0 .. sides-1: its place in the turn order
  int sides = 1;  // how many attempts the coordinator placed in the group
  std::int64_t turn_timeout_ms = 300000;
};

// coordinator -> worker: start these ranks of an attempt.
struct AssignMessage {
  AttemptRef attempt;
  std::string sweep_id;
  std::string variant_key;
  nlohmann::json config = nlohmann::json::object();  // trainer config (docs/trainer.md)
  std::vector<RankSlot> ranks;
  int world_size = 1;
  std::string store_address;  // host:port of rank 0's TCPStore
  std::int64_t timeout_ms = 0;  // 0 = no limit
  std::optional<LockstepSide> lockstep;  // absent: the attempt runs on its own
};

// coordinator -> worker: stop an attempt (kill its process group).
struct CancelMessage {
  AttemptRef attempt;
  std::string reason;
};

// coordinator -> worker: finish running attempts, take no new ones.
struct DrainMessage {};

// worker -> coordinator: the worker is stopping cleanly (its attempts were finished and
// reported); it is "gone", not "lost", and anything it still held is requeued at once.
struct GoodbyeMessage {};

// One trainer event of one rank, tagged with its attempt.
struct TrialEvent {
  AttemptRef attempt;
  int rank = 0;
  nlohmann::json event;  // the trainer's JSON line (docs/trainer.md), "event" field set
  // 1, 2, ... per (trial, attempt, rank) in the order the rank wrote them; a redelivered
  // event keeps its seq, so the store keeps it once. 0 = not numbered.
  std::int64_t seq = 0;
};

// Consecutive steps of one rank and phase, in increasing step order (docs/protocol.md,
// "Step blocks"): a worker sends a block once as it was formed, and again unchanged
// after a reconnect, so the store keeps it once.
struct StepBlock {
  AttemptRef attempt;
  int rank = 0;
  std::string phase = "measure";  // "warmup" or "measure"
  std::vector<StepRow> rows;
};
inline constexpr std::size_t kMaxStepBlockRows = 1000;

// worker -> coordinator: a batch of events, oldest first, and step blocks.
struct EventsMessage {
  std::vector<TrialEvent> events;
  std::vector<StepBlock> steps;
  // Blocks left out while parsing because a row did not read (a worker that skipped
  // the checks), with why; the rest of the frame stands.
  std::vector<std::string> unreadable_steps;
  std::int64_t outbox_seq = 0;  // acknowledged by an `ack` once handled (0 = no ack wanted)
};

struct RankExit {
  int rank = 0;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // 0 when it exited normally
};

// worker -> coordinator: every local rank of the attempt has ended.
struct AttemptFinishedMessage {
  AttemptRef attempt;
  std::string outcome;  // protocol/outcome.h names
  std::string reason;
  std::vector<RankExit> exits;
  std::int64_t outbox_seq = 0;
  // With outcome "lost": Bakeoff's own machinery failed before the variant ran (a rank
  // store's port in use), so the retry does not count against the sweep's max_attempts
  // (the coordinator grants at most kMaxInfrastructureRetries such extra attempts).
  bool infrastructure = false;
};

// coordinator -> worker: every events / attempt_finished frame up to and including
// outbox_seq is durably handled; the worker may forget them.
struct AckMessage {
  std::int64_t outbox_seq = 0;
};

nlohmann::json ToJson(const RegisterMessage& m);
nlohmann::json ToJson(const RegisteredMessage& m);
nlohmann::json ToJson(const RejectedMessage& m);
nlohmann::json ToJson(const HeartbeatMessage& m);
nlohmann::json ToJson(const AssignMessage& m);
nlohmann::json ToJson(const CancelMessage& m);
nlohmann::json ToJson(const DrainMessage& m);
nlohmann::json ToJson(const GoodbyeMessage& m);
nlohmann::json ToJson(const EventsMessage& m);
nlohmann::json ToJson(const AttemptFinishedMessage& m);
nlohmann::json ToJson(const AckMessage& m);

// The "type" field, or an error when it is missing or not a string.
Result<std::string> MessageType(const nlohmann::json& frame);

// Parse<T>(frame): validates and converts; the error names the type and field.
template <typename T>
Result<T> Parse(const nlohmann::json& frame);
template <> Result<RegisterMessage> Parse<RegisterMessage>(const nlohmann::json&);
template <> Result<RegisteredMessage> Parse<RegisteredMessage>(const nlohmann::json&);
template <> Result<RejectedMessage> Parse<RejectedMessage>(const nlohmann::json&);
template <> Result<HeartbeatMessage> Parse<HeartbeatMessage>(const nlohmann::json&);
template <> Result<AssignMessage> Parse<AssignMessage>(const nlohmann::json&);
template <> Result<CancelMessage> Parse<CancelMessage>(const nlohmann::json&);
template <> Result<DrainMessage> Parse<DrainMessage>(const nlohmann::json&);
template <> Result<GoodbyeMessage> Parse<GoodbyeMessage>(const nlohmann::json&);
template <> Result<EventsMessage> Parse<EventsMessage>(const nlohmann::json&);
template <> Result<AttemptFinishedMessage> Parse<AttemptFinishedMessage>(const nlohmann::json&);
template <> Result<AckMessage> Parse<AckMessage>(const nlohmann::json&);

}  // namespace bakeoff::protocol
