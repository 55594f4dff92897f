// Turns how a trial attempt's rank processes ended into one outcome and a reason, by
// the rules of docs/trainer.md: the trainer's `error` event is authoritative; without
// one, the exit code says what happened; a SIGKILL nobody sent (the kernel's OOM
// killer) is `oom`. A reason names the rank, the cause (the first line of its error,
// without a backtrace: protocol/error_cause.h) and where the rank's full log is. Pure, so
// every rule is unit-tested without processes.
// Thread-safety: pure function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "protocol/outcome.h"

namespace bakeoff::worker {

// How much of a rank's stderr a reason quotes when the rank wrote no error event.
inline constexpr int kStderrTailLines = 3;
inline constexpr std::size_t kStderrTailBytes = 400;

struct RankEnd {
  int rank = 0;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // 0 when it exited
  // From the rank's event stream.
  std::optional<std::string> error_kind;  // kind of its first `error` event
  std::string error_message;
  // The rank's log (its stderr) on this worker, which the reason points to; "" = none.
  std::string log_path;
  bool summary_seen = false;
  // The last lines of its stderr (at most kStderrTailLines, kStderrTailBytes), joined by
  // " | ": a crash without an error event shows its cause in the reason.
  std::string stderr_tail;
  // The supervisor itself killed it (timeout, cancel, or a sibling rank failed).
  bool killed_by_supervisor = false;
  // Order in which the rank ended or reported its error (lower = earlier).
  int end_order = 0;
};

struct Classification {
  protocol::Outcome outcome = protocol::Outcome::kFailed;
  std::string reason;
  // A `lost` that Bakeoff's machinery caused before the variant ran (a rank's error kind
  // "infrastructure": rank 0's store port taken): retried without using up max_attempts.
  bool infrastructure = false;
};

// `timed_out` and `cancelled` are the supervisor's own decisions and win over anything
// the ranks reported (a rank's error written while being killed is a consequence).
Classification ClassifyAttempt(const std::vector<RankEnd>& ranks, bool timed_out,
                               bool cancelled, const std::string& cancel_reason = "");

// The outcome a trainer exit code stands for (docs/trainer.md), nullopt when unknown.
std::optional<protocol::Outcome> OutcomeForExitCode(int exit_code);

}  // namespace bakeoff::worker
