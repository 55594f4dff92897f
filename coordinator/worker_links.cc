#include "coordinator/worker_links.h"

#include <algorithm>
#include <utility>

#include "protocol/messages.h"

namespace bakeoff::coordinator {

void WorkerLinks::Attach(const std::string& worker_id, std::shared_ptr<WorkerLink> link) {
  auto old = links_.find(worker_id);
  if (old != links_.end() && old->second != link) old->second->Close();
  links_[worker_id] = std::move(link);
  acked_[worker_id] = 0;
}

bool WorkerLinks::IsCurrent(const std::string& worker_id, const WorkerLink* link) const {
  auto it = links_.find(worker_id);
  return it != links_.end() && it->second.get() == link;
}

bool WorkerLinks::Detach(const std::string& worker_id, const WorkerLink* link) {
  if (!IsCurrent(worker_id, link)) return false;
  links_.erase(worker_id);
  return true;
}

void WorkerLinks::Close(const std::string& worker_id) {
  auto it = links_.find(worker_id);
  if (it != links_.end()) it->second->Close();
}

void WorkerLinks::Drop(const std::string& worker_id) {
  Close(worker_id);
  links_.erase(worker_id);
}

void WorkerLinks::CloseAll() {
  for (auto& [id, link] : links_) link->Close();
  links_.clear();
  acked_.clear();
}

void WorkerLinks::Send(const std::string& worker_id, const nlohmann::json& frame) {
  auto it = links_.find(worker_id);
  if (it == links_.end()) return;
  auto send = [worker_id, link = it->second, frame, log = log_]() {
    Status sent = link->Send(frame);
    if (!sent.ok()) {
      log.Warning("cannot send to a worker", {{"worker", worker_id}, {"error", sent.ToString()}});
      link->Close();
    }
  };
  group_.AfterCommit(std::move(send));
}

void WorkerLinks::Ack(const std::string& worker_id, std::int64_t outbox_seq) {
  if (outbox_seq <= 0) return;
  group_.AfterCommit([this, worker_id, outbox_seq]() {
    auto& acked = acked_[worker_id];
    acked = std::max(acked, outbox_seq);
    Send(worker_id, protocol::ToJson(protocol::AckMessage{outbox_seq}));
  });
}

std::int64_t WorkerLinks::acked(const std::string& worker_id) const {
  auto it = acked_.find(worker_id);
  return it == acked_.end() ? 0 : it->second;
}

}  // namespace bakeoff::coordinator
