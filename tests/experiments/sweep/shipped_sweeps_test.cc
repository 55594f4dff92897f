// Every sweep shipped in experiments/sweeps/ must parse and expand cleanly: they are
// what users run first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"

namespace bakeoff::spec {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> ShippedSweeps() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(BAKEOFF_SOURCE_DIR "/experiments/sweeps")) {
    if (entry.path().extension() == ".yaml" || entry.path().extension() == ".yml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ShippedSweepsTest, EveryShippedSweepValidatesAndExpands) {
  auto files = ShippedSweeps();
  ASSERT_FALSE(files.empty());
  // Command sweeps are checked against the shipped allowlist, as `bakeoff validate` does.
  auto catalog = LoadExecutorCatalog(BAKEOFF_SOURCE_DIR "/experiments/executors.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().message();
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    auto spec = ParseSweepFile(file.string(), {}, &*catalog);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    auto expanded = Expand(*spec);
    ASSERT_TRUE(expanded.ok()) << expanded.status().message();
    EXPECT_FALSE(spec->baseline.empty()) << "a shipped sweep compares against a baseline";
    EXPECT_FALSE(spec->question.empty());
    EXPECT_EQ(spec->name, file.stem().string()) << "name a sweep after its file";
    for (const auto& v : expanded->variants) {
      EXPECT_TRUE(v.is_baseline || v.counterpart.has_value() || v.counterpart_excluded) << v.key;
    }
  }
}

// The coordinator stores ToJson(spec) and the report and a restarted coordinator read it
// back through SweepSpecFromJson: the round trip loses nothing that expansion or ToJson
// sees (source locations are not stored).
TEST(ShippedSweepsTest, EveryShippedSweepReadsBackFromItsStoredJsonAndExpandsTheSame) {
  auto catalog = LoadExecutorCatalog(BAKEOFF_SOURCE_DIR "/experiments/executors.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().message();
  for (const auto& file : ShippedSweeps()) {
    SCOPED_TRACE(file.string());
    auto spec = ParseSweepFile(file.string(), {}, &*catalog);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    const nlohmann::json stored = nlohmann::json::parse(ToJson(*spec).dump());
    auto read_back = SweepSpecFromJson(stored);
    ASSERT_TRUE(read_back.ok()) << read_back.status().message();
    EXPECT_EQ(ToJson(*read_back), stored);
    auto expanded = Expand(*spec);
    auto expanded_again = Expand(*read_back);
    ASSERT_TRUE(expanded.ok() && expanded_again.ok());
    EXPECT_EQ(ToJson(*expanded_again), ToJson(*expanded));
  }
}

TEST(ShippedSweepsTest, AStoredSpecOfTheWrongShapeIsRefusedNamingTheField) {
  auto spec = ParseSweepFile(BAKEOFF_SOURCE_DIR "/experiments/sweeps/cpu-example.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const nlohmann::json good = ToJson(*spec);
  const std::vector<std::pair<nlohmann::json::json_pointer, nlohmann::json>> breaks = {
      {nlohmann::json::json_pointer("/limits/trial_timeout_s"), "an hour"},
      {nlohmann::json::json_pointer("/order"), "shuffled"},
      {nlohmann::json::json_pointer("/parameters"), 7},
      {nlohmann::json::json_pointer("/adaptive_repeats"), {{"min", 1}, {"max", 5}, {"ci_half_width", 0.1}}}};
  const std::vector<std::string> expected = {"limits.trial_timeout_s has the wrong type", "spec.order \"shuffled\"",
                                             "spec.parameters is not an array", "adaptive_repeats: min must be"};
  for (size_t i = 0; i < breaks.size(); ++i) {
    nlohmann::json broken = good;
    broken[breaks[i].first] = breaks[i].second;
    auto read = SweepSpecFromJson(broken);
    ASSERT_FALSE(read.ok()) << breaks[i].first.to_string();
    EXPECT_THAT(read.status().message(), ::testing::HasSubstr(expected[i]));
  }
  nlohmann::json old_database = good;  // fields an older version did not store take defaults
  old_database.erase("order");
  old_database.erase("warnings");
  auto read = SweepSpecFromJson(old_database);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->order, Order::kInterleaved);
}

TEST(ShippedSweepsTest, CpuExampleIsSmallAndRunsOnTwoCpuRanks) {
  auto spec = ParseSweepFile(BAKEOFF_SOURCE_DIR "/experiments/sweeps/cpu-example.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->resources.device, "cpu");
  auto expanded = Expand(*spec);
  ASSERT_TRUE(expanded.ok()) << expanded.status().message();
  EXPECT_GE(expanded->trials.size(), 8u);
  EXPECT_LE(expanded->trials.size(), 16u);
  for (const auto& v : expanded->variants) {
    EXPECT_EQ(v.world_size, 2) << v.key;
    EXPECT_FALSE(v.counterpart_excluded) << v.key;
  }
  EXPECT_TRUE(spec->warnings.empty());
}

}  // namespace
}  // namespace bakeoff::spec

namespace bakeoff::spec {
namespace {

// docs/sweep.md's example must be a sweep the parser accepts, with the counts it states.
TEST(ShippedSweepsTest, ReferenceExampleInDocsValidatesWithTheStatedCounts) {
  std::ifstream in(BAKEOFF_SOURCE_DIR "/docs/sweep.md");
  ASSERT_TRUE(in);
  std::string line, yaml;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```yaml") {
      inside = true;
    } else if (inside && line == "```") {
      break;
    } else if (inside) {
      yaml += line + "\n";
    }
  }
  ASSERT_FALSE(yaml.empty());
  auto spec = ParseSweepText(yaml, "docs/sweep.md");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto expanded = Expand(*spec);
  ASSERT_TRUE(expanded.ok()) << expanded.status().message();
  EXPECT_EQ(expanded->variants.size(), 6u);
  EXPECT_EQ(expanded->excluded_count, 2u);
  EXPECT_EQ(expanded->trials.size(), 30u);
}

}  // namespace
}  // namespace bakeoff::spec
