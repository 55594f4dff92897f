// Expand(): a SweepSpec into its variants (grid or random draw, minus excluded ones,
// with baseline counterparts) and its trials (repeats, in the sweep's order). Pure and
// deterministic: the same spec (and seed) always gives the same variants, keys and
// order, whatever the platform (the random streams are implemented here, not taken
// from <random>'s implementation-defined distributions).
// Thread-safety: reentrant.
#pragma once

#include <cstddef>

#include "experiments/sweep/expanded_sweep.h"
#include "experiments/sweep/sweep_spec.h"
#include "protocol/status.h"

namespace bakeoff::spec {

struct ExpandOptions {
  // Trials per sweep (variants x repeats). Over it: ResourceExhausted naming the cap.
  size_t max_trials = 10000;
  // Grid points enumerated before exclude rules apply; guards memory and time when a
  // grid is enormous but mostly excluded.
  size_t max_grid_points = 1000000;
  // Sum of the variants' trainer configurations (each the workload plus its axis
  // values), estimated before any variant is built: a long string field times many
  // variants is refused (ResourceExhausted). In memory the variants share the workload
  // (VariantConfig); this bounds what the results store writes, one row per variant.
  size_t max_config_bytes = 64u << 20;
  // Work to apply the exclude rules, in steps. Each rule is resolved once into value ids
  // (a rule that cannot match is dropped), and a grid's rules that name the same axes
  // become one lookup: a grid costs its points x the axes named by each distinct
  // combination of axes the rules name, checked before any point is visited (the
  // 1,000,000-point grid with 14,000 three-axis rules is 3,000,000 steps). Method random
  // compares drawn values with each rule's fields and counts the comparisons as it
  // draws. Over it: ResourceExhausted. 200,000,000 steps is about 0.2 s of one core for a
  // grid, about 1 s for random draws (docs/reliability.md, "Sweep submission time").
  size_t max_exclude_steps = 200000000;
};

// Errors: InvalidArgument when every variant is excluded or a random sweep cannot
// draw `count` distinct variants; ResourceExhausted over a cap. A grid's variants are
// counted (on value ids, nothing copied) and checked against the caps before any is
// built, so a huge grid costs a count, not its points; how many exclude rules it has
// matters only through the axes they name (max_exclude_steps).
Result<ExpandedSweep> Expand(const SweepSpec& spec, const ExpandOptions& options = {});

}  // namespace bakeoff::spec
