// Replays the protocol fuzz corpora (seeds and any crash reproducers saved there) through
// the fuzz bodies in every build, so a fixed crash stays fixed without clang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/protocol/fuzz/protocol_fuzz.h"

namespace bakeoff::protocol {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Corpus(const std::string& dir) {
  std::vector<std::string> inputs;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    inputs.push_back(ss.str());
  }
  return inputs;
}

TEST(ProtocolFuzzCorpusTest, EveryFrameCorpusInputDecodesOrFailsCleanly) {
  auto inputs = Corpus(BAKEOFF_SOURCE_DIR "/tests/protocol/fuzz/frame_corpus");
  ASSERT_GE(inputs.size(), 5u);
  for (const auto& data : inputs) {
    EXPECT_NO_THROW(FuzzFrameDecoder(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }
}

TEST(ProtocolFuzzCorpusTest, EveryEventCorpusInputParsesOrFailsCleanly) {
  auto inputs = Corpus(BAKEOFF_SOURCE_DIR "/tests/protocol/fuzz/event_corpus");
  ASSERT_GE(inputs.size(), 5u);
  for (const auto& data : inputs) {
    EXPECT_NO_THROW(FuzzTrainerEvents(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }
}

}  // namespace
}  // namespace bakeoff::protocol
