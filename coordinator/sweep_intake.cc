#include "coordinator/sweep_intake.h"

#include <chrono>
#include <optional>

#include "experiments/sweep/expanded_sweep.h"
#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"

namespace bakeoff::coordinator {
using nlohmann::json;

namespace {

// The sequential design of a spec's adaptive repeats, if any (spec::ToJson).
std::optional<metrics::SequentialDesign> AdaptiveDesign(const spec::SweepSpec& spec) {
  if (!spec.adaptive) return std::nullopt;
  metrics::SequentialDesign design;
  design.min_pairs = spec.adaptive->min;
  design.max_pairs = spec.adaptive->max;
  design.ci_half_width = spec.adaptive->ci_half_width;
  return design;
}

// The sweep-wide fields every in-memory sweep takes from its spec.
SweepEntry SweepFields(std::int64_t sweep_id, std::string name, const spec::SweepSpec& spec) {
  SweepEntry sweep;
  sweep.id = sweep_id;
  sweep.name = std::move(name);
  sweep.timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(spec.limits.trial_timeout).count();
  sweep.max_attempts = spec.limits.max_attempts;
  sweep.cuda = spec.resources.device == "cuda";
  sweep.gpu_type = spec.resources.gpu_type;
  sweep.lockstep = spec.order == spec::Order::kLockstep;
  sweep.turn_timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(spec.limits.turn_timeout).count();
  sweep.adaptive = AdaptiveDesign(spec);
  return sweep;
}

// The comparisons of the sweep's answer, over its variants in `order`.
std::vector<spec::AnswerComparison> Comparisons(const spec::SweepSpec& spec, const SweepEntry& sweep,
                                                const std::vector<std::string>& order) {
  std::vector<std::string> axis_order;
  for (const spec::ParameterAxis& axis : spec.parameters) axis_order.push_back(axis.name);
  std::map<std::string, std::string> baseline;
  for (const auto& [axis, value] : spec.baseline) baseline[axis] = spec::CanonicalValue(value);
  std::vector<spec::ComparedVariant> variants;
  for (const std::string& key : order) {
    const VariantInfo& v = sweep.variants.at(key);
    variants.push_back({key, v.params, v.counterpart_key});
  }
  return spec::AnswerComparisons(axis_order, baseline, variants);
}

}  // namespace

SweepSubmission MakeSubmission(const CoordinatorConfig& config, const std::set<std::string>& offered_templates) {
  SweepSubmission submission;
  submission.executors = config.executors;
  // A coordinator runs allowlisted templates only; a sweep's own command only where its
  // catalog says this is the operator's own run (`bakeoff local`).
  if (submission.executors.own_commands != spec::ExecutorCatalog::OwnCommands::kRun) {
    submission.executors.own_commands = spec::ExecutorCatalog::OwnCommands::kRefuse;
  }
  for (const auto& name : offered_templates) {
    if (submission.executors.Find(name) == nullptr) submission.executors.names_only.insert(name);
  }
  submission.max_trials = config.max_trials_per_sweep;
  return submission;
}

std::variant<PreparedSweep, ApiError> PrepareSubmittedSweep(const SweepSubmission& submission, std::string yaml) {
  // Over a limit (YAML size, nesting, nodes, trials per sweep): 413; otherwise 400.
  auto rejected = [](const Status& s) {
    return ApiError{s.code() == Status::Code::kResourceExhausted ? 413 : 400, s.message()};
  };
  auto spec = spec::ParseSweepText(yaml, "<submitted sweep>", {}, &submission.executors);
  if (!spec.ok()) return rejected(spec.status());
  spec::ExpandOptions options;
  options.max_trials = submission.max_trials;
  auto expanded = spec::Expand(*spec, options);
  if (!expanded.ok()) return rejected(expanded.status());

  PreparedSweep prepared;
  metrics::SweepRecord& record = prepared.record;
  record.name = spec->name;
  record.question = spec->question;
  record.yaml = std::move(yaml);
  record.spec = spec::ToJson(*spec);
  for (const auto& v : expanded->variants) {
    metrics::VariantRecord vr;
    vr.key = v.key;
    vr.ordinal = static_cast<std::int64_t>(v.index);
    vr.params = json::object();
    for (const auto& [axis, value] : v.axis_values) vr.params[axis] = value;
    vr.trainer_config = v.config.Merged();  // the stored row: the whole configuration
    vr.counterpart_key = v.counterpart_key;
    vr.is_baseline = v.is_baseline;
    vr.counterpart_excluded = v.counterpart_excluded;
    prepared.variants.push_back(std::move(vr));
  }
  for (const auto& t : expanded->trials) {
    metrics::NewTrial nt;
    nt.variant_key = expanded->variants[t.variant].key;
    nt.repeat = t.repeat;
    nt.order_index = static_cast<std::int64_t>(t.index);
    nt.max_attempts = spec->limits.max_attempts;
    prepared.trials.push_back(std::move(nt));
  }
  prepared.spec = std::move(spec).value();
  prepared.expanded = std::move(expanded).value();
  return prepared;
}

SweepEntry SweepFromSpec(std::int64_t sweep_id, const spec::SweepSpec& spec, const spec::ExpandedSweep& expanded) {
  SweepEntry sweep = SweepFields(sweep_id, spec.name, spec);
  std::vector<std::string> order;
  for (const auto& v : expanded.variants) {
    VariantInfo info{v.config, v.world_size, v.counterpart ? v.counterpart_key : "", v.is_baseline, {}};
    for (const auto& [axis, value] : v.axis_values) info.params[axis] = spec::CanonicalValue(value);
    sweep.variants[v.key] = std::move(info);
    order.push_back(v.key);
  }
  sweep.comparisons = Comparisons(spec, sweep, order);
  return sweep;
}

Result<SweepEntry> SweepFromStore(const metrics::SweepRecord& record, metrics::ResultsStore& store) {
  // Read back through the spec library, which wrote it (spec::ToJson).
  auto stored = spec::SweepSpecFromJson(record.spec);
  if (!stored.ok()) return stored.status().WithContext("sweep " + std::to_string(record.id));
  SweepEntry sweep = SweepFields(record.id, record.name, *stored);
  auto variants = store.Reader()->ListVariants(record.id);
  if (!variants.ok()) return variants.status();
  std::vector<std::string> order;  // as stored: the sweep's order
  for (const auto& v : *variants) {
    VariantInfo info;
    info.config = spec::VariantConfig(v.trainer_config);
    info.world_size = static_cast<int>(v.trainer_config.value("world_size", std::int64_t{1}));
    info.counterpart_key = v.counterpart_excluded ? "" : v.counterpart_key;
    info.is_baseline = v.is_baseline;
    if (v.params.is_object()) {
      for (const auto& [axis, value] : v.params.items()) info.params[axis] = spec::CanonicalValue(value);
    }
    sweep.variants[v.key] = info;
    order.push_back(v.key);
  }
  sweep.comparisons = Comparisons(*stored, sweep, order);
  return sweep;
}

ApiError NoNewSweeps(const metrics::ResultsStore& store) {
  return ApiError{503, "the results database is not writable (" + store.health().message() +
                           "); the coordinator accepts no new sweeps until it is fixed"};
}

ApiError SweepNotCreated(const metrics::ResultsStore& store, const Status& created) {
  if (!store.healthy()) {
    return ApiError{503, "the results database is not writable (" + created.message() +
                             "); the sweep was not stored, earlier results are kept, and the coordinator "
                             "accepts no new sweeps until it is fixed"};
  }
  return ApiErrorFrom(created);
}

}  // namespace bakeoff::coordinator
