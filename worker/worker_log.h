// The worker's logger: every line of the agent and its helpers carries the component
// "worker" (protocol/log.h). One definition for the folder, so that its files may share a
// unity batch (docs/build.md).
#pragma once

#include "protocol/log.h"

namespace bakeoff::worker {

inline constexpr logging::Logger kLog("worker");

}  // namespace bakeoff::worker
