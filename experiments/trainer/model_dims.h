// ModelDims: the shape of the Llama-style decoder, its presets, parameter counts and
// the FLOP count of a LoRA training step (formula in docs/flops.md). Pure arithmetic,
// no LibTorch, so it is unit-testable and shared with the benchmarks.
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::trainer {

struct ModelDims {
  std::string preset;  // "tiny", "small", ... or "custom"
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t ffn_dim = 172;
  int64_t vocab = 256;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;

  int64_t head_dim() const { return dim / heads; }
  int64_t kv_dim() const { return kv_heads * head_dim(); }
  nlohmann::json ToJson() const;
};

// Resolves a preset name ("tiny", "small", "llama-7b", "llama-13b") or an object of
// explicit dimensions {"dim","layers","heads","kv_heads","ffn_dim","vocab"}.
Result<ModelDims> ResolveModel(const nlohmann::json& model);

// The names of the projections LoRA may target, in the order the model applies them.
const std::vector<std::string>& LoraTargetNames();

// Input and output features of one projection of a block ("q", ..., "down").
struct ProjectionShape {
  int64_t in = 0;
  int64_t out = 0;
};
ProjectionShape ProjectionShapeOf(const ModelDims& dims, const std::string& target);

struct ParameterCounts {
  int64_t frozen = 0;      // every base weight, embedding and head included
  int64_t matmul = 0;      // frozen weights used in matrix products per token (head included, embedding not)
  int64_t trainable = 0;   // LoRA A and B of every targeted projection
};
ParameterCounts CountParameters(const ModelDims& dims, int64_t lora_rank,
                                const std::vector<std::string>& lora_targets);

// Model FLOPs of one training token (forward and backward, no recompute), for a LoRA
// model: 4*matmul (forward, and activation gradients; no weight gradients for the frozen
// base) + 6*trainable + 12*layers*seq_len*dim (attention scores and values).
double TrainingFlopsPerToken(const ModelDims& dims, const ParameterCounts& counts,
                             int64_t seq_len);

}  // namespace bakeoff::trainer
