// Replays the sweep parser's fuzz corpus (seeds and any crash reproducers saved there)
// through the fuzz body in every build, so a fixed crash stays fixed without clang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/experiments/sweep/fuzz/sweep_parser_fuzz.h"

namespace bakeoff::spec {
namespace {

namespace fs = std::filesystem;

TEST(SweepParserFuzzCorpusTest, EveryCorpusInputParsesOrFailsCleanly) {
  std::vector<fs::path> inputs;
  for (const char* dir : {BAKEOFF_SOURCE_DIR "/tests/experiments/sweep/fuzz/corpus",
                          BAKEOFF_SOURCE_DIR "/experiments/sweeps"}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().filename() != "README.md") {
        inputs.push_back(entry.path());
      }
    }
  }
  ASSERT_GE(inputs.size(), 10u);
  for (const auto& path : inputs) {
    SCOPED_TRACE(path.string());
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string data = ss.str();
    EXPECT_NO_THROW(FuzzSweepParser(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }
}

// The corpus starts with sweeps past the nesting limit (32 levels), so the depth checks
// run from the first second of every fuzz run and of this replay: 5,000 flow levels are
// refused by the scan before yaml-cpp recurses, 40 block levels by the tree walk.
TEST(SweepParserFuzzCorpusTest, SeedsPastTheNestingLimitAreRefusedWithTheDepthError) {
  for (const char* name : {"deep_flow.yaml", "deep_block.yaml"}) {
    std::ifstream in(std::string(BAKEOFF_SOURCE_DIR "/tests/experiments/sweep/fuzz/corpus/") + name,
                     std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto spec = ParseSweepText(ss.str(), name);
    ASSERT_FALSE(spec.ok()) << name;
    EXPECT_EQ(spec.status().code(), Status::Code::kResourceExhausted) << spec.status().ToString();
    EXPECT_NE(spec.status().message().find("nesting deeper than 32 levels"), std::string::npos)
        << spec.status().ToString();
  }
}

}  // namespace
}  // namespace bakeoff::spec
