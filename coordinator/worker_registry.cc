#include "coordinator/worker_registry.h"

#include <algorithm>

#include "protocol/token.h"

namespace bakeoff::coordinator {

const char* WorkerLivenessName(WorkerLiveness liveness) {
  switch (liveness) {
    case WorkerLiveness::kAlive: return "alive";
    case WorkerLiveness::kDraining: return "draining";
    case WorkerLiveness::kLost: return "lost";
    case WorkerLiveness::kGone: return "gone";
  }
  return "lost";
}

std::vector<int> WorkerInfo::free_cuda_devices() const {
  std::vector<int> out;
  for (int d : resources.cuda_devices) {
    if (!used_cuda_devices.count(d)) out.push_back(d);
  }
  return out;
}

WorkerRegistry::WorkerRegistry(const Clock& clock, std::chrono::milliseconds heartbeat_ttl,
                               std::function<std::string()> new_secret,
                               std::chrono::milliseconds departed_retention)
    : clock_(clock), ttl_(heartbeat_ttl), new_secret_(std::move(new_secret)), departed_retention_(departed_retention) {
  if (!new_secret_) new_secret_ = [] { return protocol::RandomToken(); };
}

const WorkerRegistry::Hold* WorkerRegistry::ActiveHold(const std::string& name) const {
  auto hold = holds_.find(name);
  if (hold == holds_.end() || clock_.Now() >= hold->second.until) return nullptr;
  return &hold->second;
}

void WorkerRegistry::HoldName(const std::string& name, std::string secret_sha256, Clock::TimePoint until) {
  if (secret_sha256.empty()) return;
  holds_[name] = Hold{std::move(secret_sha256), until};
}

Status WorkerRegistry::CheckIdentity(const protocol::RegisterMessage& message) const {
  auto it = workers_.find(message.worker_name);
  if (it == workers_.end() || it->second.departed()) {
    const Hold* hold = ActiveHold(message.worker_name);
    if (!hold || (!message.worker_secret.empty() &&
                  protocol::TokensEqual(hold->secret_sha256, protocol::Sha256Hex(message.worker_secret)))) {
      return Status::Ok();
    }
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(hold->until - clock_.Now());
    return Status::Unavailable("the worker name '" + message.worker_name +
                               "' has attempts awaiting reclaim after a coordinator restart, and this "
                               "registration does not carry the secret of the worker that ran them; the name "
                               "is free once they are requeued, in " + std::to_string(left.count() + 1) +
                               " s, or give this worker another --name");
  }
  if (!message.worker_secret.empty() && protocol::TokensEqual(it->second.secret, message.worker_secret)) {
    return Status::Ok();
  }
  return Status::Unavailable("the worker name '" + message.worker_name +
                             "' is in use by a live worker and this registration does not carry its secret; "
                             "give this worker another --name, or stop the other one (the name is free once "
                             "that worker is gone or lost, at most a heartbeat timeout after it stops)");
}

WorkerInfo& WorkerRegistry::Register(const protocol::RegisterMessage& message, const std::string& credential) {
  auto& info = workers_[message.worker_name];
  const bool fresh = info.id.empty();
  if (fresh || info.departed()) {
    // The worker that ran the held name's attempts keeps its secret (CheckIdentity
    // checked it); anyone else gets a new one.
    info.secret = ActiveHold(message.worker_name) ? message.worker_secret : new_secret_();
  }
  holds_.erase(message.worker_name);
  info.id = message.worker_name;
  info.host = message.host;
  info.resources = message.resources;
  info.store_ports = message.store_ports;
  info.metrics_port = message.metrics_port;
  info.metrics_host = message.metrics_host.empty() ? message.host : message.metrics_host;
  info.simulate = message.simulate;
  info.executors = message.executors;
  info.slurm_job_id = message.slurm_job_id;
  info.credential = credential;
  info.liveness = WorkerLiveness::kAlive;
  info.last_heartbeat = clock_.Now();
  if (fresh) info.registered_at = clock_.Now();
  return info;
}

bool WorkerRegistry::Heartbeat(const std::string& worker_id) {
  auto* info = Find(worker_id);
  if (!info) return false;
  info->last_heartbeat = clock_.Now();
  return true;
}

void WorkerRegistry::SetDraining(const std::string& worker_id) {
  if (auto* info = Find(worker_id)) info->liveness = WorkerLiveness::kDraining;
}

void WorkerRegistry::SetGone(const std::string& worker_id) {
  if (auto* info = Find(worker_id)) {
    if (!info->departed()) info->departed_at = clock_.Now();
    info->liveness = WorkerLiveness::kGone;
  }
}

std::vector<std::string> WorkerRegistry::Expire() {
  std::vector<std::string> lost;
  const auto now = clock_.Now();
  for (auto it = workers_.begin(); it != workers_.end();) {
    WorkerInfo& info = it->second;
    if (info.departed()) {
      if (info.attempts.empty() && now - info.departed_at > departed_retention_) {
        forgotten_.push_back(it->first);
        it = workers_.erase(it);
        continue;
      }
    } else if (now - info.last_heartbeat > ttl_) {
      info.liveness = WorkerLiveness::kLost;
      info.departed_at = now;
      lost.push_back(it->first);
    }
    ++it;
  }
  return lost;
}

void WorkerRegistry::Reserve(const std::string& worker_id, const protocol::AttemptRef& attempt,
                             int cpu_slots, const std::vector<int>& cuda_devices, const std::string& share) {
  auto* info = Find(worker_id);
  if (!info) return;
  if (!share.empty()) {
    auto [units, first] = info->shared.try_emplace(share);
    units->second.holders.insert(attempt);
    info->attempts.insert(attempt);
    if (!first) return;  // the group's units are held already
    units->second.cpu_slots = cpu_slots;
    units->second.cuda_devices = cuda_devices;
  }
  info->used_cpu_slots += cpu_slots;
  for (int d : cuda_devices) info->used_cuda_devices.insert(d);
  info->attempts.insert(attempt);
}

void WorkerRegistry::Release(const std::string& worker_id, const protocol::AttemptRef& attempt,
                             int cpu_slots, const std::vector<int>& cuda_devices) {
  auto* info = Find(worker_id);
  if (!info || !info->attempts.count(attempt)) return;
  for (auto it = info->shared.begin(); it != info->shared.end(); ++it) {
    if (!it->second.holders.erase(attempt)) continue;
    info->attempts.erase(attempt);
    if (!it->second.holders.empty()) return;  // another side still runs on them
    info->used_cpu_slots = std::max(0, info->used_cpu_slots - it->second.cpu_slots);
    for (int d : it->second.cuda_devices) info->used_cuda_devices.erase(d);
    info->shared.erase(it);
    return;
  }
  info->used_cpu_slots = std::max(0, info->used_cpu_slots - cpu_slots);
  for (int d : cuda_devices) info->used_cuda_devices.erase(d);
  info->attempts.erase(attempt);
}

int WorkerRegistry::NextStorePort(const std::string& worker_id) {
  auto* info = Find(worker_id);
  if (!info) return 0;
  const int span = std::max(1, info->store_ports.last - info->store_ports.first + 1);
  const int port = info->store_ports.first + (info->next_store_port_offset % span);
  info->next_store_port_offset = (info->next_store_port_offset + 1) % span;
  return port;
}

void WorkerRegistry::ReleaseAll() {
  for (auto& [id, info] : workers_) {
    info.used_cpu_slots = 0;
    info.used_cuda_devices.clear();
    info.attempts.clear();
    info.shared.clear();
  }
}

const WorkerInfo* WorkerRegistry::Find(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerInfo* WorkerRegistry::Find(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

}  // namespace bakeoff::coordinator
