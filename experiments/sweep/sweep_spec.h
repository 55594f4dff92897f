// SweepSpec: one validated sweep as parsed from its YAML file (docs/sweep.md): what the
// user asked for, normalised (defaults filled in, workload fields mapped onto the
// trainer's flat configuration names, values typed). It says nothing yet about which
// variants and trials exist; Expand() (sweep_expander.h) computes those.
// Thread-safety: plain values; a const SweepSpec may be read from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/sweep/executor_catalog.h"
#include "protocol/status.h"

namespace bakeoff::spec {

// Where a value was written: file (the source name given to the parser), 1-based line
// and column. Line 0 means "not from a file" (a default).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:line:column", or just "file" when line is 0.
  std::string ToString() const;
};

enum class Method { kGrid, kRandom };
enum class Order { kInterleaved, kSequential, kRandom, kLockstep };
enum class Executor { kLora, kCommand };

// A continuous or integer range sampled by `method: random`.
struct Distribution {
  enum class Kind { kIntUniform, kUniform, kLogUniform };
  Kind kind = Kind::kUniform;
  double min = 0;
  double max = 0;
};

// One entry of `parameters`. Exactly one of `values` (grid or random: each variant takes
// one of them) or `distribution` (random only) is set. `{value: x}` is stored as a
// single-element `values` with `fixed` true.
struct ParameterAxis {
  std::string name;                  // the trainer's flat field name (e.g. "micro_batch")
  std::vector<nlohmann::json> values;  // typed and normalised (see CanonicalValue)
  std::optional<Distribution> distribution;
  bool fixed = false;                // written as {value: x}
  SourceLocation location;

  // True when variants can differ in this axis: two or more values, or a distribution.
  // Only varying axes appear in variant keys.
  bool Varies() const { return distribution.has_value() || values.size() > 1; }
};

// One `exclude` rule: it matches a variant when every named field equals the variant's
// value for it (axis value, else workload value, else the trainer's default).
struct ExcludeRule {
  std::vector<std::pair<std::string, nlohmann::json>> match;  // in the order written
  SourceLocation location;
};

// The axis that compares executors: `parameters: {executor: {values: [lora, NAME, ...]}}`
// with "lora" (the native trainer) or allowlisted command template names as values.
inline constexpr const char* kExecutorAxis = "executor";

struct Workload {
  // With an executor axis (SweepSpec::ComparesExecutors) each variant's executor is its
  // axis value, and these hold nothing: kLora, no template, no args.
  Executor executor = Executor::kLora;
  // The trainer configuration shared by every variant: the workload's fields with
  // `lora: {alpha, dropout, targets, rank}` flattened to lora_alpha, ... Axis values
  // are merged over it per variant. Never contains "device" (from resources).
  nlohmann::json defaults = nlohmann::json::object();
  // executor: command only: the allowlisted template's name and its arguments; with
  // the sweep's own command, kSweepCommandName.
  std::string command_template;
  nlohmann::json command_args = nlohmann::json::object();
  // `command: {argv: [...], env: {...}, turns: bool}`: the sweep's own command, run only
  // by `bakeoff local` (its operator); a template built from the sweep (from_sweep, flags
  // true). Its argv and env values may use built-in placeholders and the sweep's fields.
  std::optional<ExecutorTemplate> own_command;
  // `command.flags` (default true): each parameter reaches the command as
  // `--name=value` too, where the template passes flags (a sweep's own command does; a
  // catalog template when it says `flags: true`). false: only the configuration file
  // and placeholders carry them.
  bool command_flags = true;
};

struct Resources {
  std::string device = "cpu";  // "cpu" | "cuda"
  std::string gpu_type;        // e.g. "A100"; empty = any (cuda only)
};

struct Limits {
  std::chrono::seconds trial_timeout{3600};
  int max_attempts = 3;  // attempts per trial; only `lost` attempts are retried
  // order: lockstep: how long a side may hold a measured turn, or keep the others waiting
  // for its next one, before it is ended `timeout` (docs/lockstep.md).
  std::chrono::seconds turn_timeout{300};
};

// `repeats: {min, max, until: {ci_half_width}}` (docs/sweep.md): each non-baseline
// variant runs at least `min` and at most `max` interleaved pairs with its baseline
// counterpart; the coordinator stops it once the sequential rule
// (metrics::SequentialLook) says so and cancels its remaining queued trials.
// SweepSpec::repeats is `max`: the expansion and the trial cap see every possible trial.
struct AdaptiveRepeats {
  int min = 3;                  // pairs before the first look (>= 2)
  int max = 20;                 // pairs at most (== SweepSpec::repeats)
  double ci_half_width = 0.02;  // stop when the ratio's interval is this narrow: (high - low) / 2
  SourceLocation location;      // of the `repeats` mapping
};

// Repeats per variant when a sweep says none (docs/statistics.md has the table behind it).
inline constexpr int kDefaultRepeats = 5;

struct SweepSpec {
  std::string source_name;  // file name given to the parser (for messages)
  std::string name;
  std::string question;
  Workload workload;
  Method method = Method::kGrid;
  int64_t count = 0;        // method random: variants to draw (>= 1)
  uint64_t seed = 0;        // method random and order random
  std::vector<ParameterAxis> parameters;  // in the order written in the file
  std::vector<ExcludeRule> exclude;
  // Axis name -> baseline value, in the order written. Empty: no baseline (the report
  // then has nothing to pair variants with; the parser adds a warning).
  std::vector<std::pair<std::string, nlohmann::json>> baseline;
  // Trials per variant. The default gives verdicts: with 5 interleaved repeats the
  // report's t interval detects a 10% difference in ~90% of sweeps (docs/statistics.md).
  // With adaptive repeats: their `max`.
  int repeats = kDefaultRepeats;
  // Set when `repeats` was written as a mapping (order is then interleaved).
  std::optional<AdaptiveRepeats> adaptive;
  Order order = Order::kInterleaved;
  Resources resources;
  Limits limits;
  // Things that are legal but probably not what the user meant (for `bakeoff validate`).
  std::vector<std::string> warnings;

  // The axis named `name`, or nullptr.
  const ParameterAxis* FindAxis(const std::string& name) const;

  // True when the sweep has an `executor` axis (kExecutorAxis).
  bool ComparesExecutors() const { return FindAxis(kExecutorAxis) != nullptr; }
};

// A warning when the sweep's repeats cannot give the report a verdict: 1 repeat never
// does (one run per variant cannot see run-to-run variation), 2 rarely (the t interval
// has 1 degree of freedom). Empty for sweeps with fewer than two variants (nothing to
// compare). For `bakeoff validate`; not an error: a single run still measures memory,
// warm-up and outcomes.
std::string RepeatsVerdictWarning(const SweepSpec& spec);

const char* MethodName(Method method);        // "grid" | "random"
const char* OrderName(Order order);           // "interleaved" | "sequential" | "random" | "lockstep"
const char* ExecutorName(Executor executor);  // "lora" | "command"
const char* DistributionName(Distribution::Kind kind);  // "int_uniform" | ...

// The normalised spec as JSON (what the coordinator stores and serves): every field
// with its resolved default; trial_timeout in seconds as "trial_timeout_s"; "repeats" is
// the number of trials per variant (max when adaptive) and "adaptive_repeats" is
// {min, max, ci_half_width} or null.
nlohmann::json ToJson(const SweepSpec& spec);

// The inverse of ToJson, for a spec read back from storage: every field ToJson writes,
// with its default where an older database lacks it. Source locations are not stored
// (line 0); `warnings` are kept. InvalidArgument names the first field of the wrong
// type or value.
Result<SweepSpec> SweepSpecFromJson(const nlohmann::json& stored);

}  // namespace bakeoff::spec
