// TrialStateMachine: the life of one trial, decided here and persisted by the results
// store (whose compare-and-set transitions mirror these). States:
//   queued -> assigned -> running -> finished(outcome)
//   assigned|running -> queued          when the attempt is lost and attempts remain
//   queued|assigned|running -> finished when cancelled
// Only `lost` attempts are retried, up to max_attempts (plus what GrantAttempt adds for
// infrastructure failures); every other outcome is final
// (deterministic results: retrying an OOM wastes a node and hides the result). A report
// for an attempt that is not the current one is stale and changes nothing.
// Pure logic. Thread-safety: a value; not thread-safe.
#pragma once

#include <optional>

#include "metrics/store/store_records.h"
#include "protocol/outcome.h"
#include "protocol/status.h"

namespace bakeoff::coordinator {

// The states are the results store's (its trials.state), so a stored trial and its
// machine share one vocabulary.
using metrics::TrialState;
using metrics::TrialStateName;

// Extra attempts a trial may be granted for infrastructure failures (a lost attempt whose
// worker says Bakeoff's own machinery failed before the variant ran): a bound, so that a
// worker that always says so cannot keep a trial going forever (docs/sweep.md, limits).
inline constexpr int kMaxInfrastructureRetries = 3;

class TrialStateMachine {
 public:
  explicit TrialStateMachine(int max_attempts = 1, int attempts_used = 0,
                             TrialState phase = TrialState::kQueued)
      : max_attempts_(max_attempts < 1 ? 1 : max_attempts), attempts_used_(attempts_used), phase_(phase) {}

  // queued -> assigned; returns the new attempt number (1-based).
  Result<int> Assign();
  // assigned -> running for the current attempt; true when it changed the phase.
  bool MarkRunning(int attempt);

  enum class Effect {
    kIgnored,   // stale attempt or already finished: nothing changed
    kRequeued,  // the attempt was lost and another attempt is allowed
    kFinished,  // the trial has its final outcome
  };
  // The current attempt ended with `outcome`.
  Effect Report(int attempt, protocol::Outcome outcome);
  // Any unfinished state -> finished(cancelled).
  Effect Cancel();
  // One more attempt than max_attempts allowed: for an attempt that Bakeoff's own
  // machinery lost before the variant ran (the caller bounds how many).
  void GrantAttempt() { ++max_attempts_; }

  bool IsCurrent(int attempt) const {
    return attempt == attempts_used_ && (phase_ == TrialState::kAssigned || phase_ == TrialState::kRunning);
  }
  TrialState phase() const { return phase_; }
  int attempts_used() const { return attempts_used_; }
  int max_attempts() const { return max_attempts_; }
  std::optional<protocol::Outcome> outcome() const { return outcome_; }

 private:
  int max_attempts_;
  int attempts_used_;
  TrialState phase_;
  std::optional<protocol::Outcome> outcome_;
};

}  // namespace bakeoff::coordinator
