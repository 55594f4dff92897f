// `bakeoff calibrate` (docs/statistics.md, "Calibration"): the A/A sweep that measures
// this machine's run-to-run noise for a sweep's workload, and the key that says which
// sweeps a stored calibration applies to. Pure: YAML text in, YAML text out.
#pragma once

#include <string>

#include "experiments/sweep/executor_catalog.h"
#include "experiments/sweep/sweep_spec.h"
#include "protocol/status.h"

namespace bakeoff::spec {

// Pairs an A/A calibration runs by default: enough for the sd of one pair's log ratio
// to within about +-25% (its standard error is sd / sqrt(2 (pairs - 1))).
inline constexpr int kDefaultCalibrationPairs = 8;
inline constexpr int kMinCalibrationPairs = 3;
inline constexpr int kMaxCalibrationPairs = 50;

// What a calibration applies to: the sweep's `workload:` block (every field but the
// seed), its executor, template and device. Two sweeps with the same workload block
// share a key whatever their axes: the noise is measured on the baseline variant and
// stands in for the others (docs/statistics.md says so). Canonical JSON text.
std::string CalibrationKey(const SweepSpec& spec);

// The A/A sweep for the sweep in `text`: its baseline variant (each axis at its baseline
// value, else its first value) run as two variants that differ only in `seed`, `pairs`
// repeats in `order` (kInterleaved or kLockstep), named "calibrate-<name>" (with
// "-lockstep" for lockstep). Errors: the sweep's own parse errors (file:line:column), an
// axis with a distribution that the baseline does not fix, pairs out of
// [kMinCalibrationPairs, kMaxCalibrationPairs], a lockstep calibration of a template
// that does not take turns.
Result<std::string> CalibrationSweepYaml(const std::string& text, const std::string& source_name, int pairs,
                                         const ExecutorCatalog* executors = nullptr,
                                         Order order = Order::kInterleaved);

}  // namespace bakeoff::spec
