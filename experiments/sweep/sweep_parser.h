// Parsing and validating a sweep file (the YAML format of docs/sweep.md) into a
// SweepSpec. yaml-cpp's exceptions stop here: every failure is a Status whose message
// has one line per problem, each "file:line:column: field.path: what is wrong; what was
// expected", so a user can fix every mistake in one pass. Unknown fields are errors
// (with the closest known name suggested).
// Thread-safety: the functions are reentrant; they share no state.
#pragma once

#include <cstddef>
#include <string>

#include "experiments/sweep/executor_catalog.h"
#include "experiments/sweep/sweep_spec.h"
#include "protocol/status.h"

namespace bakeoff::spec {

// Guards against hostile or mistaken input (issue 7): each limit, when exceeded, is a
// ResourceExhausted Status that names the limit and its value.
struct ParseLimits {
  size_t max_yaml_bytes = 1 << 20;  // text size of the sweep file (1 MiB)
  int max_depth = 32;               // nesting depth of YAML collections
  size_t max_nodes = 100000;        // YAML nodes visited (aliases counted each time)
  size_t max_errors = 20;           // problems listed before the parser gives up
};

// `executors`, when given, is the allowlist (executor_catalog.h) that `executor: command`
// sweeps are checked against: the template must be one of it, and every workload field,
// axis and command arg must be one the template accepts, with its type. Without it a
// command sweep's fields other than the trainer's are free-form.

// Reads and parses `path`; messages name `path` as the file.
Result<SweepSpec> ParseSweepFile(const std::string& path, const ParseLimits& limits = {},
                                 const ExecutorCatalog* executors = nullptr);

// Parses YAML text; messages name `source_name` as the file (e.g. "<http upload>").
Result<SweepSpec> ParseSweepText(const std::string& text, const std::string& source_name,
                                 const ParseLimits& limits = {},
                                 const ExecutorCatalog* executors = nullptr);

}  // namespace bakeoff::spec
