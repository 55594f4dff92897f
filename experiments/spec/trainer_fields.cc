#include "experiments/spec/trainer_fields.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace bakeoff::spec {
namespace {

using Kind = TrainerField::Kind;
using nlohmann::json;

// Integers beyond 2^53 do not survive a round trip through JSON numbers in other tools.
constexpr double kMaxInt = 9007199254740992.0;

TrainerField Int(const std::string& name, int64_t default_value, double min, double max = kMaxInt) {
  TrainerField f;
  f.name = name;
  f.kind = Kind::kInt;
  f.default_value = default_value;
  f.min = min;
  f.max = max;
  return f;
}

TrainerField Number(const std::string& name, double default_value, double min, double max,
                    bool min_exclusive = false, bool max_exclusive = false) {
  TrainerField f;
  f.name = name;
  f.kind = Kind::kNumber;
  f.default_value = default_value;
  f.min = min;
  f.max = max;
  f.min_exclusive = min_exclusive;
  f.max_exclusive = max_exclusive;
  return f;
}

TrainerField Choice(const std::string& name, Kind kind, json default_value,
                    std::vector<std::string> choices) {
  TrainerField f;
  f.name = name;
  f.kind = kind;
  f.default_value = std::move(default_value);
  f.choices = std::move(choices);
  return f;
}

// A free-text field with no default (unset unless the sweep sets it).
TrainerField Text(const std::string& name) {
  TrainerField f;
  f.name = name;
  f.kind = Kind::kString;
  f.default_value = nullptr;
  return f;
}

TrainerField Bool(const std::string& name, bool default_value) {
  TrainerField f;
  f.name = name;
  f.kind = Kind::kBool;
  f.default_value = default_value;
  return f;
}

std::vector<TrainerField> BuildTable() {
  return {
      Choice("model", Kind::kModel, "tiny", {"tiny", "small", "llama-7b", "llama-13b"}),
      Int("seq_len", 128, 2, 1 << 20),
      Int("micro_batch", 1, 1, 1 << 20),
      Int("grad_accum", 1, 1, 1 << 20),
      Int("steps", 20, 1, 1 << 30),
      Int("warmup_steps", 3, 0, 1 << 30),
      Choice("precision", Kind::kEnum, "fp32", {"fp32", "bf16"}),
      Choice("bf16_matmul", Kind::kEnum, "auto", {"auto", "native", "fp32"}),
      Choice("compile_mode", Kind::kEnum, "eager", {"eager", "jit", "cudagraph", "jit+cudagraph"}),
      Choice("compile_scope", Kind::kEnum, "full", {"full", "attention", "mlp", "adapters"}),
      Choice("jit_executor", Kind::kEnum, "auto", {"auto", "profiling", "legacy"}),
      Int("lora_rank", 8, 1, 1 << 16),
      Number("lora_alpha", 16.0, 0, 1e12, /*min_exclusive=*/true),
      Number("lora_dropout", 0.0, 0, 1, false, /*max_exclusive=*/true),
      Choice("lora_targets", Kind::kTargets, json::array({"q", "k", "v", "o"}),
             {"q", "k", "v", "o", "gate", "up", "down"}),
      Bool("grad_checkpointing", false),
      Bool("dynamic_shapes", false),
      Number("lr", 1e-3, 0, 1e3),
      Choice("lr_schedule", Kind::kEnum, "constant", {"constant", "cosine"}),
      Int("lr_warmup_steps", 0, 0, 1 << 30),
      Number("adam_beta1", 0.9, 0, 1, false, true),
      Number("adam_beta2", 0.999, 0, 1, false, true),
      Number("adam_eps", 1e-8, 0, 1),
      Number("weight_decay", 0.0, 0, 1),
      Number("grad_clip", 1.0, 0, 1e12),
      Int("seed", 0, 0),
      Choice("dataset", Kind::kDataset, "synthetic", {"synthetic", "repeat"}),
      Choice("dataset_dtype", Kind::kEnum, "uint16", {"uint16", "uint32"}),
      Choice("device", Kind::kEnum, "cpu", {"cpu", "cuda"}),
      Int("threads", 0, 0, 4096),
      Int("zero_stage", 0, 0, 3),
      Choice("offload", Kind::kEnum, "none", {"none", "optimizer", "parameters"}),
      Int("world_size", 1, 1, 65536),
      Int("bucket_bytes", 26214400, 1024),
      Int("max_host_memory", 0, 0),
      Choice("host_allocator", Kind::kEnum, "retain", {"retain", "system"}),
      Number("rendezvous_timeout_s", 60.0, 0.1, 86400),
      Number("collective_timeout_s", 120.0, 0.1, 86400),
      Number("peak_flops", 0.0, 0, 1e30),
      Text("adapters_out"),
  };
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

std::string FormatBound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return json(v == std::floor(v) && std::fabs(v) < kMaxInt ? json(static_cast<int64_t>(v))
                                                            : json(v)).dump();
}

std::string Got(const json& value) {
  if (value.is_null()) return "got nothing";
  if (value.is_object()) return "got a mapping";
  if (value.is_array()) return "got a list";
  return "got " + value.dump();
}

Status Invalid(const TrainerField& field, const json& value) {
  return Status::InvalidArgument("expected " + field.Expected() + ", " + Got(value));
}

bool IsChoice(const TrainerField& field, const std::string& s) {
  return std::find(field.choices.begin(), field.choices.end(), s) != field.choices.end();
}

Result<json> NormalizeModel(const TrainerField& field, const json& value) {
  if (value.is_string()) {
    if (IsChoice(field, value.get<std::string>())) return value;
    return Invalid(field, value);
  }
  if (!value.is_object()) return Invalid(field, value);
  static const std::vector<std::string> kDims = {"dim", "layers", "heads", "kv_heads", "ffn_dim", "vocab"};
  json out = json::object();
  for (const auto& [key, dim] : value.items()) {
    if (std::find(kDims.begin(), kDims.end(), key) == kDims.end()) {
      std::string hint = ClosestName(key, kDims);
      return Status::InvalidArgument("unknown model dimension '" + key + "'" +
                                     (hint.empty() ? "" : "; did you mean " + hint + "?") +
                                     " (dimensions: " + Join(kDims) + ")");
    }
    if (!dim.is_number_integer() || dim.get<int64_t>() < 1 || dim.get<int64_t>() > (1LL << 31)) {
      return Status::InvalidArgument("model." + key + ": expected an integer >= 1, " + Got(dim));
    }
    out[key] = dim;
  }
  for (const auto& key : kDims) {
    if (!out.contains(key)) {
      return Status::InvalidArgument("model: missing '" + key + "'; a custom model names all of " +
                                     Join(kDims));
    }
  }
  int64_t dim = out["dim"], heads = out["heads"], kv_heads = out["kv_heads"];
  if (dim % heads != 0) {
    return Status::InvalidArgument("model: dim " + std::to_string(dim) +
                                   " is not a multiple of heads " + std::to_string(heads));
  }
  if (heads % kv_heads != 0) {
    return Status::InvalidArgument("model: heads " + std::to_string(heads) +
                                   " is not a multiple of kv_heads " + std::to_string(kv_heads));
  }
  return out;
}

// Upper bounds at or above this are sanity caps, not part of what users need to read
// (values above them get a message with the full range).
constexpr double kQuietMax = 1 << 20;

std::string FullRange(const TrainerField& f) {
  if (f.kind == TrainerField::Kind::kInt) {
    return "an integer from " + FormatBound(f.min) + " to " + FormatBound(f.max);
  }
  return std::string("a number ") + (f.min_exclusive ? "> " : ">= ") + FormatBound(f.min) +
         " and " + (f.max_exclusive ? "< " : "<= ") + FormatBound(f.max);
}

}  // namespace

std::string TrainerField::Expected() const {
  switch (kind) {
    case Kind::kInt:
      if (max >= kQuietMax) return "an integer >= " + FormatBound(min);
      return FullRange(*this);
    case Kind::kNumber:
      if (max >= kQuietMax) return std::string("a number ") + (min_exclusive ? "> " : ">= ") + FormatBound(min);
      return FullRange(*this);
    case Kind::kBool: return "true or false";
    case Kind::kEnum: return "one of " + Join(choices);
    case Kind::kString: return "a string";
    case Kind::kDataset: return Join(choices) + " or the path of a token file";
    case Kind::kModel:
      return "a preset (" + Join(choices) +
             ") or {dim, layers, heads, kv_heads, ffn_dim, vocab}";
    case Kind::kTargets: return "a non-empty list of distinct modules from " + Join(choices);
  }
  return "a value";
}

const std::vector<TrainerField>& TrainerFields() {
  static const std::vector<TrainerField> table = BuildTable();
  return table;
}

const TrainerField* FindTrainerField(const std::string& name) {
  for (const auto& field : TrainerFields()) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

Result<json> NormalizeTrainerValue(const TrainerField& field, const json& value) {
  switch (field.kind) {
    case Kind::kInt: {
      if (!value.is_number_integer()) return Invalid(field, value);
      double v = static_cast<double>(value.get<int64_t>());
      if (v > field.max) return Status::InvalidArgument("expected " + FullRange(field) + ", " + Got(value));
      if (v < field.min) return Invalid(field, value);
      return json(value.get<int64_t>());
    }
    case Kind::kNumber: {
      if (!value.is_number()) return Invalid(field, value);
      double v = value.get<double>();
      bool low = field.min_exclusive ? v <= field.min : v < field.min;
      bool high = field.max_exclusive ? v >= field.max : v > field.max;
      if (std::isfinite(v) && high) {
        return Status::InvalidArgument("expected " + FullRange(field) + ", " + Got(value));
      }
      if (!std::isfinite(v) || low) return Invalid(field, value);
      return json(v);
    }
    case Kind::kBool:
      if (!value.is_boolean()) return Invalid(field, value);
      return value;
    case Kind::kEnum:
      if (!value.is_string() || !IsChoice(field, value.get<std::string>())) {
        return Invalid(field, value);
      }
      return value;
    case Kind::kString:
    case Kind::kDataset:
      if (!value.is_string() || value.get<std::string>().empty()) return Invalid(field, value);
      return value;
    case Kind::kModel:
      return NormalizeModel(field, value);
    case Kind::kTargets: {
      if (!value.is_array() || value.empty()) return Invalid(field, value);
      std::set<std::string> seen;
      for (const auto& item : value) {
        if (!item.is_string() || !IsChoice(field, item.get<std::string>()) ||
            !seen.insert(item.get<std::string>()).second) {
          return Invalid(field, value);
        }
      }
      return value;
    }
  }
  return Invalid(field, value);
}

std::string ClosestName(const std::string& name, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t above = row[j];
        size_t cost = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                              std::tolower(static_cast<unsigned char>(b[j - 1]))
                          ? 0
                          : 1;
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
        diagonal = above;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    size_t d = distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  // A typo is a few edits; beyond a third of the word the suggestion is noise.
  size_t allowed = std::max<size_t>(2, name.size() / 3);
  if (best_distance <= allowed) return best;
  // "batch" -> "micro_batch": a fragment of a longer name.
  if (name.size() >= 4) {
    for (const auto& candidate : candidates) {
      if (candidate.find(name) != std::string::npos) return candidate;
    }
  }
  return "";
}

}  // namespace bakeoff::spec
