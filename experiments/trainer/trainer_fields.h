// The trainer's configuration contract, written down once: every field's name, type,
// default, range or choices, and the TrainerConfig member it sets. The sweep validator
// (experiments/sweep) checks sweeps against this table and the trainer applies its
// configuration through it, so `bakeoff validate` and the trainer cannot disagree on a
// boundary (tests/experiments/trainer/trainer_fields_test.cc walks the table to prove
// it). Defaults are read from a default-constructed TrainerConfig, never restated.
// No LibTorch here. Thread-safety: the table is immutable after static initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::trainer {

struct TrainerConfig;

struct TrainerField {
  enum class Kind {
    kInt,      // integer in [min, max]
    kNumber,   // real in [min, max] (or (min, max) with the exclusive flags); stored as double
    kBool,
    kEnum,     // one of `choices`
    kString,   // free text
    kDataset,  // one of `choices` or a file name inside the worker's data root (IsSandboxedName)
    kOutput,   // a file name inside the trial's output directory (IsSandboxedName)
    kModel,    // a preset from `choices` or {dim, layers, heads, kv_heads, ffn_dim, vocab}
    kTargets,  // a non-empty list without repeats, each one of `choices`
  };
  using Member = std::variant<int64_t TrainerConfig::*, double TrainerConfig::*, bool TrainerConfig::*,
                              std::string TrainerConfig::*, std::vector<std::string> TrainerConfig::*,
                              nlohmann::json TrainerConfig::*>;

  std::string name;
  Kind kind = Kind::kString;
  Member member;
  nlohmann::json default_value;  // the default TrainerConfig's value; null when unset ("")
  std::vector<std::string> choices;
  double min = 0;
  double max = 0;
  bool min_exclusive = false;
  bool max_exclusive = false;
  // Set by the launcher (rank, store, ...), never by a sweep: the sweep validator
  // refuses these names.
  bool launcher_only = false;

  // What two variants that differ only in this field train (the report's loss parity,
  // experiments/sweep/axis_rules.h): kChanges a different loss curve (lr, lora_rank);
  // kKeeps the same one, computed another way (compile_mode, zero_stage); kBatchFactor
  // the same one while the global batch, the product of every such field, is unchanged
  // (world_size, micro_batch, grad_accum).
  enum class Math { kChanges, kKeeps, kBatchFactor };
  Math math = Math::kChanges;
  // The choices that need device cuda: on cpu such a trial ends unsupported, and the
  // sweep validator warns (offload optimizer, compile_mode cudagraph).
  std::vector<std::string> cuda_only;

  // What a valid value looks like, for messages: "an integer >= 1", "one of fp32, bf16".
  std::string Expected() const;
};

// Every trainer field, in the order of docs/trainer.md (launcher-only fields last).
const std::vector<TrainerField>& TrainerFields();

// The field called `name`, or nullptr.
const TrainerField* FindTrainerField(const std::string& name);

// `value` checked against `field` and normalised (a kNumber becomes a double, so that
// 16 and 16.0 are the same value). InvalidArgument says what was expected.
Result<nlohmann::json> NormalizeTrainerValue(const TrainerField& field, const nlohmann::json& value);

// Sets `field`'s member of `config` from a value NormalizeTrainerValue returned.
void AssignTrainerValue(const TrainerField& field, const nlohmann::json& normalized, TrainerConfig* config);

// The current value of `field` in `config`, as JSON.
nlohmann::json TrainerValue(const TrainerField& field, const TrainerConfig& config);

// A path a sweep may name: relative, at most 255 bytes, components of letters, digits,
// '.', '_', '-' and spaces separated by single '/', none of them "." or "..". Resolved by the
// trainer under a root its launcher gives (data_root, output_dir), never outside it.
bool IsSandboxedName(const std::string& name);
inline constexpr std::size_t kMaxSandboxedNameBytes = 255;

// The closest of `candidates` to `name` by edit distance when it is plausibly a typo,
// else "".
std::string ClosestName(const std::string& name, const std::vector<std::string>& candidates);

// "a, b, c": names as error messages list them ("" for none).
std::string JoinNames(const std::vector<std::string>& names);

}  // namespace bakeoff::trainer
