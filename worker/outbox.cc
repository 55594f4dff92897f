#include "worker/outbox.h"

#include <algorithm>

namespace bakeoff::worker {

void Outbox::AddEvent(const protocol::AttemptRef& attempt, int rank, protocol::TrainerEvent event) {
  auto& seq = next_event_seq_[{attempt.trial_id, attempt.attempt, rank}];
  ++seq;
  if (events_.size() >= max_events_) DropOne();
  PendingEvent pending;
  pending.event.attempt = attempt;
  pending.event.rank = rank;
  pending.is_step = event.step() != nullptr;
  pending.event.event = std::move(event.body);
  pending.event.seq = seq;
  pending.order = next_order_++;
  events_.push_back(std::move(pending));
}

void Outbox::DropOne() {
  auto step = std::find_if(events_.begin(), events_.end(), [](const PendingEvent& e) { return e.is_step; });
  events_.erase(step != events_.end() ? step : events_.begin());
  ++dropped_events_;
}

void Outbox::AddFinished(protocol::AttemptFinishedMessage finished) {
  finished_.push_back(PendingFinished{std::move(finished), next_order_++, 0});
}

std::vector<nlohmann::json> Outbox::TakeUnsent(std::size_t max_events_per_frame, std::size_t max_frames) {
  std::vector<nlohmann::json> frames;
  if (frames_in_flight() >= max_frames) return frames;
  const std::size_t room = max_frames - frames_in_flight();
  protocol::EventsMessage batch;
  auto flush_batch = [&]() {
    if (batch.events.empty()) return;
    batch.outbox_seq = next_outbox_seq_++;
    frames.push_back(protocol::ToJson(batch));
    batch.events.clear();
  };
  std::vector<PendingEvent*> batch_members;
  auto e = events_.begin();
  auto f = finished_.begin();
  auto next_unsent_event = [&]() {
    while (e != events_.end() && e->sent_in != 0) ++e;
  };
  auto next_unsent_finished = [&]() {
    while (f != finished_.end() && f->sent_in != 0) ++f;
  };
  // A batch in progress is the frame after `frames`, so it fits while frames < room.
  while (frames.size() < room) {
    next_unsent_event();
    next_unsent_finished();
    const bool have_e = e != events_.end();
    const bool have_f = f != finished_.end();
    if (!have_e && !have_f) break;
    if (have_e && (!have_f || e->order < f->order)) {
      batch.events.push_back(e->event);
      batch_members.push_back(&*e);
      ++e;
      if (batch.events.size() >= max_events_per_frame) {
        const auto seq = next_outbox_seq_;
        flush_batch();
        for (auto* m : batch_members) m->sent_in = seq;
        batch_members.clear();
      }
    } else {
      const auto seq = next_outbox_seq_;
      flush_batch();
      for (auto* m : batch_members) m->sent_in = seq;
      batch_members.clear();
      if (frames.size() >= room) break;
      f->message.outbox_seq = next_outbox_seq_++;
      f->sent_in = f->message.outbox_seq;
      frames.push_back(protocol::ToJson(f->message));
      ++f;
    }
  }
  const auto seq = next_outbox_seq_;
  flush_batch();
  for (auto* m : batch_members) m->sent_in = seq;
  return frames;
}

void Outbox::Acknowledge(std::int64_t outbox_seq) {
  acknowledged_ = std::max(acknowledged_, std::min(outbox_seq, next_outbox_seq_ - 1));
  // Not only a prefix: after MarkAllUnsent older entries may be unsent again.
  std::erase_if(events_, [&](const PendingEvent& p) { return p.sent_in != 0 && p.sent_in <= outbox_seq; });
  std::erase_if(finished_, [&](const PendingFinished& p) { return p.sent_in != 0 && p.sent_in <= outbox_seq; });
}

std::vector<protocol::AttemptRef> Outbox::PendingFinishedAttempts() const {
  std::vector<protocol::AttemptRef> out;
  for (const auto& f : finished_) out.push_back(f.message.attempt);
  return out;
}

void Outbox::MarkAllUnsent() {
  acknowledged_ = next_outbox_seq_ - 1;  // what was in flight is sent again, in new frames
  for (auto& e : events_) e.sent_in = 0;
  for (auto& f : finished_) f.sent_in = 0;
}

}  // namespace bakeoff::worker
