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
    repeats[static_cast<std::size_t>(t.repeat)] =
        RepeatOutcome{t.finished, t.tokens_per_s, t.lockstep_sides, t.steps, t.tokens_per_step};
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
    walk.by_comparison.push_back(decision);
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

std::map<std::string, int> LockstepSides(const std::map<std::string, std::string>& counterpart_of) {
  std::map<std::string, int> group_size;
  auto group = [](const std::string& key, const std::string& counterpart) {
    return counterpart.empty() ? key : counterpart;
  };
  for (const auto& [key, counterpart] : counterpart_of) ++group_size[group(key, counterpart)];
  std::map<std::string, int> sides;
  for (const auto& [key, counterpart] : counterpart_of) sides[key] = group_size[group(key, counterpart)];
  return sides;
}

std::vector<RepeatTrial> LockstepRepeatTrials(const std::vector<TrialResult>& trials,
                                              const std::vector<MeasuredStep>& steps,
                                              const std::map<std::string, std::string>& counterpart_of) {
  std::vector<RepeatTrial> repeats = RepeatTrials(trials);
  const std::map<std::string, int> sides = LockstepSides(counterpart_of);
  std::map<int64_t, std::vector<TurnStep>> steps_of;
  for (const MeasuredStep& s : steps) {
    steps_of[s.trial_id].push_back(TurnStep{
        s.step_s, s.tokens ? std::optional<double>(static_cast<double>(*s.tokens)) : std::nullopt, s.turn});
  }
  for (std::size_t i = 0; i < trials.size(); ++i) {
    RepeatTrial& t = repeats[i];
    if (!t.tokens_per_s) continue;
    auto group = sides.find(t.variant_key);
    t.lockstep_sides = group == sides.end() ? 0 : group->second;
    auto mine = steps_of.find(trials[i].trial.id);
    if (mine != steps_of.end()) t.steps = std::move(mine->second);
    // The trial's tokens per step: the summaries' own, else the slowest rank's tokens/s
    // times its median step (how the trainer computes tokens/s).
    std::optional<double> slowest_step_s;
    for (const SummaryRecord& summary : trials[i].summaries) {
      const protocol::SummaryEvent& f = summary.figures;
      if (f.tokens_per_step && *f.tokens_per_step > 0 && !t.tokens_per_step) t.tokens_per_step = f.tokens_per_step;
      if (f.tokens_per_s && *f.tokens_per_s == *t.tokens_per_s) slowest_step_s = f.step_s_median;
    }
    if (!t.tokens_per_step && slowest_step_s && *slowest_step_s > 0) {
      t.tokens_per_step = *t.tokens_per_s * *slowest_step_s;
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
