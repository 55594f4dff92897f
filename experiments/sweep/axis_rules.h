// What an axis means for a comparison, read from the tables rather than from lists kept
// by the report and the validator: a trainer field's rules come from its row of the
// trainer-field table (TrainerField::math, cuda_only); the few axes that are not trainer
// fields (the executor, the compile cache, the names users' own scripts give
// compile_mode's switch) are rows of this module's own table. A new axis is one row.
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bakeoff::spec {

// Whether two variants that differ only in `axis` train the same loss curve. A batch
// factor (world_size, micro_batch, grad_accum) does not, alone: see AxesChangingTheMath.
// An axis in no table (a user script's own flag) changes the math.
bool AxisKeepsTheMath(const std::string& axis);

// Whether `axis` is a factor of the global batch (TrainerField::Math::kBatchFactor).
bool AxisIsBatchFactor(const std::string& axis);

// Whether `value` of `axis` needs device cuda (TrainerField::cuda_only).
bool ValueNeedsCuda(const std::string& axis, const nlohmann::json& value);

// The axes on which `variant` and `counterpart` (axis -> value as text) differ that
// change the math, empty when the loss curves should match. Batch factors keep it
// together when the global batch (their product; a factor missing from a side is the
// sweep's constant, the same on both) is unchanged, and are named "world_size (global
// batch)" otherwise.
std::vector<std::string> AxesChangingTheMath(const std::map<std::string, std::string>& variant,
                                             const std::map<std::string, std::string>& counterpart);

}  // namespace bakeoff::spec
