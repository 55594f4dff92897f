// UnitRunner: runs a unit of the model's math either eagerly (a direct C++ call) or, for
// the units inside the chosen compile scope, as a TorchScript graph traced from that same
// C++ function and run by LibTorch's optimizing graph executor. Graphs are cached by the
// unit, input shapes, dtypes, requires-grad flags and grad mode, since a trace bakes these
// in. It also collects the evidence that compilation took effect.
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/trainer/torch_compat.h"

namespace bakeoff::trainer {

enum class Unit { kBlock, kAttention, kMlp, kHead, kAdapter };

class UnitRunner {
 public:
  using UnitFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

  // `jit` false: every unit runs eagerly. `scope`: full | attention | mlp | adapters.
  UnitRunner(bool jit, const std::string& scope);

  bool Compiled(Unit unit) const;

  // Runs `fn(inputs)`, compiled when `unit` is in scope.
  torch::Tensor Run(Unit unit, const std::vector<torch::Tensor>& inputs, const UnitFn& fn);

  // {"graphs": N, "optimized_graphs": N, "fusion_groups": N, "unfused_groups": N,
  //  "differentiable_graphs": N, "units": [...]}: optimized_graphs counts those the
  //  executor has optimized (a graph run too few times, e.g. a shape seen once, stays
  //  profiling-only); unfused_groups, fusion groups that run op by op on this device.
  nlohmann::json Evidence(bool on_cpu) const;
  int64_t graphs() const { return static_cast<int64_t>(graphs_.size()); }

 private:
  bool jit_;
  std::string scope_;
  std::map<std::string, std::unique_ptr<compat::CompiledGraph>> graphs_;
};

const char* UnitName(Unit unit);

}  // namespace bakeoff::trainer
