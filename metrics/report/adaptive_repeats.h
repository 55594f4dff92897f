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

#include "experiments/sweep/answer_comparisons.h"
#include "metrics/report/statistics.h"
#include "metrics/store/store_records.h"

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
  // Lockstep sweeps (RepeatOutcome): the sides of the trial's group, its measured steps
  // and tokens per step, so that each pair's log ratio is its lockstep estimate
  // (EstimatePair), the one the report's interval uses.
  int lockstep_sides = 0;
  std::vector<TurnStep> steps;
  std::optional<double> tokens_per_step;
};

struct AdaptiveWalk {
  // Per variant, the decisions of the comparisons it is a side of, in comparison order
  // (VariantDecision makes them one).
  std::map<std::string, std::vector<SequentialDecision>> decisions;
  // Each comparison's own decision, in the order of the comparisons walked.
  std::vector<SequentialDecision> by_comparison;
  int answered = 0;  // comparisons whose walk stopped
};

AdaptiveWalk WalkComparisons(const std::vector<spec::AnswerComparison>& comparisons,
                             const std::vector<RepeatTrial>& trials, const SequentialDesign& design);

// The stored trials as the walk sees them: finished per the trial's state, and the
// slowest rank's tokens/s (of the typed summaries) when it succeeded.
std::vector<RepeatTrial> RepeatTrials(const std::vector<TrialResult>& trials);

// The number of sides of each variant's lockstep group (docs/lockstep.md): the variants
// that share its baseline counterpart (`counterpart_of` maps each variant's key to its
// counterpart's, itself for a baseline; a variant mapped to "" is a group of its own).
// An upper bound on the sides taking turns at any time (a side that ended leaves).
std::map<std::string, int> LockstepSides(const std::map<std::string, std::string>& counterpart_of);

// For a lockstep sweep: as above, each succeeded trial with its measured steps (`steps`:
// ResultsReader::MeasuredSteps of the sweep, the report's own), its tokens per step (its
// summaries' tokens_per_step, else tokens/s x median step time of the slowest rank) and
// its group's sides (LockstepSides(counterpart_of)), so that the walk's pair log ratios
// are the report's lockstep estimates.
std::vector<RepeatTrial> LockstepRepeatTrials(const std::vector<TrialResult>& trials,
                                              const std::vector<MeasuredStep>& steps,
                                              const std::map<std::string, std::string>& counterpart_of);

// A variant whose comparisons have all stopped, and the reason its queued trials are
// cancelled with (it begins with kAdaptiveRepeatsReason).
struct VariantStop {
  std::string variant_key;
  std::string reason;
};
// Every variant of `walk` whose decision (VariantDecision) stopped, in key order.
// `counterpart_of` maps each variant's key to its baseline counterpart's (itself for a
// baseline); variants it does not name are left alone. The reason says "stopped after
// N of M pairs" for a variant compared once, with its counterpart, and "every
// comparison with this variant stopped" for a baseline or a variant in several.
std::vector<VariantStop> StoppedVariants(const AdaptiveWalk& walk,
                                         const std::vector<spec::AnswerComparison>& comparisons,
                                         const std::map<std::string, std::string>& counterpart_of,
                                         const SequentialDesign& design);

}  // namespace bakeoff::metrics
