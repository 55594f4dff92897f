#include "experiments/sweep/sweep_expander.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "experiments/sweep/sweep_parser.h"
#include "experiments/sweep/trainer_fields.h"
#include "tests/integration/test_sweeps.h"  // EveryCombinationOfSevenAxes

namespace bakeoff::spec {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

SweepSpec MustParse(const std::string& text) {
  auto spec = ParseSweepText(text, "test.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : SweepSpec{};
}

ExpandedSweep MustExpand(const std::string& text, const ExpandOptions& options = {}) {
  auto expanded = Expand(MustParse(text), options);
  EXPECT_TRUE(expanded.ok()) << expanded.status().ToString();
  return expanded.ok() ? *expanded : ExpandedSweep{};
}

const char* const kGrid = R"(name: g
workload: {model: tiny, steps: 4}
parameters:
  compile_mode: {values: [eager, jit]}
  zero_stage: {values: [0, 2]}
  micro_batch: {values: [1, 4]}
  world_size: {value: 2}
baseline: {compile_mode: eager}
repeats: 3
)";

TEST(SweepExpanderTest, GridHasEveryCombinationInWrittenOrder) {
  ExpandedSweep e = MustExpand(kGrid);
  ASSERT_EQ(e.variants.size(), 8u);
  EXPECT_EQ(e.trials.size(), 24u);
  EXPECT_EQ(e.axes, (std::vector<std::string>{"compile_mode", "zero_stage", "micro_batch"}));
  EXPECT_EQ(e.variants[0].key, "compile_mode=eager,zero_stage=0,micro_batch=1");
  EXPECT_EQ(e.variants[1].key, "compile_mode=eager,zero_stage=0,micro_batch=4");
  EXPECT_EQ(e.variants[7].key, "compile_mode=jit,zero_stage=2,micro_batch=4");
  std::set<std::string> keys;
  for (const auto& v : e.variants) keys.insert(v.key);
  EXPECT_EQ(keys.size(), 8u);
}

TEST(SweepExpanderTest, ConfigMergesWorkloadDefaultsAxesDeviceAndWorldSize) {
  ExpandedSweep e = MustExpand(kGrid);
  const Variant& v = e.variants[7];
  EXPECT_EQ(v.config["model"], "tiny");
  EXPECT_EQ(v.config["steps"], 4);
  EXPECT_EQ(v.config["compile_mode"], "jit");
  EXPECT_EQ(v.config["zero_stage"], 2);
  EXPECT_EQ(v.config["micro_batch"], 4);
  EXPECT_EQ(v.config["world_size"], 2);
  EXPECT_EQ(v.config["device"], "cpu");
  EXPECT_EQ(v.world_size, 2);
}

TEST(SweepExpanderTest, VariantsShareTheWorkloadInsteadOfCopyingIt) {
  ExpandedSweep e = MustExpand("name: s\nworkload: {model: tiny, adapters_out: " + std::string(200, 'a') +
                               "}\nparameters:\n  micro_batch: {values: [1, 2, 4]}\n");
  ASSERT_EQ(e.variants.size(), 3u);
  for (const auto& v : e.variants) {
    EXPECT_EQ(v.config.shared(), e.variants[0].config.shared()) << "one copy of the workload per sweep";
    EXPECT_FALSE(v.config.own().contains("adapters_out")) << v.key;
    EXPECT_EQ(v.config["adapters_out"], std::string(200, 'a'));
    json whole = v.config.Merged();
    EXPECT_EQ(whole["adapters_out"], std::string(200, 'a'));
    EXPECT_EQ(whole["micro_batch"], v.config["micro_batch"]);
    EXPECT_EQ(whole["model"], "tiny");
    EXPECT_EQ(whole["device"], "cpu");
    EXPECT_EQ(whole["world_size"], 1);
  }
  EXPECT_TRUE(e.variants[0].config["steps"].is_null()) << "a field neither part has";
}

TEST(SweepExpanderTest, WorldSizeDefaultsToOne) {
  ExpandedSweep e = MustExpand("name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\n");
  ASSERT_EQ(e.variants.size(), 2u);
  EXPECT_EQ(e.variants[0].world_size, 1);
  EXPECT_EQ(e.variants[0].config["world_size"], 1);
}

TEST(SweepExpanderTest, WorldSizeAxisGivesEachVariantItsRanks) {
  ExpandedSweep e = MustExpand("name: s\nworkload: {}\nparameters:\n  world_size: {values: [1, 8]}\n");
  ASSERT_EQ(e.variants.size(), 2u);
  EXPECT_EQ(e.variants[1].world_size, 8);
}

TEST(SweepExpanderTest, BaselineCounterpartSubstitutesOnlyTheBaselineAxes) {
  ExpandedSweep e = MustExpand(kGrid);
  for (const auto& v : e.variants) {
    ASSERT_TRUE(v.counterpart.has_value()) << v.key;
    const Variant& c = e.variants[*v.counterpart];
    EXPECT_EQ(c.key, v.counterpart_key);
    EXPECT_EQ(c.config["compile_mode"], "eager");
    EXPECT_EQ(c.config["zero_stage"], v.config["zero_stage"]);
    EXPECT_EQ(c.config["micro_batch"], v.config["micro_batch"]);
    EXPECT_EQ(v.is_baseline, v.config["compile_mode"] == "eager") << v.key;
  }
  const Variant* jit = e.FindVariant("compile_mode=jit,zero_stage=2,micro_batch=1");
  ASSERT_NE(jit, nullptr);
  EXPECT_EQ(jit->counterpart_key, "compile_mode=eager,zero_stage=2,micro_batch=1");
  EXPECT_FALSE(jit->is_baseline);
}

TEST(SweepExpanderTest, ExcludeRemovesMatchingVariants) {
  std::string text = std::string(kGrid) + "exclude:\n  - {zero_stage: 2, micro_batch: 4}\n";
  ExpandedSweep e = MustExpand(text);
  EXPECT_EQ(e.variants.size(), 6u);
  EXPECT_EQ(e.excluded_count, 2u);
  EXPECT_EQ(e.trials.size(), 18u);
  for (const auto& v : e.variants) {
    EXPECT_FALSE(v.config["zero_stage"] == 2 && v.config["micro_batch"] == 4) << v.key;
  }
}

TEST(SweepExpanderTest, ExcludeOnANonAxisFieldComparesTheWorkloadValue) {
  std::string base = "name: s\nworkload: {precision: bf16}\nparameters:\n  micro_batch: {values: [1, 2]}\n";
  EXPECT_EQ(MustExpand(base + "exclude:\n  - {micro_batch: 2, precision: bf16}\n").variants.size(), 1u);
  EXPECT_EQ(MustExpand(base + "exclude:\n  - {micro_batch: 2, precision: fp32}\n").variants.size(), 2u);
  // offload is not set: the trainer's default (none) is compared.
  EXPECT_EQ(MustExpand(base + "exclude:\n  - {micro_batch: 2, offload: none}\n").variants.size(), 1u);
}

TEST(SweepExpanderTest, ExcludeRuleNamingAValueOutsideTheAxisNeverMatches) {
  std::string base = "name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\n"
                     "  seed: {values: [1, 2]}\n";
  ExpandedSweep e = MustExpand(base + "exclude:\n  - {micro_batch: 3}\n  - {micro_batch: 3, seed: 1}\n");
  EXPECT_EQ(e.variants.size(), 4u);
  EXPECT_EQ(e.excluded_count, 0u);
  // The same rule next to one that matches: only the matching one removes variants.
  e = MustExpand(base + "exclude:\n  - {micro_batch: 3, seed: 1}\n  - {micro_batch: 2, seed: 1}\n");
  EXPECT_EQ(e.variants.size(), 3u);
  EXPECT_EQ(e.FindVariant("micro_batch=2,seed=1"), nullptr);
}

TEST(SweepExpanderTest, ExcludeRuleNamingOnlyConstantsMatchesEverythingOrNothing) {
  std::string base = "name: s\nworkload: {precision: bf16}\nparameters:\n  micro_batch: {values: [1, 2]}\n"
                     "  seed: {value: 7}\n";
  auto all = Expand(MustParse(base + "exclude:\n  - {precision: bf16, seed: 7}\n"));
  ASSERT_FALSE(all.ok());
  EXPECT_THAT(all.status().message(), HasSubstr("every variant is excluded (2 excluded)"));
  EXPECT_EQ(MustExpand(base + "exclude:\n  - {precision: fp32}\n").variants.size(), 2u);
  EXPECT_EQ(MustExpand(base + "exclude:\n  - {precision: bf16, seed: 8}\n").variants.size(), 2u);
  // A fixed axis and a constant that hold narrow nothing: the axis field decides.
  EXPECT_EQ(MustExpand(base + "exclude:\n  - {precision: bf16, seed: 7, micro_batch: 2}\n").variants.size(), 1u);
}

// The exclude semantics written plainly (every field of a rule equal to the variant's
// value for it: axis value, else workload value, else "device", else the trainer's
// default), to compare the resolved rules with on whole sweeps.
bool ExcludedByRuleScan(const SweepSpec& spec, const Variant& v) {
  json config = v.config.Merged();
  for (const auto& rule : spec.exclude) {
    bool all = true;
    for (const auto& [key, value] : rule.match) {
      json actual;
      if (config.contains(key)) {
        actual = config[key];
      } else if (const TrainerField* field = FindTrainerField(key)) {
        actual = *NormalizeTrainerValue(*field, field->default_value);
      }
      if (actual != value) all = false;
    }
    if (all) return true;
  }
  return false;
}

TEST(SweepExpanderTest, ResolvedExcludeRulesKeepTheVariantsARuleScanKeeps) {
  const std::string grid =
      "name: s\nworkload: {precision: bf16, steps: 4}\nparameters:\n"
      "  micro_batch: {values: [1, 2, 4]}\n  seed: {values: [1, 2, 3, 4]}\n"
      "  compile_mode: {values: [eager, jit]}\n  lora_rank: {value: 8}\n"
      "baseline: {compile_mode: eager}\n";
  const std::vector<std::string> excludes = {
      "  - {micro_batch: 2}\n",
      "  - {micro_batch: 2, seed: 3}\n  - {seed: 3, micro_batch: 4}\n  - {compile_mode: jit, seed: 1}\n",
      "  - {micro_batch: 2, precision: bf16}\n  - {seed: 2, precision: fp32}\n  - {lora_rank: 8, seed: 4}\n",
      "  - {compile_mode: eager, micro_batch: 1}\n  - {micro_batch: 8}\n  - {compile_mode: jit, seed: 2, micro_batch: 4}\n"
      "  - {lora_rank: 16, seed: 1}\n  - {offload: none, seed: 3, compile_mode: jit}\n  - {device: cpu, micro_batch: 4}\n",
  };
  for (const auto& rules : excludes) {
    SweepSpec spec = MustParse(grid + "exclude:\n" + rules);
    SweepSpec all = spec;
    all.exclude.clear();
    ExpandedSweep every = *Expand(all);
    ExpandedSweep e = *Expand(spec);
    std::vector<std::string> expected;
    for (const auto& v : every.variants) {
      if (!ExcludedByRuleScan(spec, v)) expected.push_back(v.key);
    }
    std::vector<std::string> kept;
    for (const auto& v : e.variants) {
      kept.push_back(v.key);
      const Variant* counterpart = every.FindVariant(v.counterpart_key);
      ASSERT_NE(counterpart, nullptr) << v.counterpart_key;
      EXPECT_EQ(v.counterpart_excluded, ExcludedByRuleScan(spec, *counterpart)) << rules << v.key;
    }
    EXPECT_EQ(kept, expected) << rules;
    EXPECT_EQ(e.excluded_count, every.variants.size() - expected.size()) << rules;
  }
}

TEST(SweepExpanderTest, VariantWhoseCounterpartIsExcludedIsMarked) {
  std::string text = std::string(kGrid) + "exclude:\n  - {compile_mode: eager, micro_batch: 4}\n";
  ExpandedSweep e = MustExpand(text);
  ASSERT_EQ(e.variants.size(), 6u);
  const Variant* v = e.FindVariant("compile_mode=jit,zero_stage=0,micro_batch=4");
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->counterpart_excluded);
  EXPECT_FALSE(v->counterpart.has_value());
  EXPECT_EQ(v->counterpart_key, "compile_mode=eager,zero_stage=0,micro_batch=4");
  const Variant* paired = e.FindVariant("compile_mode=jit,zero_stage=0,micro_batch=1");
  ASSERT_NE(paired, nullptr);
  EXPECT_FALSE(paired->counterpart_excluded);
  EXPECT_TRUE(paired->counterpart.has_value());
}

TEST(SweepExpanderTest, MultiAxisBaselinePairsWithTheAllBaselineVariant) {
  ExpandedSweep e = MustExpand(
      "name: s\nworkload: {}\nparameters:\n  precision: {values: [fp32, bf16]}\n"
      "  grad_checkpointing: {values: [false, true]}\n  micro_batch: {values: [1, 4]}\n"
      "baseline: {precision: fp32, grad_checkpointing: false}\n");
  const Variant* v = e.FindVariant("precision=bf16,grad_checkpointing=true,micro_batch=4");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->counterpart_key, "precision=fp32,grad_checkpointing=false,micro_batch=4");
  size_t baselines = 0;
  for (const auto& variant : e.variants) baselines += variant.is_baseline;
  EXPECT_EQ(baselines, 2u);  // one per micro-batch
}

TEST(SweepExpanderTest, NoBaselineLeavesVariantsUnpaired) {
  ExpandedSweep e = MustExpand("name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\n");
  for (const auto& v : e.variants) {
    EXPECT_FALSE(v.is_baseline);
    EXPECT_FALSE(v.counterpart.has_value());
    EXPECT_TRUE(v.counterpart_key.empty());
  }
}

TEST(SweepExpanderTest, FixedAxesStayOutOfTheKeyButInTheConfig) {
  ExpandedSweep e = MustExpand("name: s\nworkload: {}\nparameters:\n  micro_batch: {value: 2}\n");
  ASSERT_EQ(e.variants.size(), 1u);
  EXPECT_EQ(e.variants[0].key, "default");
  EXPECT_EQ(e.variants[0].config["micro_batch"], 2);
  EXPECT_TRUE(e.axes.empty());
}

TEST(SweepExpanderTest, KeysPrintValuesCanonically) {
  ExpandedSweep e = MustExpand(
      "name: s\nworkload: {}\nparameters:\n  lora_alpha: {values: [16, 32.5]}\n"
      "  grad_checkpointing: {values: [true, false]}\n  dataset: {values: [synthetic, \"my data.bin\"]}\n");
  EXPECT_EQ(e.variants[0].key, "lora_alpha=16.0,grad_checkpointing=true,dataset=synthetic");
  EXPECT_EQ(e.variants.back().key, "lora_alpha=32.5,grad_checkpointing=false,dataset=\"my data.bin\"");
}

TEST(SweepExpanderTest, InterleavedOrderRunsEveryVariantBeforeTheNextRepeatAndAlternatesWhichGoesFirst) {
  ExpandedSweep e = MustExpand("name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\nrepeats: 3\n");
  std::vector<std::pair<size_t, int>> order;
  for (const auto& t : e.trials) order.emplace_back(t.variant, t.repeat);
  // AB BA AB: neither side always runs first, so drift cancels over two repeats.
  EXPECT_EQ(order, (std::vector<std::pair<size_t, int>>{{0, 0}, {1, 0}, {1, 1}, {0, 1}, {0, 2}, {1, 2}}));
  for (size_t i = 0; i < e.trials.size(); ++i) EXPECT_EQ(e.trials[i].index, i);
}

TEST(SweepExpanderTest, SequentialOrderKeepsRepeatsOfAVariantTogether) {
  ExpandedSweep e = MustExpand(
      "name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\nrepeats: 2\norder: sequential\n");
  std::vector<std::pair<size_t, int>> order;
  for (const auto& t : e.trials) order.emplace_back(t.variant, t.repeat);
  EXPECT_EQ(order, (std::vector<std::pair<size_t, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
}

std::vector<std::pair<size_t, int>> RandomOrder(uint64_t seed) {
  ExpandedSweep e = MustExpand(
      "name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2, 3, 4, 5]}\nrepeats: 4\n"
      "order: random\nseed: " + std::to_string(seed) + "\n");
  std::vector<std::pair<size_t, int>> order;
  for (const auto& t : e.trials) order.emplace_back(t.variant, t.repeat);
  return order;
}

TEST(SweepExpanderTest, RandomOrderIsAPermutationDeterminedBySeed) {
  auto a = RandomOrder(1);
  EXPECT_EQ(a, RandomOrder(1));
  EXPECT_NE(a, RandomOrder(2));
  ASSERT_EQ(a.size(), 20u);
  std::set<std::pair<size_t, int>> unique(a.begin(), a.end());
  EXPECT_EQ(unique.size(), 20u);
  // Not the interleaved order.
  std::vector<std::pair<size_t, int>> interleaved;
  for (int r = 0; r < 4; ++r) for (size_t v = 0; v < 5; ++v) interleaved.emplace_back(v, r);
  EXPECT_NE(a, interleaved);
}

const char* const kRandom = R"(name: r
workload: {}
method: random
count: 6
seed: 11
parameters:
  compile_mode: {values: [eager, jit]}
  lora_rank: {distribution: log_uniform, min: 4, max: 256}
  lr: {distribution: uniform, min: 0.0001, max: 0.01}
  micro_batch: {distribution: int_uniform, min: 1, max: 8}
baseline: {compile_mode: eager}
repeats: 2
)";

TEST(SweepExpanderTest, RandomDrawsCountDistinctVariantsWithinRanges) {
  ExpandedSweep e = MustExpand(kRandom);
  size_t drawn = 0;
  for (const auto& v : e.variants) {
    if (!v.added_as_counterpart) ++drawn;
    int64_t rank = v.config["lora_rank"];
    EXPECT_GE(rank, 4);
    EXPECT_LE(rank, 256);
    double lr = v.config["lr"];
    EXPECT_GE(lr, 0.0001);
    EXPECT_LE(lr, 0.01);
    int64_t mb = v.config["micro_batch"];
    EXPECT_GE(mb, 1);
    EXPECT_LE(mb, 8);
  }
  EXPECT_EQ(drawn, 6u);
  EXPECT_EQ(e.trials.size(), e.variants.size() * 2);
}

TEST(SweepExpanderTest, RandomAddsMissingCounterpartsSoEveryVariantIsPaired) {
  ExpandedSweep e = MustExpand(kRandom);
  for (const auto& v : e.variants) {
    ASSERT_TRUE(v.counterpart.has_value()) << v.key;
    const Variant& c = e.variants[*v.counterpart];
    EXPECT_EQ(c.config["compile_mode"], "eager");
    EXPECT_EQ(c.config["lora_rank"], v.config["lora_rank"]);
  }
}

TEST(SweepExpanderTest, RandomIsDeterministicBySeed) {
  ExpandedSweep a = MustExpand(kRandom);
  ExpandedSweep b = MustExpand(kRandom);
  std::string other = kRandom;
  other.replace(other.find("seed: 11"), 8, "seed: 12");
  ExpandedSweep c = MustExpand(other);
  EXPECT_EQ(ToJson(a), ToJson(b));
  EXPECT_NE(ToJson(a)["variants"], ToJson(c)["variants"]);
}

TEST(SweepExpanderTest, RandomCountOverTheDiscreteSpaceIsAnError) {
  auto spec = MustParse("name: s\nworkload: {}\nmethod: random\ncount: 5\nparameters:\n  micro_batch: {values: [1, 2]}\n");
  auto e = Expand(spec);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("count 5 is more than the 2 distinct variants"));
}

TEST(SweepExpanderTest, EverythingExcludedIsAnError) {
  auto spec = MustParse("name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\n"
                        "exclude:\n  - {micro_batch: 1}\n  - {micro_batch: 2}\n");
  auto e = Expand(spec);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("test.yaml (sweep s): every variant is excluded"));
}

TEST(SweepExpanderTest, TrialCapIsEnforcedWithACountInTheMessage) {
  auto spec = MustParse(kGrid);  // 8 variants x 3 repeats = 24 trials
  ExpandOptions options;
  options.max_trials = 20;
  auto e = Expand(spec, options);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(e.status().message(),
              HasSubstr("24 trials (8 variants x 3 repeats) is over the cap of 20 trials per sweep"));
  options.max_trials = 24;
  EXPECT_TRUE(Expand(spec, options).ok());
}

TEST(SweepExpanderTest, DefaultTrialCapIsTenThousand) {
  std::string text = "name: s\nworkload: {}\nparameters:\n  seed: {values: [";
  for (int i = 0; i < 101; ++i) text += (i ? ", " : "") + std::to_string(i);
  text += "]}\n  micro_batch: {values: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\nrepeats: 10\n";
  auto e = Expand(MustParse(text));
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("10100 trials"));
  EXPECT_THAT(e.status().message(), HasSubstr("cap of 10000"));
}

TEST(SweepExpanderTest, HugeGridIsRejectedBeforeEnumeration) {
  std::string text = "name: s\nworkload: {}\nparameters:\n";
  for (const char* axis : {"seed", "micro_batch", "lora_rank", "seq_len", "steps"}) {
    text += std::string("  ") + axis + ": {values: [";
    for (int i = 0; i < 100; ++i) text += (i ? ", " : "") + std::to_string(i + 2);
    text += "]}\n";
  }
  auto e = Expand(MustParse(text));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(e.status().message(), HasSubstr("more than 1000000 points"));
}

// A 100x100x100 grid (a million points, under the grid limit) over the trial cap:
// refused by a count on value indices, before a point is built (building them took the
// coordinator to 1.39 GB; with the longest name a field takes, more).
std::string MillionPointGrid(const std::string& long_field) {
  std::string text = "name: big\nworkload: {model: tiny" + long_field + "}\nparameters:\n";
  for (const char* axis : {"seed", "micro_batch", "lora_rank"}) {
    text += std::string("  ") + axis + ": {values: [";
    for (int i = 0; i < 100; ++i) text += (i ? ", " : "") + std::to_string(i + 1);
    text += "]}\n";
  }
  return text + "repeats: 1\n";
}

TEST(SweepExpanderTest, MillionPointGridIsRefusedAtTheTrialCapBeforeAnyPointIsBuilt) {
  for (const std::string& field : {std::string(), ", adapters_out: " + std::string(250, 'a')}) {
    auto e = Expand(MustParse(MillionPointGrid(field)));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), Status::Code::kResourceExhausted);
    EXPECT_THAT(e.status().message(),
                HasSubstr("1000000 trials (1000000 variants x 1 repeats) is over the cap of 10000"));
  }
}

TEST(SweepExpanderTest, ExcludedPointsDoNotCountTowardsTheTrialCap) {
  // 100 x 100 x 2 = 20,000 points, over the cap of 10,000, but 99 seeds are excluded.
  std::string text = "name: s\nworkload: {model: tiny}\nparameters:\n";
  for (const auto& [axis, n] : std::vector<std::pair<std::string, int>>{{"seed", 100}, {"micro_batch", 100}, {"lora_rank", 2}}) {
    text += "  " + axis + ": {values: [";
    for (int i = 0; i < n; ++i) text += (i ? ", " : "") + std::to_string(i + 1);
    text += "]}\n";
  }
  text += "repeats: 1\nexclude:\n";
  for (int i = 2; i <= 100; ++i) text += "  - {seed: " + std::to_string(i) + "}\n";
  ExpandedSweep e = MustExpand(text);
  EXPECT_EQ(e.variants.size(), 200u);
  EXPECT_EQ(e.excluded_count, 19800u);
}

// Rules that name the same axes are one lookup per point however many they are: the
// 1,000,000-point grid with 5,000 three-axis rules and 99 one-axis rules (4 steps a point).
TEST(SweepExpanderTest, ManyRulesNamingTheSameAxesCostOneLookupPerPoint) {
  std::string text = MillionPointGrid("") + "exclude:\n";
  for (int i = 0; i < 5000; ++i) {
    text += "  - {seed: " + std::to_string(1 + i % 100) + ", micro_batch: " + std::to_string(1 + i / 100) +
            ", lora_rank: 1}\n";
  }
  for (int r = 2; r <= 100; ++r) text += "  - {lora_rank: " + std::to_string(r) + "}\n";
  ExpandOptions options;
  options.max_exclude_steps = 4000000;  // 1,000,000 points x (3 + 1) axes
  ExpandedSweep e = MustExpand(text, options);
  EXPECT_EQ(e.variants.size(), 5000u);
  EXPECT_EQ(e.excluded_count, 995000u);
  EXPECT_EQ(e.variants[0].key, "seed=1,micro_batch=51,lora_rank=1");
  options.max_exclude_steps = 3999999;
  auto over = Expand(MustParse(text), options);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Status::Code::kResourceExhausted);
}

TEST(SweepExpanderTest, ExcludeWorkOverTheLimitIsRefusedBeforeAPointIsVisited) {
  auto e = Expand(MustParse(testing::EveryCombinationOfSevenAxes()));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(e.status().message(),
              HasSubstr("applying the 127 exclude rules to 1000000 grid points takes 1000000 x 448 steps"));
  EXPECT_THAT(e.status().message(), HasSubstr("over the limit of 200000000 steps"));
}

TEST(SweepExpanderTest, RandomDrawsCountTheirExcludeComparisonsAgainstTheLimit) {
  std::string text = std::string(kRandom) + "exclude:\n";
  for (int i = 0; i < 50; ++i) text += "  - {lora_rank: " + std::to_string(1000 + i) + ", compile_mode: jit}\n";
  text += "  - {lora_rank: 4000}\n";  // outside the log_uniform range: compared, never matches
  text += "  - {compile_mode: cudagraph}\n";  // not one of the axis values: dropped
  ExpandedSweep e = MustExpand(text);
  EXPECT_EQ(e.variants.size(), MustExpand(kRandom).variants.size());
  ExpandOptions options;
  options.max_exclude_steps = 20;
  auto over = Expand(MustParse(text), options);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("to the random draws took more value comparisons, over the limit of 20 steps"));
}

TEST(SweepExpanderTest, LongWorkloadFieldTimesManyVariantsIsRefusedBeforeBuilding) {
  // 50 x 100 = 5000 variants, each a copy of the workload with a 250-byte name in it.
  std::string text = "name: wide\nworkload: {model: tiny, adapters_out: " + std::string(250, 'a') +
                     "}\nparameters:\n  seed: {values: [";
  for (int i = 0; i < 50; ++i) text += (i ? ", " : "") + std::to_string(i + 1);
  text += "]}\n  lora_rank: {values: [";
  for (int i = 0; i < 100; ++i) text += (i ? ", " : "") + std::to_string(i + 1);
  text += "]}\nrepeats: 1\n";
  ExpandOptions tight;
  tight.max_config_bytes = 1u << 20;
  auto e = Expand(MustParse(text), tight);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(e.status().message(), HasSubstr("5000 variants x "));
  EXPECT_THAT(e.status().message(), HasSubstr("bytes of trainer configuration each is over the limit of 1048576"));
  EXPECT_TRUE(Expand(MustParse(text)).ok()) << "within the default 64 MiB";
}

TEST(SweepExpanderTest, DifferInExactlyOneAxisFindsMarginalPairs) {
  ExpandedSweep e = MustExpand(kGrid);
  const Variant* a = e.FindVariant("compile_mode=eager,zero_stage=0,micro_batch=1");
  const Variant* b = e.FindVariant("compile_mode=jit,zero_stage=0,micro_batch=1");
  const Variant* c = e.FindVariant("compile_mode=jit,zero_stage=2,micro_batch=1");
  ASSERT_TRUE(a && b && c);
  std::string axis;
  EXPECT_TRUE(DifferInExactlyOneAxis(*a, *b, &axis));
  EXPECT_EQ(axis, "compile_mode");
  EXPECT_TRUE(DifferInExactlyOneAxis(*b, *c, &axis));
  EXPECT_EQ(axis, "zero_stage");
  EXPECT_FALSE(DifferInExactlyOneAxis(*a, *c));
  EXPECT_FALSE(DifferInExactlyOneAxis(*a, *a));
  // Over the whole grid: each variant has exactly one partner per axis (3 axes of 2 values).
  size_t pairs = 0;
  for (size_t i = 0; i < e.variants.size(); ++i) {
    for (size_t j = i + 1; j < e.variants.size(); ++j) {
      pairs += DifferInExactlyOneAxis(e.variants[i], e.variants[j]);
    }
  }
  EXPECT_EQ(pairs, 12u);  // 8 variants x 3 axes / 2
}

TEST(SweepExpanderTest, ToJsonListsVariantsAndTrials) {
  std::string text = std::string(kGrid) + "exclude:\n  - {compile_mode: eager, micro_batch: 4}\n";
  json j = ToJson(MustExpand(text));
  EXPECT_EQ(j["variant_count"], 6);
  EXPECT_EQ(j["trial_count"], 18);
  EXPECT_EQ(j["excluded_count"], 2);
  EXPECT_EQ(j["variants"][0]["key"], "compile_mode=eager,zero_stage=0,micro_batch=1");
  EXPECT_EQ(j["variants"][0]["is_baseline"], true);
  EXPECT_EQ(j["variants"][0]["config"]["world_size"], 2);
  bool saw_excluded = false;
  for (const auto& v : j["variants"]) {
    if (v["counterpart_excluded"] == true) {
      saw_excluded = true;
      EXPECT_TRUE(v["counterpart"].is_null());
    }
  }
  EXPECT_TRUE(saw_excluded);
  EXPECT_EQ(j["trials"][1]["variant"], 1);
}

TEST(SweepExpanderTest, AdaptiveRepeatsPreExpandMaxInterleavedRepeats) {
  ExpandedSweep e = MustExpand(
      "name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\n"
      "baseline: {micro_batch: 1}\nrepeats: {min: 3, max: 6, until: {ci_half_width: 0.02}}\n");
  ASSERT_EQ(e.trials.size(), 12u);
  for (size_t i = 0; i < e.trials.size(); ++i) {
    EXPECT_EQ(e.trials[i].repeat, static_cast<int>(i / 2));
    EXPECT_EQ(e.trials[i].variant, (i / 2) % 2 == 0 ? i % 2 : 1 - i % 2);  // AB BA AB ...
  }
}

TEST(SweepExpanderTest, AdaptiveRepeatsCountMaxAgainstTheTrialCap) {
  ExpandOptions options;
  options.max_trials = 10;
  auto expanded = Expand(
      MustParse("name: s\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2]}\n"
                "baseline: {micro_batch: 1}\nrepeats: {min: 3, max: 6, until: {ci_half_width: 0.02}}\n"),
      options);
  ASSERT_FALSE(expanded.ok());
  EXPECT_THAT(expanded.status().message(), HasSubstr("12 trials (2 variants x 6 repeats, the adaptive max)"));
  EXPECT_THAT(expanded.status().message(), HasSubstr("lower repeats.max"));
}

}  // namespace
}  // namespace bakeoff::spec
