#include "experiments/sweep/sweep_spec.h"

#include "experiments/sweep/duration.h"

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
    case Order::kLockstep: return "lockstep";
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
                           {"args", spec.workload.command_args},
                           {"flags", spec.workload.command_flags}};
    if (const auto& own = spec.workload.own_command) {
      workload["command"]["argv"] = own->argv;
      workload["command"]["env"] = own->env_set;
      workload["command"]["turns"] = own->turns;
    }
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
        {"max_attempts", spec.limits.max_attempts},
        {"turn_timeout_s", spec.limits.turn_timeout.count()}}},
      {"warnings", spec.warnings},
  };
  if (spec.method == Method::kRandom) out["count"] = spec.count;
  return out;
}

namespace {

// Reads `stored` field by field; the first problem is kept and later reads are no-ops.
class StoredSpecReader {
 public:
  const json* Find(const json& object, const char* key, const std::string& where) {
    if (!object.is_object()) return Fail(where + " is not an object");
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  template <typename T>
  void Read(const json& object, const char* key, const std::string& where, T* out) {
    const json* value = Find(object, key, where);
    if (value == nullptr || !error_.empty()) return;
    try {
      *out = value->get<T>();
    } catch (const json::exception&) {
      Fail(where + "." + key + " has the wrong type (" + value->type_name() + ")");
    }
  }
  template <typename E>
  void ReadEnum(const json& object, const char* key, const std::string& where,
                std::initializer_list<E> choices, const char* (*name)(E), E* out) {
    std::string text;
    Read(object, key, where, &text);
    if (text.empty() || !error_.empty()) return;
    for (E choice : choices) {
      if (text == name(choice)) {
        *out = choice;
        return;
      }
    }
    Fail(where + "." + key + " \"" + text + "\" is not a known value");
  }
  const json* Fail(const std::string& problem) {
    if (error_.empty()) error_ = problem;
    return nullptr;
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

namespace {

void ReadStoredWorkload(StoredSpecReader& r, const json& workload, SweepSpec& spec) {
  r.Read(workload, "defaults", "workload", &spec.workload.defaults);
  r.ReadEnum(workload, "executor", "workload", {Executor::kLora, Executor::kCommand}, ExecutorName,
             &spec.workload.executor);
  const json* command = r.Find(workload, "command", "workload");
  if (command == nullptr) return;
  r.Read(*command, "template", "workload.command", &spec.workload.command_template);
  r.Read(*command, "args", "workload.command", &spec.workload.command_args);
  r.Read(*command, "flags", "workload.command", &spec.workload.command_flags);
  if (command->contains("argv")) {
    ExecutorTemplate own;
    own.name = kSweepCommandName;
    own.from_sweep = true;
    own.flags = true;
    r.Read(*command, "argv", "workload.command", &own.argv);
    r.Read(*command, "env", "workload.command", &own.env_set);
    r.Read(*command, "turns", "workload.command", &own.turns);
    spec.workload.own_command = std::move(own);
  }
}

void ReadStoredParameters(StoredSpecReader& r, const json& parameters, SweepSpec& spec) {
  if (!parameters.is_array()) r.Fail("spec.parameters is not an array");
  for (size_t i = 0; parameters.is_array() && i < parameters.size(); ++i) {
    const json& p = parameters[i];
    const std::string where = "parameters[" + std::to_string(i) + "]";
    ParameterAxis axis;
    r.Read(p, "name", where, &axis.name);
    if (const json* d = r.Find(p, "distribution", where)) {
      Distribution dist;
      r.ReadEnum(*d, "kind", where + ".distribution",
                 {Distribution::Kind::kIntUniform, Distribution::Kind::kUniform, Distribution::Kind::kLogUniform},
                 DistributionName, &dist.kind);
      r.Read(*d, "min", where + ".distribution", &dist.min);
      r.Read(*d, "max", where + ".distribution", &dist.max);
      axis.distribution = dist;
    } else if (const json* value = r.Find(p, "value", where)) {
      axis.values = {*value};
      axis.fixed = true;
    } else {
      r.Read(p, "values", where, &axis.values);
    }
    spec.parameters.push_back(std::move(axis));
  }
}

// exclude and baseline: lists of (axis, value) matches.
void ReadStoredMatches(StoredSpecReader& r, const json& stored, SweepSpec& spec) {
  if (const json* exclude = r.Find(stored, "exclude", "spec")) {
    if (!exclude->is_array()) r.Fail("spec.exclude is not an array");
    for (size_t i = 0; exclude->is_array() && i < exclude->size(); ++i) {
      const json& rule = (*exclude)[i];
      if (!rule.is_object()) {
        r.Fail("spec.exclude[" + std::to_string(i) + "] is not an object");
        break;
      }
      ExcludeRule e;
      for (const auto& [key, value] : rule.items()) e.match.emplace_back(key, value);
      spec.exclude.push_back(std::move(e));
    }
  }
  if (const json* baseline = r.Find(stored, "baseline", "spec")) {
    if (!baseline->is_object()) r.Fail("spec.baseline is not an object");
    if (baseline->is_object()) {
      for (const auto& [key, value] : baseline->items()) spec.baseline.emplace_back(key, value);
    }
  }
}

// repeats (fixed or adaptive), order, resources and limits.
void ReadStoredDesign(StoredSpecReader& r, const json& stored, SweepSpec& spec) {
  r.Read(stored, "repeats", "spec", &spec.repeats);
  if (const json* adaptive = r.Find(stored, "adaptive_repeats", "spec")) {
    AdaptiveRepeats a;
    r.Read(*adaptive, "min", "adaptive_repeats", &a.min);
    r.Read(*adaptive, "max", "adaptive_repeats", &a.max);
    r.Read(*adaptive, "ci_half_width", "adaptive_repeats", &a.ci_half_width);
    if (r.error().empty() && (a.min < 2 || a.max < a.min)) r.Fail("adaptive_repeats: min must be >= 2 and <= max");
    spec.adaptive = a;
  }
  r.ReadEnum(stored, "order", "spec", {Order::kInterleaved, Order::kSequential, Order::kRandom, Order::kLockstep},
             OrderName, &spec.order);
  if (const json* resources = r.Find(stored, "resources", "spec")) {
    r.Read(*resources, "device", "resources", &spec.resources.device);
    r.Read(*resources, "gpu_type", "resources", &spec.resources.gpu_type);
  }
  if (const json* limits = r.Find(stored, "limits", "spec")) {
    int64_t timeout_s = spec.limits.trial_timeout.count();
    r.Read(*limits, "trial_timeout_s", "limits", &timeout_s);
    spec.limits.trial_timeout = std::chrono::seconds(timeout_s);
    r.Read(*limits, "max_attempts", "limits", &spec.limits.max_attempts);
    if (limits->contains("turn_timeout_s")) {  // absent in sweeps stored before lockstep
      int64_t turn_s = spec.limits.turn_timeout.count();
      r.Read(*limits, "turn_timeout_s", "limits", &turn_s);
      spec.limits.turn_timeout = std::chrono::seconds(turn_s);
    }
  }
}

}  // namespace

Result<SweepSpec> SweepSpecFromJson(const json& stored) {
  StoredSpecReader r;
  SweepSpec spec;
  r.Read(stored, "source", "spec", &spec.source_name);
  r.Read(stored, "name", "spec", &spec.name);
  r.Read(stored, "question", "spec", &spec.question);
  if (const json* workload = r.Find(stored, "workload", "spec")) ReadStoredWorkload(r, *workload, spec);
  r.ReadEnum(stored, "method", "spec", {Method::kGrid, Method::kRandom}, MethodName, &spec.method);
  r.Read(stored, "seed", "spec", &spec.seed);
  r.Read(stored, "count", "spec", &spec.count);
  if (const json* parameters = r.Find(stored, "parameters", "spec")) ReadStoredParameters(r, *parameters, spec);
  ReadStoredMatches(r, stored, spec);
  ReadStoredDesign(r, stored, spec);
  r.Read(stored, "warnings", "spec", &spec.warnings);
  if (!r.error().empty()) return Status::InvalidArgument("stored sweep spec: " + r.error());
  return spec;
}

}  // namespace bakeoff::spec
