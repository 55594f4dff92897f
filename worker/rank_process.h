// Starting and stopping rank processes with fork+exec: every rank of a trial on this
// worker joins one process group, so that a timeout or cancel kills the whole group
// (and anything the trainer itself started) with one signal. The child's stdout is a
// pipe (the event stream); its stderr is another pipe, which the worker drains into the
// rank's capped log (worker/rank_log.h). No shell is involved.
// Thread-safety: the functions are reentrant; SpawnRankProcess must not race with
// another thread's fork of descriptors it does not own (all pipes are O_CLOEXEC).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "protocol/status.h"

namespace bakeoff::worker {

struct SpawnRequest {
  std::string executable;
  std::vector<std::string> args;         // argv[1..]
  std::vector<std::string> environment;  // complete environment, KEY=VALUE
  std::string working_dir;
  // true: the child's stderr is a pipe, read at SpawnedProcess::stderr_fd (the worker
  // drains it into a RankLog: a file the child wrote itself could grow without bound);
  // false: inherited.
  bool capture_stderr = false;
  pid_t process_group = 0;               // 0: lead a new group; else join this one
  std::vector<int> cpus;                 // the child's CPU affinity; empty: inherited
  // false: events are the child's stdout (the native trainer). true: events go to
  // descriptor kEventsFd (BAKEOFF_EVENTS_FD) and the child's stdout joins its stderr
  // (the log), so a script's own prints cannot corrupt its events (allowlisted commands).
  bool events_on_separate_fd = false;
  // The uid (and gid, the same number, no supplementary groups) the child runs as;
  // nullopt: the worker's own. Needs root (worker --rank-uids, docs/security.md).
  std::optional<uid_t> run_as;
  // true: the child gets one end of a Unix stream socket at descriptor kTurnFd, its
  // lockstep turn channel (docs/lockstep.md); the worker keeps the other.
  bool turn_channel = false;
  // Directories bound over /dev/shm and /tmp in a mount namespace of the child's own
  // (docs/security.md, "Private /tmp and /dev/shm"): the ranks of one attempt, given the
  // same directories, share them; no other attempt sees them, so nothing a script left
  // there (a DeepSpeed shared-memory segment named after the store's port, a planted
  // file) reaches a later attempt. REQUIRES: PrivateMountsAvailable(); "" leaves the
  // path as the worker's.
  std::string private_shm_dir;
  std::string private_tmp_dir;
};

// Whether this process may give a child a mount namespace of its own (root with
// CAP_SYS_ADMIN, not in a locked-down container): probed once by a short-lived child.
bool PrivateMountsAvailable();

// The descriptor a command's events are written to (its BAKEOFF_EVENTS_FD).
inline constexpr int kEventsFd = 3;
// The descriptor of a rank's lockstep turn channel (its BAKEOFF_TURN_FD).
inline constexpr int kTurnFd = 4;

struct SpawnedProcess {
  pid_t pid = -1;
  pid_t process_group = -1;
  int stdout_fd = -1;  // read end of the child's event stream, O_CLOEXEC|O_NONBLOCK; caller owns it
  int stderr_fd = -1;  // with capture_stderr: read end of its stderr, O_CLOEXEC|O_NONBLOCK; caller owns it
  int turn_fd = -1;    // with turn_channel: the worker's end of the turn socket, O_CLOEXEC; caller owns it
};

Result<SpawnedProcess> SpawnRankProcess(const SpawnRequest& request);

struct ProcessExit {
  int exit_code = -1;  // -1 when signalled
  int signal = 0;
};

// Reaps `pid` if it has ended; nullopt while it runs. An error when it is not our child.
Result<std::optional<ProcessExit>> TryReap(pid_t pid);

// A child of this process that is not a rank it spawned, killed by KillStrayChildren.
struct KilledStray {
  pid_t pid = -1;
  std::string name;  // its /proc comm, for the log
  std::size_t descendants = 0;  // processes below it, killed with it
};

// Kills (SIGKILL) every child of this process that is not a rank spawned by
// SpawnRankProcess and not yet reaped, with its whole tree of descendants (stopped
// first, so that none forks a successor meanwhile), and reaps those killed before. In a
// worker that is a child subreaper (worker/stray_reaper.h) these are what ranks left
// behind. A process that runs rank processes starts no other children (this would kill
// them).
std::vector<KilledStray> KillStrayChildren();

// Kills (SIGKILL) every process running as `uid`, wherever it is in the process tree,
// by a helper child that takes the uid and signals all it may (kill(-1)) until none is
// left. Needs root. For --rank-uids: a uid's attempt has ended, nothing of it may stay.
Status KillEveryProcessOf(uid_t uid);

// Removes every entry directly in `dir` (and what is under it) that `uid` owns, never
// following a link. For --rank-uids without private mounts: what a uid's attempt left in
// /tmp and /dev/shm does not reach the uid's next attempt (another sweep's).
Status RemoveEntriesOwnedBy(uid_t uid, const std::string& dir);

// Gives `path` and everything under it to uid:gid, never following a link (a rank may
// have planted one). For --rank-uids: a trial's directory to its uid, and back to root.
Status ChownTree(const std::string& path, uid_t uid, gid_t gid);

// Sends `signal` to every process of the group; a group already gone is not an error.
void SignalProcessGroup(pid_t process_group, int signal);

// This process's environment with `overrides` (KEY=VALUE) replacing same-named entries.
std::vector<std::string> EnvironmentWith(const std::vector<std::string>& overrides);

}  // namespace bakeoff::worker
