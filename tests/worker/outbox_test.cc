#include "worker/outbox.h"

#include <gtest/gtest.h>

namespace bakeoff::worker {
namespace {

nlohmann::json Step(int s) { return {{"event", "step"}, {"step", s}}; }

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
  outbox.AddEvent({1, 1}, 0, Step(0));
  protocol::AttemptFinishedMessage done;
  done.attempt = {1, 1};
  done.outcome = "succeeded";
  outbox.AddFinished(done);
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
  outbox.AddEvent({1, 1}, 0, {{"event", "ready"}});
  outbox.AddEvent({1, 1}, 0, Step(0));
  outbox.AddEvent({1, 1}, 0, Step(1));
  outbox.AddEvent({1, 1}, 0, {{"event", "summary"}});
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

}  // namespace
}  // namespace bakeoff::worker
