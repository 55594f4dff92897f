// Adaptive repeats' decisions from the trials' outcomes (docs/statistics.md, "Adaptive
// repeats"): each comparison of the answer walked pair by pair with the sequential rule
// (RepeatPairs, SequentialWalk in statistics.h). The coordinator walks it to cancel the
// queued trials of variants whose comparisons all stopped; the report walks it to say
// what stopped and what that saved. One pure function of the outcomes, so both, and a
// restarted coordinator, decide the same.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "experiments/spec/answer_comparisons.h"
#include "metrics/report/statistics.h"

namespace bakeoff::metrics {

// How the reason of a trial that adaptive repeats cancelled begins (the coordinator
// writes it, the report counts those trials as not run: docs/statistics.md).
inline constexpr char kAdaptiveRepeatsReason[] = "adaptive repeats:";

// One trial as adaptive repeats see it.
struct RepeatTrial {
  std::string variant_key;
  int64_t repeat = 0;  // 0-based; trials outside [0, max_pairs) are not looked at
  bool finished = false;
  // The slowest rank's tokens/s when the trial succeeded with a positive figure.
  std::optional<double> tokens_per_s;
};

struct AdaptiveWalk {
  // Per variant, the decisions of the comparisons it is a side of, in comparison order
  // (VariantDecision makes them one).
  std::map<std::string, std::vector<SequentialDecision>> decisions;
  int answered = 0;  // comparisons whose walk stopped
};

AdaptiveWalk WalkComparisons(const std::vector<spec::AnswerComparison>& comparisons,
                             const std::vector<RepeatTrial>& trials, const SequentialDesign& design);

}  // namespace bakeoff::metrics
