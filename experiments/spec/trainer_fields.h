// The native trainer's configuration fields (docs/trainer.md is the contract): name,
// type, default and allowed values. The sweep parser checks workload fields, parameter
// values, exclude rules and baselines against this table so that a mistake is reported
// at its line in the sweep file, before any trial starts.
// Thread-safety: the table is immutable after static initialisation.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::spec {

struct TrainerField {
  enum class Kind {
    kInt,      // integer in [min, max]
    kNumber,   // real in [min, max] (or (min, max) with the exclusive flags); stored as double
    kBool,
    kEnum,     // one of `choices`
    kString,   // free text (a path, for example)
    kDataset,  // one of `choices` or a path
    kModel,    // a preset from `choices` or {dim, layers, heads, kv_heads, ffn_dim, vocab}
    kTargets,  // a non-empty list without repeats, each one of `choices`
  };
  std::string name;
  Kind kind = Kind::kString;
  nlohmann::json default_value;  // the trainer's default; null when it has none (unset)
  std::vector<std::string> choices;
  double min = 0;
  double max = 0;
  bool min_exclusive = false;
  bool max_exclusive = false;

  // What a valid value looks like, for messages: "an integer >= 1", "one of fp32, bf16".
  std::string Expected() const;
};

// Every trainer field, in the order of docs/trainer.md.
const std::vector<TrainerField>& TrainerFields();

// The field called `name`, or nullptr.
const TrainerField* FindTrainerField(const std::string& name);

// `value` checked against `field` and normalised (a kNumber becomes a double, so that
// 16 and 16.0 are the same value). InvalidArgument says what was expected.
Result<nlohmann::json> NormalizeTrainerValue(const TrainerField& field,
                                             const nlohmann::json& value);

// The closest of `candidates` to `name` by edit distance when it is plausibly a typo,
// else "".
std::string ClosestName(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace bakeoff::spec
