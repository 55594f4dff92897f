#include "experiments/sweep/variant_config.h"

#include <utility>

namespace bakeoff::spec {

using nlohmann::json;

VariantConfig::VariantConfig(std::shared_ptr<const json> shared, json own)
    : shared_(std::move(shared)), own_(std::move(own)) {}

VariantConfig::VariantConfig(json whole) : own_(std::move(whole)) {}

const json& VariantConfig::operator[](const std::string& field) const {
  static const json kNull;
  if (auto it = own_.find(field); it != own_.end()) return *it;
  if (shared_ != nullptr) {
    if (auto it = shared_->find(field); it != shared_->end()) return *it;
  }
  return kNull;
}

bool VariantConfig::contains(const std::string& field) const {
  return own_.contains(field) || (shared_ != nullptr && shared_->contains(field));
}

json VariantConfig::Merged() const {
  json merged = shared_ != nullptr ? *shared_ : json::object();
  for (const auto& [field, value] : own_.items()) merged[field] = value;
  return merged;
}

}  // namespace bakeoff::spec
