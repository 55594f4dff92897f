// The trainer-field table's rules drive the report's loss parity and the validator's CUDA
// warnings: these tests walk the table, so a new field's row is checked in both places
// without a test of its own (issue 48, item 2).
#include "experiments/sweep/axis_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiments/sweep/sweep_parser.h"
#include "experiments/sweep/trainer_fields.h"

namespace bakeoff::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Math = TrainerField::Math;

// Two distinct values of `field` as the report sees them (text).
std::pair<std::string, std::string> TwoValues(const TrainerField& field) {
  if (field.choices.size() >= 2) return {field.choices[0], field.choices[1]};
  if (field.kind == TrainerField::Kind::kBool) return {"false", "true"};
  return {"1", "2"};
}

TEST(AxisRulesTest, EveryFieldsMathRuleDecidesItsLossParity) {
  int keeps = 0, changes = 0, factors = 0;
  for (const TrainerField& field : TrainerFields()) {
    auto [a, b] = TwoValues(field);
    const auto changing = AxesChangingTheMath({{field.name, a}}, {{field.name, b}});
    switch (field.math) {
      case Math::kKeeps:
        EXPECT_THAT(changing, IsEmpty()) << field.name;
        ++keeps;
        break;
      case Math::kChanges:
        EXPECT_THAT(changing, ElementsAre(field.name)) << field.name;
        ++changes;
        break;
      case Math::kBatchFactor:
        EXPECT_THAT(changing, ElementsAre(field.name + " (global batch)")) << field.name;
        ++factors;
        break;
    }
  }
  EXPECT_GE(keeps, 9);  // compile_mode, zero_stage, offload, ... (docs/statistics.md)
  EXPECT_GT(changes, 0);
  EXPECT_EQ(factors, 3);  // world_size, micro_batch, grad_accum
}

TEST(AxisRulesTest, BatchFactorsKeepTheMathTogetherAtTheSameGlobalBatch) {
  // 2 ranks x 4 against 4 ranks x 2: the same global batch of 8.
  EXPECT_THAT(AxesChangingTheMath({{"world_size", "2"}, {"micro_batch", "4"}},
                                  {{"world_size", "4"}, {"micro_batch", "2"}}),
              IsEmpty());
  EXPECT_THAT(AxesChangingTheMath({{"world_size", "2"}, {"micro_batch", "4"}, {"lr", "0.1"}},
                                  {{"world_size", "4"}, {"micro_batch", "4"}, {"lr", "0.1"}}),
              ElementsAre("world_size (global batch)"));
}

TEST(AxisRulesTest, AxesOutsideTheTrainerTableFollowTheirOwnRows) {
  for (const char* axis : {"executor", "compile_cache", "compile", "torch_compile"}) {
    EXPECT_TRUE(AxisKeepsTheMath(axis)) << axis;
  }
  // A user script's own flag is in no table: it changes the math until someone says not.
  EXPECT_THAT(AxesChangingTheMath({{"my_flag", "a"}}, {{"my_flag", "b"}}), ElementsAre("my_flag"));
}

TEST(AxisRulesTest, EveryCudaOnlyChoiceAndNoOtherIsWarnedOnACpu) {
  int cuda_only = 0;
  for (const TrainerField& field : TrainerFields()) {
    if (field.launcher_only || field.kind != TrainerField::Kind::kEnum) continue;
    if (field.name == "device") continue;  // set by resources.device, never an axis
    for (const std::string& choice : field.choices) {
      const std::string text = "name: s\nworkload: {}\nparameters:\n  " + field.name + ": {values: [" + choice +
                               "]}\nresources: {device: cpu}\n";
      auto spec = ParseSweepText(text, "test.yaml");
      ASSERT_TRUE(spec.ok()) << text << spec.status().ToString();
      const bool warned = std::any_of(spec->warnings.begin(), spec->warnings.end(), [&](const std::string& w) {
        return w.find(field.name + " " + choice + " is CUDA only") != std::string::npos;
      });
      EXPECT_EQ(warned, ValueNeedsCuda(field.name, choice)) << field.name << " " << choice;
      cuda_only += ValueNeedsCuda(field.name, choice) ? 1 : 0;
    }
  }
  EXPECT_EQ(cuda_only, 4);  // offload optimizer, parameters; compile_mode cudagraph, jit+cudagraph
}

}  // namespace
}  // namespace bakeoff::spec
