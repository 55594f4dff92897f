// Sweep intake: how a sweep's specification becomes what the coordinator stores and
// holds. A submitted sweep's YAML is parsed, checked against the coordinator's limits
// and executors, and expanded into the records the store takes (PrepareSubmittedSweep);
// the in-memory sweep comes from the same spec once the store has created it
// (SweepFromSpec), or, after a restart, from the stored spec and variant rows
// (SweepFromStore), read back through the spec library that wrote them. The refusals
// name what was over which limit, with the HTTP status they map to: 413 over a limit
// (size, nesting, nodes, trials, configurations), 400 for anything else in the YAML,
// 503 while the store cannot write.
//
// Thread-safety: pure functions, reentrant, except SweepFromStore, which reads the
// store (the caller's thread owns it). PrepareSubmittedSweep runs on HttpServer's pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "coordinator/api_json.h"
#include "coordinator/coordinator_config.h"
#include "coordinator/sweep_entry.h"
#include "experiments/sweep/executor_catalog.h"
#include "experiments/sweep/expanded_sweep.h"
#include "experiments/sweep/sweep_spec.h"
#include "metrics/store/results_store.h"
#include "protocol/status.h"

namespace bakeoff::coordinator {

// What preparing a submitted sweep reads from the service, captured on its executor
// (CoordinatorService::BeginSubmit) so that the preparation touches no service state.
struct SweepSubmission {
  // The coordinator's allowlist, plus by name the templates registered workers offer.
  spec::ExecutorCatalog executors;
  std::size_t max_trials = 0;  // CoordinatorConfig::max_trials_per_sweep
};

// A submitted sweep parsed, validated and expanded, with the records to store: what
// CoordinatorService::CommitSweep needs. A plain value, built on any thread.
struct PreparedSweep {
  spec::SweepSpec spec;
  spec::ExpandedSweep expanded;
  metrics::SweepRecord record;  // holds the YAML as submitted
  std::vector<metrics::VariantRecord> variants;
  std::vector<metrics::NewTrial> trials;
};

// The coordinator's allowlist checks its templates' fields; a template only registered
// workers offer (`offered_templates`) is accepted by name (the worker's script checks
// its fields). A sweep's own command (`command: {argv: [...]}`) is refused unless the
// allowlist is `bakeoff local`'s (own_commands kRun: its operator runs it).
SweepSubmission MakeSubmission(const CoordinatorConfig& config, const std::set<std::string>& offered_templates);

// Parses, validates and expands `yaml`: 413 over a limit, 400 otherwise.
std::variant<PreparedSweep, ApiError> PrepareSubmittedSweep(const SweepSubmission& submission, std::string yaml);

// The in-memory sweep (no trials yet) of a prepared sweep that the store created as
// `sweep_id`.
SweepEntry SweepFromSpec(std::int64_t sweep_id, const spec::SweepSpec& spec, const spec::ExpandedSweep& expanded);

// The in-memory sweep (no trials yet) of a stored sweep: its spec and variant rows.
Result<SweepEntry> SweepFromStore(const metrics::SweepRecord& record, metrics::ResultsStore& store);

// 503: why a sweep is refused while the store cannot write.
ApiError NoNewSweeps(const metrics::ResultsStore& store);
// The refusal of a sweep whose CreateSweep failed (`created`): 503 when the store has
// turned unwritable (the server's condition, not the payload's), else as the Status maps.
ApiError SweepNotCreated(const metrics::ResultsStore& store, const Status& created);

}  // namespace bakeoff::coordinator
