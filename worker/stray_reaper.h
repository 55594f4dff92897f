// Ends what a rank leaves behind (security review 2026-12-02, finding 6). The worker
// process becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a process that a
// rank started and that outlives its parent (a daemon in a session of its own, the
// child of a rank that exited or was killed at timeout or cancel) becomes the worker's
// child instead of init's. Every `period` the reaper kills and reaps the worker's
// children that are not ranks (KillStrayChildren), so a rank's whole process tree ends
// with the rank. What it does not cover: a tree whose worker itself died (reparented to
// init; the worker's systemd unit or container ends it), and a script that kills the
// worker (same uid; --rank-uids separates them, docs/security.md).
// Thread-safety: StartStrayReaper may be called from any thread, any number of times;
// the first call's executor runs the sweeps.
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <chrono>

#include <boost/asio/any_io_executor.hpp>

#include "protocol/status.h"

namespace bakeoff::worker {

inline constexpr std::chrono::milliseconds kStraySweepPeriod{200};

// Makes this process a child subreaper and starts the sweeps. Idempotent. Not OK when
// the kernel refuses the prctl (strays then outlive their ranks, as before).
Status StartStrayReaper(boost::asio::any_io_executor executor,
                        std::chrono::milliseconds period = kStraySweepPeriod);

}  // namespace bakeoff::worker
