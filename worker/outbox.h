// Outbox: what the worker owes the coordinator, kept until the coordinator acknowledges
// it, so that nothing is lost when the connection drops or the coordinator restarts.
// Entries are trainer events and attempt_finished reports, each with a sequence number;
// the coordinator acknowledges the highest sequence it has durably handled, and after a
// reconnect everything unacknowledged is sent again (the store drops redelivered
// events by their per-rank `seq`, and finish transitions are compare-and-set).
//
// Flow control: at most `max_frames` frames are in flight (sent, not acknowledged);
// the rest waits here, so a coordinator that reads slowly (it limits the events per
// second it takes from each worker) pushes back into this bounded buffer instead of an
// unbounded socket queue, and heartbeats never wait behind megabytes of events.
//
// Bound: at most `max_events` events are held (default 100000, docs/protocol.md).
// When full, the oldest `step` event is dropped first (the summary carries the
// figures that matter), then the oldest event of any kind; attempt_finished reports
// are never dropped (there is at most one per attempt). Drops are counted.
// Thread-safety: not thread-safe; used from the worker's io thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/messages.h"
#include "protocol/trainer_event.h"

namespace bakeoff::worker {

class Outbox {
 public:
  explicit Outbox(std::size_t max_events = 100000) : max_events_(max_events) {}

  // Queues one event (its body travels as written; its kind says what may be dropped
  // first); assigns it the next per-(attempt, rank) event seq.
  void AddEvent(const protocol::AttemptRef& attempt, int rank, protocol::TrainerEvent event);
  void AddFinished(protocol::AttemptFinishedMessage finished);

  // The next frames to send: events not yet sent (up to `max_events_per_frame` per
  // events frame) and finished reports, in the order they were added, while fewer than
  // `max_frames` are in flight. Each frame gets an outbox sequence number
  // ("outbox_seq"). Marks them sent.
  std::vector<nlohmann::json> TakeUnsent(std::size_t max_events_per_frame = 500,
                                         std::size_t max_frames = SIZE_MAX);

  // The coordinator handled everything up to `outbox_seq`: forget it.
  void Acknowledge(std::int64_t outbox_seq);

  // After a reconnect: everything not acknowledged is sent again.
  void MarkAllUnsent();

  // Attempts whose attempt_finished is not yet acknowledged: a re-registration lists
  // them with the running ones, so the coordinator does not declare them lost.
  std::vector<protocol::AttemptRef> PendingFinishedAttempts() const;

  // Frames sent and not yet acknowledged.
  std::size_t frames_in_flight() const { return static_cast<std::size_t>(next_outbox_seq_ - 1 - acknowledged_); }
  std::size_t pending_events() const { return events_.size(); }
  std::size_t pending_finished() const { return finished_.size(); }
  std::uint64_t dropped_events() const { return dropped_events_; }
  bool empty() const { return events_.empty() && finished_.empty(); }

 private:
  struct PendingEvent {
    protocol::TrialEvent event;
    bool is_step = false;         // a `step` event: the first to go when the outbox is full
    std::int64_t order = 0;       // insertion order across events and finished
    std::int64_t sent_in = 0;     // outbox_seq of the frame that carried it; 0 = unsent
  };
  struct PendingFinished {
    protocol::AttemptFinishedMessage message;
    std::int64_t order = 0;
    std::int64_t sent_in = 0;
  };
  void DropOne();

  std::size_t max_events_;
  std::deque<PendingEvent> events_;
  std::deque<PendingFinished> finished_;
  std::map<std::tuple<std::int64_t, int, int>, std::int64_t> next_event_seq_;
  std::int64_t next_order_ = 1;
  std::int64_t next_outbox_seq_ = 1;
  std::int64_t acknowledged_ = 0;  // highest outbox_seq acknowledged (or given up on)
  std::uint64_t dropped_events_ = 0;
};

}  // namespace bakeoff::worker
