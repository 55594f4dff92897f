// ParseTrainerEvent / TrainerEventFromJson: the documented kinds are accepted and read
// into their types, unknown fields kept in the body; logs, malformed and mistyped lines
// are refused with the reason.
#include "protocol/trainer_event.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <variant>

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

TEST(TrainerEventTest, StepFieldsAreTyped) {
  auto parsed = ParseTrainerEvent(
      R"({"event":"step","step":7,"phase":"warmup","step_s":0.25,"tokens":512,"loss":4.5,"lr":0.001,)"
      R"("grad_norm":1.5,"peak_mem_bytes":3000,"rss_bytes":2000,"comm_s":0.125,"comm_bytes":1024,)"
      R"("device_allocated_bytes":1500,"device_reserved_peak_bytes":4096})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const StepEvent* step = parsed->step();
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(parsed->summary(), nullptr);
  EXPECT_EQ(step->row.step, 7);
  EXPECT_EQ(step->phase, "warmup");
  EXPECT_EQ(step->row.step_s, 0.25);
  EXPECT_EQ(step->row.tokens, 512);
  EXPECT_EQ(step->row.loss, 4.5);
  EXPECT_EQ(step->row.lr, 0.001);
  EXPECT_EQ(step->grad_norm, 1.5);
  EXPECT_EQ(step->row.peak_mem_bytes, 3000);
  EXPECT_EQ(step->row.rss_bytes, 2000);
  EXPECT_EQ(step->row.comm_s, 0.125);
  EXPECT_EQ(step->row.comm_bytes, 1024);
  EXPECT_EQ(step->device_allocated_bytes, 1500);
  EXPECT_EQ(step->device_reserved_peak_bytes, 4096);

  auto bare = ParseTrainerEvent(R"({"event":"step","step":0,"step_s":0,"loss":null})");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->step()->phase, "measure") << "a step without a phase is measured";
  EXPECT_FALSE(bare->step()->row.tokens.has_value());
  EXPECT_FALSE(bare->step()->row.loss.has_value()) << "null reads as absent";
}

// A lockstep trial's measured step carries its turn number (docs/lockstep.md); any other
// step has none.
TEST(TrainerEventTest, AStepsTurnIsACountAndAbsentOutsideLockstep) {
  auto turned = ParseTrainerEvent(R"({"event":"step","step":3,"phase":"measure","step_s":0.5,"turn":41})");
  ASSERT_TRUE(turned.ok()) << turned.status().ToString();
  EXPECT_EQ(turned->step()->row.turn, 41);
  auto zero = ParseTrainerEvent(R"({"event":"step","step":0,"step_s":0.5,"turn":0})");
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->step()->row.turn, 0) << "the group's first turn is 0";
  auto plain = ParseTrainerEvent(R"({"event":"step","step":3,"step_s":0.5,"turn":null})");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->step()->row.turn.has_value());
  for (const char* line : {R"({"event":"step","step":1,"step_s":0.1,"turn":-1})",
                           R"({"event":"step","step":1,"step_s":0.1,"turn":2.5})",
                           R"({"event":"step","step":1,"step_s":0.1,"turn":"7"})"}) {
    auto parsed = ParseTrainerEvent(line);
    ASSERT_FALSE(parsed.ok()) << line;
    EXPECT_NE(parsed.status().message().find("\"turn\" must be an integer >= 0"), std::string::npos)
        << parsed.status().message();
  }
}

// The turn is the last column of both stored forms: the columns of a step block on the
// wire and a row of step_blocks.rows_json. A row without one is written exactly as before
// the column existed, and a block or row from before it reads the turn as absent.
TEST(TrainerEventTest, TheTurnColumnRoundTripsAndOlderFormsReadWithoutIt) {
  ASSERT_EQ(kStepRowColumnCount, 10u);
  EXPECT_STREQ(kStepRowColumns[kStepRowColumnCount - 1], "turn");
  std::vector<StepRow> rows(3);
  rows[0].step = 4;
  rows[0].step_s = 0.5;
  rows[0].turn = 10;
  rows[1].step = 5;
  rows[1].step_s = 0.25;
  rows[1].tokens = 64;
  rows[2].step = 6;
  rows[2].step_s = 0.5;
  rows[2].turn = 14;
  nlohmann::json block = StepRowsToColumns(rows);
  EXPECT_EQ(block["turn"], nlohmann::json::parse("[10, null, 14]"));
  std::vector<StepRow> read;
  ASSERT_TRUE(ReadStepColumns(block, read).ok());
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[0].turn, 10);
  EXPECT_FALSE(read[1].turn.has_value());
  EXPECT_EQ(read[1].tokens, 64);
  EXPECT_EQ(read[2].turn, 14);

  // A block without the column (a worker from before it) reads every turn as absent.
  block.erase("turn");
  ASSERT_TRUE(ReadStepColumns(block, read).ok());
  for (const StepRow& row : read) EXPECT_FALSE(row.turn.has_value());
  nlohmann::json bad = StepRowsToColumns(rows);
  bad["turn"] = nlohmann::json::parse("[10, -1, 14]");
  Status refused = ReadStepColumns(bad, read);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("column \"turn\""), std::string::npos) << refused.message();

  // The stored row: the turn is the tenth element, the nulls before it written out; a row
  // without one ends where it always did.
  std::string text;
  AppendStepRowJson(rows[0], text);
  EXPECT_EQ(text, "[4,0.5,null,null,null,null,null,null,null,10]");
  text.clear();
  AppendStepRowJson(rows[1], text);
  EXPECT_EQ(text, "[5,0.25,64]");
}

TEST(TrainerEventTest, NonFiniteNumbersReadAsAbsent) {
  // JSON text cannot hold a NaN; an event the worker builds in process can.
  auto parsed = TrainerEventFromJson({{"event", "step"}, {"step", 1}, {"step_s", 0.5},
                                      {"loss", std::numeric_limits<double>::quiet_NaN()}});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->step()->row.loss.has_value());
}

TEST(TrainerEventTest, SummaryFieldsAreTyped) {
  auto parsed = ParseTrainerEvent(
      R"({"event":"summary","startup_s":1.5,"first_step_s":2,"warmup_s":3,"step_s_median":0.1,)"
      R"("step_s_p10":0.09,"step_s_p90":0.12,"tokens_per_s":1000.5,"flops_per_s":2e9,"mfu":null,)"
      R"("peak_mem_bytes":4096,"peak_reserved_bytes":8192,"peak_rss_bytes":12345,"frozen_bytes":100,)"
      R"("trainable_bytes":10,"grad_bytes":10.4,"optimizer_bytes":20,"comm_s_per_step":0.01,)"
      R"("comm_bytes_per_step":64,"tokens_per_step":512,"applied":{"compile_mode":"jit"}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const SummaryEvent* s = parsed->summary();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->startup_s, 1.5);
  EXPECT_EQ(s->first_step_s, 2.0);
  EXPECT_EQ(s->warmup_s, 3.0);
  EXPECT_EQ(s->step_s_median, 0.1);
  EXPECT_EQ(s->step_s_p10, 0.09);
  EXPECT_EQ(s->step_s_p90, 0.12);
  EXPECT_EQ(s->tokens_per_s, 1000.5);
  EXPECT_EQ(s->flops_per_s, 2e9);
  EXPECT_FALSE(s->mfu.has_value());
  EXPECT_EQ(s->peak_mem_bytes, 4096);
  EXPECT_EQ(s->peak_reserved_bytes, 8192);
  EXPECT_EQ(s->peak_rss_bytes, 12345);
  EXPECT_EQ(s->frozen_bytes, 100);
  EXPECT_EQ(s->trainable_bytes, 10);
  EXPECT_EQ(s->grad_bytes, 10) << "a fractional byte count is rounded";
  EXPECT_EQ(s->optimizer_bytes, 20);
  EXPECT_EQ(s->comm_s_per_step, 0.01);
  EXPECT_EQ(s->comm_bytes_per_step, 64);
  EXPECT_EQ(s->tokens_per_step, 512.0);
  ASSERT_TRUE(s->applied.has_value());
  EXPECT_EQ((*s->applied)["compile_mode"], "jit");
}

TEST(TrainerEventTest, ErrorStartedAndReadyFieldsAreTyped) {
  auto error = ParseTrainerEvent(R"({"event":"error","kind":"oom","message":"no memory"})");
  ASSERT_TRUE(error.ok()) << error.status().ToString();
  ASSERT_NE(error->error(), nullptr);
  EXPECT_EQ(error->error()->kind, "oom");
  EXPECT_EQ(error->error()->message, "no memory");
  EXPECT_EQ(ParseTrainerEvent(R"({"event":"error","kind":"failed"})")->error()->message, "");

  auto started = TrainerEventFromJson(
      {{"event", "started"}, {"pid", 4242}, {"at", 1700000000.5}, {"host", "node1"}, {"address", "10.0.0.1"}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_NE(started->started(), nullptr);
  EXPECT_EQ(started->started()->pid, 4242);
  EXPECT_EQ(started->started()->host, "node1");
  EXPECT_EQ(started->started()->address, "10.0.0.1");
  EXPECT_EQ(started->at, 1700000000.5);

  auto ready = ParseTrainerEvent(R"({"event":"ready","config":{"model":"tiny"},"at":"noon"})");
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_EQ(ready->kind, "ready");
  EXPECT_TRUE(std::holds_alternative<UntypedEvent>(ready->fields));
  EXPECT_FALSE(ready->at.has_value()) << "an \"at\" that is not a number is not read, and not refused";
}

TEST(TrainerEventTest, UnknownFieldsAreKeptInTheBody) {
  const std::string line =
      R"({"event":"summary","tokens_per_s":10,"custom":{"graphs":3,"breaks":[1,2]},"note":"x",)"
      R"("environment":{"host":"n1"}})";
  auto parsed = ParseTrainerEvent(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->body, nlohmann::json::parse(line)) << "the body is the whole object, as written";
  auto other = ParseTrainerEvent(R"({"event":"compile_stats","graphs":2})");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->body["graphs"], 2);
  // The events frame carries the body; the receiving side reads the same types back.
  auto again = TrainerEventFromJson(parsed->body);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->summary()->tokens_per_s, 10.0);
  EXPECT_EQ(again->body, parsed->body);
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
                        Case{R"({"event":"error","message":"x"})", "\"kind\""},
                        Case{R"({"event":"error","kind":"oom","message":3})", "\"message\""},
                        Case{R"({"event":"step","step":1,"step_s":0.1,"phase":5})", "\"phase\""},
                        Case{R"({"event":"step","step":1,"step_s":0.1,"phase":"eval"})", "\"phase\""},
                        Case{R"({"event":"step","step":1,"step_s":0.1,"rss_bytes":-5})", "\"rss_bytes\""},
                        Case{R"({"event":"step","step":18446744073709551615,"step_s":0.1})", "\"step\""},
                        Case{R"({"event":"step","step":1,"step_s":0.1,"device_allocated_bytes":"1G"})",
                             "\"device_allocated_bytes\""},
                        Case{R"({"event":"summary","grad_bytes":"1G"})", "\"grad_bytes\""},
                        Case{R"({"event":"started","pid":"one"})", "\"pid\""}}) {
    auto parsed = ParseTrainerEvent(c.line);
    ASSERT_FALSE(parsed.ok()) << c.line;
    EXPECT_NE(parsed.status().message().find(c.field), std::string::npos) << parsed.status().message();
    // The receiving side of an events frame refuses it the same way.
    auto from_json = TrainerEventFromJson(nlohmann::json::parse(c.line));
    ASSERT_FALSE(from_json.ok()) << c.line;
    EXPECT_EQ(from_json.status().message(), parsed.status().message());
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

// Every figure of the table is read from a summary event into its member: the parser
// walks the table (issue 48, item 1).
TEST(TrainerEventTest, EverySummaryFigureOfTheTableIsRead) {
  nlohmann::json event = {{"event", "summary"}};
  double value = 1;
  for (const SummaryFigure& figure : SummaryFigures()) event[figure.name] = value++;
  auto parsed = ParseTrainerEvent(event.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const SummaryEvent* s = parsed->summary();
  ASSERT_NE(s, nullptr);
  value = 1;
  for (const SummaryFigure& figure : SummaryFigures()) {
    const double expected = value++;
    if (auto real = std::get_if<std::optional<double> SummaryEvent::*>(&figure.member)) {
      EXPECT_EQ(s->**real, expected) << figure.name;
    } else {
      EXPECT_EQ(s->*std::get<std::optional<std::int64_t> SummaryEvent::*>(figure.member),
                static_cast<std::int64_t>(expected))
          << figure.name;
    }
  }
}

}  // namespace
}  // namespace bakeoff::protocol
