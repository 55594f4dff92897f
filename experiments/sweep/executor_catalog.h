// ExecutorCatalog: the commands a worker's operator allowlisted for `executor: command`
// sweeps (docs/executors.md), read from a YAML file such as experiments/executors.yaml.
// A sweep names a template; it never names a program, a shell line or a path. Each
// template is an argument vector with typed placeholders, the environment the process
// may see, and the fields its trial configuration accepts:
//   - `trainer_fields`: native trainer fields the workload accepts with the same meaning,
//     checked against the trainer's one table (experiments/trainer/trainer_fields.h);
//   - `fields`: its own fields, or a trainer field's name with other choices (e.g.
//     compile_mode's torch.compile modes), each {choices | type, min, max, default};
//   - `args`: values a sweep's `command.args` (or an axis of the same name) may put into
//     the argument vector, typed the same way; strings are names (letters, digits, '.',
//     '_', '-'), never paths.
// How a trial's values reach the program (docs/sweep.md, "How values reach your
// script"): always in the JSON configuration ({config}, BAKEOFF_CONFIG); a `{field}`
// placeholder in argv or env.set puts one field's value there; and with `flags: true`
// each parameter of the sweep that no placeholder takes is appended as `--name=value`
// (W&B's ${args}).
// A sweep on its operator's own machine (`bakeoff local`) may instead give its own
// command (`command: {argv: [...]}`): it becomes a template named kSweepCommandName in
// that run's workers' catalogs only. A coordinator refuses such a sweep, and no catalog
// file may define that name, so `bakeoff worker` never runs a program a sweep named.
// The worker renders the argument vector (RenderArgv) and the spec checks a sweep's
// fields (CheckField) from the same file, so `bakeoff validate`, the coordinator and
// the worker agree.
// Thread-safety: a value; const methods may be called from any thread.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::spec {

// One typed value: a field of a template's configuration or one of its args.
struct ValueSpec {
  enum class Type { kChoice, kBool, kInt, kNumber, kName };
  Type type = Type::kName;
  std::vector<std::string> choices;  // kChoice
  double min = -1e300;               // kInt, kNumber
  double max = 1e300;
  nlohmann::json default_value;      // null: none

  // `value` checked and normalised (ints stay ints, numbers become reals); an error
  // saying what was expected otherwise.
  Result<nlohmann::json> Check(const nlohmann::json& value) const;
  std::string Describe() const;  // e.g. "one of eager, default" or "an integer in [1, 64]"
};

struct ExecutorTemplate {
  std::string name;
  std::string description;
  std::vector<std::string> argv;  // argv[0] is the program; placeholders in {braces}
  // Environment of the process: only these names pass from the worker's environment
  // (when set there), then `env_set` (placeholders allowed), then the worker's own
  // variables (RANK, ..., BAKEOFF_EVENTS_FD), which nothing here can override.
  std::vector<std::string> env_pass;
  std::map<std::string, std::string> env_set;
  std::vector<std::string> trainer_fields;
  std::map<std::string, ValueSpec> fields;
  std::map<std::string, ValueSpec> args;
  // `turns: true`: its script reports through bakeoff_report's run.step() (or takes
  // turns itself), so it may run in `order: lockstep` sweeps (docs/lockstep.md).
  bool turns = false;
  // `flags: true`: each parameter of a sweep that no placeholder takes is appended to
  // argv as `--name=value` (RenderArgv). The shipped templates read their config file.
  bool flags = false;
  // Built from a sweep's own command (`bakeoff local`): its fields are free-form (any
  // name, any value), where a catalog template's are checked against its specs.
  bool from_sweep = false;
  std::string location;  // file:line of the template, for messages

  // Whether the trial configuration may carry `field`, and its value checked: the
  // template's own spec first, then the trainer's table for trainer_fields. An error
  // names the accepted fields.
  Result<nlohmann::json> CheckField(const std::string& field, const nlohmann::json& value) const;
  bool AcceptsField(const std::string& field) const;
  std::vector<std::string> FieldNames() const;  // sorted
  // The names its argv and env.set values use as placeholders, built-ins excluded: a
  // parameter taken by one of them is not also passed as a flag.
  std::set<std::string> PlaceholderFields() const;
};

// The name of the template a sweep's own command becomes (`command: {argv: [...]}`),
// which workers offer by it like any other: reserved, so a catalog file may not define it
// and a sweep's `template:` may not name it.
inline constexpr const char* kSweepCommandName = "sweep-command";

// The values of the built-in placeholders a worker fills for one rank.
struct ArgvContext {
  std::string python;      // {python}
  std::string dir;         // {dir}: the catalog file's directory
  std::string config;      // {config}: the trial configuration file
  std::string trial_dir;   // {trial_dir}
  std::string output_dir;  // {output_dir}
  std::string data_root;   // {data_root} ("" when the worker has none)
  std::string cache;       // {cache}: the worker's cache directory
  // The trial's configuration: a `{field}` placeholder takes its value from here (else
  // the field's default), and flags are written from it.
  nlohmann::json fields = nlohmann::json::object();
  // The sweep's parameters in the order written (the configuration's
  // "command_parameters"): each one no placeholder takes becomes `--name=value` when the
  // template has `flags: true`.
  std::vector<std::string> flag_fields;
};

// How a value is written into argv or the environment: strings as they are, booleans
// true/false, numbers in JSON's shortest form, lists and mappings as compact JSON.
std::string FormatArgValue(const nlohmann::json& value);

// Names of the built-in placeholders, for documentation and checks.
const std::vector<std::string>& BuiltinPlaceholders();

struct ExecutorCatalog {
  std::string source;   // the file it was read from
  std::string dir;      // that file's directory ({dir})
  std::string python;   // {python}: `python:` in the file, BAKEOFF_VENV's bin/python when set
  std::map<std::string, ExecutorTemplate> templates;
  // Templates known by name only (a coordinator hears them from registered workers):
  // a sweep may name them; their fields are not checked here but by the worker's script.
  std::set<std::string> names_only;
  // Whether a sweep may give its own command (`command: {argv: [...]}`): kCheck parses
  // and checks it (bakeoff validate), kRun is the operator's own run (bakeoff local's
  // coordinator and workers), kRefuse is a coordinator's (allowlisted templates only).
  enum class OwnCommands { kCheck, kRun, kRefuse };
  OwnCommands own_commands = OwnCommands::kCheck;

  const ExecutorTemplate* Find(const std::string& name) const;
  // Whether a sweep may name `name`: a template here, or a name-only one.
  bool Knows(const std::string& name) const { return Find(name) != nullptr || names_only.count(name) > 0; }
  std::vector<std::string> Names() const;  // sorted, name-only ones included
  // "a, b, c" or "none": for messages.
  std::string NameList() const;
};

// Limits of a catalog file (docs/executors.md).
inline constexpr std::size_t kMaxCatalogBytes = 256 * 1024;
inline constexpr std::size_t kMaxTemplates = 64;
inline constexpr std::size_t kMaxArgv = 128;

// Reads and checks a catalog; every problem is "file:line:column: path: what is wrong".
Result<ExecutorCatalog> LoadExecutorCatalog(const std::string& path);
Result<ExecutorCatalog> ParseExecutorCatalog(const std::string& text, const std::string& source_name,
                                             const std::string& dir);

// The argument vector of `tmpl` for one rank: placeholders replaced by `context`, by
// `args` (a sweep's command.args, or an axis of an arg's name in context.fields, checked
// against tmpl.args, defaults filled in) and by the trial's fields (checked against the
// template's specs), then with `flags: true` one `--name=value` per context.flag_fields
// entry that no placeholder takes. Every placeholder must resolve; an unset data_root
// used by the template is an error.
Result<std::vector<std::string>> RenderArgv(const ExecutorTemplate& tmpl, const ArgvContext& context,
                                            const nlohmann::json& args);

// One string with placeholders replaced (env_set values), by the same rules.
Result<std::string> RenderTemplateString(const std::string& text, const ExecutorTemplate& tmpl,
                                         const ArgvContext& context, const nlohmann::json& args);

// The default catalog: BAKEOFF_EXECUTORS when set, else experiments/executors.yaml of
// the source tree this binary was built from when it exists, else "" (none).
std::string DefaultExecutorCatalogPath();

}  // namespace bakeoff::spec
