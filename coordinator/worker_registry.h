// WorkerRegistry: the workers the coordinator knows, their resources, what is in use on
// each, and whether they are alive. A worker is identified by its name (stable across
// reconnects and coordinator restarts); it is alive while heartbeats arrive within the
// TTL. Expire() turns silent workers lost, so that the coordinator can requeue their
// attempts. Pure bookkeeping with an injected clock: no I/O.
// Thread-safety: not thread-safe; used on the coordinator's io thread only.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "protocol/messages.h"

namespace bakeoff::coordinator {

// kGone: the worker said goodbye (a clean stop); kLost: its heartbeats stopped.
enum class WorkerLiveness { kAlive, kDraining, kLost, kGone };
const char* WorkerLivenessName(WorkerLiveness liveness);

struct WorkerInfo {
  std::string id;  // == the worker's name
  std::string host;
  protocol::Resources resources;
  protocol::PortRange store_ports;
  int metrics_port = 0;     // 0: the worker serves no /metrics
  std::string metrics_host;  // where Prometheus scrapes it (the worker's host by default)
  bool simulate = false;
  std::vector<std::string> executors;  // command templates its allowlist offers
  WorkerLiveness liveness = WorkerLiveness::kAlive;
  Clock::TimePoint last_heartbeat{};
  Clock::TimePoint registered_at{};
  // Resources held by attempts placed on this worker.
  int used_cpu_slots = 0;
  std::set<int> used_cuda_devices;
  std::set<protocol::AttemptRef> attempts;
  int next_store_port_offset = 0;

  int free_cpu_slots() const { return resources.cpu_slots - used_cpu_slots; }
  std::vector<int> free_cuda_devices() const;
  bool schedulable() const { return liveness == WorkerLiveness::kAlive; }
  bool departed() const { return liveness == WorkerLiveness::kLost || liveness == WorkerLiveness::kGone; }
};

class WorkerRegistry {
 public:
  WorkerRegistry(const Clock& clock, std::chrono::milliseconds heartbeat_ttl)
      : clock_(clock), ttl_(heartbeat_ttl) {}

  // Adds or refreshes the worker `message.worker_name`. A re-registration keeps the
  // resources held by attempts still placed on it; it is alive again.
  WorkerInfo& Register(const protocol::RegisterMessage& message);

  // Returns false for an unknown worker.
  bool Heartbeat(const std::string& worker_id);
  void SetDraining(const std::string& worker_id);
  // A clean stop: the worker is gone (never reported lost later).
  void SetGone(const std::string& worker_id);

  // Workers whose last heartbeat is older than the TTL become lost; returns those that
  // just did (each once). A gone worker is never lost.
  std::vector<std::string> Expire();

  // Reserve / release a rank's resources. `cuda_device` < 0 means a CPU slot.
  void Reserve(const std::string& worker_id, const protocol::AttemptRef& attempt, int cpu_slots,
               const std::vector<int>& cuda_devices);
  void Release(const std::string& worker_id, const protocol::AttemptRef& attempt, int cpu_slots,
               const std::vector<int>& cuda_devices);

  // The next port of the worker's advertised store range (round robin).
  int NextStorePort(const std::string& worker_id);

  WorkerInfo* Find(const std::string& worker_id);
  const std::map<std::string, WorkerInfo>& workers() const { return workers_; }
  std::chrono::milliseconds ttl() const { return ttl_; }

 private:
  const Clock& clock_;
  std::chrono::milliseconds ttl_;
  std::map<std::string, WorkerInfo> workers_;
};

}  // namespace bakeoff::coordinator
