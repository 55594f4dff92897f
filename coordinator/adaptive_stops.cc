#include "coordinator/adaptive_stops.h"

#include <map>
#include <string>
#include <vector>

#include "metrics/report/adaptive_repeats.h"

namespace bakeoff::coordinator {

int ApplyAdaptiveStops(std::int64_t sweep_id, TrialTable& table, metrics::ResultsStore& store,
                       CoordinatorMetrics& metrics, const logging::Logger& log) {
  SweepEntry* sweep = table.FindSweep(sweep_id);
  if (sweep == nullptr || !sweep->adaptive || sweep->done || sweep->cancelled) return 0;
  auto results = store.Reader()->ListTrialResults(sweep_id);
  if (!results.ok()) {
    log.Info("adaptive repeats not evaluated", {{"sweep", sweep_id}, {"error", results.status().ToString()}});
    return 0;
  }
  std::map<std::string, std::string> counterpart_of;
  for (const auto& [key, variant] : sweep->variants) counterpart_of[key] = variant.counterpart_key;
  // Lockstep pairs stand on their per-step ratios, as in the report (docs/statistics.md).
  std::vector<metrics::RepeatTrial> repeats;
  if (sweep->lockstep) {
    auto steps = store.Reader()->MeasuredSteps(sweep_id);
    if (!steps.ok()) {
      log.Info("adaptive repeats not evaluated",
               {{"sweep", sweep_id}, {"error", steps.status().ToString()}});
      return 0;
    }
    repeats = metrics::LockstepRepeatTrials(*results, *steps, counterpart_of);
  } else {
    repeats = metrics::RepeatTrials(*results);
  }
  // Each comparison of the answer, walked; a variant stops once every comparison it is a
  // side of has stopped (the report walks the same).
  metrics::AdaptiveWalk walk = metrics::WalkComparisons(sweep->comparisons, repeats, *sweep->adaptive);
  sweep->comparisons_answered = walk.answered;
  int total = 0;
  for (const metrics::VariantStop& stop :
       metrics::StoppedVariants(walk, sweep->comparisons, counterpart_of, *sweep->adaptive)) {
    int cancelled = 0;
    for (TrialEntry* trial : table.QueuedTrialsOf(*sweep, stop.variant_key)) {
      auto stored = [&] {
        CoordinatorMetrics::StoreWriteTimer timer(metrics, "cancel_trials");
        return store.FinishTrial(trial->id, trial->machine.attempts_used(), protocol::Outcome::kCancelled, stop.reason);
      }();
      if (!stored.ok() || !stored->applied) {
        log.Warning("cannot cancel a trial", {{"trial", trial->id}, {"reason", stop.reason},
                                              {"error", stored.ok() ? "the store refused it" : stored.status().ToString()}});
        continue;
      }
      trial->machine.Cancel();
      ++cancelled;
    }
    if (cancelled > 0) {
      log.Info("adaptive stop: queued trials cancelled",
               {{"sweep", sweep_id}, {"variant", stop.variant_key}, {"reason", stop.reason}, {"cancelled", cancelled}});
    }
    total += cancelled;
  }
  return total;
}

}  // namespace bakeoff::coordinator
