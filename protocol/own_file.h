// Files a process keeps for its user alone in a directory others may write (a shared
// working directory, /tmp): the log of `bakeoff local` and the results database with its
// -wal, -shm and -journal files. Such a file is never opened through a symbolic link,
// never one that another user owns (who could read it, change it, or point it at a file of
// ours), and is created 0600 whatever the umask (security review 2026-12-07, A11).
//
// Thread-safety: the functions are pure but for the file system calls; any thread.
#pragma once

#include <string>
#include <string_view>

#include "protocol/status.h"

namespace bakeoff::protocol {

// Opens `path` with `flags` (O_WRONLY | O_APPEND, O_RDWR, ...), creating it 0600 when it
// is missing, never through a symbolic link (O_NOFOLLOW, also for a link whose target is
// missing) nor a FIFO's block, and checks that what it opened is a regular file this
// effective user owns. `what` names the file in errors ("log file"). Returns the
// descriptor (close-on-exec, blocking), which the caller owns. A file this user already
// has keeps its mode.
// Errors (kInvalidArgument: the path must change, not the call be retried): a link, not a
// regular file, another user's file; kIoError for anything else open(2) says. Each names
// the path and says what to do.
Result<int> OpenOwnFile(const std::string& path, int flags, std::string_view what);

// Ok when `path` does not exist, or is a regular file (not a link) that this effective user
// owns; else the error OpenOwnFile would give. For files another library opens by name
// after this check (SQLite's -wal, -shm and -journal files).
Status CheckOwnFileIfPresent(const std::string& path, std::string_view what);

}  // namespace bakeoff::protocol
