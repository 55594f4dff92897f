// Expand(): a SweepSpec into its variants (grid or random draw, minus excluded ones,
// with baseline counterparts) and its trials (repeats, in the sweep's order). Pure and
// deterministic: the same spec (and seed) always gives the same variants, keys and
// order, whatever the platform (the random streams are implemented here, not taken
// from <random>'s implementation-defined distributions).
// Thread-safety: reentrant.
#pragma once

#include <cstddef>

#include "experiments/spec/expanded_sweep.h"
#include "experiments/spec/sweep_spec.h"
#include "protocol/status.h"

namespace bakeoff::spec {

struct ExpandOptions {
  // Trials per sweep (variants x repeats). Over it: ResourceExhausted naming the cap.
  size_t max_trials = 10000;
  // Grid points enumerated before exclude rules apply; guards memory and time when a
  // grid is enormous but mostly excluded.
  size_t max_grid_points = 1000000;
  // Sum of the variants' trainer configurations (each a copy of the workload plus its
  // axis values), estimated before any variant is built: a long string field times many
  // variants is refused (ResourceExhausted) instead of filling memory.
  size_t max_config_bytes = 64u << 20;
};

// Errors: InvalidArgument when every variant is excluded or a random sweep cannot
// draw `count` distinct variants; ResourceExhausted over a cap. A grid's variants are
// counted (on value indices, nothing copied) and checked against the caps before any
// is built, so a huge grid costs a count, not its points.
Result<ExpandedSweep> Expand(const SweepSpec& spec, const ExpandOptions& options = {});

}  // namespace bakeoff::spec
