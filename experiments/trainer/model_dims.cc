#include "experiments/trainer/model_dims.h"

#include <algorithm>

namespace bakeoff::trainer {
namespace {

ModelDims Preset(const std::string& name, int64_t dim, int64_t layers, int64_t heads,
                 int64_t kv_heads, int64_t ffn_dim, int64_t vocab) {
  ModelDims d;
  d.preset = name;
  d.dim = dim;
  d.layers = layers;
  d.heads = heads;
  d.kv_heads = kv_heads;
  d.ffn_dim = ffn_dim;
  d.vocab = vocab;
  return d;
}

}  // namespace

nlohmann::json ModelDims::ToJson() const {
  return {{"preset", preset}, {"dim", dim},         {"layers", layers},
          {"heads", heads},   {"kv_heads", kv_heads}, {"ffn_dim", ffn_dim},
          {"vocab", vocab},   {"head_dim", head_dim()}};
}

Result<ModelDims> ResolveModel(const nlohmann::json& model) {
  if (model.is_string()) {
    const std::string name = model.get<std::string>();
    // tiny: tests. small: ~100M parameters, benchmarks. Llama-2 shapes as published.
    if (name == "tiny") return Preset(name, 64, 2, 4, 2, 172, 256);
    if (name == "small") return Preset(name, 768, 12, 12, 4, 2048, 16000);
    if (name == "llama-7b") return Preset(name, 4096, 32, 32, 32, 11008, 32000);
    if (name == "llama-13b") return Preset(name, 5120, 40, 40, 40, 13824, 32000);
    return Status::InvalidArgument("model: unknown preset \"" + name +
                                   "\"; allowed: tiny, small, llama-7b, llama-13b, or an object "
                                   "{dim, layers, heads, kv_heads, ffn_dim, vocab}");
  }
  if (!model.is_object()) {
    return Status::InvalidArgument("model: expected a preset name or an object of dimensions");
  }
  ModelDims d;
  d.preset = "custom";
  static const std::vector<std::string> kFields = {"dim", "layers", "heads", "kv_heads",
                                                   "ffn_dim", "vocab"};
  for (auto it = model.begin(); it != model.end(); ++it) {
    if (std::find(kFields.begin(), kFields.end(), it.key()) == kFields.end()) {
      return Status::InvalidArgument("model." + it.key() +
                                     ": unknown field; allowed: dim, layers, heads, kv_heads, "
                                     "ffn_dim, vocab");
    }
    if (!it->is_number_integer() || it->get<int64_t>() < 1) {
      return Status::InvalidArgument("model." + it.key() + ": expected a positive integer");
    }
  }
  for (const auto& f : kFields) {
    if (!model.contains(f) && f != "kv_heads") {
      return Status::InvalidArgument("model." + f + ": missing; an explicit model needs dim, "
                                     "layers, heads, ffn_dim, vocab (kv_heads defaults to heads)");
    }
  }
  d.dim = model["dim"];
  d.layers = model["layers"];
  d.heads = model["heads"];
  d.kv_heads = model.value("kv_heads", d.heads);
  d.ffn_dim = model["ffn_dim"];
  d.vocab = model["vocab"];
  if (d.dim % d.heads != 0) {
    return Status::InvalidArgument("model.heads: dim (" + std::to_string(d.dim) +
                                   ") must be divisible by heads (" + std::to_string(d.heads) + ")");
  }
  if (d.head_dim() % 2 != 0) {
    return Status::InvalidArgument("model.heads: rotary embeddings need an even head dimension");
  }
  if (d.heads % d.kv_heads != 0) {
    return Status::InvalidArgument("model.kv_heads: heads (" + std::to_string(d.heads) +
                                   ") must be a multiple of kv_heads (" +
                                   std::to_string(d.kv_heads) + ")");
  }
  return d;
}

const std::vector<std::string>& LoraTargetNames() {
  static const std::vector<std::string> kNames = {"q", "k", "v", "o", "gate", "up", "down"};
  return kNames;
}

ProjectionShape ProjectionShapeOf(const ModelDims& d, const std::string& t) {
  if (t == "q") return {d.dim, d.dim};
  if (t == "k" || t == "v") return {d.dim, d.kv_dim()};
  if (t == "o") return {d.dim, d.dim};
  if (t == "gate" || t == "up") return {d.dim, d.ffn_dim};
  return {d.ffn_dim, d.dim};  // down
}

ParameterCounts CountParameters(const ModelDims& d, int64_t rank,
                                const std::vector<std::string>& targets) {
  ParameterCounts c;
  int64_t block_matmul = 0;
  for (const auto& t : LoraTargetNames()) {
    ProjectionShape s = ProjectionShapeOf(d, t);
    block_matmul += s.in * s.out;
  }
  int64_t block_trainable = 0;
  for (const auto& t : targets) {
    ProjectionShape s = ProjectionShapeOf(d, t);
    block_trainable += rank * (s.in + s.out);
  }
  const int64_t norms = 2 * d.dim;
  c.matmul = d.layers * block_matmul + d.vocab * d.dim;  // blocks + LM head
  c.frozen = d.layers * (block_matmul + norms) + 2 * d.vocab * d.dim + d.dim;
  c.trainable = d.layers * block_trainable;
  return c;
}

double TrainingFlopsPerToken(const ModelDims& d, const ParameterCounts& c, int64_t seq_len) {
  return 4.0 * static_cast<double>(c.matmul) + 6.0 * static_cast<double>(c.trainable) +
         12.0 * static_cast<double>(d.layers) * static_cast<double>(seq_len) *
             static_cast<double>(d.dim);
}

}  // namespace bakeoff::trainer
