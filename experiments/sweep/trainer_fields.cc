#include "experiments/sweep/trainer_fields.h"

namespace bakeoff::spec {

const std::vector<TrainerField>& TrainerFields() {
  static const std::vector<TrainerField> fields = [] {
    std::vector<TrainerField> out;
    for (const auto& field : trainer::TrainerFields()) {
      if (!field.launcher_only) out.push_back(field);
    }
    return out;
  }();
  return fields;
}

const TrainerField* FindTrainerField(const std::string& name) {
  const TrainerField* field = trainer::FindTrainerField(name);
  return field != nullptr && !field->launcher_only ? field : nullptr;
}

}  // namespace bakeoff::spec
