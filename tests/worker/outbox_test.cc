#include "worker/outbox.h"

#include <gtest/gtest.h>

#include "protocol/frame_codec.h"

namespace bakeoff::worker {
namespace {

// An event as the trial runner hands it over: read into its type.
protocol::TrainerEvent Event(nlohmann::json body) { return protocol::TrainerEventFromJson(std::move(body)).value(); }
protocol::TrainerEvent Step(int s, const char* phase = "measure") {
  return Event({{"event", "step"}, {"step", s}, {"step_s", 0.1}, {"phase", phase}});
}
// An event of no kind the outbox treats apart: one entry, one seq.
protocol::TrainerEvent Note(int n) { return Event({{"event", "note"}, {"n", n}}); }

// Attempt {1, 1}'s first step, then its report (succeeded): an event frame, then a
// finished frame.
void AddAStepThenTheReport(Outbox& outbox) {
  outbox.AddEvent({1, 1}, 0, Step(0));
  protocol::AttemptFinishedMessage done;
  done.attempt = {1, 1};
  done.outcome = "succeeded";
  outbox.AddFinished(done);
}

TEST(OutboxTest, EventsAreNumberedPerAttemptAndRank) {
  Outbox outbox;
  outbox.AddEvent({1, 1}, 0, Note(0));
  outbox.AddEvent({1, 1}, 0, Note(1));
  outbox.AddEvent({1, 1}, 1, Note(0));
  auto frames = outbox.TakeUnsent();
  ASSERT_EQ(frames.size(), 1u);
  auto events = frames[0]["events"];
  EXPECT_EQ(events[0]["seq"], 1);
  EXPECT_EQ(events[1]["seq"], 2);
  EXPECT_EQ(events[2]["seq"], 1);
}

TEST(OutboxTest, FinishedIsSentAfterTheEventsBeforeIt) {
  Outbox outbox;
  AddAStepThenTheReport(outbox);
  outbox.AddEvent({2, 1}, 0, Note(0));
  auto frames = outbox.TakeUnsent();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0]["type"], "events");
  EXPECT_EQ(frames[1]["type"], "attempt_finished");
  EXPECT_EQ(frames[2]["type"], "events");
  EXPECT_LT(frames[0]["outbox_seq"], frames[1]["outbox_seq"]);
  EXPECT_LT(frames[1]["outbox_seq"], frames[2]["outbox_seq"]);
}

TEST(OutboxTest, SentButUnacknowledgedIsResentAfterReconnect) {
  Outbox outbox;
  outbox.AddEvent({1, 1}, 0, Note(0));
  auto first = outbox.TakeUnsent();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(outbox.TakeUnsent().empty());  // sent, not twice on the same connection
  outbox.MarkAllUnsent();
  auto again = outbox.TakeUnsent();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]["events"][0]["seq"], 1);  // same event seq: the store dedups it
}

TEST(OutboxTest, AcknowledgedEntriesAreForgotten) {
  Outbox outbox;
  outbox.AddEvent({1, 1}, 0, Note(0));
  auto frames = outbox.TakeUnsent();
  outbox.AddEvent({1, 1}, 0, Note(1));
  outbox.Acknowledge(frames[0]["outbox_seq"]);
  EXPECT_EQ(outbox.pending_events(), 1u);
  outbox.MarkAllUnsent();
  auto rest = outbox.TakeUnsent();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0]["events"][0]["event"]["n"], 1);
}

TEST(OutboxTest, BatchesAreSplitAtTheFrameLimit) {
  Outbox outbox;
  for (int i = 0; i < 25; ++i) outbox.AddEvent({1, 1}, 0, Note(i));
  auto frames = outbox.TakeUnsent(10);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[2]["events"].size(), 5u);
}

TEST(OutboxTest, WhenFullStepsAreDroppedBeforeOtherEvents) {
  Outbox outbox(3);
  outbox.AddEvent({1, 1}, 0, Event({{"event", "ready"}}));
  outbox.AddEvent({1, 1}, 0, Step(0));
  outbox.AddEvent({1, 1}, 0, Step(1));
  outbox.AddEvent({1, 1}, 0, Event({{"event", "summary"}}));
  EXPECT_EQ(outbox.pending_events(), 3u);
  EXPECT_EQ(outbox.dropped_events(), 1u);
  auto frame = outbox.TakeUnsent()[0];
  ASSERT_EQ(frame["events"].size(), 2u);
  EXPECT_EQ(frame["events"][0]["event"]["event"], "ready");
  EXPECT_EQ(frame["events"][1]["event"]["event"], "summary");
  ASSERT_EQ(frame["steps"].size(), 1u);
  ASSERT_EQ(frame["steps"][0]["step"].size(), 1u);
  EXPECT_EQ(frame["steps"][0]["step"][0], 1) << "the oldest step went first";
}

// Security review 2026-12-02, hole 7: one trial flooding its event channel drops its
// own events, never the steps of a trial running beside it on the same worker.
TEST(OutboxTest, AFloodingAttemptDropsItsOwnEventsNeverAnotherAttempts) {
  Outbox outbox(20);
  for (int s = 0; s < 8; ++s) outbox.AddEvent({1, 1}, 0, Step(s));  // the honest trial
  for (int n = 0; n < 1000; ++n) outbox.AddEvent({2, 1}, 0, Note(n));  // the flood
  for (int s = 8; s < 10; ++s) outbox.AddEvent({1, 1}, 0, Step(s));
  EXPECT_EQ(outbox.pending_events(), 20u);
  std::size_t honest_steps = 0, flood = 0;
  for (const auto& frame : outbox.TakeUnsent()) {
    for (const auto& block : frame.value("steps", nlohmann::json::array())) {
      if (block["trial_id"] == 1) honest_steps += block["step"].size();
    }
    for (const auto& e : frame.value("events", nlohmann::json::array())) flood += e["trial_id"] == 2;
  }
  EXPECT_EQ(honest_steps, 10u) << "every step of the honest trial is kept";
  EXPECT_EQ(flood, 10u) << "the flood keeps what is left of the bound";
  EXPECT_EQ(outbox.dropped_events(), 990u);
}

TEST(OutboxTest, WhenFullASentBlockIsDroppedWholeNeverChanged) {
  Outbox outbox(3);
  outbox.AddEvent({1, 1}, 0, Step(0));
  outbox.AddEvent({1, 1}, 0, Step(1));
  ASSERT_EQ(outbox.TakeUnsent().size(), 1u);  // sent, not acknowledged: it may be stored
  outbox.AddEvent({1, 1}, 0, Note(0));
  outbox.AddEvent({1, 1}, 0, Note(1));  // full: the sent block goes, both its steps
  EXPECT_EQ(outbox.dropped_events(), 2u);
  EXPECT_EQ(outbox.pending_events(), 2u);
  outbox.MarkAllUnsent();
  auto frames = outbox.TakeUnsent();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_FALSE(frames[0].contains("steps"));
  EXPECT_EQ(frames[0]["events"].size(), 2u);
}

TEST(OutboxTest, StepsOfARankAndPhaseTravelAsOneBlock) {
  Outbox outbox;
  outbox.AddEvent({1, 1}, 0, Step(0, "warmup"));
  outbox.AddEvent({1, 1}, 0, Step(0));
  outbox.AddEvent({1, 1}, 1, Step(0));
  outbox.AddEvent({1, 1}, 0, Step(1));
  outbox.AddEvent({1, 1}, 1, Step(1));
  outbox.AddEvent({1, 1}, 0, Step(2));
  EXPECT_EQ(outbox.pending_events(), 6u);
  auto frames = outbox.TakeUnsent();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0]["events"].empty());
  const auto& steps = frames[0]["steps"];
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0]["phase"], "warmup");
  EXPECT_EQ(steps[0]["step"].size(), 1u);
  EXPECT_EQ(steps[1]["rank"], 0);
  EXPECT_EQ(steps[1]["phase"], "measure");
  ASSERT_EQ(steps[1]["step"].size(), 3u);
  EXPECT_EQ(steps[1]["step"][2], 2);
  EXPECT_DOUBLE_EQ(steps[1]["step_s"][2].get<double>(), 0.1);
  EXPECT_EQ(steps[2]["rank"], 1);
  EXPECT_EQ(steps[2]["step"].size(), 2u);
  // The frame reads back as it was sent.
  auto parsed = protocol::Parse<protocol::EventsMessage>(frames[0]);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->steps.size(), 3u);
  EXPECT_TRUE(parsed->unreadable_steps.empty());
  EXPECT_EQ(parsed->steps[1].rows[1].step, 1);
}

TEST(OutboxTest, ASentBlockIsResentUnchangedAndLaterStepsStartANewOne) {
  Outbox outbox;
  outbox.AddEvent({1, 1}, 0, Step(0));
  outbox.AddEvent({1, 1}, 0, Step(1));
  auto first = outbox.TakeUnsent();
  ASSERT_EQ(first.size(), 1u);
  outbox.AddEvent({1, 1}, 0, Step(2));  // after the send: a new block
  outbox.MarkAllUnsent();              // the connection dropped before the ack
  auto again = outbox.TakeUnsent();
  ASSERT_EQ(again.size(), 1u);
  ASSERT_EQ(again[0]["steps"].size(), 2u);
  EXPECT_EQ(again[0]["steps"][0], first[0]["steps"][0]) << "the store keeps a block by its first step";
  ASSERT_EQ(again[0]["steps"][1]["step"].size(), 1u);
  EXPECT_EQ(again[0]["steps"][1]["step"][0], 2);
}

TEST(OutboxTest, AStepNotAboveTheLastOfItsRankAndPhaseIsDropped) {
  Outbox outbox;
  outbox.AddEvent({1, 1}, 0, Step(3));
  outbox.AddEvent({1, 1}, 0, Step(3));
  outbox.AddEvent({1, 1}, 0, Step(2));
  outbox.AddEvent({1, 1}, 0, Step(0, "warmup"));  // another phase: its own order
  outbox.AddEvent({1, 1}, 0, Step(4));
  EXPECT_EQ(outbox.dropped_events(), 2u);
  auto steps = outbox.TakeUnsent()[0]["steps"];
  ASSERT_EQ(steps.size(), 2u);
  ASSERT_EQ(steps[0]["step"].size(), 2u);
  EXPECT_EQ(steps[0]["step"][0], 3);
  EXPECT_EQ(steps[0]["step"][1], 4);
}

TEST(OutboxTest, ABlockHoldsAtMostItsLimitOfStepsAndIsNeverSplitAcrossFrames) {
  Outbox outbox;
  const int n = static_cast<int>(protocol::kMaxStepBlockRows) + 5;
  for (int i = 0; i < n; ++i) outbox.AddEvent({1, 1}, 0, Step(i));
  outbox.AddEvent({1, 1}, 0, Note(0));
  // 10 events a frame: the full block goes alone, over the limit rather than cut.
  auto frames = outbox.TakeUnsent(10);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0]["steps"][0]["step"].size(), protocol::kMaxStepBlockRows);
  EXPECT_FALSE(frames[0].contains("events") && !frames[0]["events"].empty());
  EXPECT_EQ(frames[1]["steps"][0]["step"].size(), 5u);
  EXPECT_EQ(frames[1]["steps"][0]["step"][0], static_cast<int>(protocol::kMaxStepBlockRows));
  EXPECT_EQ(frames[1]["events"].size(), 1u);
}

TEST(OutboxTest, FinishedReportsAreNeverDropped) {
  Outbox outbox(1);
  for (int i = 0; i < 5; ++i) {
    protocol::AttemptFinishedMessage done;
    done.attempt = {i, 1};
    outbox.AddFinished(done);
    outbox.AddEvent({i, 1}, 0, Note(0));
  }
  EXPECT_EQ(outbox.pending_finished(), 5u);
  EXPECT_EQ(outbox.pending_events(), 1u);
}

TEST(OutboxTest, AtMostTheWindowOfFramesIsInFlight) {
  Outbox outbox;
  for (int i = 0; i < 50; ++i) outbox.AddEvent({1, 1}, 0, Note(i));
  auto first = outbox.TakeUnsent(10, 3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(outbox.frames_in_flight(), 3u);
  EXPECT_TRUE(outbox.TakeUnsent(10, 3).empty());  // the window is full; the rest waits
  // One acknowledgement frees room for one more frame, which starts where the last ended.
  outbox.Acknowledge(first[0]["outbox_seq"]);
  auto next = outbox.TakeUnsent(10, 3);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0]["events"][0]["event"]["n"], 30);
  // A cumulative acknowledgement frees the whole window.
  outbox.Acknowledge(next[0]["outbox_seq"]);
  EXPECT_EQ(outbox.frames_in_flight(), 0u);
  EXPECT_EQ(outbox.TakeUnsent(10, 3).size(), 1u);  // the last 10 events
  EXPECT_EQ(outbox.pending_events(), 10u);
}

TEST(OutboxTest, AFinishedReportWaitsForRoomInTheWindowToo) {
  Outbox outbox;
  AddAStepThenTheReport(outbox);
  auto first = outbox.TakeUnsent(10, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["type"], "events");
  outbox.Acknowledge(first[0]["outbox_seq"]);
  auto second = outbox.TakeUnsent(10, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]["type"], "attempt_finished");
}

TEST(OutboxTest, AReconnectEmptiesTheWindow) {
  Outbox outbox;
  for (int i = 0; i < 5; ++i) outbox.AddEvent({1, 1}, 0, Note(i));
  ASSERT_EQ(outbox.TakeUnsent(1, 2).size(), 2u);
  outbox.MarkAllUnsent();  // those frames died with the connection
  EXPECT_EQ(outbox.frames_in_flight(), 0u);
  auto again = outbox.TakeUnsent(1, 2);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0]["events"][0]["event"]["n"], 0);
}

TEST(OutboxTest, AnAcknowledgementForgetsOnlyTheFramesUpToItWhileLaterOnesAreInFlight) {
  Outbox outbox;
  for (int i = 0; i < 4; ++i) outbox.AddEvent({1, 1}, 0, Note(i));
  auto frames = outbox.TakeUnsent(2, 4);  // two frames of two events each, both in flight
  ASSERT_EQ(frames.size(), 2u);
  outbox.Acknowledge(frames[0]["outbox_seq"]);
  // The second frame is still unacknowledged: its events must stay until it is.
  EXPECT_EQ(outbox.pending_events(), 2u);
  EXPECT_EQ(outbox.frames_in_flight(), 1u);
  EXPECT_TRUE(outbox.TakeUnsent(2, 4).empty());  // and are not sent twice on this connection
  outbox.MarkAllUnsent();                        // the connection drops before the second ack
  auto again = outbox.TakeUnsent(2, 4);
  ASSERT_EQ(again.size(), 1u);
  ASSERT_EQ(again[0]["events"].size(), 2u);
  EXPECT_EQ(again[0]["events"][0]["event"]["n"], 2);
  EXPECT_EQ(again[0]["events"][1]["event"]["n"], 3);
  outbox.Acknowledge(again[0]["outbox_seq"]);
  EXPECT_TRUE(outbox.empty());
}

TEST(OutboxTest, AFinishedReportInALaterFrameSurvivesTheAckOfAnEarlierOne) {
  Outbox outbox;
  AddAStepThenTheReport(outbox);
  auto frames = outbox.TakeUnsent(10, 4);
  ASSERT_EQ(frames.size(), 2u);
  outbox.Acknowledge(frames[0]["outbox_seq"]);
  EXPECT_EQ(outbox.pending_events(), 0u);
  EXPECT_EQ(outbox.pending_finished(), 1u);
  ASSERT_EQ(outbox.PendingFinishedAttempts().size(), 1u);
  outbox.MarkAllUnsent();
  auto again = outbox.TakeUnsent(10, 4);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]["type"], "attempt_finished");
}

// Security review 2026-12-07, A4: frames are cut by their encoded bytes, not only by
// their event count, and an event that could never fit in a frame is dropped and counted
// when it is added, never held, so nothing is ever resent in a loop. Three directions:
// one event over the frame limit, a few large ones, many mid-sized ones, and step blocks
// beside them.
TEST(OutboxTest, FramesAreCutByBytesAndAnEventThatCanNeverFitIsDropped) {
  constexpr std::size_t kFrame = 1u << 20;
  Outbox outbox(100000, kFrame);
  auto padded = [](std::size_t bytes, int n) { return Event({{"event", "note"}, {"n", n}, {"pad", std::string(bytes, '\x01')}}); };
  // Escaped bytes count as sent: 200,000 control characters are 1.2 MB as JSON.
  outbox.AddEvent({1, 1}, 0, padded(200'000, 0));
  EXPECT_EQ(outbox.oversized_events(), 1u);
  EXPECT_EQ(outbox.dropped_events(), 1u);
  EXPECT_EQ(outbox.pending_events(), 0u) << "never held";
  for (int i = 0; i < 5; ++i) outbox.AddEvent({1, 1}, 0, padded(60'000, i + 1));  // 360 KB each as JSON
  for (int i = 0; i < 300; ++i) outbox.AddEvent({1, 1}, 1, Event({{"event", "note"}, {"pad", std::string(5'000, 'y')}}));
  for (int s = 0; s < 2000; ++s) outbox.AddEvent({1, 1}, 0, Step(s));
  std::size_t events = 0, steps = 0;
  auto frames = outbox.TakeUnsent(500);
  EXPECT_GE(frames.size(), 4u);
  for (const auto& frame : frames) {
    const auto encoded = protocol::EncodeFrame(frame, kFrame);
    EXPECT_TRUE(encoded.ok()) << frame.dump().size() << " bytes: " << encoded.status().ToString();
    events += frame["events"].size();
    if (frame.contains("steps")) {
      for (const auto& block : frame["steps"]) steps += block["step"].size();
    }
  }
  EXPECT_EQ(events, 305u);
  EXPECT_EQ(steps, 2000u);
  EXPECT_EQ(outbox.dropped_events(), 1u) << "only the one that can never fit";
  // Resent after a reconnect, the frames fit again.
  outbox.MarkAllUnsent();
  for (const auto& frame : outbox.TakeUnsent(500)) EXPECT_TRUE(protocol::EncodeFrame(frame, kFrame).ok());
}

// A frame the codec refused anyway (a safety net): its events are dropped and counted,
// never resent.
TEST(OutboxTest, AFrameThatCouldNotBeSentIsDroppedNotResent) {
  Outbox outbox;
  outbox.AddEvent({1, 1}, 0, Note(0));
  outbox.AddEvent({1, 1}, 0, Note(1));
  auto frames = outbox.TakeUnsent();
  ASSERT_EQ(frames.size(), 1u);
  outbox.DropFrame(frames[0]["outbox_seq"]);
  EXPECT_EQ(outbox.dropped_events(), 2u);
  EXPECT_EQ(outbox.pending_events(), 0u);
  outbox.MarkAllUnsent();
  EXPECT_TRUE(outbox.TakeUnsent().empty());
}

}  // namespace
}  // namespace bakeoff::worker
