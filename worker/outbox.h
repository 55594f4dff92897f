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
// Steps travel as step blocks (docs/protocol.md): a `step` event joins the open block of
// its (attempt, rank, phase), up to kMaxStepBlockRows steps. A block is sealed when it
// is first sent: it is resent unchanged after a reconnect, so the store, which keeps a
// block by its first step, keeps it once. A step whose number is not above the last one
// of its rank and phase is dropped (counted): blocks of a rank never overlap.
//
// Bound: at most `max_events` events are held, a step counting as one (default 100000,
// docs/protocol.md). When full, the attempt holding the most events pays (each attempt's
// quota is a fair share: a trial that floods its event channel drops its own events,
// never a co-located trial's steps; security review 2026-12-02, hole 7). Within that
// attempt the oldest step is dropped first (the summary carries the figures that
// matter): the first step of the oldest block not yet sent, or the oldest sent block
// whole; then its oldest event of any kind; attempt_finished reports are never dropped
// (there is at most one per attempt). Drops are counted.
// Frames by bytes (security review 2026-12-07, A4): each held event knows an upper bound
// of its bytes in a frame (its JSON as encoded plus kEventEnvelopeBytes; a step row
// kStepRowBytes), and TakeUnsent cuts events frames at `max_frame_bytes` less
// kFrameEnvelopeBytes as well as at their event count, so no frame it makes is refused
// by the codec. An event that could never fit in a frame is dropped when it is added
// and counted (oversized_events(), included in dropped_events()): it is never held,
// never sent, and never makes the worker reconnect and resend.
// Thread-safety: not thread-safe; used from the worker's io thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/frame_codec.h"
#include "protocol/messages.h"
#include "protocol/trainer_event.h"

namespace bakeoff::worker {

class Outbox {
 public:
  // An event's fields around its body in a frame (trial_id, attempt, rank, seq), at most.
  static constexpr std::size_t kEventEnvelopeBytes = 256;
  // One step row of a block, at most (ten numbers in their longest form, with commas).
  static constexpr std::size_t kStepRowBytes = 320;
  // An events frame's own fields (type, outbox_seq, brackets), at most.
  static constexpr std::size_t kFrameEnvelopeBytes = 4096;

  explicit Outbox(std::size_t max_events = 100000,
                  std::size_t max_frame_bytes = protocol::kDefaultMaxFrameBytes)
      : max_events_(max_events), max_frame_bytes_(max_frame_bytes) {}

  // Queues one event: a step joins its block; any other event's body travels as
  // written, with the next per-(attempt, rank) event seq. An event whose encoded bytes
  // cannot fit in one frame is dropped and counted instead (it still takes its seq).
  void AddEvent(const protocol::AttemptRef& attempt, int rank, protocol::TrainerEvent event);
  void AddStep(const protocol::AttemptRef& attempt, int rank, const protocol::StepEvent& step);
  void AddFinished(protocol::AttemptFinishedMessage finished);

  // The next frames to send: events not yet sent (up to `max_events_per_frame` per
  // events frame) and finished reports, in the order they were added, while fewer than
  // `max_frames` are in flight. Each frame gets an outbox sequence number
  // ("outbox_seq"); an events frame's encoded payload stays within `max_frame_bytes`
  // (the constructor's). Marks them sent.
  std::vector<nlohmann::json> TakeUnsent(std::size_t max_events_per_frame = 500,
                                         std::size_t max_frames = SIZE_MAX);

  // The coordinator handled everything up to `outbox_seq`: forget it.
  void Acknowledge(std::int64_t outbox_seq);

  // After a reconnect: everything not acknowledged is sent again.
  void MarkAllUnsent();

  // The frame `outbox_seq` could not be sent for its own sake (the codec refused it):
  // its events are dropped and counted, so that it is never resent. attempt_finished
  // reports are kept. A safety net: TakeUnsent's frames fit by construction.
  void DropFrame(std::int64_t outbox_seq);

  // Attempts whose attempt_finished is not yet acknowledged: a re-registration lists
  // them with the running ones, so the coordinator does not declare them lost.
  std::vector<protocol::AttemptRef> PendingFinishedAttempts() const;

  // Frames sent and not yet acknowledged.
  std::size_t frames_in_flight() const { return static_cast<std::size_t>(next_outbox_seq_ - 1 - acknowledged_); }
  // Events held, each step counted.
  std::size_t pending_events() const { return held_events_; }
  std::size_t pending_finished() const { return finished_.size(); }
  std::uint64_t dropped_events() const { return dropped_events_; }
  // Events dropped because they could never fit in a frame (also in dropped_events()).
  std::uint64_t oversized_events() const { return oversized_events_; }
  bool empty() const { return events_.empty() && finished_.empty(); }

 private:
  struct PendingEvent {
    protocol::TrialEvent event;              // unless `block`
    std::optional<protocol::StepBlock> block;  // a step block
    bool sealed = false;                     // a block that was sent: it never changes
    std::int64_t order = 0;                  // insertion order across events and finished
    std::int64_t sent_in = 0;  // outbox_seq of the frame that carried it; 0 = unsent
    std::size_t event_bytes = 0;  // unless `block`: its body's JSON plus kEventEnvelopeBytes
    std::size_t size() const { return block ? block->rows.size() : 1; }
    // At most this many bytes in an events frame.
    std::size_t bytes() const { return block ? kEventEnvelopeBytes + block->rows.size() * kStepRowBytes : event_bytes; }
  };
  struct PendingFinished {
    protocol::AttemptFinishedMessage message;
    std::int64_t order = 0;
    std::int64_t sent_in = 0;
  };
  // (trial, attempt, rank, phase): 0 warmup, 1 measure.
  using StepKey = std::tuple<std::int64_t, int, int, int>;

  using AttemptKey = std::pair<std::int64_t, int>;  // (trial, attempt)
  static AttemptKey AttemptOf(const PendingEvent& e);
  void Held(const PendingEvent& e, std::ptrdiff_t delta);
  void DropOne();
  PendingEvent* FindByOrder(std::int64_t order);
  void Remove(std::deque<PendingEvent>::iterator it);

  std::size_t max_events_;
  std::size_t max_frame_bytes_;
  std::deque<PendingEvent> events_;  // in `order`
  std::deque<PendingFinished> finished_;
  std::size_t held_events_ = 0;  // events_ with each step counted
  std::map<AttemptKey, std::size_t> held_by_attempt_;  // the same, per attempt (no zeros)
  std::map<std::tuple<std::int64_t, int, int>, std::int64_t> next_event_seq_;
  std::map<StepKey, std::int64_t> open_blocks_;  // the order of each key's newest block
  std::map<StepKey, std::int64_t> last_step_;    // the last step queued per key
  std::int64_t next_order_ = 1;
  std::int64_t next_outbox_seq_ = 1;
  std::int64_t acknowledged_ = 0;  // highest outbox_seq acknowledged (or given up on)
  std::uint64_t dropped_events_ = 0;
  std::uint64_t oversized_events_ = 0;
};

}  // namespace bakeoff::worker
