#include "experiments/spec/trainer_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace bakeoff::spec {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

TEST(TrainerFieldsTest, EveryFieldOfTheTrainerContractIsInTheTable) {
  // docs/trainer.md is the contract: each `| name |` row of its configuration table
  // (some rows list several fields, comma-separated) must be a known field.
  std::ifstream in(BAKEOFF_SOURCE_DIR "/docs/trainer.md");
  ASSERT_TRUE(in) << "docs/trainer.md not found";
  std::string line;
  bool in_table = false;
  size_t checked = 0;
  while (std::getline(in, line)) {
    if (line.rfind("| field |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.empty() || line[0] != '|') break;
    if (line.rfind("|---", 0) == 0) continue;
    std::string names = line.substr(2, line.find('|', 1) - 2);
    std::stringstream ss(names);
    std::string name;
    while (std::getline(ss, name, ',')) {
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      EXPECT_NE(FindTrainerField(name), nullptr) << name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 30u);
  EXPECT_EQ(checked, TrainerFields().size());
}

TEST(TrainerFieldsTest, DefaultsAreValidValues) {
  for (const auto& field : TrainerFields()) {
    if (field.default_value.is_null()) continue;  // no default: unset unless given
    EXPECT_TRUE(NormalizeTrainerValue(field, field.default_value).ok()) << field.name;
  }
}

TEST(TrainerFieldsTest, NumbersNormaliseToDoubles) {
  auto v = NormalizeTrainerValue(*FindTrainerField("lora_alpha"), json(16));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->is_number_float());
  EXPECT_EQ(*v, json(16.0));
}

TEST(TrainerFieldsTest, IntegersRejectFractions) {
  auto v = NormalizeTrainerValue(*FindTrainerField("micro_batch"), json(2.5));
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("expected an integer >= 1, got 2.5"));
}

TEST(TrainerFieldsTest, ValuesAboveASanityCapGetTheFullRange) {
  auto v = NormalizeTrainerValue(*FindTrainerField("micro_batch"), json(1 << 21));
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("expected an integer from 1 to 1048576, got 2097152"));
  auto lr = NormalizeTrainerValue(*FindTrainerField("lr"), json(5000.0));
  ASSERT_FALSE(lr.ok());
  EXPECT_THAT(lr.status().message(), HasSubstr("expected a number >= 0 and <= 1000"));
}

TEST(TrainerFieldsTest, ExpectedDescribesRanges) {
  EXPECT_EQ(FindTrainerField("zero_stage")->Expected(), "an integer from 0 to 3");
  EXPECT_EQ(FindTrainerField("lora_dropout")->Expected(), "a number >= 0 and < 1");
  EXPECT_EQ(FindTrainerField("precision")->Expected(), "one of fp32, bf16");
}

TEST(TrainerFieldsTest, ClosestNameSuggestsTyposAndFragmentsOnly) {
  std::vector<std::string> names = {"micro_batch", "grad_accum", "zero_stage"};
  EXPECT_EQ(ClosestName("micro_bach", names), "micro_batch");
  EXPECT_EQ(ClosestName("Zero_Stage", names), "zero_stage");
  EXPECT_EQ(ClosestName("batch", names), "micro_batch");
  EXPECT_EQ(ClosestName("temperature", names), "");
}

}  // namespace
}  // namespace bakeoff::spec
