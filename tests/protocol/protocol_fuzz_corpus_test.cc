// Replays the protocol fuzz corpora (seeds and any crash reproducers saved there) through
// the fuzz bodies in every build, so a fixed crash stays fixed without clang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "protocol/json_limits.h"
#include "tests/protocol/fuzz/protocol_fuzz.h"

namespace bakeoff::protocol {
namespace {

namespace fs = std::filesystem;

std::string Seed(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

// The corpora start with inputs past the nesting limit (protocol/json_limits.h), so the
// depth check runs from the first second of every fuzz run and of this replay: a frame
// at the limit decodes, one level more and 30,000 levels are refused with the depth
// error, before any recursive parse.
TEST(ProtocolFuzzCorpusTest, FrameSeedsPastTheNestingLimitAreRefusedWithTheDepthError) {
  const std::string dir = BAKEOFF_SOURCE_DIR "/tests/protocol/fuzz/frame_corpus/";
  auto decode = [&](const std::string& name) {
    const std::string data = Seed(dir + name);
    EXPECT_GT(data.size(), 5u) << name;
    FrameDecoder decoder(64 * 1024);
    decoder.Append(std::string_view(data).substr(1));  // byte 0 picks the fuzz body's chunk size
    return decoder.Next();
  };
  auto at_limit = decode("depth_64_events");
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().ToString();
  ASSERT_TRUE(at_limit->has_value());
  auto parsed = Parse<EventsMessage>(**at_limit);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  for (const char* name : {"depth_65_events", "deep_30000"}) {
    auto deep = decode(name);
    ASSERT_FALSE(deep.ok()) << name;
    EXPECT_NE(deep.status().message().find("nested deeper than 64 levels"), std::string::npos)
        << name << ": " << deep.status().ToString();
  }
}

// A trainer line may nest as deep as the events frame that carries it allows: the
// deepest accepted line still reaches the coordinator; one level more, and 30,000, are
// refused by the worker with the depth error.
TEST(ProtocolFuzzCorpusTest, EventSeedsPastTheNestingLimitAreRefusedWithTheDepthError) {
  const std::string dir = BAKEOFF_SOURCE_DIR "/tests/protocol/fuzz/event_corpus/";
  auto line = [&](const std::string& name) {
    std::string data = Seed(dir + name);
    if (!data.empty() && data.back() == '\n') data.pop_back();
    return data;
  };
  auto deepest = ParseTrainerEvent(line("depth_61"), 64 * 1024);
  ASSERT_TRUE(deepest.ok()) << deepest.status().ToString();
  EventsMessage message;
  message.events.push_back(TrialEvent{AttemptRef{1, 1}, 0, deepest->body, 1});
  message.outbox_seq = 1;
  auto frame = EncodeFrame(ToJson(message));
  ASSERT_TRUE(frame.ok());
  FrameDecoder decoder;
  decoder.Append(*frame);
  auto decoded = decoder.Next();
  ASSERT_TRUE(decoded.ok()) << "the coordinator refuses what the worker accepted: " << decoded.status().ToString();
  ASSERT_TRUE(decoded->has_value());
  for (const char* name : {"depth_62", "deep_30000", "deep"}) {
    auto deep = ParseTrainerEvent(line(name), 64 * 1024);
    ASSERT_FALSE(deep.ok()) << name;
    EXPECT_NE(deep.status().message().find("nested deeper than " + std::to_string(kMaxTrainerLineDepth) + " levels"),
              std::string::npos)
        << name << ": " << deep.status().ToString();
  }
}

}  // namespace
}  // namespace bakeoff::protocol
