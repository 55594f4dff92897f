// The coordinator's in-memory entries of an unfinished sweep (SweepEntry, with its
// variants) and of its trials (TrialEntry, with their placement): plain values that
// TrialTable holds and CoordinatorService decides on; sweep_intake.h builds them from a
// submitted or stored sweep.
// Thread-safety: values; used on the coordinator's executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator/trial_state_machine.h"
#include "experiments/sweep/answer_comparisons.h"
#include "experiments/sweep/variant_config.h"
#include "metrics/report/statistics.h"
#include "protocol/clock.h"
#include "protocol/messages.h"

namespace bakeoff::coordinator {

// The share of one trial's attempt placed on one worker.
struct TrialPart {
  std::string worker_id;
  std::vector<protocol::RankSlot> ranks;
  bool cuda = false;
  // order: lockstep: the attempt is a side of this group; its units are the group's,
  // held until the group's last side ends (WorkerRegistry's shared reservations).
  std::optional<protocol::LockstepSide> lockstep;
  bool finished = false;
  bool reclaimed = true;  // false after a restart until the worker reports it
};

struct TrialEntry {
  std::int64_t id = 0;
  std::int64_t sweep_id = 0;
  std::string variant_key;
  std::int64_t order_index = 0;
  int repeat = 0;  // 0-based; with the counterpart's key it names the trial's pair group
  TrialStateMachine machine;
  std::vector<TrialPart> parts;  // the current attempt's placement
  bool cancel_requested = false;
  std::optional<Clock::TimePoint> reclaim_deadline;
  // The coordinator's own end of the current attempt (trial_timeout + a grace); unset
  // without a timeout. Also a key of TrialTable::attempt_deadlines().
  std::optional<Clock::TimePoint> attempt_deadline;
  // When the trial last entered the queue, until its first rank starts: the start of
  // bakeoff_dispatch_latency_seconds.
  std::optional<Clock::TimePoint> queued_since;
  // When the current attempt was assigned by this process (unset after a restart): how
  // quickly it ended decides a worker's quarantine (worker_quarantine.h).
  std::optional<Clock::TimePoint> assigned_at;
};

struct VariantInfo {
  // Shares the sweep's workload with the other variants (built whole per assignment).
  spec::VariantConfig config;
  int world_size = 1;
  std::string counterpart_key;  // the baseline counterpart; empty when none
  bool is_baseline = false;
  // Varying axis -> value as it appears in keys (spec::CanonicalValue).
  std::map<std::string, std::string> params;
  // The command template the variant runs (its config's command_template); "" = the
  // native trainer. One sweep may compare executors (an `executor` axis).
  std::string CommandTemplate() const {
    const nlohmann::json& name = config["command_template"];
    return name.is_string() ? name.get<std::string>() : std::string();
  }
};

// The pair group of a trial of `variant` (its key is `variant_key`) at `repeat`: the
// baseline counterpart's key and the repeat; "" when the variant has no counterpart.
std::string PairGroup(const std::string& variant_key, const VariantInfo& variant, int repeat);

struct SweepEntry {
  std::int64_t id = 0;
  std::string name;
  std::map<std::string, VariantInfo> variants;
  std::vector<std::int64_t> trial_order;
  std::int64_t timeout_ms = 0;
  int max_attempts = 1;  // the spec's limits.max_attempts (a trial's own may have grown)
  bool cuda = false;
  // order: lockstep (docs/lockstep.md): each pair group's trials are placed together on
  // one worker and take turns; a side may keep the others waiting turn_timeout_ms.
  bool lockstep = false;
  std::int64_t turn_timeout_ms = 300000;
  std::string gpu_type;  // resources.gpu_type ("" any): workers whose GPU model matches
  // Adaptive repeats (docs/sweep.md): the sequential rule's design; every variant has
  // adaptive->max_pairs trials, repeats 0..max-1.
  std::optional<metrics::SequentialDesign> adaptive;
  // The comparisons the sweep's answer reports (spec::AnswerComparisons): adaptive
  // repeats stop a variant once each one it is a side of has stopped.
  std::vector<spec::AnswerComparison> comparisons;
  int comparisons_answered = 0;  // stopped by the sequential rule at its last look
  bool cancelled = false;
  bool done = false;          // every trial finished
  bool state_stored = false;  // the store has it finished or cancelled: evictable
  // Balanced placement (docs/sweep.md, "Placement"): the worker each pair group (the
  // baseline counterpart's key and a repeat: a baseline trial and every variant trial
  // paired with it) was first placed on whole. The group's other trials go there too, so
  // that a worker's speed cancels in each pair's ratio.
  std::map<std::string, std::string> pair_workers;
  // Scan cursors into trial_order: every trial before finished_prefix is finished;
  // none before queued_from is queued (reset to 0 when a trial is requeued).
  std::size_t finished_prefix = 0;
  std::size_t queued_from = 0;
};

// Names `worker_id` the worker of `trial`'s pair group in `sweep` unless the group has one
// already: `trial` was placed whole on that worker (or found so after a restart). A trial
// without a group, or of a variant `sweep` does not hold, names none.
void NamePairWorker(SweepEntry& sweep, const TrialEntry& trial, const std::string& worker_id);

}  // namespace bakeoff::coordinator
