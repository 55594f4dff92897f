// WorkerRegistry: the workers the coordinator knows, their resources, what is in use on
// each, and whether they are alive. A worker is identified by its name (stable across
// reconnects and coordinator restarts); it is alive while heartbeats arrive within the
// TTL. Expire() turns silent workers lost, so that the coordinator can requeue their
// attempts, and forgets departed workers that hold nothing once a retention has passed
// (Slurm names a worker per job: without that the registry grows a worker a job). Pure
// bookkeeping with an injected clock: no I/O.
// Thread-safety: not thread-safe; used on the coordinator's io thread only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "protocol/clock.h"
#include "protocol/messages.h"

namespace bakeoff::coordinator {

// kGone: the worker said goodbye (a clean stop); kLost: its heartbeats stopped.
enum class WorkerLiveness { kAlive, kDraining, kLost, kGone };
inline constexpr WorkerLiveness kWorkerLivenesses[] = {WorkerLiveness::kAlive, WorkerLiveness::kDraining,
                                                      WorkerLiveness::kLost, WorkerLiveness::kGone};
const char* WorkerLivenessName(WorkerLiveness liveness);

struct WorkerInfo {
  std::string id;  // == the worker's name
  std::string host;
  protocol::Resources resources;
  protocol::PortRange store_ports;
  int metrics_port = 0;     // 0: the worker serves no /metrics
  std::string metrics_host;  // where Prometheus scrapes it (the worker's host by default)
  // Issued when the name is taken (first registration, or after the worker was lost or
  // gone); a live worker's re-registration must present it. Never logged.
  std::string secret;
  bool simulate = false;
  std::vector<std::string> executors;  // command templates its allowlist offers
  std::string slurm_job_id;            // "" = not started by Slurm
  // The worker credential it registered with, as the coordinator names it
  // (WorkerCredential: "worker-token-N", "" when registration needs none): the workers
  // of one credential together get at most --max-credential-slots / --max-credential-gpus.
  std::string credential;
  WorkerLiveness liveness = WorkerLiveness::kAlive;
  Clock::TimePoint last_heartbeat{};
  Clock::TimePoint registered_at{};
  Clock::TimePoint departed_at{};  // when it turned lost or gone
  // Resources held by attempts placed on this worker.
  int used_cpu_slots = 0;
  std::set<int> used_cuda_devices;
  std::set<protocol::AttemptRef> attempts;
  // Units held once for several attempts (a lockstep group's sides), by share name.
  struct SharedUnits {
    int cpu_slots = 0;
    std::vector<int> cuda_devices;
    std::set<protocol::AttemptRef> holders;
  };
  std::map<std::string, SharedUnits> shared;
  int next_store_port_offset = 0;

  int free_cpu_slots() const { return resources.cpu_slots - used_cpu_slots; }
  // Ranks it can hold at all, in use or not: CUDA devices, or else CPU slots.
  int capacity(bool cuda) const { return cuda ? static_cast<int>(resources.cuda_devices.size()) : resources.cpu_slots; }
  std::vector<int> free_cuda_devices() const;
  bool schedulable() const { return liveness == WorkerLiveness::kAlive; }
  bool departed() const { return liveness == WorkerLiveness::kLost || liveness == WorkerLiveness::kGone; }
};

class WorkerRegistry {
 public:
  // A departed worker that holds no attempt is forgotten this long after it departed
  // (docs/scale.md); its name is free before that anyway.
  static constexpr std::chrono::hours kDefaultDepartedRetention{1};

  // `new_secret` makes the per-worker secrets (default: protocol::RandomToken).
  WorkerRegistry(const Clock& clock, std::chrono::milliseconds heartbeat_ttl,
                 std::function<std::string()> new_secret = {},
                 std::chrono::milliseconds departed_retention = kDefaultDepartedRetention);

  // Whether `message` may take its name. A name nobody holds, or whose worker is lost or
  // gone, is free; a live (alive or draining) worker's name needs the secret issued to
  // it, so that a second process cannot take over a running worker; so does a held name
  // (HoldName) until its hold ends. Refused: kUnavailable saying why (temporary: the
  // name frees when its worker is lost or gone, or when the hold ends).
  Status CheckIdentity(const protocol::RegisterMessage& message) const;

  // After a coordinator restart: `name` has attempts awaiting reclaim, and until `until`
  // only a registration whose secret has this SHA-256 (hex, as stored in the workers
  // table) may take it. The worker that holds the secret keeps it. An empty hash (a
  // worker stored before schema v5) holds nothing.
  void HoldName(const std::string& name, std::string secret_sha256, Clock::TimePoint until);

  // Adds or refreshes the worker `message.worker_name` (REQUIRES: CheckIdentity passed).
  // A re-registration keeps the resources held by attempts still placed on it, and its
  // secret; it is alive again. A held name taken with its secret keeps that secret; any
  // other new or departed name gets a new one.
  // `credential`: the one it presented (WorkerCredential), kept on its WorkerInfo.
  WorkerInfo& Register(const protocol::RegisterMessage& message, const std::string& credential = "");

  // Returns false for an unknown worker.
  bool Heartbeat(const std::string& worker_id);
  void SetDraining(const std::string& worker_id);
  // A clean stop: the worker is gone (never reported lost later).
  void SetGone(const std::string& worker_id);

  // Workers whose last heartbeat is older than the TTL become lost; returns those that
  // just did (each once). A gone worker is never lost. Also forgets the workers departed
  // longer than the retention that hold no attempt (TakeForgotten names them).
  std::vector<std::string> Expire();
  // The workers Expire forgot since the last call, so that per-worker state kept
  // elsewhere is dropped with them.
  std::vector<std::string> TakeForgotten() { return std::exchange(forgotten_, {}); }

  // Reserve / release what one attempt's ranks on this worker hold: `cpu_slots` CPU
  // slots (0 for ranks on GPUs) and the `cuda_devices` ordinals (empty for CPU ranks).
  // An unknown worker is ignored; Release of an attempt the worker does not hold is a
  // no-op, so releasing twice is harmless.
  // `share` (a lockstep group's name, "" none): the attempts reserved under one share
  // hold its units once, from the first Reserve until the last of them is released.
  void Reserve(const std::string& worker_id, const protocol::AttemptRef& attempt, int cpu_slots,
               const std::vector<int>& cuda_devices, const std::string& share = "");
  void Release(const std::string& worker_id, const protocol::AttemptRef& attempt, int cpu_slots,
               const std::vector<int>& cuda_devices);

  // The next port of the worker's advertised store range (round robin).
  int NextStorePort(const std::string& worker_id);
  // Frees every worker's reservations (identities and liveness stay): the coordinator
  // rebuilds them from the store and the workers' re-registrations after it lost a
  // group of store writes.
  void ReleaseAll();

  WorkerInfo* Find(const std::string& worker_id);
  const WorkerInfo* Find(const std::string& worker_id) const;
  const std::map<std::string, WorkerInfo>& workers() const { return workers_; }
  std::chrono::milliseconds ttl() const { return ttl_; }

 private:
  const Clock& clock_;
  std::chrono::milliseconds ttl_;
  std::function<std::string()> new_secret_;
  std::chrono::milliseconds departed_retention_;
  std::map<std::string, WorkerInfo> workers_;
  std::vector<std::string> forgotten_;
  struct Hold {
    std::string secret_sha256;
    Clock::TimePoint until;
  };
  // The hold on `name` that has not ended, or null.
  const Hold* ActiveHold(const std::string& name) const;
  std::map<std::string, Hold> holds_;
};

}  // namespace bakeoff::coordinator
