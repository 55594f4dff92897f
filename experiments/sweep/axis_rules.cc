#include "experiments/sweep/axis_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "experiments/sweep/sweep_spec.h"
#include "experiments/sweep/trainer_fields.h"

namespace bakeoff::spec {
namespace {

// The axes that are not trainer fields, and whether each keeps the math.
struct OtherAxis {
  const char* name;
  bool keeps_math;
};
constexpr OtherAxis kOtherAxes[] = {
    {kExecutorAxis, true},    // the native trainer against a Python stack, same model and data
    {"compile_cache", true},  // a cold or warm compile cache: the same graphs
    {"compile", true},        // what users' own scripts call compile_mode's switch (issue 47)
    {"torch_compile", true},
};

// The trainer field `axis`, launcher-only ones included (they never reach a sweep).
const TrainerField* Field(const std::string& axis) { return trainer::FindTrainerField(axis); }

}  // namespace

bool AxisKeepsTheMath(const std::string& axis) {
  if (const TrainerField* f = Field(axis)) return f->math == TrainerField::Math::kKeeps;
  return std::any_of(std::begin(kOtherAxes), std::end(kOtherAxes),
                     [&](const OtherAxis& a) { return axis == a.name && a.keeps_math; });
}

bool AxisIsBatchFactor(const std::string& axis) {
  const TrainerField* f = Field(axis);
  return f != nullptr && f->math == TrainerField::Math::kBatchFactor;
}

bool ValueNeedsCuda(const std::string& axis, const nlohmann::json& value) {
  const TrainerField* f = Field(axis);
  if (f == nullptr || !value.is_string()) return false;
  return std::find(f->cuda_only.begin(), f->cuda_only.end(), value.get<std::string>()) != f->cuda_only.end();
}

std::vector<std::string> AxesChangingTheMath(const std::map<std::string, std::string>& variant,
                                             const std::map<std::string, std::string>& counterpart) {
  std::vector<std::string> changing;
  std::set<std::string> names, differing_factors;
  for (const auto& [name, value] : variant) names.insert(name);
  for (const auto& [name, value] : counterpart) names.insert(name);
  for (const std::string& name : names) {
    auto a = variant.find(name), b = counterpart.find(name);
    if (a != variant.end() && b != counterpart.end() && a->second == b->second) continue;
    if (AxisIsBatchFactor(name)) {
      differing_factors.insert(name);
    } else if (!AxisKeepsTheMath(name)) {
      changing.push_back(name);
    }
  }
  if (differing_factors.empty()) return changing;
  auto global_batch = [&](const std::map<std::string, std::string>& params) {
    double p = 1;
    for (const auto& [name, value] : params) {
      if (AxisIsBatchFactor(name)) p *= std::strtod(value.c_str(), nullptr);
    }
    return p;
  };
  if (std::fabs(global_batch(variant) - global_batch(counterpart)) > 1e-9) {
    for (const std::string& name : differing_factors) changing.push_back(name + " (global batch)");
  }
  return changing;
}

}  // namespace bakeoff::spec
