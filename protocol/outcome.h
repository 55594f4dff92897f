// Trial outcomes shared by the worker (which classifies exits) and the coordinator
// (which stores them and decides on retries), and the results store (metrics/), which
// uses this very enum. The names are the wire and SQL spelling. Part of the light core
// library (bakeoff_trainer_event: no Asio), so metrics/ links it.
// Thread-safety: pure functions.
#pragma once

#include <array>
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

// Every outcome, in the order above.
inline constexpr std::array<Outcome, 8> kAllOutcomes = {
    Outcome::kSucceeded, Outcome::kOom,     Outcome::kUnsupported, Outcome::kDiverged,
    Outcome::kFailed,    Outcome::kTimeout, Outcome::kLost,        Outcome::kCancelled};

const char* OutcomeName(Outcome outcome);
std::optional<Outcome> ParseOutcome(std::string_view name);

}  // namespace bakeoff::protocol
