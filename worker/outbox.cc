#include "worker/outbox.h"

#include <algorithm>
#include <climits>

namespace bakeoff::worker {

void Outbox::AddEvent(const protocol::AttemptRef& attempt, int rank, protocol::TrainerEvent event) {
  if (const protocol::StepEvent* step = event.step()) {
    AddStep(attempt, rank, *step);
    return;
  }
  auto& seq = next_event_seq_[{attempt.trial_id, attempt.attempt, rank}];
  ++seq;
  // Its bytes as the frame will carry them (invalid UTF-8 as the encoder would replace
  // it): one that can never fit is dropped here, never held or sent.
  const std::size_t bytes =
      kEventEnvelopeBytes + event.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  if (bytes + kFrameEnvelopeBytes > max_frame_bytes_) {
    ++dropped_events_;
    ++oversized_events_;
    return;
  }
  if (held_events_ >= max_events_) DropOne();
  PendingEvent pending;
  pending.event_bytes = bytes;
  pending.event.attempt = attempt;
  pending.event.rank = rank;
  pending.event.event = std::move(event.body);
  pending.event.seq = seq;
  pending.order = next_order_++;
  events_.push_back(std::move(pending));
  Held(events_.back(), 1);
}

Outbox::AttemptKey Outbox::AttemptOf(const PendingEvent& e) {
  const protocol::AttemptRef& a = e.block ? e.block->attempt : e.event.attempt;
  return {a.trial_id, a.attempt};
}

void Outbox::Held(const PendingEvent& e, std::ptrdiff_t delta) {
  held_events_ = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(held_events_) + delta);
  auto it = held_by_attempt_.try_emplace(AttemptOf(e), 0).first;
  it->second = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(it->second) + delta);
  if (it->second == 0) held_by_attempt_.erase(it);
}

void Outbox::AddStep(const protocol::AttemptRef& attempt, int rank, const protocol::StepEvent& step) {
  const StepKey key{attempt.trial_id, attempt.attempt, rank, step.phase == "warmup" ? 0 : 1};
  auto [last, first_of_key] = last_step_.try_emplace(key, step.row.step);
  if (!first_of_key) {
    if (step.row.step <= last->second) {  // would overlap a block already formed
      ++dropped_events_;
      return;
    }
    last->second = step.row.step;
  }
  if (held_events_ >= max_events_) DropOne();
  if (auto open = open_blocks_.find(key); open != open_blocks_.end()) {
    PendingEvent* pending = FindByOrder(open->second);
    if (pending != nullptr && !pending->sealed && pending->block->rows.size() < protocol::kMaxStepBlockRows) {
      pending->block->rows.push_back(step.row);
      Held(*pending, 1);
      return;
    }
  }
  PendingEvent pending;
  pending.block.emplace();
  pending.block->attempt = attempt;
  pending.block->rank = rank;
  pending.block->phase = step.phase;
  pending.block->rows.push_back(step.row);
  pending.order = next_order_++;
  open_blocks_[key] = pending.order;
  events_.push_back(std::move(pending));
  Held(events_.back(), 1);
}

Outbox::PendingEvent* Outbox::FindByOrder(std::int64_t order) {
  auto it = std::lower_bound(events_.begin(), events_.end(), order,
                             [](const PendingEvent& e, std::int64_t o) { return e.order < o; });
  return it != events_.end() && it->order == order ? &*it : nullptr;
}

void Outbox::Remove(std::deque<PendingEvent>::iterator it) {
  Held(*it, -static_cast<std::ptrdiff_t>(it->size()));
  events_.erase(it);
}

void Outbox::DropOne() {
  if (held_by_attempt_.empty()) return;
  // The attempt holding the most pays: a flood drops its own events first.
  auto largest = std::max_element(held_by_attempt_.begin(), held_by_attempt_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
  const AttemptKey victim = largest->first;
  auto mine = [&victim](const PendingEvent& e) { return AttemptOf(e) == victim; };
  auto block = std::find_if(events_.begin(), events_.end(),
                            [&](const PendingEvent& e) { return e.block.has_value() && mine(e); });
  if (block == events_.end()) {
    Remove(std::find_if(events_.begin(), events_.end(), mine));
    ++dropped_events_;
  } else if (!block->sealed && block->block->rows.size() > 1) {
    // Never sent: it may still change.
    block->block->rows.erase(block->block->rows.begin());
    Held(*block, -1);
    ++dropped_events_;
  } else {
    // Sent (it may be stored already) or down to one step: whole, so that a resend
    // never differs from what the store may hold.
    dropped_events_ += block->size();
    Remove(block);
  }
}

void Outbox::AddFinished(protocol::AttemptFinishedMessage finished) {
  // The attempt's ranks have ended: their step keys go (the sent blocks stay until
  // acknowledged).
  const auto& a = finished.attempt;
  auto erase_attempt = [&](std::map<StepKey, std::int64_t>& keys) {
    keys.erase(keys.lower_bound(StepKey{a.trial_id, a.attempt, INT_MIN, 0}),
               keys.lower_bound(StepKey{a.trial_id, a.attempt + 1, INT_MIN, 0}));
  };
  erase_attempt(open_blocks_);
  erase_attempt(last_step_);
  finished_.push_back(PendingFinished{std::move(finished), next_order_++, 0});
}

std::vector<nlohmann::json> Outbox::TakeUnsent(std::size_t max_events_per_frame, std::size_t max_frames) {
  std::vector<nlohmann::json> frames;
  if (frames_in_flight() >= max_frames) return frames;
  const std::size_t room = max_frames - frames_in_flight();
  protocol::EventsMessage batch;
  std::size_t batch_events = 0;  // steps counted one each
  std::size_t batch_bytes = 0;   // at most, as encoded
  const std::size_t frame_budget = max_frame_bytes_ > kFrameEnvelopeBytes ? max_frame_bytes_ - kFrameEnvelopeBytes : 0;
  std::vector<PendingEvent*> batch_members;
  auto flush_batch = [&]() {
    if (batch_members.empty()) return;
    batch.outbox_seq = next_outbox_seq_++;
    for (auto* m : batch_members) m->sent_in = batch.outbox_seq;
    frames.push_back(protocol::ToJson(batch));
    batch.events.clear();
    batch.steps.clear();
    batch_members.clear();
    batch_events = 0;
    batch_bytes = 0;
  };
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
      if (!batch_members.empty() &&
          (batch_events + e->size() > max_events_per_frame || batch_bytes + e->bytes() > frame_budget)) {
        flush_batch();
        if (frames.size() >= room) break;
      }
      if (e->block) {
        e->sealed = true;  // later steps of its key start a new block
        batch.steps.push_back(*e->block);
      } else {
        batch.events.push_back(e->event);
      }
      batch_events += e->size();
      batch_bytes += e->bytes();
      batch_members.push_back(&*e);
      ++e;
      if (batch_events >= max_events_per_frame) flush_batch();
    } else {
      flush_batch();
      if (frames.size() >= room) break;
      f->message.outbox_seq = next_outbox_seq_++;
      f->sent_in = f->message.outbox_seq;
      frames.push_back(protocol::ToJson(f->message));
      ++f;
    }
  }
  flush_batch();
  return frames;
}

void Outbox::Acknowledge(std::int64_t outbox_seq) {
  acknowledged_ = std::max(acknowledged_, std::min(outbox_seq, next_outbox_seq_ - 1));
  // Not only a prefix: after MarkAllUnsent older entries may be unsent again.
  std::erase_if(events_, [&](const PendingEvent& p) {
    const bool acknowledged = p.sent_in != 0 && p.sent_in <= outbox_seq;
    if (acknowledged) Held(p, -static_cast<std::ptrdiff_t>(p.size()));
    return acknowledged;
  });
  std::erase_if(finished_, [&](const PendingFinished& p) { return p.sent_in != 0 && p.sent_in <= outbox_seq; });
}

std::vector<protocol::AttemptRef> Outbox::PendingFinishedAttempts() const {
  std::vector<protocol::AttemptRef> out;
  for (const auto& f : finished_) out.push_back(f.message.attempt);
  return out;
}

void Outbox::DropFrame(std::int64_t outbox_seq) {
  std::erase_if(events_, [&](const PendingEvent& p) {
    if (p.sent_in != outbox_seq) return false;
    Held(p, -static_cast<std::ptrdiff_t>(p.size()));
    dropped_events_ += p.size();
    oversized_events_ += p.size();
    return true;
  });
}

void Outbox::MarkAllUnsent() {
  acknowledged_ = next_outbox_seq_ - 1;  // what was in flight is sent again, in new frames
  for (auto& e : events_) e.sent_in = 0;  // sealed blocks stay sealed
  for (auto& f : finished_) f.sent_in = 0;
}

}  // namespace bakeoff::worker
