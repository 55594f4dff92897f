// ExpandedSweep: the variants and the ordered trials of one sweep, as computed by
// Expand() (sweep_expander.h). This is what the coordinator stores and schedules, what
// the worker turns into trainer processes (Variant::config, Variant::world_size) and
// what the report pairs (Variant::counterpart).
// Thread-safety: plain values; a const ExpandedSweep may be read from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/sweep/variant_config.h"

namespace bakeoff::spec {

struct Variant {
  size_t index = 0;  // position in ExpandedSweep::variants
  // Stable identity: "axis=value,..." over the varying axes in the order written in the
  // file, values printed by CanonicalValue; "default" when no axis varies.
  std::string key;
  // The varying axes' values, in the same order as in the key.
  std::vector<std::pair<std::string, nlohmann::json>> axis_values;
  // The trainer configuration (bakeoff-trainer --config): workload defaults, then every
  // axis value (fixed ones too), then "device" from resources and "world_size". The
  // workload's defaults are shared by every variant of the sweep, not copied into each
  // (config.Merged() builds the whole object).
  VariantConfig config;
  int world_size = 1;  // ranks to gang-allocate (config["world_size"])

  // Pairing with the baseline (all false/empty when the sweep has no baseline):
  bool is_baseline = false;            // its own counterpart
  std::string counterpart_key;         // the baseline counterpart's key
  std::optional<size_t> counterpart;   // its index; empty when excluded (or no baseline)
  bool counterpart_excluded = false;   // the counterpart matched an exclude rule
  // method random: this variant was not drawn but added as another variant's counterpart.
  bool added_as_counterpart = false;
};

struct Trial {
  size_t index = 0;    // position in the run order (0 runs first)
  size_t variant = 0;  // index into ExpandedSweep::variants
  int repeat = 0;      // 0-based
};

struct ExpandedSweep {
  std::vector<std::string> axes;  // the varying axes, in key order
  std::vector<Variant> variants;
  std::vector<Trial> trials;      // in run order
  size_t excluded_count = 0;      // grid points (or random draws) removed by exclude

  // The variant with `key`, or nullptr.
  const Variant* FindVariant(const std::string& key) const;
};

// For the report's marginal effects: true when `a` and `b` differ in exactly one
// varying axis; then *axis (if not null) is that axis's name.
bool DifferInExactlyOneAxis(const Variant& a, const Variant& b, std::string* axis = nullptr);

// How a value appears in a variant key: strings bare unless they contain characters
// outside [A-Za-z0-9_.+/:-] (then JSON-quoted), numbers in shortest round-trip form,
// booleans true/false, objects and arrays as compact JSON.
std::string CanonicalValue(const nlohmann::json& value);

// {"axes", "variants": [{index, key, axis_values{}, config, world_size, is_baseline,
// counterpart_key, counterpart (index or null), counterpart_excluded,
// added_as_counterpart}], "trials": [{index, variant, repeat}], "excluded_count",
// "variant_count", "trial_count"}.
nlohmann::json ToJson(const Variant& variant);
nlohmann::json ToJson(const ExpandedSweep& sweep);

}  // namespace bakeoff::spec
