// The sweep validator's view of the trainer's configuration contract. The table itself
// lives with the trainer's configuration (experiments/trainer/trainer_fields.h), the one
// place it is written down; the spec checks sweeps against it. Launcher-only fields
// (rank, store, ...) are not sweep fields: FindTrainerField returns nullptr for them.
// Thread-safety: the table is immutable after static initialisation.
#pragma once

#include <string>
#include <vector>

#include "experiments/trainer/trainer_fields.h"

namespace bakeoff::spec {

using trainer::ClosestName;
using trainer::NormalizeTrainerValue;
using trainer::TrainerField;

// The fields a sweep may set, in the order of docs/trainer.md.
const std::vector<TrainerField>& TrainerFields();

// The sweep field called `name`, or nullptr (also for launcher-only fields).
const TrainerField* FindTrainerField(const std::string& name);

}  // namespace bakeoff::spec
