// HostClaims: what a worker holds on its host against every other Bakeoff worker there
// (docs/sweep.md, "Isolation"): its CPUs, so that two workers started by hand on one host
// never pin ranks to the same cores, and its window of rendezvous-store ports, so that
// two sweeps on one host never pick the same port. Each claim is a lock file in a
// host-wide directory held with flock(2) for the claimer's life: a worker that dies,
// even by SIGKILL, releases its claims at once, and there is no stale state to clean.
// The descriptors are close-on-exec: rank processes never inherit a claim.
// Local users (security review 2026-12-07, A10): the directory is created 0755 and its
// files 0600 (flock needs only a read descriptor: a file another user could open, that
// user could hold), and a directory that belongs to another user (not root), or that others
// may write, is refused with a message naming BAKEOFF_HOST_LOCK_DIR, so no other user
// can hold, plant or replace a claim; a claim file another user planted is removed and
// made anew. A holder's text is printed escaped (printable ASCII only, 100 bytes).
// So claims interlock among the workers of one user (and root's with its own): another
// user's worker is refused root's directory and names one of its own
// (BAKEOFF_HOST_LOCK_DIR).
// Thread-safety: a value filled once at start (WorkerConfig::Finalize), then read-only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "protocol/messages.h"
#include "protocol/status.h"

namespace bakeoff::worker {

class HostClaims {
 public:
  // The host-wide directory: $BAKEOFF_HOST_LOCK_DIR, else /run/lock/bakeoff (where
  // /run/lock exists), else /tmp/bakeoff-locks. "off" claims no CPUs and no uids: test
  // suites that start many workers side by side on purpose (and docs/cli.md says so).
  // Store ports are claimed even then (ClaimStorePorts).
  static std::string DefaultDirectory();

  explicit HostClaims(std::string directory);
  HostClaims(const HostClaims&) = delete;
  HostClaims& operator=(const HostClaims&) = delete;
  ~HostClaims();

  bool enabled() const { return directory_ != "off"; }
  const std::string& directory() const { return directory_; }

  // Claims `cpus` for this worker alone. When `all_required` (the operator named them
  // with --cpus) every one must be free; otherwise *cpus narrows to the free ones and at
  // least one must be. `shared` (--share-cores) takes shared claims and never fails, so
  // that a worker wanting the CPUs alone sees them held. An error names the CPUs held
  // and the process holding them.
  Status ClaimCpus(std::vector<int>* cpus, bool all_required, bool shared);

  // Claims the first `ports` store ports of *range (in blocks of kPortBlock, the same
  // blocks for every worker whatever its range) that no other worker holds, and narrows
  // *range to them. An error when no block of the range is free.
  // Also when claims are "off": two trials whose rank 0s bind one port share a
  // rendezvous (a rank joins the other trial's) and DeepSpeed's shared-memory segments
  // (named after the port), so two test suites side by side failed (issue 51). Off,
  // the ports are claimed in the default directory without $BAKEOFF_HOST_LOCK_DIR, or,
  // when that one is another user's, in /tmp/bakeoff-locks-UID.
  static constexpr int kPortBlock = 10;
  Status ClaimStorePorts(protocol::PortRange* range, int ports);

  // Claims uids first..first+count-1 (--rank-uids) for this worker alone: a worker ends
  // every process of a uid when an attempt ends, so two workers must never share one.
  // An error names a uid held and its holder.
  Status ClaimUids(unsigned first, int count);

 private:
  // Locks `name` in the directory; false when another process holds it (*holder then
  // says who, when it wrote its pid). Errors other than "held" are returned as status.
  Result<bool> Lock(const std::string& name, bool shared, std::string* holder);
  // Gives back every claim taken after the first `first`.
  void ReleaseFrom(std::size_t first);
  // Creates the directory 0755 when it is missing; refuses one that is not a directory,
  // belongs to a user other than root or this one, or that others may write (an older
  // worker's 01777 directory of this user is made 0755).
  Status CheckDirectory();

  std::string directory_;
  bool directory_checked_ = false;
  // Where store ports are claimed while this one is "off".
  std::unique_ptr<HostClaims> port_claims_;
  std::vector<int> fds_;
};

}  // namespace bakeoff::worker
