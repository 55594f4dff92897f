#include "experiments/sweep/answer_comparisons.h"

#include <set>

namespace bakeoff::spec {

std::string SettingKey(const std::vector<std::string>& axis_order, const std::map<std::string, std::string>& params,
                       const std::string& skip_axis) {
  std::string key;
  std::set<std::string> done;
  auto add = [&](const std::string& name, const std::string& value) {
    if (name == skip_axis) return;
    key += (key.empty() ? "" : ",") + name + "=" + value;
  };
  for (const std::string& axis : axis_order) {
    auto it = params.find(axis);
    if (it == params.end() || done.count(axis)) continue;
    add(axis, it->second);
    done.insert(axis);
  }
  for (const auto& [name, value] : params) {
    if (!done.count(name)) add(name, value);
  }
  return key;
}

std::vector<AnswerComparison> AnswerComparisons(const std::vector<std::string>& axis_order,
                                                const std::map<std::string, std::string>& baseline,
                                                const std::vector<ComparedVariant>& variants) {
  std::vector<std::string> axes;
  for (const std::string& axis : axis_order) {
    if (!baseline.count(axis)) continue;
    std::set<std::string> values;
    for (const ComparedVariant& v : variants) {
      auto it = v.params.find(axis);
      if (it != v.params.end()) values.insert(it->second);
    }
    if (values.size() >= 2) axes.push_back(axis);
  }
  std::vector<AnswerComparison> out;
  if (axes.size() < 2) {
    for (const ComparedVariant& v : variants) {
      if (!v.counterpart_key.empty() && v.counterpart_key != v.key) {
        out.push_back(AnswerComparison{"", "", "", "", v.key, v.counterpart_key});
      }
    }
    return out;
  }
  std::map<std::string, const ComparedVariant*> by_setting;
  for (const ComparedVariant& v : variants) by_setting.emplace(SettingKey(axis_order, v.params), &v);
  for (const std::string& axis : axes) {
    const std::string& reference = baseline.at(axis);
    for (const ComparedVariant& v : variants) {
      auto value = v.params.find(axis);
      if (value == v.params.end() || value->second == reference) continue;
      auto cp_params = v.params;
      cp_params[axis] = reference;
      auto cp = by_setting.find(SettingKey(axis_order, cp_params));
      if (cp == by_setting.end()) continue;
      out.push_back(AnswerComparison{axis, value->second, reference, SettingKey(axis_order, v.params, axis), v.key,
                                     cp->second->key});
    }
  }
  return out;
}

}  // namespace bakeoff::spec
