// WorkerLink: how the coordinator's logic sends frames to one connected worker,
// without knowing the transport (a FrameConnection in production, a recorder in
// tests). Thread-safety: called on the coordinator's io thread only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::coordinator {

class WorkerLink {
 public:
  virtual ~WorkerLink() = default;
  // Queues a frame; fails when the link is closed or over its send limits.
  virtual Status Send(const nlohmann::json& frame) = 0;
  virtual void Close() = 0;
  // The IP address the worker's connection comes from ("" when unknown, as in tests).
  virtual std::string peer_address() const { return ""; }
};

}  // namespace bakeoff::coordinator
