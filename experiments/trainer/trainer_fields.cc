#include "experiments/trainer/trainer_fields.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "experiments/trainer/model_dims.h"
#include "experiments/trainer/trainer_config.h"

namespace bakeoff::trainer {
namespace {

using Kind = TrainerField::Kind;
using nlohmann::json;
using C = TrainerConfig;

// Integers beyond 2^53 do not survive a round trip through JSON numbers in other tools.
constexpr double kMaxInt = 9007199254740992.0;

// The default of a field is what a default-constructed TrainerConfig holds.
template <typename T>
json DefaultOf(T C::*member) {
  static const C defaults;
  const T& value = defaults.*member;
  if constexpr (std::is_same_v<T, std::string>) {
    if (value.empty()) return nullptr;
  }
  return json(value);
}

// A field of `kind` setting `member`, with the member's default.
template <typename T>
TrainerField Field(const std::string& name, Kind kind, T C::*member) {
  TrainerField f;
  f.name = name;
  f.kind = kind;
  f.member = member;
  f.default_value = DefaultOf(member);
  return f;
}

TrainerField Int(const std::string& name, int64_t C::*member, double min, double max = kMaxInt) {
  TrainerField f = Field(name, Kind::kInt, member);
  f.min = min;
  f.max = max;
  return f;
}

TrainerField Number(const std::string& name, double C::*member, double min, double max,
                    bool min_exclusive = false, bool max_exclusive = false) {
  TrainerField f = Field(name, Kind::kNumber, member);
  f.min = min;
  f.max = max;
  f.min_exclusive = min_exclusive;
  f.max_exclusive = max_exclusive;
  return f;
}

template <typename T>
TrainerField Choice(const std::string& name, Kind kind, T C::*member, std::vector<std::string> choices) {
  TrainerField f = Field(name, kind, member);
  f.choices = std::move(choices);
  return f;
}

// Free text with no default (unset unless given).
TrainerField Text(const std::string& name, std::string C::*member) { return Field(name, Kind::kString, member); }

// A file the trainer writes, named inside its output directory.
TrainerField Output(const std::string& name, std::string C::*member) { return Field(name, Kind::kOutput, member); }

TrainerField Bool(const std::string& name, bool C::*member) { return Field(name, Kind::kBool, member); }

TrainerField Launcher(TrainerField f) {
  f.launcher_only = true;
  return f;
}

// Changes how a step is computed, not what it computes.
TrainerField KeepsMath(TrainerField f) {
  f.math = TrainerField::Math::kKeeps;
  return f;
}

// A factor of the global batch (TrainerField::Math::kBatchFactor).
TrainerField BatchFactor(TrainerField f) {
  f.math = TrainerField::Math::kBatchFactor;
  return f;
}

TrainerField CudaOnly(TrainerField f, std::vector<std::string> choices) {
  f.cuda_only = std::move(choices);
  return f;
}

std::vector<TrainerField> BuildTable() {
  return {
      Choice("model", Kind::kModel, &C::model, {"tiny", "small", "llama-7b", "llama-13b"}),
      Int("seq_len", &C::seq_len, 2, 1 << 20),
      BatchFactor(Int("micro_batch", &C::micro_batch, 1, 1 << 20)),
      BatchFactor(Int("grad_accum", &C::grad_accum, 1, 1 << 20)),
      Int("steps", &C::steps, 1, 1 << 30),
      Int("warmup_steps", &C::warmup_steps, 0, 1 << 30),
      Choice("precision", Kind::kEnum, &C::precision, {"fp32", "bf16"}),
      KeepsMath(Choice("bf16_matmul", Kind::kEnum, &C::bf16_matmul, {"auto", "native", "fp32"})),
      KeepsMath(CudaOnly(Choice("compile_mode", Kind::kEnum, &C::compile_mode,
                                {"eager", "jit", "cudagraph", "jit+cudagraph"}),
                         {"cudagraph", "jit+cudagraph"})),
      KeepsMath(Choice("compile_scope", Kind::kEnum, &C::compile_scope, {"full", "attention", "mlp", "adapters"})),
      KeepsMath(Choice("jit_executor", Kind::kEnum, &C::jit_executor, {"auto", "profiling", "legacy"})),
      Int("lora_rank", &C::lora_rank, 1, 1 << 16),
      Number("lora_alpha", &C::lora_alpha, 0, 1e12, /*min_exclusive=*/true),
      Number("lora_dropout", &C::lora_dropout, 0, 1, false, /*max_exclusive=*/true),
      Choice("lora_targets", Kind::kTargets, &C::lora_targets, LoraTargetNames()),
      KeepsMath(Bool("grad_checkpointing", &C::grad_checkpointing)),
      Bool("dynamic_shapes", &C::dynamic_shapes),
      Number("lr", &C::lr, 0, 1e3),
      Choice("lr_schedule", Kind::kEnum, &C::lr_schedule, {"constant", "cosine"}),
      Int("lr_warmup_steps", &C::lr_warmup_steps, 0, 1 << 30),
      Number("adam_beta1", &C::adam_beta1, 0, 1, false, true),
      Number("adam_beta2", &C::adam_beta2, 0, 1, false, true),
      Number("adam_eps", &C::adam_eps, 0, 1),
      Number("weight_decay", &C::weight_decay, 0, 1),
      Number("grad_clip", &C::grad_clip, 0, 1e12),
      Int("seed", &C::seed, 0),
      Choice("dataset", Kind::kDataset, &C::dataset, {"synthetic", "repeat"}),
      Choice("dataset_dtype", Kind::kEnum, &C::dataset_dtype, {"uint16", "uint32"}),
      Choice("device", Kind::kEnum, &C::device, {"cpu", "cuda"}),
      Int("threads", &C::threads, 0, 4096),
      KeepsMath(Int("zero_stage", &C::zero_stage, 0, 3)),
      KeepsMath(CudaOnly(Choice("offload", Kind::kEnum, &C::offload, {"none", "optimizer", "parameters"}),
                         {"optimizer", "parameters"})),
      BatchFactor(Int("world_size", &C::world_size, 1, 65536)),
      Int("bucket_bytes", &C::bucket_bytes, 1024),
      Int("max_host_memory", &C::max_host_memory, 0),
      KeepsMath(Choice("host_allocator", Kind::kEnum, &C::host_allocator, {"retain", "system"})),
      Number("rendezvous_timeout_s", &C::rendezvous_timeout_s, 0.1, 86400),
      Number("collective_timeout_s", &C::collective_timeout_s, 0.1, 86400),
      Number("peak_flops", &C::peak_flops, 0, 1e30),
      KeepsMath(Number("test_slowdown", &C::test_slowdown, 0, 10)),
      Output("adapters_out", &C::adapters_out),
      Launcher(Int("rank", &C::rank, 0, 65535)),
      Launcher(Int("local_rank", &C::local_rank, 0, 65535)),
      Launcher(Int("local_world_size", &C::local_world_size, 1, 65536)),
      Launcher(Text("store", &C::store)),
      Launcher(Text("rank_address", &C::rank_address)),
      Launcher(Text("rank_interface", &C::rank_interface)),
      Launcher(Text("data_root", &C::data_root)),
      Launcher(Text("output_dir", &C::output_dir)),
  };
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
  // replace: a value from a peer's or a file's text never makes the message throw.
  return "got " + value.dump(-1, ' ', false, json::error_handler_t::replace);
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
                                     " (dimensions: " + JoinNames(kDims) + ")");
    }
    if (!dim.is_number_integer() || dim.get<int64_t>() < 1 || dim.get<int64_t>() > (1LL << 31)) {
      return Status::InvalidArgument("model." + key + ": expected an integer >= 1, " + Got(dim));
    }
    out[key] = dim;
  }
  for (const auto& key : kDims) {
    if (!out.contains(key) && key != "kv_heads") {
      return Status::InvalidArgument("model: missing '" + key + "'; a custom model names " + JoinNames(kDims) +
                                     " (kv_heads defaults to heads)");
    }
  }
  // The shape rules the model itself needs (divisibility, an even head dimension for the
  // rotary embeddings) live in one place, ResolveModel.
  auto dims = ResolveModel(out);
  if (!dims.ok()) return dims.status();
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
    case Kind::kEnum: return "one of " + JoinNames(choices);
    case Kind::kString: return "a string";
    case Kind::kDataset:
      return JoinNames(choices) + " or a token file's name inside the worker's data root (relative, no '..')";
    case Kind::kOutput: return "a file name inside the trial's output directory (relative, no '..')";
    case Kind::kModel:
      return "a preset (" + JoinNames(choices) +
             ") or {dim, layers, heads, kv_heads, ffn_dim, vocab}";
    case Kind::kTargets: return "a non-empty list of distinct modules from " + JoinNames(choices);
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
      if (!value.is_string() || value.get<std::string>().empty()) return Invalid(field, value);
      return value;
    case Kind::kDataset:
    case Kind::kOutput:
      if (!value.is_string()) return Invalid(field, value);
      if (field.kind == Kind::kDataset && IsChoice(field, value.get<std::string>())) return value;
      if (!IsSandboxedName(value.get<std::string>())) return Invalid(field, value);
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

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
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

bool IsSandboxedName(const std::string& name) {
  if (name.empty() || name.size() > kMaxSandboxedNameBytes || name.front() == '/' || name.back() == '/') {
    return false;
  }
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' && c != ' ') {
        return false;
      }
    }
    start = end + 1;
  }
  return true;
}

void AssignTrainerValue(const TrainerField& field, const json& normalized, TrainerConfig* config) {
  std::visit([&](auto member) { config->*member = normalized.get<std::remove_reference_t<decltype(config->*member)>>(); },
             field.member);
}

json TrainerValue(const TrainerField& field, const TrainerConfig& config) {
  return std::visit([&](auto member) { return json(config.*member); }, field.member);
}

}  // namespace bakeoff::trainer
