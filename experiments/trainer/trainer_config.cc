#include "experiments/trainer/trainer_config.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

namespace bakeoff::trainer {
namespace {

using Setter = std::function<Status(const nlohmann::json&, TrainerConfig*)>;

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

Status Invalid(const std::string& field, const std::string& expected, const nlohmann::json& got) {
  return Status::InvalidArgument(field + ": expected " + expected + ", got " + got.dump());
}

Setter Int(int64_t TrainerConfig::*member, int64_t min, int64_t max, const std::string& field) {
  return [=](const nlohmann::json& v, TrainerConfig* c) {
    bool integral = v.is_number_integer() ||
                    (v.is_number_float() && v.get<double>() == static_cast<int64_t>(v.get<double>()));
    if (!integral || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      return Invalid(field, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]", v);
    }
    c->*member = v.get<int64_t>();
    return Status::Ok();
  };
}

Setter Real(double TrainerConfig::*member, double min, double max, bool max_open,
            const std::string& field) {
  return [=](const nlohmann::json& v, TrainerConfig* c) {
    if (!v.is_number() || v.get<double>() < min || v.get<double>() > max ||
        (max_open && v.get<double>() == max)) {
      std::ostringstream range;
      range << "a number in [" << min << ", " << max << (max_open ? ")" : "]");
      return Invalid(field, range.str(), v);
    }
    c->*member = v.get<double>();
    return Status::Ok();
  };
}

Setter Enum(std::string TrainerConfig::*member, std::vector<std::string> allowed,
            const std::string& field) {
  return [=](const nlohmann::json& v, TrainerConfig* c) {
    if (!v.is_string() || std::find(allowed.begin(), allowed.end(), v.get<std::string>()) == allowed.end()) {
      return Invalid(field, "one of " + Join(allowed), v);
    }
    c->*member = v.get<std::string>();
    return Status::Ok();
  };
}

Setter Text(std::string TrainerConfig::*member, const std::string& field) {
  return [=](const nlohmann::json& v, TrainerConfig* c) {
    if (!v.is_string() || v.get<std::string>().empty()) return Invalid(field, "a non-empty string", v);
    c->*member = v.get<std::string>();
    return Status::Ok();
  };
}

const std::map<std::string, Setter>& Setters() {
  static const std::map<std::string, Setter> kSetters = [] {
    std::map<std::string, Setter> s;
    s["model"] = [](const nlohmann::json& v, TrainerConfig* c) {
      auto dims = ResolveModel(v);
      if (!dims.ok()) return dims.status();
      c->model = v;
      return Status::Ok();
    };
    s["seq_len"] = Int(&TrainerConfig::seq_len, 2, 1 << 20, "seq_len");
    s["micro_batch"] = Int(&TrainerConfig::micro_batch, 1, 1 << 20, "micro_batch");
    s["grad_accum"] = Int(&TrainerConfig::grad_accum, 1, 1 << 20, "grad_accum");
    s["steps"] = Int(&TrainerConfig::steps, 1, 1 << 30, "steps");
    s["warmup_steps"] = Int(&TrainerConfig::warmup_steps, 0, 1 << 30, "warmup_steps");
    s["precision"] = Enum(&TrainerConfig::precision, {"fp32", "bf16"}, "precision");
    s["compile_mode"] = Enum(&TrainerConfig::compile_mode,
                             {"eager", "jit", "cudagraph", "jit+cudagraph"}, "compile_mode");
    s["compile_scope"] = Enum(&TrainerConfig::compile_scope,
                              {"full", "attention", "mlp", "adapters"}, "compile_scope");
    s["lora_rank"] = Int(&TrainerConfig::lora_rank, 1, 1 << 16, "lora_rank");
    s["lora_alpha"] = Real(&TrainerConfig::lora_alpha, 1e-12, 1e12, false, "lora_alpha");
    s["lora_dropout"] = Real(&TrainerConfig::lora_dropout, 0.0, 1.0, true, "lora_dropout");
    s["lora_targets"] = [](const nlohmann::json& v, TrainerConfig* c) {
      const auto& names = LoraTargetNames();
      std::vector<std::string> targets;
      if (!v.is_array() || v.empty()) {
        return Invalid("lora_targets", "a non-empty list of " + Join(names), v);
      }
      for (const auto& t : v) {
        if (!t.is_string() || std::find(names.begin(), names.end(), t.get<std::string>()) == names.end()) {
          return Invalid("lora_targets", "a non-empty list of " + Join(names), v);
        }
        if (std::find(targets.begin(), targets.end(), t.get<std::string>()) != targets.end()) {
          return Invalid("lora_targets", "each target at most once", v);
        }
        targets.push_back(t.get<std::string>());
      }
      c->lora_targets = targets;
      return Status::Ok();
    };
    s["grad_checkpointing"] = [](const nlohmann::json& v, TrainerConfig* c) {
      if (!v.is_boolean()) return Invalid("grad_checkpointing", "true or false", v);
      c->grad_checkpointing = v.get<bool>();
      return Status::Ok();
    };
    s["jit_executor"] = Enum(&TrainerConfig::jit_executor, {"auto", "profiling", "legacy"}, "jit_executor");
    s["bf16_matmul"] = Enum(&TrainerConfig::bf16_matmul, {"auto", "native"}, "bf16_matmul");
    s["dynamic_shapes"] = [](const nlohmann::json& v, TrainerConfig* c) {
      if (!v.is_boolean()) return Invalid("dynamic_shapes", "true or false", v);
      c->dynamic_shapes = v.get<bool>();
      return Status::Ok();
    };
    s["lr"] = Real(&TrainerConfig::lr, 0.0, 1e3, false, "lr");
    s["lr_schedule"] = Enum(&TrainerConfig::lr_schedule, {"constant", "cosine"}, "lr_schedule");
    s["lr_warmup_steps"] = Int(&TrainerConfig::lr_warmup_steps, 0, 1 << 30, "lr_warmup_steps");
    s["adam_beta1"] = Real(&TrainerConfig::adam_beta1, 0.0, 1.0, true, "adam_beta1");
    s["adam_beta2"] = Real(&TrainerConfig::adam_beta2, 0.0, 1.0, true, "adam_beta2");
    s["adam_eps"] = Real(&TrainerConfig::adam_eps, 0.0, 1.0, false, "adam_eps");
    s["weight_decay"] = Real(&TrainerConfig::weight_decay, 0.0, 1.0, false, "weight_decay");
    s["grad_clip"] = Real(&TrainerConfig::grad_clip, 0.0, 1e12, false, "grad_clip");
    s["seed"] = Int(&TrainerConfig::seed, 0, INT64_MAX, "seed");
    s["dataset"] = Text(&TrainerConfig::dataset, "dataset");
    s["dataset_dtype"] = Enum(&TrainerConfig::dataset_dtype, {"uint16", "uint32"}, "dataset_dtype");
    s["device"] = Enum(&TrainerConfig::device, {"cpu", "cuda"}, "device");
    s["threads"] = Int(&TrainerConfig::threads, 0, 4096, "threads");
    s["zero_stage"] = Int(&TrainerConfig::zero_stage, 0, 3, "zero_stage");
    s["offload"] = Enum(&TrainerConfig::offload, {"none", "optimizer", "parameters"}, "offload");
    s["world_size"] = Int(&TrainerConfig::world_size, 1, 1 << 16, "world_size");
    s["bucket_bytes"] = Int(&TrainerConfig::bucket_bytes, 1024, INT64_MAX, "bucket_bytes");
    s["max_host_memory"] = Int(&TrainerConfig::max_host_memory, 0, INT64_MAX, "max_host_memory");
    s["host_allocator"] = Enum(&TrainerConfig::host_allocator, {"retain", "system"}, "host_allocator");
    s["peak_flops"] = Real(&TrainerConfig::peak_flops, 0.0, 1e30, false, "peak_flops");
    s["rendezvous_timeout_s"] =
        Real(&TrainerConfig::rendezvous_timeout_s, 0.1, 86400, false, "rendezvous_timeout_s");
    s["collective_timeout_s"] =
        Real(&TrainerConfig::collective_timeout_s, 0.1, 86400, false, "collective_timeout_s");
    s["adapters_out"] = Text(&TrainerConfig::adapters_out, "adapters_out");
    s["rank"] = Int(&TrainerConfig::rank, 0, 1 << 16, "rank");
    s["local_rank"] = Int(&TrainerConfig::local_rank, 0, 1 << 16, "local_rank");
    s["store"] = Text(&TrainerConfig::store, "store");
    s["rank_address"] = Text(&TrainerConfig::rank_address, "rank_address");
    s["rank_interface"] = Text(&TrainerConfig::rank_interface, "rank_interface");
    return s;
  }();
  return kSetters;
}

// Levenshtein distance, for "did you mean" on unknown fields.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

Status ApplyField(const std::string& field, const nlohmann::json& value, TrainerConfig* config) {
  const auto& setters = Setters();
  auto it = setters.find(field);
  if (it == setters.end()) {
    std::string best;
    size_t best_distance = 4;
    for (const auto& [name, setter] : setters) {
      size_t d = EditDistance(field, name);
      if (d < best_distance) best_distance = d, best = name;
    }
    return Status::InvalidArgument(
        field + ": unknown field" + (best.empty() ? "" : " (did you mean " + best + "?)") +
        "; allowed: " + Join(TrainerConfigFieldNames()));
  }
  return it->second(value, config);
}

}  // namespace

const std::vector<std::string>& TrainerConfigFieldNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& [name, setter] : Setters()) names.push_back(name);
    return names;
  }();
  return kNames;
}

Status ApplyConfigJson(const nlohmann::json& object, TrainerConfig* config) {
  if (!object.is_object()) {
    return Status::InvalidArgument("configuration: expected a JSON object of fields");
  }
  for (auto it = object.begin(); it != object.end(); ++it) {
    BAKEOFF_RETURN_IF_ERROR(ApplyField(it.key(), it.value(), config));
  }
  return Status::Ok();
}

Status ApplyConfigFlag(const std::string& field, const std::string& value, TrainerConfig* config) {
  nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) parsed = value;
  return ApplyField(field, parsed, config);
}

Status FinalizeConfig(TrainerConfig* c) {
  auto dims = ResolveModel(c->model);
  if (!dims.ok()) return dims.status();
  c->dims = *dims;
  if (c->rank >= c->world_size) {
    return Status::InvalidArgument("rank: " + std::to_string(c->rank) + " must be below world_size " +
                                   std::to_string(c->world_size));
  }
  if (c->world_size > 1 && c->store.empty()) {
    return Status::InvalidArgument("store: world_size > 1 needs the rendezvous address "
                                   "(--store HOST:PORT or MASTER_ADDR/MASTER_PORT)");
  }
  return Status::Ok();
}

nlohmann::json TrainerConfig::ToJson() const {
  return {{"model", model},
          {"dims", dims.ToJson()},
          {"seq_len", seq_len},
          {"micro_batch", micro_batch},
          {"grad_accum", grad_accum},
          {"steps", steps},
          {"warmup_steps", warmup_steps},
          {"precision", precision},
          {"bf16_matmul", bf16_matmul},
          {"compile_mode", compile_mode},
          {"compile_scope", compile_scope},
          {"jit_executor", jit_executor},
          {"lora_rank", lora_rank},
          {"lora_alpha", lora_alpha},
          {"lora_dropout", lora_dropout},
          {"lora_targets", lora_targets},
          {"grad_checkpointing", grad_checkpointing},
          {"dynamic_shapes", dynamic_shapes},
          {"lr", lr},
          {"lr_schedule", lr_schedule},
          {"lr_warmup_steps", lr_warmup_steps},
          {"adam_beta1", adam_beta1},
          {"adam_beta2", adam_beta2},
          {"adam_eps", adam_eps},
          {"weight_decay", weight_decay},
          {"grad_clip", grad_clip},
          {"seed", seed},
          {"dataset", dataset},
          {"dataset_dtype", dataset_dtype},
          {"device", device},
          {"threads", threads},
          {"zero_stage", zero_stage},
          {"offload", offload},
          {"world_size", world_size},
          {"bucket_bytes", bucket_bytes},
          {"max_host_memory", max_host_memory},
          {"host_allocator", host_allocator},
          {"peak_flops", peak_flops},
          {"rendezvous_timeout_s", rendezvous_timeout_s},
          {"collective_timeout_s", collective_timeout_s},
          {"adapters_out", adapters_out},
          {"rank", rank},
          {"local_rank", local_rank},
          {"store", store},
          {"rank_address", rank_address},
          {"rank_interface", rank_interface}};
}

}  // namespace bakeoff::trainer
