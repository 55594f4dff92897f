#include "experiments/spec/sweep_spec.h"

#include "experiments/spec/duration.h"

namespace bakeoff::spec {

using nlohmann::json;

std::string SourceLocation::ToString() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

const ParameterAxis* SweepSpec::FindAxis(const std::string& axis_name) const {
  for (const auto& axis : parameters) {
    if (axis.name == axis_name) return &axis;
  }
  return nullptr;
}

std::string RepeatsVerdictWarning(const SweepSpec& spec) {
  bool varies = false;
  for (const auto& axis : spec.parameters) varies |= axis.Varies();
  if (!varies && !(spec.method == Method::kRandom && spec.count > 1)) return "";
  if (spec.adaptive) {
    if (spec.adaptive->min == 2) {
      return "repeats: min 2 rarely gives a verdict at the first look (its interval has 1 "
             "degree of freedom); min: 3 or more lets a large difference stop early "
             "(docs/statistics.md)";
    }
    return "";
  }
  if (spec.repeats == 1) {
    return "repeats: 1 cannot give a verdict: one run per variant sees no run-to-run "
           "variation, so every speedup is reported \"unclear\"; use repeats: " +
           std::to_string(kDefaultRepeats) + " (docs/statistics.md)";
  }
  if (spec.repeats == 2) {
    return "repeats: 2 rarely gives a verdict: its t interval has 1 degree of freedom (a 10% "
           "difference is detected in about 1 sweep of 5); use repeats: " +
           std::to_string(kDefaultRepeats) + " (docs/statistics.md)";
  }
  return "";
}

const char* MethodName(Method method) {
  return method == Method::kGrid ? "grid" : "random";
}

const char* OrderName(Order order) {
  switch (order) {
    case Order::kInterleaved: return "interleaved";
    case Order::kSequential: return "sequential";
    case Order::kRandom: return "random";
  }
  return "interleaved";
}

const char* ExecutorName(Executor executor) {
  return executor == Executor::kLora ? "lora" : "command";
}

const char* DistributionName(Distribution::Kind kind) {
  switch (kind) {
    case Distribution::Kind::kIntUniform: return "int_uniform";
    case Distribution::Kind::kUniform: return "uniform";
    case Distribution::Kind::kLogUniform: return "log_uniform";
  }
  return "uniform";
}

json ToJson(const SweepSpec& spec) {
  json workload = {{"defaults", spec.workload.defaults}};
  // With an executor axis the axis says each variant's executor.
  if (!spec.ComparesExecutors()) workload["executor"] = ExecutorName(spec.workload.executor);
  if (!spec.ComparesExecutors() && spec.workload.executor == Executor::kCommand) {
    workload["command"] = {{"template", spec.workload.command_template},
                           {"args", spec.workload.command_args}};
  }
  json parameters = json::array();
  for (const auto& axis : spec.parameters) {
    json p = {{"name", axis.name}, {"varies", axis.Varies()}};
    if (axis.distribution) {
      p["distribution"] = {{"kind", DistributionName(axis.distribution->kind)},
                           {"min", axis.distribution->min},
                           {"max", axis.distribution->max}};
    } else if (axis.fixed) {
      p["value"] = axis.values.front();
    } else {
      p["values"] = axis.values;
    }
    parameters.push_back(std::move(p));
  }
  json exclude = json::array();
  for (const auto& rule : spec.exclude) {
    json r = json::object();
    for (const auto& [key, value] : rule.match) r[key] = value;
    exclude.push_back(std::move(r));
  }
  json baseline = json::object();
  for (const auto& [key, value] : spec.baseline) baseline[key] = value;
  json out = {
      {"source", spec.source_name},
      {"name", spec.name},
      {"question", spec.question},
      {"workload", std::move(workload)},
      {"method", MethodName(spec.method)},
      {"seed", spec.seed},
      {"parameters", std::move(parameters)},
      {"exclude", std::move(exclude)},
      {"baseline", spec.baseline.empty() ? json(nullptr) : std::move(baseline)},
      {"repeats", spec.repeats},
      {"adaptive_repeats", spec.adaptive ? json{{"min", spec.adaptive->min},
                                                {"max", spec.adaptive->max},
                                                {"ci_half_width", spec.adaptive->ci_half_width}}
                                         : json(nullptr)},
      {"order", OrderName(spec.order)},
      {"resources", {{"device", spec.resources.device}, {"gpu_type", spec.resources.gpu_type}}},
      {"limits",
       {{"trial_timeout_s", spec.limits.trial_timeout.count()},
        {"trial_timeout", FormatDuration(spec.limits.trial_timeout)},
        {"max_attempts", spec.limits.max_attempts}}},
      {"warnings", spec.warnings},
  };
  if (spec.method == Method::kRandom) out["count"] = spec.count;
  return out;
}

}  // namespace bakeoff::spec
