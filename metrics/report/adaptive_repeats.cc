#include "metrics/report/adaptive_repeats.h"

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

}  // namespace bakeoff::metrics
