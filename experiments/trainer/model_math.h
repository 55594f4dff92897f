// The model's math, written once: RMSNorm, rotary embeddings, grouped-KV causal
// attention, SwiGLU MLP, LoRA projections, LM head and loss. Eager mode calls these
// functions directly; `jit` traces the chosen scope's unit of them into a TorchScript
// graph (UnitRunner), so both modes run exactly this code.
// Thread-safety: the functions are pure; a ModelMath is used by one training thread.
#pragma once

#include <torch/torch.h>

#include <array>
#include <vector>

#include "experiments/trainer/model_dims.h"

namespace bakeoff::trainer {

class UnitRunner;

// The projections of a block, in the order LoraTargetNames() lists them.
enum Projection : int { kQ = 0, kK, kV, kO, kGate, kUp, kDown, kNumProjections };

struct LoraPair {
  torch::Tensor a;  // [rank, in], fp32 master; undefined when the projection has no adapter
  torch::Tensor b;  // [out, rank]
  bool defined() const { return a.defined(); }
};

struct BlockWeights {
  torch::Tensor attn_norm;  // [dim]
  torch::Tensor mlp_norm;   // [dim]
  std::array<torch::Tensor, kNumProjections> proj;  // [out, in] each
};

struct HeadWeights {
  torch::Tensor final_norm;  // [dim]
  torch::Tensor head;        // [vocab, dim]
};

// Rotary tables and the causal mask for one sequence length, dtype and device.
struct AttentionTables {
  torch::Tensor cos;   // [seq, head_dim]
  torch::Tensor sin;   // [seq, head_dim]
  // [group * seq, seq]: the causal mask (0 on and below the diagonal, -inf above)
  // repeated for the query heads that share one KV head (attention folds them into rows).
  torch::Tensor mask;
};
AttentionTables MakeAttentionTables(const ModelDims& dims, int64_t seq_len,
                                    torch::ScalarType dtype, const torch::Device& device);

struct MathOptions {
  ModelDims dims;
  double lora_scale = 2.0;
  double lora_dropout = 0.0;
  bool training = true;
  // bf16 matrix products on a CPU through the fp32 BLAS: operands widened to fp32, the
  // product rounded back to bf16 (bf16 storage, fp32 accumulation, as a bf16 GEMM
  // accumulates anyway). LibTorch 1.13's own CPU bf16 GEMM is a plain loop, 10-20x
  // slower than OpenBLAS on a CPU without AVX-512 BF16. See docs/trainer.md.
  bool bf16_matmul_via_fp32 = false;
};

class ModelMath {
 public:
  // `runner` decides which units run compiled; it must outlive this object.
  ModelMath(MathOptions options, UnitRunner* runner);

  // One decoder block: x + attention(norm(x)), then h + mlp(norm(h)).
  torch::Tensor Block(const torch::Tensor& x, const BlockWeights& w,
                      const std::array<LoraPair, kNumProjections>& lora,
                      const AttentionTables& tables) const;
  // Final norm, LM head and mean cross-entropy over every target token (fp32).
  torch::Tensor HeadLoss(const torch::Tensor& h, const HeadWeights& w,
                         const torch::Tensor& targets) const;

  // The units themselves (public for the tests).
  torch::Tensor AttentionPart(const torch::Tensor& x, const BlockWeights& w,
                              const std::array<LoraPair, kNumProjections>& lora,
                              const AttentionTables& tables) const;
  torch::Tensor MlpPart(const torch::Tensor& x, const BlockWeights& w,
                        const std::array<LoraPair, kNumProjections>& lora) const;
  torch::Tensor Projection(const torch::Tensor& x, const torch::Tensor& w,
                           const LoraPair& lora) const;
  // y + scale * (dropout(x) A^T) B^T: the base projection `y` of `x` plus the adapter's
  // update, the scale and the sum fused into one addmm where the product runs natively.
  torch::Tensor AddLoraDelta(const torch::Tensor& y, const torch::Tensor& x, const torch::Tensor& a,
                             const torch::Tensor& b) const;
  // torch::matmul, or for bf16 CPU operands with bf16_matmul_via_fp32 the fp32-BLAS
  // product (an autograd function saving the bf16 operands, so activation memory is
  // that of bf16; when tracing, the same ops inline).
  torch::Tensor Matmul(const torch::Tensor& a, const torch::Tensor& b) const;

  const MathOptions& options() const { return options_; }

 private:
  // bf16 CPU products go through MatmulViaFp32 (bf16_matmul_via_fp32).
  bool WidensMatmul(const torch::Tensor& x) const;

  MathOptions options_;
  UnitRunner* runner_;
};

// a @ b computed in fp32 and returned in a's dtype, with a backward that does the same;
// saves a and b as they are (bf16). Public for the tests.
torch::Tensor MatmulViaFp32(const torch::Tensor& a, const torch::Tensor& b);

// x itself when it already has `dtype`, else x.to(dtype).
torch::Tensor CastTo(const torch::Tensor& x, torch::ScalarType dtype);
// Softmax, norms and the loss run in fp32 for bf16 activations (fp64 stays fp64).
torch::Tensor AtLeastFloat32(const torch::Tensor& x);
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);
torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace bakeoff::trainer
