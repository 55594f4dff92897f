#include "experiments/sweep/trainer_fields.h"

#include "experiments/sweep/sweep_parser.h"
#include "experiments/trainer/trainer_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
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

// Values at, just inside and just outside every boundary of `field`, and of the wrong type.
std::vector<json> BoundaryProbes(const TrainerField& f) {
  using Kind = TrainerField::Kind;
  std::vector<json> probes = {json(nullptr), json("text"), json::array(), json::object(), json(true)};
  switch (f.kind) {
    case Kind::kInt:
      for (double v : {f.min - 1, f.min, f.min + 1, f.max - 1, f.max, f.max + 1}) {
        if (std::fabs(v) <= 9007199254740992.0) probes.push_back(static_cast<int64_t>(v));
      }
      probes.push_back(f.min + 0.5);
      break;
    case Kind::kNumber:
      for (double v : {f.min, f.max}) {
        probes.push_back(v);
        probes.push_back(std::nextafter(v, -1e308));
        probes.push_back(std::nextafter(v, 1e308));
      }
      probes.push_back(1e-13);
      break;
    case Kind::kEnum:
    case Kind::kDataset:
      for (const auto& c : f.choices) probes.push_back(c);
      probes.push_back("");
      break;
    case Kind::kTargets:
      probes.push_back(json::array({"q"}));
      probes.push_back(json::array({"q", "q"}));
      probes.push_back(json::array({"nope"}));
      break;
    case Kind::kModel:
      for (const auto& c : f.choices) probes.push_back(c);
      probes.push_back({{"dim", 60}, {"layers", 1}, {"heads", 4}, {"kv_heads", 2}, {"ffn_dim", 8}, {"vocab", 16}});  // head_dim 15: odd
      probes.push_back({{"dim", 64}, {"layers", 1}, {"heads", 4}, {"kv_heads", 3}, {"ffn_dim", 8}, {"vocab", 16}});
      probes.push_back({{"dim", 64}, {"layers", 1}, {"heads", 4}, {"ffn_dim", 8}, {"vocab", 16}});  // kv_heads = heads
      probes.push_back({{"dim", 64}, {"layers", 1}, {"heads", 4}, {"kv_heads", 2}, {"ffn_dim", 8}, {"vocab", 16}});
      break;
    default:
      probes.push_back("a-name");
      break;
  }
  return probes;
}

// `bakeoff validate` (the sweep parser) and the trainer (its configuration parser, as the
// worker feeds it) accept exactly the same values of every field: one table, no drift.
TEST(TrainerFieldsTest, ValidateAndTheTrainerAgreeOnEveryBoundaryOfEveryField) {
  size_t probes = 0;
  for (const TrainerField& field : TrainerFields()) {
    // A sweep sets the device under resources.device (its scheduling depends on it),
    // never as a workload field: a rule of the sweep's shape, not of the value.
    if (field.name == "device") continue;
    for (const json& value : BoundaryProbes(field)) {
      json workload = {{"executor", "lora"}, {field.name, value}};
      const std::string yaml = "name: probe\nworkload: " + workload.dump() +
                               "\nparameters: {seed: {values: [1, 2]}}\n";
      auto sweep = ParseSweepText(yaml, "probe.yaml");
      trainer::TrainerConfig config;
      config.store = "127.0.0.1:1";  // what the worker adds for world_size > 1
      Status trainer = trainer::ApplyConfigJson({{field.name, value}}, &config);
      if (trainer.ok()) trainer = trainer::FinalizeConfig(&config);
      EXPECT_EQ(sweep.ok(), trainer.ok())
          << field.name << " = " << value.dump() << "\n  validate: "
          << (sweep.ok() ? "accepted" : sweep.status().ToString()) << "\n  trainer: " << trainer.ToString();
      ++probes;
    }
  }
  EXPECT_GT(probes, 200u);
}

TEST(TrainerFieldsTest, LauncherFieldsAreNotSweepFields) {
  for (const char* name : {"rank", "local_rank", "local_world_size", "store"}) {
    EXPECT_EQ(FindTrainerField(name), nullptr) << name;
    EXPECT_NE(trainer::FindTrainerField(name), nullptr) << name;
  }
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
