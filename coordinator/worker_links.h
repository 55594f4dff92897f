// WorkerLinks: the coordinator's live connections, one per worker, and how far each
// worker's outbox has been acknowledged. Every frame and every acknowledgement leaves
// through the group commit (group_commit.h): only once what the turn wrote is durable,
// in the order the turn decided them. A worker whose connection closes reconnects and
// sends again everything not acknowledged.
// Thread-safety: not thread-safe; owned by CoordinatorService and used on its executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "coordinator/group_commit.h"
#include "coordinator/worker_link.h"
#include "protocol/log.h"

namespace bakeoff::coordinator {

class WorkerLinks {
 public:
  // A send that fails is logged to `log`.
  WorkerLinks(GroupCommit& group, const logging::Logger& log) : group_(group), log_(log) {}

  // `link` becomes the worker's connection (an older one is closed: the newer wins) and
  // its acknowledgements start again from 0.
  void Attach(const std::string& worker_id, std::shared_ptr<WorkerLink> link);
  // Whether `link` is the worker's current connection (frames of a replaced one are dropped).
  bool IsCurrent(const std::string& worker_id, const WorkerLink* link) const;
  // Forgets `link` when it is the worker's current connection; true when it was.
  bool Detach(const std::string& worker_id, const WorkerLink* link);
  // Closes the worker's connection, which it notices and reconnects.
  void Close(const std::string& worker_id);
  // Closes and forgets it (the worker is lost or gone).
  void Drop(const std::string& worker_id);
  // Closes and forgets every connection and acknowledgement (a stop, or a reload).
  void CloseAll();
  // Forgets the worker's acknowledgements (the registry forgot the worker).
  void Forget(const std::string& worker_id) { acked_.erase(worker_id); }

  // Sends `frame` once the open group commits; nothing when the worker has no connection
  // (its reconnect and heartbeats reconcile). A send that fails closes the connection.
  void Send(const std::string& worker_id, const nlohmann::json& frame);
  // Acknowledges the worker's outbox up to `outbox_seq` once the open group commits: the
  // worker then forgets those frames, so never before they are stored.
  void Ack(const std::string& worker_id, std::int64_t outbox_seq);
  // The highest outbox_seq acknowledged to the worker (0 when none).
  std::int64_t acked(const std::string& worker_id) const;

  bool connected(const std::string& worker_id) const { return links_.count(worker_id) > 0; }
  std::size_t size() const { return links_.size(); }

 private:
  GroupCommit& group_;
  const logging::Logger& log_;
  std::map<std::string, std::shared_ptr<WorkerLink>> links_;
  std::map<std::string, std::int64_t> acked_;
};

}  // namespace bakeoff::coordinator
