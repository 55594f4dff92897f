#include "coordinator/sweep_entry.h"

namespace bakeoff::coordinator {

std::string PairGroup(const std::string& variant_key, const VariantInfo& variant, int repeat) {
  const std::string& baseline = variant.is_baseline ? variant_key : variant.counterpart_key;
  if (baseline.empty()) return "";
  return baseline + "#" + std::to_string(repeat);
}

void NamePairWorker(SweepEntry& sweep, const TrialEntry& trial, const std::string& worker_id) {
  auto variant = sweep.variants.find(trial.variant_key);
  if (variant == sweep.variants.end()) return;
  const std::string group = PairGroup(trial.variant_key, variant->second, trial.repeat);
  if (!group.empty()) sweep.pair_workers.emplace(group, worker_id);
}

}  // namespace bakeoff::coordinator
