#include "experiments/trainer/recompute_function.h"

#include "experiments/trainer/torch_compat.h"

namespace bakeoff::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The reentrant form (as torch.utils.checkpoint with use_reentrant=True): backward runs
// the segment again with grad enabled and calls backward on it, which accumulates the
// adapters' gradients into their .grad directly. LibTorch 1.13's custom functions take
// no tensor lists as inputs, so the adapters cannot be inputs; the segment's input must
// require grad for autograd to reach this function at all (LoraModel ensures it).
class RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, RecomputeSegment* segment) {
    ctx->saved_data["segment"] = reinterpret_cast<int64_t>(segment);
    if (segment->restore_rng) ctx->saved_data["rng"] = compat::GetRngState(segment->device);
    ctx->save_for_backward({x});
    // Autograd runs a custom forward with grad mode off: no activations are kept.
    return {segment->run(x)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* segment = reinterpret_cast<RecomputeSegment*>(ctx->saved_data["segment"].toInt());
    torch::Tensor x = ctx->get_saved_variables()[0];
    torch::Tensor rng_now;
    if (segment->restore_rng) {
      rng_now = compat::GetRngState(segment->device);
      compat::SetRngState(segment->device, ctx->saved_data["rng"].toTensor());
    }
    torch::Tensor x_in = x.detach().requires_grad_(true);
    {
      torch::AutoGradMode enable(true);
      torch::Tensor out = segment->run(x_in);
      if (segment->restore_rng) compat::SetRngState(segment->device, rng_now);
      torch::autograd::backward({out}, {grad_outputs[0]});
    }
    return {x_in.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RunRecomputed(RecomputeSegment* segment, const torch::Tensor& x) {
  return RecomputeFunction::apply(x, segment)[0];
}

}  // namespace bakeoff::trainer
