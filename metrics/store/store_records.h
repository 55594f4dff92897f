// The records the results store reads and writes: sweeps, variants, trials, attempts,
// workers, step metrics, trial summaries and events, and the vocabulary of trial states
// and outcomes as they are spelled in SQL (docs/schema.md). Plain values, no behaviour
// beyond converting the enums to and from their stored names.
// Thread-safety: values; the conversion functions are pure and safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/outcome.h"
#include "protocol/status.h"
#include "protocol/trainer_event.h"

namespace bakeoff::metrics {

// Where a trial is in its life. Stored in trials.state.
//   queued -> assigned -> running -> finished
//   assigned|running -> queued      (attempt lost, attempts remain: requeued)
//   queued|assigned|running -> finished (outcome decided, e.g. cancelled)
enum class TrialState { kQueued, kAssigned, kRunning, kFinished };
inline constexpr TrialState kTrialStates[] = {TrialState::kQueued, TrialState::kAssigned, TrialState::kRunning,
                                              TrialState::kFinished};

// How a trial or an attempt ended: the protocol's outcomes, spelled the same in
// trials.outcome and attempts.outcome.
using Outcome = protocol::Outcome;
using protocol::OutcomeName;

// A sweep's state. Stored in sweeps.state.
enum class SweepState { kRunning, kFinished, kCancelled };

// A worker's state as the coordinator last saw it. Stored in workers.state.
enum class WorkerState { kIdle, kBusy, kDraining, kLost, kGone };

// "queued", "assigned", ... ; the Parse functions accept exactly these names.
const char* TrialStateName(TrialState state);
const char* SweepStateName(SweepState state);
const char* WorkerStateName(WorkerState state);
Result<TrialState> ParseTrialState(const std::string& name);
Result<Outcome> ParseOutcome(const std::string& name);
Result<SweepState> ParseSweepState(const std::string& name);
Result<WorkerState> ParseWorkerState(const std::string& name);

// Times are Unix seconds (fractional), as stored in every *_at column.
using UnixSeconds = double;

struct TrialCounts {
  int64_t queued = 0;
  int64_t assigned = 0;
  int64_t running = 0;
  int64_t finished = 0;
  int64_t succeeded = 0;  // finished with outcome succeeded
  int64_t unsuccessful = 0;  // finished with any other outcome
  // Of unsuccessful: cancelled. In a sweep that finished (not cancelled by a user) these
  // are the trials adaptive repeats found not needed (docs/statistics.md).
  int64_t cancelled = 0;
};

struct SweepRecord {
  int64_t id = 0;  // assigned by CreateSweep
  std::string name;
  std::string question;
  std::string yaml;        // the submitted YAML, verbatim
  nlohmann::json spec;     // the validated spec as JSON (null when not given)
  SweepState state = SweepState::kRunning;
  UnixSeconds created_at = 0;  // set by CreateSweep when 0
  std::optional<UnixSeconds> finished_at;
  int64_t variant_count = 0;  // set by CreateSweep
  int64_t trial_count = 0;    // set by CreateSweep
  TrialCounts counts;         // read side only: computed from trials
};

struct VariantRecord {
  std::string key;  // stable key, e.g. "compile_mode=jit,zero_stage=2"
  int64_t ordinal = 0;  // position in the expansion
  nlohmann::json params = nlohmann::json::object();          // axis name -> value
  nlohmann::json trainer_config = nlohmann::json::object();  // what the trainer gets
  // Key of the baseline counterpart (equal to `key` for a baseline variant). Empty
  // when there is none to name.
  std::string counterpart_key;
  bool is_baseline = false;
  bool counterpart_excluded = false;  // the counterpart was removed by `exclude`
};

struct TrialRecord {
  int64_t id = 0;  // assigned by CreateSweep; unique across sweeps
  int64_t sweep_id = 0;
  std::string variant_key;
  int64_t repeat = 0;       // 0-based
  int64_t order_index = 0;  // dispatch order within the sweep, 0-based
  TrialState state = TrialState::kQueued;
  std::optional<Outcome> outcome;  // set when finished
  std::string reason;              // why it ended (or why it was last requeued)
  // Attempts started so far; while assigned or running, the live attempt's number.
  int64_t attempts_used = 0;
  int64_t max_attempts = 1;
  UnixSeconds queued_at = 0;
  std::optional<UnixSeconds> finished_at;
};

// One rank's place in an attempt; ranks_json of an attempt is an array of these.
struct RankPlacement {
  int64_t rank = 0;
  std::string worker_id;
  std::string host;
  std::string device;  // "cpu", "cuda:0", ...
};

struct AttemptRecord {
  int64_t trial_id = 0;
  int64_t attempt = 0;  // 1-based
  std::string worker_id;  // the worker of rank 0 (see ranks for all ranks)
  std::string host;       // the host of rank 0
  std::vector<RankPlacement> ranks;
  bool simulated = false;  // the worker ran the documented simulated workload
  UnixSeconds assigned_at = 0;
  std::optional<UnixSeconds> started_at;
  std::optional<UnixSeconds> ended_at;
  std::optional<Outcome> outcome;
  std::string reason;
};

// What a sweep's page shows of a trial while it runs (ResultsStore::LiveTrialFigures):
// rank 0's measured steps of the trial's current attempt so far (each step's tokens are
// the optimizer step's global tokens), and the highest peak memory any rank reported.
struct LiveTrialFigures {
  int64_t trial_id = 0;
  int64_t attempt = 0;
  int64_t measured_steps = 0;
  int64_t tokens = 0;
  double step_s = 0;  // the measured steps' summed time
  std::optional<int64_t> peak_mem_bytes;
};

struct WorkerRecord {
  std::string id;  // chosen by the coordinator
  std::string name;
  std::string host;
  nlohmann::json resources = nlohmann::json::object();
  std::string metrics_url;  // the worker's /metrics endpoint, empty when none
  WorkerState state = WorkerState::kIdle;
  UnixSeconds registered_at = 0;  // set by UpsertWorker when 0
  std::optional<UnixSeconds> last_heartbeat_at;
  // SHA-256 (hex) of the secret the coordinator gave this worker; '' when none is kept.
  // UpsertWorker keeps the stored one when this is ''.
  std::string secret_sha256;
};

// One step of one rank, a row of the step_metrics view (docs/schema.md): whose it is, its
// phase, and the row of its `step` event (docs/trainer.md; missing values are nullopt,
// stored as NULL, and so is a non-finite loss).
struct StepRecord {
  int64_t trial_id = 0;
  int64_t attempt = 0;
  int64_t rank = 0;
  std::string phase = "measure";  // "warmup" | "measure"
  protocol::StepRow row;
};

// Consecutive steps of one rank and phase, in strictly increasing step order: one row of
// step_blocks (docs/schema.md), each step a row of the step_metrics view.
struct StepBlockRecord {
  int64_t trial_id = 0;
  int64_t attempt = 0;
  int64_t rank = 0;
  std::string phase = "measure";  // "warmup" | "measure"
  std::vector<protocol::StepRow> rows;
};

// One `summary` event of docs/trainer.md as stored and read back: the whole object in
// `summary` (trial_summaries.summary_json).
struct TrialSummary {
  int64_t trial_id = 0;
  int64_t attempt = 0;
  int64_t rank = 0;
  nlohmann::json summary = nlohmann::json::object();
};

// A summary to store, read once into its type (protocol/trainer_event.h): the store
// copies `figures` into columns (docs/schema.md) and `figures.applied` aside, and keeps
// `body`, the event as written (unknown fields included), as summary_json.
struct SummaryRecord {
  int64_t trial_id = 0;
  int64_t attempt = 0;
  int64_t rank = 0;
  protocol::SummaryEvent figures;
  nlohmann::json body = nlohmann::json::object();
};

// A summary given as JSON read through the event parser (protocol::ReadSummaryEvent):
// InvalidArgument naming the field when one has the wrong type.
Result<SummaryRecord> ReadSummaryRecord(const TrialSummary& summary);

// Any other event worth keeping: ready, error, the coordinator's own notes.
struct EventRecord {
  int64_t trial_id = 0;
  int64_t attempt = 0;
  std::optional<int64_t> rank;  // nullopt for trial-level events
  std::string kind;             // "ready", "error", "assigned", "lost", ...
  nlohmann::json data = nlohmann::json::object();
  UnixSeconds at = 0;  // when it happened; 0 means "now" (the store's clock)
  // Optional per-(trial, attempt, rank) sequence number from the sender; when given, a
  // redelivered event with the same sequence is stored once.
  std::optional<int64_t> seq;
};

// A trial with its current attempt (if any) and that attempt's summaries, one per
// rank that sent one, ordered by rank: each read once into its type (a stored summary
// was checked so on its way in; one that no longer reads has no figures).
struct TrialResult {
  TrialRecord trial;
  std::optional<AttemptRecord> attempt;
  std::vector<SummaryRecord> summaries;
};

// One measured step of a trial's current attempt across its ranks
// (ResultsReader::MeasuredSteps).
struct MeasuredStep {
  int64_t trial_id = 0;
  int64_t step = 0;
  double step_s = 0;           // the slowest rank's
  std::optional<double> loss;  // the lowest rank's that reported one
  std::optional<int64_t> tokens;  // global tokens of the step: the lowest rank's that reported them
  // The lockstep turn number (docs/lockstep.md): the lowest rank's that reported one (every
  // rank of a side shares it).
  std::optional<int64_t> turn;
};

// The one rule for text that names a sweep (every command, route and the report): 1 to
// 18 digits is an id first, and a name when no sweep has that id; anything else is a
// name (the newest sweep of that name). Returns the id to try first, if any. 18 digits
// always fit an int64.
std::optional<int64_t> SweepIdToTry(const std::string& id_or_name);

}  // namespace bakeoff::metrics
