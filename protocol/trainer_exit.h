// The trainer's exit codes (docs/trainer.md, "Exit codes"), written once: the native
// trainer exits with them, the worker classifies a rank's exit by them, and the Python
// workloads' bakeoff_report.EXIT_CODES holds the same numbers (TrainerExitTest checks
// it). Header-only and dependency-free (the trainer-only build uses it).
// Thread-safety: constants and pure functions.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "protocol/outcome.h"

namespace bakeoff::protocol {

struct TrainerExit {
  int code;
  std::string_view error_kind;  // the `error` event's kind that exits with it ("" for 0)
  Outcome outcome;              // what the worker makes of a rank that exited with it
};

inline constexpr std::array<TrainerExit, 6> kTrainerExits = {{
    {0, "", Outcome::kSucceeded},
    {1, "failed", Outcome::kFailed},  // a workload error
    {2, "config", Outcome::kFailed},  // invalid configuration or flags (event kind `failed`)
    {3, "oom", Outcome::kOom},
    {4, "unsupported", Outcome::kUnsupported},
    {5, "diverged", Outcome::kDiverged},
}};

// The exit code of an `error` event of `kind`: 1 (failed) for a kind not in the table.
constexpr int TrainerExitForErrorKind(std::string_view kind) {
  for (const TrainerExit& e : kTrainerExits) {
    if (!e.error_kind.empty() && e.error_kind == kind) return e.code;
  }
  return 1;
}

// The outcome of a rank that exited with `code`; nullopt for a code not in the table.
constexpr std::optional<Outcome> OutcomeForTrainerExit(int code) {
  for (const TrainerExit& e : kTrainerExits) {
    if (e.code == code) return e.outcome;
  }
  return std::nullopt;
}

}  // namespace bakeoff::protocol
