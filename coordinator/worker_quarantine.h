// WorkerQuarantine: which workers get no new placements for a while because their
// attempts end within seconds of starting (security review 2026-12-07, A2: a worker that
// ended every trial `oom` within 3 s took all six of a sweep while an honest worker
// idled). Pure policy with the time given in: no I/O, no clock of its own.
//
// The policy (docs/reliability.md, "Quarantine"):
//  - A worker's streak counts the attempts it ended itself (attempt_finished) with an
//    outcome other than succeeded or cancelled, within `window` of their assignment.
//  - A success, or any attempt that ran `window` or longer, ends the streak and the
//    back-off; a success also ends a quarantine it comes in; a cancelled attempt (the user's or the coordinator's doing) changes
//    nothing.
//  - `attempts` such endings in a row put the worker in quarantine for `period`, doubled
//    for each quarantine since its last good attempt, up to `max_period`. Then it takes
//    placements again with a new streak. Its name keeps the quarantine when it
//    re-registers (a reconnect does not clear it).
//  - What a quarantined worker ended is not undone: its attempts were recorded with the
//    outcome it reported, retried or not as the trial state machine's rules say.
// Thread-safety: not thread-safe; the coordinator's io thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "protocol/clock.h"
#include "protocol/outcome.h"

namespace bakeoff::coordinator {

struct QuarantinePolicy {
  // Endings in a row that quarantine a worker; 0: never quarantine.
  std::size_t attempts = 3;
  // An attempt ending sooner than this after its assignment is quick.
  std::chrono::milliseconds window{10'000};
  // The first quarantine's length; each further one since the last good attempt doubles
  // it, up to max_period.
  std::chrono::milliseconds period{300'000};
  std::chrono::milliseconds max_period{3'600'000};
};

class WorkerQuarantine {
 public:
  explicit WorkerQuarantine(QuarantinePolicy policy = {}) : policy_(policy) {}

  // `worker` ended an attempt with `outcome`, `ran` after it was assigned (unknown, as
  // after a coordinator restart: nullopt, never quick). Returns the end of the
  // quarantine this ending starts, or nullopt when it starts none.
  std::optional<Clock::TimePoint> OnAttemptEnded(const std::string& worker, protocol::Outcome outcome,
                                                 std::optional<std::chrono::milliseconds> ran,
                                                 Clock::TimePoint now);

  // Whether `worker` takes no new placements at `now`.
  bool Quarantined(const std::string& worker, Clock::TimePoint now) const;
  // The end of its quarantine, when it is in one at `now`.
  std::optional<Clock::TimePoint> QuarantinedUntil(const std::string& worker, Clock::TimePoint now) const;
  // Its quick endings in a row so far.
  std::size_t Streak(const std::string& worker) const;

  // Drops what is kept about a worker the registry forgot.
  void Forget(const std::string& worker) { workers_.erase(worker); }
  const QuarantinePolicy& policy() const { return policy_; }

 private:
  struct State {
    std::size_t streak = 0;
    int quarantines = 0;  // since the last good attempt: the back-off's exponent
    std::optional<Clock::TimePoint> until;
  };
  QuarantinePolicy policy_;
  std::map<std::string, State> workers_;
};

}  // namespace bakeoff::coordinator
