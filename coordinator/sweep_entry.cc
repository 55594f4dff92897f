#include "coordinator/sweep_entry.h"

namespace bakeoff::coordinator {

std::string PairGroup(const std::string& variant_key, const VariantInfo& variant, int repeat) {
  const std::string& baseline = variant.is_baseline ? variant_key : variant.counterpart_key;
  if (baseline.empty()) return "";
  return baseline + "#" + std::to_string(repeat);
}

}  // namespace bakeoff::coordinator
