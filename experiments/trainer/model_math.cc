#include "experiments/trainer/model_math.h"

#include <ATen/ExpandUtils.h>

#include <cmath>
#include <limits>

#include "experiments/trainer/torch_compat.h"
#include "experiments/trainer/unit_runner.h"

namespace bakeoff::trainer {
namespace {

using LoraArray = std::array<LoraPair, kNumProjections>;

// Flattens a block's tensors for a traced unit, in a fixed order; Unpack mirrors it
// using the adapter layout of `like` (which projections carry an adapter).
std::vector<torch::Tensor> PackBlock(const torch::Tensor& x, const BlockWeights& w,
                                     const LoraArray& lora, const AttentionTables* tables) {
  std::vector<torch::Tensor> v = {x, w.attn_norm, w.mlp_norm};
  for (const auto& p : w.proj) v.push_back(p);
  for (const auto& l : lora) {
    if (l.defined()) {
      v.push_back(l.a);
      v.push_back(l.b);
    }
  }
  if (tables != nullptr) {
    v.push_back(tables->cos);
    v.push_back(tables->sin);
    v.push_back(tables->mask);
  }
  return v;
}

struct Unpacked {
  torch::Tensor x;
  BlockWeights w;
  LoraArray lora;
  AttentionTables tables;
};

Unpacked UnpackBlock(const std::vector<torch::Tensor>& v, const LoraArray& like, bool has_tables) {
  Unpacked u;
  size_t i = 0;
  u.x = v[i++];
  u.w.attn_norm = v[i++];
  u.w.mlp_norm = v[i++];
  for (auto& p : u.w.proj) p = v[i++];
  for (size_t k = 0; k < like.size(); ++k) {
    if (like[k].defined()) {
      u.lora[k].a = v[i++];
      u.lora[k].b = v[i++];
    }
  }
  if (has_tables) {
    u.tables.cos = v[i++];
    u.tables.sin = v[i++];
    u.tables.mask = v[i++];
  }
  return u;
}

}  // namespace

namespace {

// The gradient of a broadcasting matmul operand: `grad` summed down to `shape`.
torch::Tensor SumToShape(const torch::Tensor& grad, at::IntArrayRef shape) {
  return grad.sizes() == shape ? grad : at::sum_to(grad, shape);
}

class Fp32GemmMatmul : public torch::autograd::Function<Fp32GemmMatmul> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor a, torch::Tensor b) {
    ctx->save_for_backward({a, b});
    return torch::matmul(a.to(torch::kFloat32), b.to(torch::kFloat32)).to(a.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];
    const torch::Tensor& b = saved[1];
    const torch::Tensor g = grads[0].to(torch::kFloat32);
    torch::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) {
      grad_a = SumToShape(torch::matmul(g, b.to(torch::kFloat32).transpose(-1, -2)), a.sizes()).to(a.scalar_type());
    }
    if (ctx->needs_input_grad(1)) {
      if (b.dim() == 2 && a.dim() > 2) {
        // [..., T, in] x [in, out]: one GEMM over the folded rows, not one per batch.
        auto a2 = a.reshape({-1, a.size(-1)}).to(torch::kFloat32);
        grad_b = torch::matmul(a2.t(), g.reshape({-1, g.size(-1)})).to(b.scalar_type());
      } else {
        grad_b = SumToShape(torch::matmul(a.to(torch::kFloat32).transpose(-1, -2), g), b.sizes()).to(b.scalar_type());
      }
    }
    return {grad_a, grad_b};
  }
};

}  // namespace

torch::Tensor MatmulViaFp32(const torch::Tensor& a, const torch::Tensor& b) {
  if (compat::IsTracing()) {
    // A traced graph cannot hold a C++ autograd function; the same ops, differentiated
    // by the graph executor's symbolic autodiff.
    return torch::matmul(a.to(torch::kFloat32), b.to(torch::kFloat32)).to(a.scalar_type());
  }
  return Fp32GemmMatmul::apply(a, b);
}

torch::Tensor ModelMath::Matmul(const torch::Tensor& a, const torch::Tensor& b) const {
  if (WidensMatmul(a) && b.scalar_type() == torch::kBFloat16) {
    return MatmulViaFp32(a, b);
  }
  return torch::matmul(a, b);
}

torch::Tensor CastTo(const torch::Tensor& x, torch::ScalarType dtype) {
  // No call when the dtype already matches: a traced no-op `to` is still a graph node,
  // and one the autodiff subgraphs cannot absorb, so it splits them.
  return x.scalar_type() == dtype ? x : x.to(dtype);
}

torch::Tensor AtLeastFloat32(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat64 ? x : CastTo(x, torch::kFloat32);
}

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  // Statistics in fp32 (or wider) whatever the activation dtype, as Llama does.
  auto xf = AtLeastFloat32(x);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return CastTo(normed, x.scalar_type()) * weight;
}

torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  // Rotate-half form: pairs (i, i + d/2) rotate together.
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = torch::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

AttentionTables MakeAttentionTables(const ModelDims& dims, int64_t seq_len,
                                    torch::ScalarType dtype, const torch::Device& device) {
  const int64_t hd = dims.head_dim();
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto inv_freq = 1.0 / torch::pow(dims.rope_theta, torch::arange(0, hd, 2, options) / hd);
  auto positions = torch::arange(seq_len, options);
  auto freqs = torch::outer(positions, inv_freq);  // [seq, hd/2]
  auto emb = torch::cat({freqs, freqs}, -1);       // [seq, hd]
  AttentionTables t;
  t.cos = emb.cos().to(device, dtype);
  t.sin = emb.sin().to(device, dtype);
  t.mask = torch::full({seq_len, seq_len}, -std::numeric_limits<double>::infinity(),
                       torch::TensorOptions().dtype(torch::kFloat32))
               .triu(1)
               .repeat({dims.heads / dims.kv_heads, 1})
               .to(device, torch::kFloat32);
  return t;
}

ModelMath::ModelMath(MathOptions options, UnitRunner* runner)
    : options_(std::move(options)), runner_(runner) {}

bool ModelMath::WidensMatmul(const torch::Tensor& x) const {
  return options_.bf16_matmul_via_fp32 && x.scalar_type() == torch::kBFloat16 && x.device().is_cpu();
}

torch::Tensor ModelMath::AddLoraDelta(const torch::Tensor& y, const torch::Tensor& x, const torch::Tensor& a,
                                      const torch::Tensor& b) const {
  auto run = [this](const std::vector<torch::Tensor>& v) {
    const auto& y = v[0];
    const auto& x = v[1];
    // PEFT's form: dropout on the adapter's input; fp32 master weights cast to the
    // activation dtype, so gradients flow back to the fp32 masters.
    auto h = options_.lora_dropout > 0 ? torch::dropout(x, options_.lora_dropout, options_.training) : x;
    auto a_t = CastTo(v[2], x.scalar_type()).t();
    auto b_t = CastTo(v[3], x.scalar_type()).t();
    if (WidensMatmul(x)) return y + Matmul(Matmul(h, a_t), b_t) * options_.lora_scale;
    // On rows folded to 2-D, one addmm adds the scaled update to y: for small models the
    // separate scale and sum (and their backward nodes) cost as much as the GEMMs.
    auto down = torch::mm(h.reshape({-1, h.size(-1)}), a_t);
    return torch::addmm(y.reshape({-1, y.size(-1)}), down, b_t, /*beta=*/1.0, /*alpha=*/options_.lora_scale)
        .view(y.sizes());
  };
  return runner_->Run(Unit::kAdapter, {y, x, a, b}, run);
}

torch::Tensor ModelMath::Projection(const torch::Tensor& x, const torch::Tensor& w,
                                    const LoraPair& lora) const {
  auto y = Matmul(x, w.t());
  return lora.defined() ? AddLoraDelta(y, x, lora.a, lora.b) : y;
}

torch::Tensor ModelMath::AttentionPart(const torch::Tensor& x, const BlockWeights& w,
                                       const LoraArray& lora, const AttentionTables& tables) const {
  auto run = [this, &lora](const std::vector<torch::Tensor>& v) {
    Unpacked u = UnpackBlock(v, lora, /*has_tables=*/true);
    const auto& d = options_.dims;
    const int64_t batch = u.x.size(0), seq = u.x.size(1), hd = d.head_dim();
    const int64_t group = d.heads / d.kv_heads;
    auto xn = RmsNorm(u.x, u.w.attn_norm, d.norm_eps);
    // Grouped KV heads without copying K and V per query head: the G query heads of one
    // KV head are folded into rows, q [B*KV, G*T, hd] against k, v [B*KV, T, hd], so
    // every product is one batched GEMM (query head h = kv * G + g, as Llama orders them).
    auto q = Projection(xn, u.w.proj[kQ], u.lora[kQ])
                 .view({batch, seq, d.kv_heads, group, hd})
                 .permute({0, 2, 3, 1, 4});  // [B, KV, G, T, hd]
    auto k = Projection(xn, u.w.proj[kK], u.lora[kK]).view({batch, seq, d.kv_heads, hd}).transpose(1, 2);
    auto v_ = Projection(xn, u.w.proj[kV], u.lora[kV]).view({batch, seq, d.kv_heads, hd}).transpose(1, 2);
    q = ApplyRotary(q, u.tables.cos, u.tables.sin).reshape({batch * d.kv_heads, group * seq, hd});
    k = ApplyRotary(k, u.tables.cos, u.tables.sin).reshape({batch * d.kv_heads, seq, hd});
    v_ = v_.reshape({batch * d.kv_heads, seq, hd});
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    // fp32: scale and mask fused into the product (one op); else the product widens first.
    auto scores = q.scalar_type() == torch::kFloat32
                      ? torch::baddbmm(u.tables.mask, q, k.transpose(1, 2), /*beta=*/1.0, /*alpha=*/scale)
                      : AtLeastFloat32(Matmul(q, k.transpose(1, 2))) * scale + u.tables.mask;
    auto probs = CastTo(torch::softmax(scores, -1), u.x.scalar_type());
    auto context = Matmul(probs, v_)  // [B*KV, G*T, hd]
                       .view({batch, d.kv_heads, group, seq, hd})
                       .permute({0, 3, 1, 2, 4})  // [B, T, KV, G, hd]
                       .reshape({batch, seq, d.dim});
    return u.x + Projection(context, u.w.proj[kO], u.lora[kO]);
  };
  return runner_->Run(Unit::kAttention, PackBlock(x, w, lora, &tables), run);
}

torch::Tensor ModelMath::MlpPart(const torch::Tensor& x, const BlockWeights& w,
                                 const LoraArray& lora) const {
  auto run = [this, &lora](const std::vector<torch::Tensor>& v) {
    Unpacked u = UnpackBlock(v, lora, /*has_tables=*/false);
    auto hn = RmsNorm(u.x, u.w.mlp_norm, options_.dims.norm_eps);
    auto gate = Projection(hn, u.w.proj[kGate], u.lora[kGate]);
    auto up = Projection(hn, u.w.proj[kUp], u.lora[kUp]);
    return u.x + Projection(torch::silu(gate) * up, u.w.proj[kDown], u.lora[kDown]);
  };
  return runner_->Run(Unit::kMlp, PackBlock(x, w, lora, nullptr), run);
}

torch::Tensor ModelMath::Block(const torch::Tensor& x, const BlockWeights& w, const LoraArray& lora,
                               const AttentionTables& tables) const {
  auto run = [this, &lora](const std::vector<torch::Tensor>& v) {
    Unpacked u = UnpackBlock(v, lora, /*has_tables=*/true);
    auto h = AttentionPart(u.x, u.w, u.lora, u.tables);
    return MlpPart(h, u.w, u.lora);
  };
  return runner_->Run(Unit::kBlock, PackBlock(x, w, lora, &tables), run);
}

torch::Tensor ModelMath::HeadLoss(const torch::Tensor& h, const HeadWeights& w,
                                  const torch::Tensor& targets) const {
  auto run = [this](const std::vector<torch::Tensor>& v) {
    auto hn = RmsNorm(v[0], v[1], options_.dims.norm_eps);
    auto logits = AtLeastFloat32(Matmul(hn, v[2].t()));
    return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}),
                                                v[3].reshape({-1}));
  };
  return runner_->Run(Unit::kHead, {h, w.final_norm, w.head, targets}, run);
}

}  // namespace bakeoff::trainer
