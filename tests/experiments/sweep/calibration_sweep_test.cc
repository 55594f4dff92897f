// The A/A sweep `bakeoff calibrate` runs, and the key that says which sweeps a stored
// calibration applies to.
#include "experiments/sweep/calibration_sweep.h"
#include "experiments/sweep/executor_catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"

namespace bakeoff::spec {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

const char* const kSweep = R"(name: main
question: is compile faster?
workload: {model: tiny, steps: 4, seed: 7}
parameters:
  compile_mode: {values: [eager, jit]}
  zero_stage: {values: [0, 2]}
  world_size: {value: 2}
exclude:
  - {compile_mode: jit, zero_stage: 2}
baseline: {compile_mode: jit, zero_stage: 0}
repeats: 3
order: sequential
)";

SweepSpec MustParse(const std::string& text) {
  auto spec = ParseSweepText(text, "test.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : SweepSpec{};
}

TEST(CalibrationSweepTest, RunsTheBaselineVariantTwiceDifferingOnlyInTheSeedInInterleavedPairs) {
  auto yaml = CalibrationSweepYaml(kSweep, "main.yaml", 6);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  const SweepSpec aa = MustParse(*yaml);
  EXPECT_EQ(aa.name, "calibrate-main");
  EXPECT_EQ(aa.repeats, 6);
  EXPECT_EQ(aa.order, Order::kInterleaved);
  EXPECT_TRUE(aa.exclude.empty());
  auto expanded = Expand(aa);
  ASSERT_TRUE(expanded.ok()) << expanded.status().ToString();
  ASSERT_EQ(expanded->variants.size(), 2u);
  EXPECT_EQ(expanded->trials.size(), 12u);
  // Both variants are the baseline (jit, ZeRO 0, 2 ranks), seeds 7 and 8.
  for (const Variant& v : expanded->variants) {
    EXPECT_EQ(v.config["compile_mode"], "jit") << v.key;
    EXPECT_EQ(v.config["zero_stage"], 0) << v.key;
    EXPECT_EQ(v.world_size, 2) << v.key;
  }
  EXPECT_EQ(expanded->variants[0].config["seed"], 7);
  EXPECT_EQ(expanded->variants[1].config["seed"], 8);
  EXPECT_TRUE(expanded->variants[0].is_baseline);
  EXPECT_EQ(expanded->variants[1].counterpart_key, expanded->variants[0].key);
}

TEST(CalibrationSweepTest, WithoutABaselineEachAxisTakesItsFirstValue) {
  auto yaml = CalibrationSweepYaml("name: nb\nworkload: {model: tiny}\nparameters:\n"
                                   "  micro_batch: {values: [4, 1]}\n",
                                   "nb.yaml", 3);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  auto expanded = Expand(MustParse(*yaml));
  ASSERT_TRUE(expanded.ok());
  for (const Variant& v : expanded->variants) EXPECT_EQ(v.config["micro_batch"], 4);
}

TEST(CalibrationSweepTest, RefusesADistributionTheBaselineDoesNotFixAndPairsOutOfRange) {
  auto random = CalibrationSweepYaml("name: r\nmethod: random\ncount: 3\nworkload: {model: tiny}\n"
                                     "parameters:\n  lr: {distribution: log_uniform, min: 0.0001, max: 0.01}\n",
                                     "r.yaml", 5);
  ASSERT_FALSE(random.ok());
  EXPECT_THAT(random.status().message(), HasSubstr("r.yaml:6"));
  EXPECT_THAT(random.status().message(), HasSubstr("lr"));
  EXPECT_FALSE(CalibrationSweepYaml(kSweep, "main.yaml", kMinCalibrationPairs - 1).ok());
  EXPECT_FALSE(CalibrationSweepYaml(kSweep, "main.yaml", kMaxCalibrationPairs + 1).ok());
  auto broken = CalibrationSweepYaml("name: b\nworkload: {model: tiny, steps: -1}\n", "b.yaml", 5);
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("b.yaml:2"));
}

TEST(CalibrationSweepTest, TheKeyIsTheWorkloadBlockWhateverTheAxesAndTheSeed) {
  const std::string key = CalibrationKey(MustParse(kSweep));
  // Other axes, another baseline, another seed: the same workload, the same key.
  EXPECT_EQ(CalibrationKey(MustParse("name: other\nworkload: {model: tiny, steps: 4, seed: 1}\n"
                                     "parameters:\n  lora_rank: {values: [4, 8]}\n")),
            key);
  // The calibration sweep itself has the key of the sweep it calibrates.
  auto yaml = CalibrationSweepYaml(kSweep, "main.yaml", 4);
  ASSERT_TRUE(yaml.ok());
  EXPECT_EQ(CalibrationKey(MustParse(*yaml)), key);
  // Another workload field, another key.
  EXPECT_NE(CalibrationKey(MustParse("name: m\nworkload: {model: tiny, steps: 5}\n")), key);
  EXPECT_NE(CalibrationKey(MustParse("name: m\nworkload: {model: tiny, steps: 4}\nresources: {device: cuda}\n")),
            key);
}

TEST(CalibrationSweepTest, ALockstepCalibrationIsTheSameAAInLockstepUnderItsOwnNameAndKey) {
  auto yaml = CalibrationSweepYaml(kSweep, "main.yaml", 4, nullptr, Order::kLockstep);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  const SweepSpec aa = MustParse(*yaml);
  EXPECT_EQ(aa.order, Order::kLockstep);
  EXPECT_EQ(aa.repeats, 4);
  EXPECT_EQ(aa.name.substr(aa.name.size() - 9), "-lockstep");
  EXPECT_EQ(CalibrationKey(aa), CalibrationKey(MustParse(kSweep))) << "one workload, two orders, one key";
  // A template that does not take turns cannot be calibrated in lockstep: the sweep's
  // own error says why.
  auto catalog = ParseExecutorCatalog(
      "templates:\n  t:\n    argv: [\"{python}\", \"x.py\"]\n    trainer_fields: [seed]\n", "c.yaml", "/opt");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  auto refused = CalibrationSweepYaml("name: c\nworkload: {executor: command, command: {template: t}}\n", "c.yaml", 4,
                                      &*catalog, Order::kLockstep);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("lockstep needs every side to take turns"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(CalibrationSweepYaml("name: c\nworkload: {executor: command, command: {template: t}}\n", "c.yaml", 4,
                                   &*catalog, Order::kInterleaved)
                  .ok());
}

}  // namespace
}  // namespace bakeoff::spec
