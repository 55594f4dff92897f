// VariantConfig: one variant's trainer configuration (bakeoff-trainer --config), kept as
// the part every variant of a sweep shares (the workload's defaults: one copy however
// many variants there are, held by a shared pointer) and the variant's own fields over
// it (its axis values, "device", "world_size", the command template). A sweep of 10,000
// variants with a long workload field holds that field once, not 10,000 times; the
// whole object is built only where it is needed, one at a time (Merged()).
// Thread-safety: a const VariantConfig may be read from any thread; the shared part is
// immutable.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace bakeoff::spec {

class VariantConfig {
 public:
  // An empty object.
  VariantConfig() = default;
  // `shared` (null: nothing shared) with `own`'s fields over it. REQUIRES: `own` is an
  // object, and *shared too when not null.
  VariantConfig(std::shared_ptr<const nlohmann::json> shared, nlohmann::json own);
  // Nothing shared: e.g. a configuration read back from the results store.
  explicit VariantConfig(nlohmann::json whole);

  // The field's value, the variant's own first; a null value when neither has it.
  const nlohmann::json& operator[](const std::string& field) const;
  bool contains(const std::string& field) const;

  // The whole configuration as one object (shared fields, then the variant's own over
  // them). Builds a copy of the shared part: call it for one variant at a time.
  nlohmann::json Merged() const;

  // The variant's own fields, and the shared part (may be null).
  const nlohmann::json& own() const { return own_; }
  const std::shared_ptr<const nlohmann::json>& shared() const { return shared_; }

 private:
  std::shared_ptr<const nlohmann::json> shared_;
  nlohmann::json own_ = nlohmann::json::object();
};

}  // namespace bakeoff::spec
