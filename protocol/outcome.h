// Trial outcomes shared by the worker (which classifies exits) and the coordinator
// (which stores them and decides on retries). The names are the wire and SQL spelling.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string_view>

namespace bakeoff::protocol {

enum class Outcome {
  kSucceeded,
  kOom,          // device or host memory exhausted
  kUnsupported,  // the variant cannot run on this hardware or build
  kDiverged,     // loss not finite
  kFailed,       // workload error; deterministic, never retried
  kTimeout,      // the trial ran past its limit and was killed
  kLost,         // the worker vanished; the only outcome that is retried
  kCancelled,
};

const char* OutcomeName(Outcome outcome);
std::optional<Outcome> ParseOutcome(std::string_view name);

}  // namespace bakeoff::protocol
