// Adaptive repeats carried out (docs/statistics.md, "Adaptive repeats"): after a trial of
// an adaptive sweep finishes, the answer's comparisons are walked on the stored outcomes
// (metrics/report/adaptive_repeats.h, the same walk the report runs) and the queued
// trials of every variant whose comparisons have all stopped are cancelled, in the store
// first and then in the trial table, with the walk's reason.
// Thread-safety: call on the coordinator's executor, which owns the table.
#pragma once

#include <cstdint>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/trial_table.h"
#include "metrics/store/results_store.h"
#include "protocol/log.h"

namespace bakeoff::coordinator {

// Walks sweep `sweep_id` when it is held, adaptive and neither done nor cancelled;
// records how many comparisons are answered (SweepEntry::comparisons_answered) and
// returns how many queued trials it cancelled. A store that cannot be read leaves
// everything as it was (the next finished trial walks again); a trial the store will not
// cancel stays queued. What it decides is logged to `log`.
int ApplyAdaptiveStops(std::int64_t sweep_id, TrialTable& table, metrics::ResultsStore& store,
                       CoordinatorMetrics& metrics, const logging::Logger& log);

}  // namespace bakeoff::coordinator
