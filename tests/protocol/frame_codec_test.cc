#include "protocol/frame_codec.h"

#include <gtest/gtest.h>

#include <random>

namespace bakeoff::protocol {
namespace {

std::string Header(std::uint32_t n) {
  return std::string{static_cast<char>(n >> 24), static_cast<char>((n >> 16) & 0xff),
                     static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
}

TEST(FrameCodecTest, EncodesBigEndianLengthThenPayload) {
  auto frame = EncodeFrame({{"type", "drain"}});
  ASSERT_TRUE(frame.ok());
  const std::string payload = R"({"type":"drain"})";
  EXPECT_EQ(*frame, Header(payload.size()) + payload);
}

TEST(FrameCodecTest, RoundTripsThroughTheDecoder) {
  nlohmann::json message = {{"type", "events"}, {"events", {1, 2, 3}}, {"text", "héllo"}};
  FrameDecoder decoder;
  decoder.Append(*EncodeFrame(message));
  auto next = decoder.Next();
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ(**next, message);
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
}

TEST(FrameCodecTest, SplitFrameDeliveredByteByByteDecodesOnce) {
  auto a = *EncodeFrame({{"type", "a"}});
  auto b = *EncodeFrame({{"type", "b"}});
  std::string stream = a + b;
  FrameDecoder decoder;
  std::vector<std::string> types;
  for (char c : stream) {
    decoder.Append(std::string_view(&c, 1));
    while (true) {
      auto next = decoder.Next();
      ASSERT_TRUE(next.ok());
      if (!next->has_value()) break;
      types.push_back((**next)["type"]);
    }
  }
  EXPECT_EQ(types, (std::vector<std::string>{"a", "b"}));
}

TEST(FrameCodecTest, CoalescedFramesDecodeInOrder) {
  FrameDecoder decoder;
  std::string stream;
  for (int i = 0; i < 100; ++i) stream += *EncodeFrame({{"type", "x"}, {"i", i}});
  decoder.Append(stream);
  for (int i = 0; i < 100; ++i) {
    auto next = decoder.Next();
    ASSERT_TRUE(next.ok() && next->has_value());
    EXPECT_EQ((**next)["i"], i);
  }
  EXPECT_FALSE(decoder.Next()->has_value());
}

TEST(FrameCodecTest, OversizedAnnouncedLengthFailsWithoutWaitingForBody) {
  FrameDecoder decoder(1024);
  decoder.Append(Header(1025));
  auto next = decoder.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(next.status().message().find("1024"), std::string::npos);
}

// The limit is inclusive on both sides: a payload of exactly max bytes is encoded and
// decoded; one byte more is refused by each (so encoder and decoder cannot disagree).
TEST(FrameCodecTest, APayloadOfExactlyTheLimitRoundTripsAndOneByteMoreIsRefused) {
  const nlohmann::json base = {{"type", "x"}, {"blob", ""}};
  const std::size_t overhead = base.dump().size();
  const std::size_t limit = 1000;
  const nlohmann::json at = {{"type", "x"}, {"blob", std::string(limit - overhead, 'a')}};
  const nlohmann::json over = {{"type", "x"}, {"blob", std::string(limit - overhead + 1, 'a')}};
  auto frame = EncodeFrame(at, limit);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->size(), kFrameHeaderBytes + limit);
  FrameDecoder decoder(limit);
  decoder.Append(*frame);
  auto next = decoder.Next();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ(**next, at);
  EXPECT_EQ(EncodeFrame(over, limit).status().code(), Status::Code::kResourceExhausted);
}

TEST(FrameCodecTest, HeaderAnnouncingExactlyTheLimitIsAcceptedAndOneMoreIsNot) {
  const unsigned char at[] = {0, 0, 0x04, 0x00};    // 1024
  const unsigned char over[] = {0, 0, 0x04, 0x01};  // 1025
  const unsigned char below[] = {0, 0, 0x03, 0xff}; // 1023
  EXPECT_EQ(DecodeFrameHeader(below, 1024).value(), 1023u);
  EXPECT_EQ(DecodeFrameHeader(at, 1024).value(), 1024u);
  EXPECT_EQ(DecodeFrameHeader(over, 1024).status().code(), Status::Code::kResourceExhausted);
  const unsigned char zero[] = {0, 0, 0, 0};  // refused by the header alone: no payload is JSON
  EXPECT_EQ(DecodeFrameHeader(zero, 1024).status().code(), Status::Code::kInvalidArgument);
}

TEST(FrameCodecTest, NestingIsLimitedAtSixtyFourLevelsAndStringsDoNotCount) {
  auto nested = [](int depth) {
    return "{\"type\":\"x\",\"v\":" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  };
  EXPECT_TRUE(DecodeFramePayload(nested(64)).ok());
  auto deep = DecodeFramePayload(nested(65));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("nested deeper than 64 levels"), std::string::npos);
  EXPECT_FALSE(DecodeFramePayload(nested(2000000)).ok()) << "no crash, an error";
  // Brackets inside strings (escaped quotes included) are text, not nesting.
  const std::string text = "{\"type\":\"x\",\"s\":\"\\\"" + std::string(1000, '[') + "\"}";
  EXPECT_TRUE(DecodeFramePayload(text).ok());
}

TEST(FrameCodecTest, HugeLengthHeaderIsRejectedByDefaultLimit) {
  FrameDecoder decoder;
  decoder.Append("\xff\xff\xff\xff");
  EXPECT_EQ(decoder.Next().status().code(), Status::Code::kResourceExhausted);
}

TEST(FrameCodecTest, EncoderRefusesPayloadOverLimit) {
  auto frame = EncodeFrame({{"type", "x"}, {"blob", std::string(2000, 'a')}}, 1000);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), Status::Code::kResourceExhausted);
}

TEST(FrameCodecTest, EncoderRefusesNonObject) {
  EXPECT_FALSE(EncodeFrame(nlohmann::json::array()).ok());
}

TEST(FrameCodecTest, MalformedJsonIsAnError) {
  FrameDecoder decoder;
  decoder.Append(Header(5) + "{oops");
  auto next = decoder.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Status::Code::kInvalidArgument);
}

TEST(FrameCodecTest, NonObjectPayloadIsAnError) {
  FrameDecoder decoder;
  decoder.Append(Header(3) + "[1]");
  EXPECT_FALSE(decoder.Next().ok());
}

TEST(FrameCodecTest, ZeroLengthFrameIsAnError) {
  FrameDecoder decoder;
  decoder.Append(Header(0));
  EXPECT_FALSE(decoder.Next().ok());
}

TEST(FrameCodecTest, InvalidUtf8IsReplacedNotThrown) {
  auto frame = EncodeFrame({{"type", "x"}, {"s", std::string("\xff\xfe")}});
  EXPECT_TRUE(frame.ok());
}

TEST(FrameCodecTest, RandomGarbageNeverCrashes) {
  std::mt19937 rng(42);
  for (int round = 0; round < 2000; ++round) {
    FrameDecoder decoder(4096);
    std::string bytes(rng() % 64, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    if (round % 2 == 0 && bytes.size() >= 4) bytes.replace(0, 4, Header(bytes.size() - 4));
    decoder.Append(bytes);
    for (int i = 0; i < 4; ++i) {
      auto next = decoder.Next();
      if (!next.ok() || !next->has_value()) break;
      EXPECT_TRUE((*next)->is_object());
    }
  }
}

}  // namespace
}  // namespace bakeoff::protocol
