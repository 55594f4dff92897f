// Files a sweep names, kept inside the roots the trainer's launcher gives it: a token
// file is read only from inside `data_root`, an output is written only inside
// `output_dir` (the worker passes its --data-root and the trial's own directory). Names
// are IsSandboxedName (relative, no ".."); on top of that, a symbolic link that leads out
// of the root is refused (reads: the real path must lie inside the root's real path;
// writes: no component is followed if it is a link). Messages name the file, never
// its contents. No LibTorch here. Thread-safety: functions of the file system.
#pragma once

#include <string>

#include "protocol/status.h"

namespace bakeoff::trainer {

// The real path of `root`/`name` for reading. `root` "" is the current directory.
// NotFound when absent; PermissionDenied when it resolves outside the root.
Result<std::string> ResolveForReading(const std::string& root, const std::string& name);

// Opens `root`/`name` for writing (created or truncated, mode 0644), creating missing
// parent directories inside the root; refuses any component that is a symbolic link.
// Returns the open file descriptor; the caller closes it.
Result<int> OpenForWriting(const std::string& root, const std::string& name);

}  // namespace bakeoff::trainer
