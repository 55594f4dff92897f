// ParseTrainerEvent: the documented kinds are accepted with their fields typed; logs,
// malformed and mistyped lines are refused with the reason.
#include "protocol/trainer_event.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol/frame_codec.h"
#include "protocol/json_limits.h"
#include "protocol/messages.h"

namespace bakeoff::protocol {
namespace {

TEST(TrainerEventTest, DocumentedKindsAreAccepted) {
  auto step = ParseTrainerEvent(R"({"event":"step","step":2,"phase":"measure","step_s":0.1,"tokens":64,"loss":4.5})");
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->kind, "step");
  EXPECT_EQ(step->body["tokens"], 64);
  EXPECT_TRUE(ParseTrainerEvent(R"({"event":"summary","tokens_per_s":100.5,"mfu":null,"applied":{}})").ok());
  EXPECT_TRUE(ParseTrainerEvent(R"({"event":"error","kind":"oom","message":"no memory"})").ok());
  // Kinds the parser does not know pass as they are (ready, other executors' events).
  EXPECT_TRUE(ParseTrainerEvent(R"({"event":"ready","config":{"model":"tiny"}})").ok());
}

TEST(TrainerEventTest, LogsAndMalformedLinesAreRefused) {
  for (const std::string line : {"loading weights...", "", "[1, 2]", R"({"step": 1})", R"({"event": 3})",
                                 R"({"event":"step","step":1)"}) {
    auto parsed = ParseTrainerEvent(line);
    EXPECT_FALSE(parsed.ok()) << line;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument) << line;
  }
}

TEST(TrainerEventTest, MistypedFieldsNameTheFieldAndWhatIsExpected) {
  struct Case {
    const char* line;
    const char* field;
  };
  for (const Case& c : {Case{R"({"event":"step","step":-1,"step_s":0.1})", "\"step\""},
                        Case{R"({"event":"step","step":1,"step_s":"fast"})", "\"step_s\""},
                        Case{R"({"event":"step","step":1,"step_s":-2})", "\"step_s\""},
                        Case{R"({"event":"step","step":1,"step_s":0.1,"tokens":1.5})", "\"tokens\""},
                        Case{R"({"event":"step","step":1,"step_s":0.1,"loss":"nan"})", "\"loss\""},
                        Case{R"({"event":"summary","tokens_per_s":"many"})", "\"tokens_per_s\""},
                        Case{R"({"event":"summary","applied":[1]})", "\"applied\""},
                        Case{R"({"event":"error","message":"x"})", "\"kind\""}}) {
    auto parsed = ParseTrainerEvent(c.line);
    ASSERT_FALSE(parsed.ok()) << c.line;
    EXPECT_NE(parsed.status().message().find(c.field), std::string::npos) << parsed.status().message();
  }
}

TEST(TrainerEventTest, LinesOverTheLimitAreRefusedUnparsed) {
  std::string line = R"({"event":"step","step":1,"step_s":0.1,"pad":")" + std::string(2000, 'x') + "\"}";
  EXPECT_TRUE(ParseTrainerEvent(line).ok());
  auto refused = ParseTrainerEvent(line, 1000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("over the limit"), std::string::npos);
}

// The events frame wraps a line 3 levels deep: a line the worker accepts must still
// fit the coordinator's 64, else it is resent forever and never acknowledged.
TEST(TrainerEventTest, LinesAreRefusedPastTheDepthTheirEventsFrameLeaves) {
  auto nested = [](int depth) {
    return R"({"event":"step","step":1,"step_s":0.1,"x":)" + std::string(depth - 1, '[') +
           std::string(depth - 1, ']') + "}";
  };
  ASSERT_EQ(kMaxTrainerLineDepth, 61);
  auto deepest = ParseTrainerEvent(nested(61));
  ASSERT_TRUE(deepest.ok()) << deepest.status().ToString();
  EventsMessage message;
  message.events.push_back(TrialEvent{AttemptRef{1, 1}, 0, deepest->body, 1});
  auto payload = ToJson(message).dump();
  EXPECT_TRUE(DecodeFramePayload(payload).ok()) << "the coordinator must take the frame";
  auto deeper = ParseTrainerEvent(nested(62));
  ASSERT_FALSE(deeper.ok());
  EXPECT_NE(deeper.status().message().find("nested deeper than 61 levels"), std::string::npos)
      << deeper.status().ToString();
}

}  // namespace
}  // namespace bakeoff::protocol
