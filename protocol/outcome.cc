#include "protocol/outcome.h"

namespace bakeoff::protocol {

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kSucceeded: return "succeeded";
    case Outcome::kOom: return "oom";
    case Outcome::kUnsupported: return "unsupported";
    case Outcome::kDiverged: return "diverged";
    case Outcome::kFailed: return "failed";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kLost: return "lost";
    case Outcome::kCancelled: return "cancelled";
  }
  return "failed";
}

std::optional<Outcome> ParseOutcome(std::string_view name) {
  for (Outcome o : kAllOutcomes) {
    if (name == OutcomeName(o)) return o;
  }
  return std::nullopt;
}

}  // namespace bakeoff::protocol
