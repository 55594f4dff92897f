#include "experiments/trainer/trainer_config.h"

#include <string>
#include <vector>

#include "experiments/trainer/trainer_fields.h"

namespace bakeoff::trainer {
namespace {

Status ApplyField(const std::string& name, const nlohmann::json& value, TrainerConfig* config) {
  const TrainerField* field = FindTrainerField(name);
  if (field == nullptr) {
    const std::string best = ClosestName(name, TrainerConfigFieldNames());
    return Status::InvalidArgument(name + ": unknown field" + (best.empty() ? "" : " (did you mean " + best + "?)") +
                                   "; allowed: " + JoinNames(TrainerConfigFieldNames()));
  }
  auto normalized = NormalizeTrainerValue(*field, value);
  if (!normalized.ok()) return Status::InvalidArgument(name + ": " + normalized.status().message());
  AssignTrainerValue(*field, *normalized, config);
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& TrainerConfigFieldNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& field : TrainerFields()) names.push_back(field.name);
    return names;
  }();
  return kNames;
}

Status ApplyConfigJson(const nlohmann::json& object, TrainerConfig* config) {
  if (!object.is_object()) {
    return Status::InvalidArgument("configuration: expected a JSON object of fields");
  }
  for (auto it = object.begin(); it != object.end(); ++it) {
    BAKEOFF_RETURN_IF_ERROR(ApplyField(it.key(), it.value(), config));
  }
  return Status::Ok();
}

Status ApplyConfigFlag(const std::string& field, const std::string& value, TrainerConfig* config) {
  nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) parsed = value;
  return ApplyField(field, parsed, config);
}

Status FinalizeConfig(TrainerConfig* c) {
  auto dims = ResolveModel(c->model);
  if (!dims.ok()) return dims.status();
  c->dims = *dims;
  if (c->rank >= c->world_size) {
    return Status::InvalidArgument("rank: " + std::to_string(c->rank) + " must be below world_size " +
                                   std::to_string(c->world_size));
  }
  if (c->world_size > 1 && c->store.empty()) {
    return Status::InvalidArgument("store: world_size > 1 needs the rendezvous address "
                                   "(--store HOST:PORT or MASTER_ADDR/MASTER_PORT)");
  }
  return Status::Ok();
}

nlohmann::json TrainerConfig::ToJson() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& field : TrainerFields()) out[field.name] = TrainerValue(field, *this);
  out["dims"] = dims.ToJson();
  return out;
}

}  // namespace bakeoff::trainer
