#include "metrics/report/adaptive_repeats.h"

#include <algorithm>

namespace bakeoff::metrics {

AdaptiveWalk WalkComparisons(const std::vector<spec::AnswerComparison>& comparisons,
                             const std::vector<RepeatTrial>& trials, const SequentialDesign& design) {
  const auto pairs = static_cast<std::size_t>(design.max_pairs);
  std::map<std::string, std::vector<RepeatOutcome>> by_variant;
  for (const RepeatTrial& t : trials) {
    if (t.repeat < 0 || t.repeat >= design.max_pairs) continue;
    std::vector<RepeatOutcome>& repeats = by_variant[t.variant_key];
    repeats.resize(pairs);
    repeats[static_cast<std::size_t>(t.repeat)] = RepeatOutcome{t.finished, t.tokens_per_s};
  }
  auto repeats_of = [&](const std::string& key) {
    auto it = by_variant.find(key);
    return it != by_variant.end() ? it->second : std::vector<RepeatOutcome>(pairs);
  };
  AdaptiveWalk walk;
  for (const spec::AnswerComparison& c : comparisons) {
    SequentialDecision decision =
        SequentialWalk(RepeatPairs(repeats_of(c.variant_key), repeats_of(c.counterpart_key)), design);
    walk.decisions[c.variant_key].push_back(decision);
    walk.decisions[c.counterpart_key].push_back(decision);
    walk.answered += decision.stopped() ? 1 : 0;
  }
  return walk;
}

std::vector<RepeatTrial> RepeatTrials(const std::vector<TrialResult>& trials) {
  std::vector<RepeatTrial> repeats;
  repeats.reserve(trials.size());
  for (const TrialResult& r : trials) {
    RepeatTrial& t = repeats.emplace_back();
    t.variant_key = r.trial.variant_key;
    t.repeat = r.trial.repeat;
    t.finished = r.trial.state == TrialState::kFinished;
    if (r.trial.outcome != Outcome::kSucceeded) continue;
    for (const SummaryRecord& summary : r.summaries) {
      const std::optional<double>& tps = summary.figures.tokens_per_s;
      if (tps && *tps > 0) t.tokens_per_s = t.tokens_per_s ? std::min(*t.tokens_per_s, *tps) : *tps;
    }
  }
  return repeats;
}

std::vector<VariantStop> StoppedVariants(const AdaptiveWalk& walk,
                                         const std::vector<spec::AnswerComparison>& comparisons,
                                         const std::map<std::string, std::string>& counterpart_of,
                                         const SequentialDesign& design) {
  std::vector<VariantStop> stops;
  for (const auto& [key, mine] : walk.decisions) {
    const SequentialDecision decision = VariantDecision(mine);
    auto counterpart = counterpart_of.find(key);
    if (!decision.stopped() || counterpart == counterpart_of.end()) continue;
    // "stopped after" for a variant compared once, with its counterpart; otherwise
    // (a baseline, a variant in several comparisons) the binding comparison's pairs.
    const bool single = mine.size() == 1 && counterpart->second != key &&
                        std::any_of(comparisons.begin(), comparisons.end(),
                                    [&](const spec::AnswerComparison& c) { return c.variant_key == key; });
    stops.push_back({key, std::string(kAdaptiveRepeatsReason) + " " +
                              (single ? "stopped" : "every comparison with this variant stopped") + " after " +
                              std::to_string(decision.pairs) + " of " + std::to_string(design.max_pairs) +
                              " pairs (" + SequentialStopName(decision.stop) + ")"});
  }
  return stops;
}

}  // namespace bakeoff::metrics
