#include "experiments/sweep/expanded_sweep.h"

#include <regex>

namespace bakeoff::spec {

using nlohmann::json;

const Variant* ExpandedSweep::FindVariant(const std::string& key) const {
  for (const auto& variant : variants) {
    if (variant.key == key) return &variant;
  }
  return nullptr;
}

bool DifferInExactlyOneAxis(const Variant& a, const Variant& b, std::string* axis) {
  if (a.axis_values.size() != b.axis_values.size()) return false;
  size_t differences = 0;
  std::string differing;
  for (size_t i = 0; i < a.axis_values.size(); ++i) {
    if (a.axis_values[i].first != b.axis_values[i].first) return false;  // other sweep shape
    if (a.axis_values[i].second != b.axis_values[i].second) {
      ++differences;
      differing = a.axis_values[i].first;
    }
  }
  if (differences != 1) return false;
  if (axis != nullptr) *axis = differing;
  return true;
}

std::string CanonicalValue(const json& value) {
  if (value.is_string()) {
    static const std::regex kBare("[A-Za-z0-9_.+/:-]+");
    const std::string& s = value.get_ref<const std::string&>();
    return std::regex_match(s, kBare) ? s : value.dump();
  }
  // nlohmann prints doubles in shortest round-trip form and objects with sorted keys.
  return value.dump();
}

json ToJson(const Variant& variant) {
  json axis_values = json::object();
  for (const auto& [axis, value] : variant.axis_values) axis_values[axis] = value;
  return {
      {"index", variant.index},
      {"key", variant.key},
      {"axis_values", std::move(axis_values)},
      {"config", variant.config.Merged()},
      {"world_size", variant.world_size},
      {"is_baseline", variant.is_baseline},
      {"counterpart_key", variant.counterpart_key},
      {"counterpart", variant.counterpart ? json(*variant.counterpart) : json(nullptr)},
      {"counterpart_excluded", variant.counterpart_excluded},
      {"added_as_counterpart", variant.added_as_counterpart},
  };
}

json ToJson(const ExpandedSweep& sweep) {
  json variants = json::array();
  for (const auto& variant : sweep.variants) variants.push_back(ToJson(variant));
  json trials = json::array();
  for (const auto& trial : sweep.trials) {
    trials.push_back({{"index", trial.index}, {"variant", trial.variant}, {"repeat", trial.repeat}});
  }
  return {
      {"axes", sweep.axes},
      {"variants", std::move(variants)},
      {"trials", std::move(trials)},
      {"excluded_count", sweep.excluded_count},
      {"variant_count", sweep.variants.size()},
      {"trial_count", sweep.trials.size()},
  };
}

}  // namespace bakeoff::spec
