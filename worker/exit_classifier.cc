#include "worker/exit_classifier.h"

#include <algorithm>
#include <csignal>
#include <cstring>

#include "protocol/error_cause.h"
#include "protocol/trainer_exit.h"

namespace bakeoff::worker {

using protocol::Outcome;

std::optional<Outcome> OutcomeForExitCode(int exit_code) { return protocol::OutcomeForTrainerExit(exit_code); }

namespace {

// " (full text in PATH)", or "" without a log.
std::string LogPointer(const RankEnd& r) {
  return r.log_path.empty() ? "" : " (full text in " + r.log_path + ")";
}

// ": its last stderr lines: ..." when the rank wrote any, else "".
std::string StderrTail(const RankEnd& r) {
  return r.stderr_tail.empty() ? "" : "; its last stderr lines: " + r.stderr_tail;
}

std::string Describe(const RankEnd& r) {
  if (r.signal != 0) {
    const char* name = strsignal(r.signal);
    return "rank " + std::to_string(r.rank) + " killed by signal " + std::to_string(r.signal) +
           (name ? std::string(" (") + name + ")" : std::string());
  }
  return "rank " + std::to_string(r.rank) + " exited with code " + std::to_string(r.exit_code);
}

}  // namespace

Classification ClassifyAttempt(const std::vector<RankEnd>& ranks, bool timed_out, bool cancelled,
                               const std::string& cancel_reason) {
  if (cancelled) {
    return {Outcome::kCancelled, cancel_reason.empty() ? "cancelled" : cancel_reason};
  }
  if (timed_out) return {Outcome::kTimeout, "the trial ran past its timeout; its process group was killed"};

  std::vector<const RankEnd*> ordered;
  for (const auto& r : ranks) ordered.push_back(&r);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const RankEnd* a, const RankEnd* b) { return a->end_order < b->end_order; });

  // 1. The earliest error event decides: later ranks usually fail as a consequence.
  for (const RankEnd* r : ordered) {
    if (!r->error_kind) continue;
    Outcome outcome = Outcome::kFailed;
    if (*r->error_kind == "oom") outcome = Outcome::kOom;
    else if (*r->error_kind == "unsupported") outcome = Outcome::kUnsupported;
    else if (*r->error_kind == "diverged") outcome = Outcome::kDiverged;
    else if (*r->error_kind == "infrastructure") outcome = Outcome::kLost;  // retried, not the variant's
    const bool infrastructure = outcome == Outcome::kLost;
    const std::string cause = protocol::ErrorCause(r->error_message);
    std::string reason = "rank " + std::to_string(r->rank) + ": " + (cause.empty() ? *r->error_kind : cause);
    if (infrastructure) reason = "infrastructure: " + reason;
    return {outcome, reason + LogPointer(*r), infrastructure};
  }
  // 2. No event: the first rank that ended badly, by its exit status.
  for (const RankEnd* r : ordered) {
    if (r->killed_by_supervisor) continue;
    if (r->signal == SIGKILL) {
      return {Outcome::kOom, Describe(*r) + " without an error event (presumed out of memory)" + LogPointer(*r)};
    }
    if (r->signal != 0) return {Outcome::kFailed, Describe(*r) + StderrTail(*r) + LogPointer(*r)};
    if (r->exit_code != 0) {
      auto outcome = OutcomeForExitCode(r->exit_code).value_or(Outcome::kFailed);
      return {outcome, Describe(*r) + " without an error event" + StderrTail(*r) + LogPointer(*r)};
    }
  }
  bool any_killed = std::any_of(ranks.begin(), ranks.end(),
                                [](const RankEnd& r) { return r.killed_by_supervisor; });
  if (any_killed) return {Outcome::kFailed, "ranks were stopped by the worker"};
  if (ranks.empty()) return {Outcome::kFailed, "no rank ran"};
  for (const auto& r : ranks) {
    if (r.rank == 0 && !r.summary_seen) {
      return {Outcome::kFailed,
              "rank 0 exited with code 0 but wrote no summary event (a script reports one with the "
              "reporting library's run.summary(), docs/executors.md)" + StderrTail(r) + LogPointer(r)};
    }
  }
  return {Outcome::kSucceeded, ""};
}

}  // namespace bakeoff::worker
