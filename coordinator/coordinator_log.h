// The coordinator's loggers (protocol/log.h): "coordinator" for the service, its servers
// and ingest, "coordinator.slurm" for the Slurm provisioner. One definition for the
// folder, so that its files may share a unity batch (docs/build.md).
#pragma once

#include "protocol/log.h"

namespace bakeoff::coordinator {

inline constexpr logging::Logger kLog("coordinator");
inline constexpr logging::Logger kSlurmLog("coordinator.slurm");

}  // namespace bakeoff::coordinator
