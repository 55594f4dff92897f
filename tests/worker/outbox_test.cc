#include "worker/outbox.h"

#include <gtest/gtest.h>

namespace bakeoff::worker {
namespace {

// An event as the trial runner hands it over: read into its type.
protocol::TrainerEvent Event(nlohmann::json body) { return protocol::TrainerEventFromJson(std::move(body)).value(); }
protocol::TrainerEvent Step(int s) { return Event({{"event", "step"}, {"step", s}, {"step_s", 0.1}}); }

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
  outbox.AddEvent({1, 1}, 0, Step(0));
  outbox.AddEvent({1, 1}, 0, Step(1));
  outbox.AddEvent({1, 1}, 1, Step(0));
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
  outbox.AddEvent({2, 1}, 0, Step(0));
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
  outbox.AddEvent({1, 1}, 0, Step(0));
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
  outbox.AddEvent({1, 1}, 0, Step(0));
  auto frames = outbox.TakeUnsent();
  outbox.AddEvent({1, 1}, 0, Step(1));
  outbox.Acknowledge(frames[0]["outbox_seq"]);
  EXPECT_EQ(outbox.pending_events(), 1u);
  outbox.MarkAllUnsent();
  auto rest = outbox.TakeUnsent();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0]["events"][0]["event"]["step"], 1);
}

TEST(OutboxTest, BatchesAreSplitAtTheFrameLimit) {
  Outbox outbox;
  for (int i = 0; i < 25; ++i) outbox.AddEvent({1, 1}, 0, Step(i));
  auto frames = outbox.TakeUnsent(10);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[2]["events"].size(), 5u);
}

TEST(OutboxTest, WhenFullStepEventsAreDroppedBeforeOthers) {
  Outbox outbox(3);
  outbox.AddEvent({1, 1}, 0, Event({{"event", "ready"}}));
  outbox.AddEvent({1, 1}, 0, Step(0));
  outbox.AddEvent({1, 1}, 0, Step(1));
  outbox.AddEvent({1, 1}, 0, Event({{"event", "summary"}}));
  EXPECT_EQ(outbox.pending_events(), 3u);
  EXPECT_EQ(outbox.dropped_events(), 1u);
  auto events = outbox.TakeUnsent()[0]["events"];
  EXPECT_EQ(events[0]["event"]["event"], "ready");
  EXPECT_EQ(events[1]["event"]["step"], 1);
  EXPECT_EQ(events[2]["event"]["event"], "summary");
}

TEST(OutboxTest, FinishedReportsAreNeverDropped) {
  Outbox outbox(1);
  for (int i = 0; i < 5; ++i) {
    protocol::AttemptFinishedMessage done;
    done.attempt = {i, 1};
    outbox.AddFinished(done);
    outbox.AddEvent({i, 1}, 0, Step(0));
  }
  EXPECT_EQ(outbox.pending_finished(), 5u);
  EXPECT_EQ(outbox.pending_events(), 1u);
}

TEST(OutboxTest, AtMostTheWindowOfFramesIsInFlight) {
  Outbox outbox;
  for (int i = 0; i < 50; ++i) outbox.AddEvent({1, 1}, 0, Step(i));
  auto first = outbox.TakeUnsent(10, 3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(outbox.frames_in_flight(), 3u);
  EXPECT_TRUE(outbox.TakeUnsent(10, 3).empty());  // the window is full; the rest waits
  // One acknowledgement frees room for one more frame, which starts where the last ended.
  outbox.Acknowledge(first[0]["outbox_seq"]);
  auto next = outbox.TakeUnsent(10, 3);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0]["events"][0]["event"]["step"], 30);
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
  for (int i = 0; i < 5; ++i) outbox.AddEvent({1, 1}, 0, Step(i));
  ASSERT_EQ(outbox.TakeUnsent(1, 2).size(), 2u);
  outbox.MarkAllUnsent();  // those frames died with the connection
  EXPECT_EQ(outbox.frames_in_flight(), 0u);
  auto again = outbox.TakeUnsent(1, 2);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0]["events"][0]["event"]["step"], 0);
}

TEST(OutboxTest, AnAcknowledgementForgetsOnlyTheFramesUpToItWhileLaterOnesAreInFlight) {
  Outbox outbox;
  for (int i = 0; i < 4; ++i) outbox.AddEvent({1, 1}, 0, Step(i));
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
  EXPECT_EQ(again[0]["events"][0]["event"]["step"], 2);
  EXPECT_EQ(again[0]["events"][1]["event"]["step"], 3);
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

}  // namespace
}  // namespace bakeoff::worker
