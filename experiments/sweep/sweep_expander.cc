#include "experiments/sweep/sweep_expander.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "experiments/sweep/trainer_fields.h"

namespace bakeoff::spec {
namespace {

using nlohmann::json;
using Assignment = std::vector<json>;  // one value per spec.parameters entry, same order

// SplitMix64: a fully specified generator, so a seed means the same draws and order on
// every platform (std::uniform_int_distribution and std::shuffle are not specified).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), without modulo bias. REQUIRES: n > 0.
  uint64_t Below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % n;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Sampled reals keep six significant digits so that keys stay readable.
double RoundSignificant(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return std::strtod(buffer, nullptr);
}

// A key under which values that nlohmann's == holds equal fall together (it compares 1
// and 1.0 equal, so numbers are keyed by their double); callers confirm with ==.
void AppendValueKey(const json& v, std::string& out) {
  if (v.is_number()) {
    double d = v.get<double>();
    char buffer[40];
    std::snprintf(buffer, sizeof(buffer), "n%.17g,", d == 0 ? 0.0 : d);
    out += buffer;
  } else if (v.is_array()) {
    out += '[';
    for (const auto& e : v) AppendValueKey(e, out);
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    for (const auto& [k, e] : v.items()) {
      out += json(k).dump();
      out += ':';
      AppendValueKey(e, out);
    }
    out += '}';
  } else {
    out += v.dump();
    out += ',';
  }
}

std::string ValueKey(const json& v) {
  std::string key;
  AppendValueKey(v, key);
  return key;
}

constexpr size_t kNoValue = static_cast<size_t>(-1);

// One field of an exclude rule, resolved against the spec: the parameter it names and,
// on an axis of listed values, the value's id (the index of the first equal value), so a
// grid point matches it by an integer comparison. On a distribution axis (method
// random) the drawn value is compared with `value`.
struct RuleTerm {
  size_t param = 0;
  size_t id = kNoValue;
  json value;
};

// The rules of a grid that name the same axes, as one lookup: a bit per combination of
// those axes' value ids, set where some rule matches. A point costs one lookup per
// shape, whatever the number of rules.
struct RuleShape {
  std::vector<size_t> params;   // sorted
  std::vector<size_t> strides;  // mixed radix over the axes' value counts
  std::vector<bool> matched;
};

class Expander {
 public:
  Expander(const SweepSpec& spec, const ExpandOptions& options) : spec_(spec), options_(options) {
    for (size_t i = 0; i < spec_.parameters.size(); ++i) {
      if (spec_.parameters[i].Varies()) {
        varying_.push_back(i);
        result_.axes.push_back(spec_.parameters[i].name);
      }
    }
    workload_ = std::make_shared<const json>(spec_.workload.defaults);
    IndexValues();
    ResolveRules();
  }

  Result<ExpandedSweep> Run() {
    BAKEOFF_RETURN_IF_ERROR(spec_.method == Method::kGrid ? Grid() : Random());
    if (result_.variants.empty()) {
      return Status::InvalidArgument(
          Where() + ": every variant is excluded (" + std::to_string(result_.excluded_count) +
          " excluded); loosen the exclude rules");
    }
    BAKEOFF_RETURN_IF_ERROR(Pair());
    return Trials();
  }

 private:
  std::string Where() const {
    return spec_.source_name + (spec_.name.empty() ? "" : " (sweep " + spec_.name + ")");
  }

  // Gives each listed value of each parameter an id: the index of the first value equal
  // to it (nlohmann's ==), found through a hash of ValueKey, so resolving a rule costs a
  // lookup rather than a scan of the axis.
  void IndexValues() {
    value_ids_.resize(spec_.parameters.size());
    value_index_.resize(spec_.parameters.size());
    distinct_values_.assign(spec_.parameters.size(), 0);
    for (size_t i = 0; i < spec_.parameters.size(); ++i) {
      const auto& values = spec_.parameters[i].values;
      for (size_t j = 0; j < values.size(); ++j) {
        size_t id = FindValue(i, values[j]);
        if (id == kNoValue) {
          id = j;
          value_index_[i].emplace(ValueKey(values[j]), j);
          ++distinct_values_[i];
        }
        value_ids_[i].push_back(id);
      }
    }
  }

  // The id of the listed value of parameter `param` equal to `value`, or kNoValue.
  size_t FindValue(size_t param, const json& value) const {
    auto [begin, end] = value_index_[param].equal_range(ValueKey(value));
    for (auto it = begin; it != end; ++it) {
      if (spec_.parameters[param].values[it->second] == value) return it->second;
    }
    return kNoValue;
  }

  // Resolves each exclude rule once against the spec. A rule that can never match is
  // dropped: it names a value that is not one of its axis's listed values (every variant
  // takes one of them: grid points, random draws and baseline counterparts alike), or a
  // workload field, "device" or trainer default that differs from the one the sweep
  // uses. Fields that always match (such a constant when equal, an axis with one value)
  // are left out, so a rule left with no fields matches every variant.
  void ResolveRules() {
    for (const auto& rule : spec_.exclude) {
      std::vector<RuleTerm> terms;
      bool never = false;
      for (const auto& [key, value] : rule.match) {
        bool found = false;
        for (size_t i = 0; i < spec_.parameters.size(); ++i) {
          const ParameterAxis& axis = spec_.parameters[i];
          if (axis.name != key) continue;
          found = true;
          if (axis.distribution) {
            terms.push_back({i, kNoValue, value});
            continue;
          }
          size_t id = FindValue(i, value);
          if (id == kNoValue) {
            never = true;
          } else if (distinct_values_[i] > 1) {
            terms.push_back({i, id, value});
          }
        }
        if (found) continue;
        json constant;
        if (key == "device") {
          constant = spec_.resources.device;
        } else if (spec_.workload.defaults.contains(key)) {
          constant = spec_.workload.defaults[key];
        } else if (const TrainerField* field = FindTrainerField(key)) {
          auto v = NormalizeTrainerValue(*field, field->default_value);
          if (v.ok()) constant = *v;
        }
        if (constant != value) never = true;
      }
      if (never) continue;
      std::sort(terms.begin(), terms.end(),
                [](const RuleTerm& a, const RuleTerm& b) { return a.param < b.param; });
      if (terms.empty()) matches_all_ = true;
      rules_.push_back(std::move(terms));
    }
  }

  // Exclude-rule work over the cap, as an error.
  Status OverExcludeSteps(const std::string& what, const std::string& hint) const {
    return Status::ResourceExhausted(Where() + ": applying the " + std::to_string(rules_.size()) +
                                     " exclude rules " + what + ", over the limit of " +
                                     std::to_string(options_.max_exclude_steps) + " steps; " + hint);
  }

  // Method random: whether the drawn (or counterpart) assignment matches a rule, values
  // compared as JSON (drawn reals cannot be indexed). Counts the comparisons against
  // max_exclude_steps.
  bool Excluded(const Assignment& a) {
    for (const auto& rule : rules_) {
      bool all = true;
      for (const auto& term : rule) {
        ++exclude_steps_;
        if (a[term.param] != term.value) {
          all = false;
          break;
        }
      }
      if (all) return true;
    }
    return false;
  }

  Status CheckExcludeSteps() const {
    if (exclude_steps_ <= options_.max_exclude_steps) return Status::Ok();
    return OverExcludeSteps("to the random draws took more value comparisons",
                            "loosen exclude (fewer rules on a distribution axis) or lower count");
  }

  std::string Key(const Assignment& a) const {
    if (varying_.empty()) return "default";
    std::string key;
    for (size_t i : varying_) {
      if (!key.empty()) key += ",";
      key += spec_.parameters[i].name + "=" + CanonicalValue(a[i]);
    }
    return key;
  }

  void AddVariant(const Assignment& a, bool added_as_counterpart) {
    Variant v;
    v.index = result_.variants.size();
    v.key = Key(a);
    for (size_t i : varying_) v.axis_values.emplace_back(spec_.parameters[i].name, a[i]);
    // The variant's own fields; the workload's defaults are shared (workload_).
    json own = json::object();
    std::string executor = spec_.workload.executor == Executor::kCommand ? spec_.workload.command_template : "";
    for (size_t i = 0; i < a.size(); ++i) {
      if (spec_.parameters[i].name == kExecutorAxis) {
        executor = a[i].get<std::string>() == "lora" ? "" : a[i].get<std::string>();
      } else {
        own[spec_.parameters[i].name] = a[i];
      }
    }
    own["device"] = spec_.resources.device;
    if (!executor.empty()) {
      // What the worker runs: an allowlisted template it looks up in its own catalog.
      own["command_template"] = executor;
      own["command_args"] = spec_.workload.command_args;
      // The parameters, for the worker to pass as --name=value where the template does.
      json parameters = json::array();
      if (spec_.workload.command_flags) {
        for (const auto& axis : spec_.parameters) {
          if (axis.name != kExecutorAxis) parameters.push_back(axis.name);
        }
      }
      own["command_parameters"] = std::move(parameters);
    }
    const json* ws = own.contains("world_size") ? &own["world_size"]
                     : workload_->contains("world_size") ? &workload_->at("world_size")
                                                         : nullptr;
    v.world_size = ws != nullptr && ws->is_number_integer() && ws->get<int64_t>() >= 1
                       ? static_cast<int>(ws->get<int64_t>())
                       : 1;
    own["world_size"] = v.world_size;
    v.config = VariantConfig(workload_, std::move(own));
    v.added_as_counterpart = added_as_counterpart;
    index_by_key_[v.key] = v.index;
    assignments_.push_back(a);
    result_.variants.push_back(std::move(v));
  }

  // The cap on trials per sweep, as an error: `variants` of them would be too many.
  Status OverTrialCap(size_t variants) const {
    auto repeats = static_cast<size_t>(spec_.repeats);
    return Status::ResourceExhausted(
        Where() + ": " + std::to_string(variants * repeats) + " trials (" + std::to_string(variants) +
        " variants x " + std::to_string(repeats) +
        (spec_.adaptive ? " repeats, the adaptive max" : " repeats") + ") is over the cap of " +
        std::to_string(options_.max_trials) +
        " trials per sweep; remove axis values, add exclude rules or lower repeats" +
        (spec_.adaptive ? ".max" : ""));
  }

  // The variants share the workload in memory, but each is stored (and sent to a worker)
  // as a whole configuration: bound their sum before any is built (a long string field
  // times many variants is that many bytes in the results store).
  Status CheckConfigBytes(size_t variants) const {
    size_t bytes = spec_.workload.defaults.dump().size();
    for (const auto& axis : spec_.parameters) {
      size_t widest = 0;
      for (const auto& value : axis.values) widest = std::max(widest, value.dump().size());
      bytes += axis.name.size() + widest + 4;
    }
    if (variants > 0 && bytes > options_.max_config_bytes / variants) {
      return Status::ResourceExhausted(
          Where() + ": " + std::to_string(variants) + " variants x " + std::to_string(bytes) +
          " bytes of trainer configuration each is over the limit of " +
          std::to_string(options_.max_config_bytes) +
          " bytes per sweep; shorten the workload's long fields or vary fewer values");
    }
    return Status::Ok();
  }

  // Groups the grid's rules by the axes they name, one lookup per group, after checking
  // the work: grid points x the axes named by each group.
  Status BuildShapes(size_t points) {
    if (matches_all_) return Status::Ok();
    std::map<std::vector<size_t>, size_t> shape_of;
    size_t width = 0;
    for (const auto& rule : rules_) {
      std::vector<size_t> params;
      for (const auto& term : rule) params.push_back(term.param);
      if (shape_of.emplace(params, shapes_.size()).second) {
        width += params.size();
        shapes_.push_back({std::move(params), {}, {}});
      }
    }
    if (width > 0 && points > options_.max_exclude_steps / width) {
      return OverExcludeSteps("to " + std::to_string(points) + " grid points takes " +
                              std::to_string(points) + " x " + std::to_string(width) +
                              " steps (the axes named by each of the " +
                              std::to_string(shapes_.size()) + " combinations of axes the rules name)",
                              "write rules that name the same axes, or remove axis values");
    }
    for (auto& shape : shapes_) {
      size_t size = 1;
      for (size_t param : shape.params) {
        shape.strides.push_back(size);
        size *= spec_.parameters[param].values.size();  // <= points: a sub-grid
      }
      shape.matched.assign(size, false);
    }
    for (const auto& rule : rules_) {
      std::vector<size_t> params;
      for (const auto& term : rule) params.push_back(term.param);
      RuleShape& shape = shapes_[shape_of.at(params)];
      size_t index = 0;
      for (size_t k = 0; k < rule.size(); ++k) index += rule[k].id * shape.strides[k];
      shape.matched[index] = true;
    }
    return Status::Ok();
  }

  // Whether the grid point whose parameters take these value ids is excluded (kNoValue:
  // a value no rule names). Integer work only: one lookup per shape.
  bool ExcludedIds(const std::vector<size_t>& ids) const {
    if (matches_all_) return true;
    for (const auto& shape : shapes_) {
      size_t index = 0;
      bool possible = true;
      for (size_t k = 0; k < shape.params.size(); ++k) {
        size_t id = ids[shape.params[k]];
        if (id == kNoValue) {
          possible = false;
          break;
        }
        index += id * shape.strides[k];
      }
      if (possible && shape.matched[index]) return true;
    }
    return false;
  }

  // Odometer: the last axis written changes fastest; ids follow digits.
  void NextPoint(std::vector<size_t>& digits, std::vector<size_t>& ids) const {
    for (size_t i = digits.size(); i-- > 0;) {
      bool carry = ++digits[i] == spec_.parameters[i].values.size();
      if (carry) digits[i] = 0;
      ids[i] = value_ids_[i][digits[i]];
      if (!carry) break;
    }
  }

  Status Grid() {
    size_t points = 1;
    for (const auto& axis : spec_.parameters) {
      if (axis.values.empty()) {
        return Status::InvalidArgument(Where() + ": parameter " + axis.name +
                                       " has no values; a grid needs {values: [...]}");
      }
      if (points > options_.max_grid_points / axis.values.size()) {
        return Status::ResourceExhausted(
            Where() + ": the grid has more than " + std::to_string(options_.max_grid_points) +
            " points before exclude rules, the limit; remove axis values or use method: random");
      }
      points *= axis.values.size();
    }
    BAKEOFF_RETURN_IF_ERROR(BuildShapes(points));
    // Mark the excluded points and count the variants first, on value ids, and check the
    // caps before any is built: a 100x100x100 grid must cost a count, not a million
    // configurations.
    std::vector<bool> excluded(points);
    std::vector<size_t> digits(spec_.parameters.size(), 0);
    std::vector<size_t> ids(spec_.parameters.size(), 0);
    size_t kept = 0;
    for (size_t p = 0; p < points; ++p, NextPoint(digits, ids)) {
      excluded[p] = ExcludedIds(ids);
      kept += !excluded[p];
    }
    const auto repeats = static_cast<size_t>(std::max(spec_.repeats, 1));
    if (kept > options_.max_trials / repeats) return OverTrialCap(kept);
    BAKEOFF_RETURN_IF_ERROR(CheckConfigBytes(kept));
    result_.variants.reserve(kept);
    variant_ids_.reserve(kept);
    result_.excluded_count = points - kept;
    std::fill(digits.begin(), digits.end(), 0);
    std::fill(ids.begin(), ids.end(), 0);
    Assignment a(spec_.parameters.size());
    for (size_t p = 0; p < points; ++p, NextPoint(digits, ids)) {
      if (excluded[p]) continue;
      for (size_t i = 0; i < digits.size(); ++i) a[i] = spec_.parameters[i].values[digits[i]];
      AddVariant(a, false);
      variant_ids_.push_back(ids);
    }
    return Status::Ok();
  }

  std::optional<json> Draw(const ParameterAxis& axis, SplitMix64& rng) const {
    if (!axis.distribution) return axis.values[rng.Below(axis.values.size())];
    const Distribution& d = *axis.distribution;
    const TrainerField* field = FindTrainerField(axis.name);
    bool int_field = field ? field->kind == TrainerField::Kind::kInt
                           : d.kind == Distribution::Kind::kIntUniform;
    json value;
    switch (d.kind) {
      case Distribution::Kind::kIntUniform: {
        auto lo = static_cast<int64_t>(d.min), hi = static_cast<int64_t>(d.max);
        value = lo + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(hi - lo) + 1));
        break;
      }
      case Distribution::Kind::kUniform:
        value = RoundSignificant(d.min + rng.Unit() * (d.max - d.min));
        break;
      case Distribution::Kind::kLogUniform: {
        double x = std::exp(std::log(d.min) + rng.Unit() * (std::log(d.max) - std::log(d.min)));
        if (int_field) {
          value = std::clamp<int64_t>(std::llround(x), static_cast<int64_t>(d.min),
                                      static_cast<int64_t>(d.max));
        } else {
          value = RoundSignificant(x);
        }
        break;
      }
    }
    // Rounding can land on an excluded bound (lora_dropout < 1): the caller draws again.
    if (field) {
      auto normalized = NormalizeTrainerValue(*field, value);
      if (!normalized.ok()) return std::nullopt;
      return *normalized;
    }
    return value;
  }

  Status Random() {
    bool discrete = true;
    size_t space = 1;
    for (const auto& axis : spec_.parameters) {
      if (axis.distribution) {
        discrete = false;
      } else if (space <= SIZE_MAX / axis.values.size()) {
        space *= axis.values.size();
      } else {
        space = SIZE_MAX;
      }
    }
    auto count = static_cast<size_t>(spec_.count);
    if (discrete && count > space) {
      return Status::InvalidArgument(Where() + ": count " + std::to_string(count) +
                                     " is more than the " + std::to_string(space) +
                                     " distinct variants the parameters allow; lower count or "
                                     "use method: grid");
    }
    if (count > options_.max_trials) {
      return Status::ResourceExhausted(Where() + ": count " + std::to_string(count) +
                                       " is over the cap of " + std::to_string(options_.max_trials) +
                                       " trials per sweep; lower count");
    }
    // Counterparts may double the variants drawn.
    BAKEOFF_RETURN_IF_ERROR(CheckConfigBytes(spec_.baseline.empty() ? count : 2 * count));
    SplitMix64 rng(spec_.seed);
    size_t drawn = 0;
    const size_t max_attempts = count * 100 + 1000;
    for (size_t attempt = 0; attempt < max_attempts && drawn < count; ++attempt) {
      Assignment a;
      bool ok = true;
      for (const auto& axis : spec_.parameters) {
        auto v = Draw(axis, rng);
        if (!v) {
          ok = false;
          break;
        }
        a.push_back(std::move(*v));
      }
      if (!ok) continue;
      bool excluded = Excluded(a);
      BAKEOFF_RETURN_IF_ERROR(CheckExcludeSteps());
      if (excluded) {
        ++result_.excluded_count;
        continue;
      }
      if (index_by_key_.count(Key(a))) continue;
      AddVariant(a, false);
      ++drawn;
    }
    if (drawn < count) {
      return Status::InvalidArgument(
          Where() + ": drew only " + std::to_string(drawn) + " distinct variants of count " +
          std::to_string(count) + " in " + std::to_string(max_attempts) +
          " attempts (exclude rules or a small space); lower count or loosen exclude");
    }
    // Every comparison is paired: make sure each drawn variant's counterpart runs too.
    if (!spec_.baseline.empty()) {
      size_t n = result_.variants.size();
      for (size_t i = 0; i < n; ++i) {
        Assignment c = Counterpart(assignments_[i]);
        bool excluded = Excluded(c);
        BAKEOFF_RETURN_IF_ERROR(CheckExcludeSteps());
        if (!excluded && !index_by_key_.count(Key(c))) AddVariant(c, true);
      }
    }
    return Status::Ok();
  }

  Assignment Counterpart(const Assignment& a) const {
    Assignment c = a;
    for (const auto& [name, value] : spec_.baseline) {
      for (size_t i = 0; i < spec_.parameters.size(); ++i) {
        if (spec_.parameters[i].name == name) c[i] = value;
      }
    }
    return c;
  }

  // Whether variant `v`'s counterpart `c` is excluded: on value ids for a grid, else
  // (method random) by comparing values.
  bool CounterpartExcluded(const Variant& v, const Assignment& c) {
    if (spec_.method == Method::kRandom) return Excluded(c);
    std::vector<size_t> ids = variant_ids_[v.index];
    for (const auto& [name, value] : spec_.baseline) {
      for (size_t i = 0; i < spec_.parameters.size(); ++i) {
        if (spec_.parameters[i].name == name) ids[i] = FindValue(i, value);
      }
    }
    return ExcludedIds(ids);
  }

  Status Pair() {
    if (spec_.baseline.empty()) return Status::Ok();
    for (auto& v : result_.variants) {
      const Assignment& a = assignments_[v.index];
      Assignment c = Counterpart(a);
      v.counterpart_key = Key(c);
      v.is_baseline = c == a;
      bool excluded = CounterpartExcluded(v, c);
      BAKEOFF_RETURN_IF_ERROR(CheckExcludeSteps());
      if (excluded) {
        v.counterpart_excluded = true;
        continue;
      }
      auto it = index_by_key_.find(v.counterpart_key);
      if (it != index_by_key_.end()) v.counterpart = it->second;
    }
    return Status::Ok();
  }

  Result<ExpandedSweep> Trials() {
    size_t variants = result_.variants.size();
    auto repeats = static_cast<size_t>(spec_.repeats);
    if (variants > options_.max_trials / repeats) return OverTrialCap(variants);
    std::vector<Trial>& trials = result_.trials;
    trials.reserve(variants * repeats);
    if (spec_.order == Order::kSequential) {
      for (size_t v = 0; v < variants; ++v) {
        for (size_t r = 0; r < repeats; ++r) trials.push_back({0, v, static_cast<int>(r)});
      }
    } else {
      // Interleaved, counterbalanced: every other repeat runs the variants in reverse
      // (AB BA AB ...), so that neither side of a pair always runs first. A drift over
      // the sweep, or a cost the first trial of a group pays, then cancels over two
      // repeats instead of favouring whichever side runs second (docs/sweep.md, "order").
      // Lockstep keeps this order: a group's side order (who goes first) is its trials'
      // order here. Random shuffles the plain list, so a seed keeps its order.
      for (size_t r = 0; r < repeats; ++r) {
        for (size_t i = 0; i < variants; ++i) {
          const bool reverse = spec_.order != Order::kRandom && r % 2 == 1;
          size_t v = reverse ? variants - 1 - i : i;
          trials.push_back({0, v, static_cast<int>(r)});
        }
      }
    }
    if (spec_.order == Order::kRandom) {
      // A stream of its own, so the order does not depend on how many draws method
      // random consumed.
      SplitMix64 rng(spec_.seed ^ 0x6F72646572ULL);
      for (size_t i = trials.size(); i > 1; --i) {
        std::swap(trials[i - 1], trials[rng.Below(i)]);
      }
    }
    for (size_t i = 0; i < trials.size(); ++i) trials[i].index = i;
    return std::move(result_);
  }

  const SweepSpec& spec_;
  ExpandOptions options_;
  std::vector<size_t> varying_;
  // The workload's defaults, one copy shared by every variant's configuration.
  std::shared_ptr<const json> workload_;
  // Per parameter: each listed value's id (the index of the first equal value), the
  // first-of-their-kind values by ValueKey, and how many distinct values there are.
  std::vector<std::vector<size_t>> value_ids_;
  std::vector<std::unordered_multimap<std::string, size_t>> value_index_;
  std::vector<size_t> distinct_values_;
  std::vector<std::vector<RuleTerm>> rules_;  // the rules that can match, resolved
  bool matches_all_ = false;                  // a rule that matches every variant
  std::vector<RuleShape> shapes_;             // method grid: rules_ grouped by axes
  std::vector<std::vector<size_t>> variant_ids_;  // method grid: parallel to variants
  size_t exclude_steps_ = 0;                  // method random: comparisons made
  std::vector<Assignment> assignments_;  // parallel to result_.variants
  std::map<std::string, size_t> index_by_key_;
  ExpandedSweep result_;
};

}  // namespace

Result<ExpandedSweep> Expand(const SweepSpec& spec, const ExpandOptions& options) {
  return Expander(spec, options).Run();
}

}  // namespace bakeoff::spec
