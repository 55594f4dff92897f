#include "experiments/trainer/unit_runner.h"

#include <sstream>

namespace bakeoff::trainer {

const char* UnitName(Unit unit) {
  switch (unit) {
    case Unit::kBlock: return "block";
    case Unit::kAttention: return "attention";
    case Unit::kMlp: return "mlp";
    case Unit::kHead: return "head";
    case Unit::kAdapter: return "adapter";
  }
  return "?";
}

UnitRunner::UnitRunner(bool jit, const std::string& scope) : jit_(jit), scope_(scope) {}

bool UnitRunner::Compiled(Unit unit) const {
  if (!jit_) return false;
  if (scope_ == "full") return unit == Unit::kBlock || unit == Unit::kHead;
  if (scope_ == "attention") return unit == Unit::kAttention;
  if (scope_ == "mlp") return unit == Unit::kMlp;
  if (scope_ == "adapters") return unit == Unit::kAdapter;
  return false;
}

torch::Tensor UnitRunner::Run(Unit unit, const std::vector<torch::Tensor>& inputs,
                              const UnitFn& fn) {
  if (!Compiled(unit)) return fn(inputs);
  std::ostringstream key;
  key << UnitName(unit) << (torch::GradMode::is_enabled() ? "/grad" : "/nograd");
  for (const auto& t : inputs) {
    key << '|' << t.scalar_type() << (t.requires_grad() ? "g" : "") << t.sizes();
  }
  auto it = graphs_.find(key.str());
  if (it == graphs_.end()) {
    auto graph = compat::TraceToGraph(inputs, fn);
    it = graphs_
             .emplace(key.str(), std::make_unique<compat::CompiledGraph>(
                                     std::string("bakeoff_") + UnitName(unit), graph))
             .first;
  }
  return it->second->Run(inputs);
}

nlohmann::json UnitRunner::Evidence(bool on_cpu) const {
  int64_t fusion = 0;
  int64_t unfused = 0;
  int64_t diff = 0;
  int64_t optimized = 0;
  nlohmann::json units = nlohmann::json::array();
  for (const auto& [key, graph] : graphs_) {
    auto e = graph->Inspect(on_cpu);
    fusion += e.fusion_groups;
    unfused += e.unfused_groups;
    diff += e.differentiable_graphs;
    optimized += e.optimized ? 1 : 0;
    units.push_back({{"key", key.substr(0, key.find('|'))},
                     {"fusion_groups", e.fusion_groups},
                     {"unfused_groups", e.unfused_groups},
                     {"differentiable_graphs", e.differentiable_graphs},
                     {"nodes", e.nodes},
                     {"optimized", e.optimized}});
  }
  return {{"graphs", graphs_.size()},
          {"optimized_graphs", optimized},
          {"fusion_groups", fusion},
          {"unfused_groups", unfused},
          {"differentiable_graphs", diff},
          {"units", units}};
}

}  // namespace bakeoff::trainer
