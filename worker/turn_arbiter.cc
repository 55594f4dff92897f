#include "worker/turn_arbiter.h"

#include <algorithm>

namespace bakeoff::worker {

namespace {
std::string Seconds(std::chrono::milliseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}
}  // namespace

TurnArbiter::TurnArbiter(int sides, std::chrono::milliseconds turn_timeout, std::uint64_t seed)
    : sides_(static_cast<std::size_t>(std::max(1, sides))), turn_timeout_(turn_timeout), random_(seed) {}

bool TurnArbiter::Live(const Side& side) const { return side.joined && !side.ended; }

bool TurnArbiter::AllAsked(const Side& side, Request request) const {
  bool any = false;
  for (const Rank& r : side.ranks) {
    if (r.state == RankState::kEnded) continue;
    if (r.state != RankState::kWaiting || r.asked != request) return false;
    any = true;
  }
  return any;
}

bool TurnArbiter::AnyHolding(const Side& side) const {
  return std::any_of(side.ranks.begin(), side.ranks.end(), [](const Rank& r) { return r.state == RankState::kHolding; });
}

bool TurnArbiter::finished() const {
  return std::all_of(sides_.begin(), sides_.end(), [](const Side& s) { return s.ended; });
}

std::vector<TurnArbiter::Effect> TurnArbiter::Join(int side, int ranks, TimePoint now) {
  std::vector<Effect> effects;
  Side* found = SideOf(side);
  if (found == nullptr || found->joined || found->ended) return effects;
  Side& s = *found;
  s.joined = true;
  s.ranks.assign(static_cast<std::size_t>(std::max(1, ranks)), Rank{});
  if (!first_join_) first_join_ = now;
  Pump(now, effects);
  return effects;
}

TurnArbiter::Side* TurnArbiter::SideOf(int side) {
  return side < 0 || side >= static_cast<int>(sides_.size()) ? nullptr : &sides_[static_cast<std::size_t>(side)];
}

TurnArbiter::Rank* TurnArbiter::RankOf(int side, int rank) {
  Side* s = SideOf(side);
  if (s == nullptr || rank < 0 || rank >= static_cast<int>(s->ranks.size())) return nullptr;
  return &s->ranks[static_cast<std::size_t>(rank)];
}

std::vector<TurnArbiter::Effect> TurnArbiter::Ask(int side, int rank, Request request, TimePoint now) {
  std::vector<Effect> effects;
  Rank* found = RankOf(side, rank);  // a rank of a side that joined
  if (found == nullptr) return effects;
  Side& s = *SideOf(side);
  Rank& r = *found;
  if (s.ended) {
    // Its side no longer takes turns (it left the rotation, or was given up on): never
    // keep a rank waiting; `go -1` tells it to run on without turns.
    effects.push_back(Effect{Effect::Kind::kGo, side, -1, {rank}, ""});
    return effects;
  }
  if (r.state == RankState::kEnded) return effects;
  if (r.state == RankState::kHolding) return effects;  // asked twice: the turn is its already
  // A warm-up request after the side's warm-up is over is a measured one.
  r.asked = (request == Request::kWarmup && s.warmed_up) ? Request::kStep : request;
  r.state = RankState::kWaiting;
  Pump(now, effects);
  return effects;
}

std::vector<TurnArbiter::Effect> TurnArbiter::Done(int side, int rank, TimePoint now) {
  std::vector<Effect> effects;
  Rank* r = RankOf(side, rank);
  if (r == nullptr || r->state != RankState::kHolding) return effects;
  Side& s = *SideOf(side);
  r->state = RankState::kIdle;
  if (holder_ == side && !AnyHolding(s)) {
    if (holder_request_ == Request::kWarmup) s.warmed_up = true;
    holder_.reset();
  }
  Pump(now, effects);
  return effects;
}

std::vector<TurnArbiter::Effect> TurnArbiter::EndRank(int side, int rank, TimePoint now) {
  std::vector<Effect> effects;
  Rank* r = RankOf(side, rank);
  if (r == nullptr) return effects;
  Side& s = *SideOf(side);
  r->state = RankState::kEnded;
  const bool all_ended = std::all_of(s.ranks.begin(), s.ranks.end(),
                                     [](const Rank& x) { return x.state == RankState::kEnded; });
  if (all_ended) {
    EndSideInternal(side);
  } else if (holder_ == side && !AnyHolding(s)) {
    if (holder_request_ == Request::kWarmup) s.warmed_up = true;
    holder_.reset();
  }
  Pump(now, effects);
  return effects;
}

std::vector<TurnArbiter::Effect> TurnArbiter::EndSide(int side, TimePoint now) {
  std::vector<Effect> effects;
  if (SideOf(side) == nullptr) return effects;
  EndSideInternal(side);
  Pump(now, effects);
  return effects;
}

void TurnArbiter::EndSideInternal(int side) {
  Side& s = sides_[static_cast<std::size_t>(side)];
  s.ended = true;
  for (Rank& r : s.ranks) r.state = RankState::kEnded;
  if (holder_ == side) holder_.reset();
  if (expected_side_ == side) {
    expected_side_.reset();
    expected_since_.reset();
  }
}

std::vector<TurnArbiter::Effect> TurnArbiter::StepReported(int side, int rank, TimePoint now) {
  std::vector<Effect> effects;
  Rank* found = RankOf(side, rank);
  if (found == nullptr) return effects;
  Side& s = *SideOf(side);
  Rank& r = *found;
  ++r.measured_steps;
  // A turn is granted before its step is computed, so a rank that takes turns never has
  // reported more steps than it was granted.
  if (s.ended || r.measured_steps <= r.measured_turns) return effects;
  EndSideInternal(side);
  effects.push_back(Effect{Effect::Kind::kLeftRotation, side, 0, {},
                           "rank " + std::to_string(rank) + " reported a measured step without a turn: its program "
                           "does not take turns (docs/lockstep.md); its steps ran unarbitrated"});
  Pump(now, effects);
  return effects;
}

void TurnArbiter::StartRoundIfDone() {
  const bool open = std::any_of(round_.begin(), round_.end(),
                                [&](int s) { return !sides_[static_cast<std::size_t>(s)].ended; });
  if (open) return;
  round_.clear();
  for (int s = 0; s < static_cast<int>(sides_.size()); ++s) {
    if (!sides_[static_cast<std::size_t>(s)].ended) round_.push_back(s);
  }
  std::shuffle(round_.begin(), round_.end(), random_);
}

std::optional<int> TurnArbiter::Expected() const {
  const int n = static_cast<int>(sides_.size());
  for (int s = 0; s < n; ++s) {
    const Side& side = sides_[static_cast<std::size_t>(s)];
    if (!side.ended && !side.warmed_up) return s;
  }
  for (int s : round_) {
    if (!sides_[static_cast<std::size_t>(s)].ended) return s;
  }
  return std::nullopt;
}

void TurnArbiter::Pump(TimePoint now, std::vector<Effect>& effects) {
  while (!holder_) {
    if (std::all_of(sides_.begin(), sides_.end(), [](const Side& s) { return s.ended || s.warmed_up; })) {
      StartRoundIfDone();
    }
    const std::optional<int> expected = Expected();
    if (!expected) return;
    if (expected != expected_side_) {
      expected_side_ = expected;
      expected_since_ = now;
    }
    Side& s = sides_[static_cast<std::size_t>(*expected)];
    if (!s.joined) return;
    if (!s.warmed_up) {
      if (AllAsked(s, Request::kWarmup)) {
        Grant(*expected, Request::kWarmup, now, effects);
      } else if (AllAsked(s, Request::kStep)) {
        s.warmed_up = true;  // no warm-up steps: its first request is a measured one
        continue;
      }
      return;
    }
    if (AllAsked(s, Request::kStep)) {
      Grant(*expected, Request::kStep, now, effects);
      round_.erase(std::find(round_.begin(), round_.end(), *expected));
    }
    return;
  }
}

void TurnArbiter::Grant(int side, Request request, TimePoint now, std::vector<Effect>& effects) {
  Side& s = sides_[static_cast<std::size_t>(side)];
  Effect go{Effect::Kind::kGo, side, next_turn_++, {}, ""};
  for (std::size_t i = 0; i < s.ranks.size(); ++i) {
    Rank& r = s.ranks[i];
    if (r.state != RankState::kWaiting) continue;
    r.state = RankState::kHolding;
    if (request == Request::kStep) ++r.measured_turns;
    go.ranks.push_back(static_cast<int>(i));
  }
  holder_ = side;
  holder_request_ = request;
  holder_since_ = now;
  expected_side_.reset();
  expected_since_.reset();
  effects.push_back(std::move(go));
}

std::optional<TurnArbiter::TimePoint> TurnArbiter::Deadline() const {
  std::optional<TimePoint> deadline;
  auto consider = [&](TimePoint t) {
    if (!deadline || t < *deadline) deadline = t;
  };
  if (holder_ && holder_request_ == Request::kStep) consider(holder_since_ + turn_timeout_);
  if (!holder_ && expected_side_ && expected_since_) {
    const Side& s = sides_[static_cast<std::size_t>(*expected_side_)];
    if (Live(s) && s.warmed_up) consider(*expected_since_ + turn_timeout_);
  }
  if (first_join_) {
    for (const Side& s : sides_) {
      if (!s.joined && !s.ended) consider(*first_join_ + turn_timeout_);
    }
  }
  return deadline;
}

std::vector<TurnArbiter::Effect> TurnArbiter::Expire(TimePoint now) {
  std::vector<Effect> effects;
  if (holder_ && holder_request_ == Request::kStep && now >= holder_since_ + turn_timeout_) {
    const int side = *holder_;
    EndSideInternal(side);
    effects.push_back(Effect{Effect::Kind::kTimedOut, side, 0, {},
                             "held its lockstep turn for more than " + Seconds(turn_timeout_) +
                                 " (limits.turn_timeout); the other side(s) went on without it"});
  }
  if (!holder_ && expected_side_ && expected_since_ && now >= *expected_since_ + turn_timeout_) {
    const int side = *expected_side_;
    const Side& s = sides_[static_cast<std::size_t>(side)];
    if (Live(s) && s.warmed_up) {
      EndSideInternal(side);
      effects.push_back(Effect{Effect::Kind::kTimedOut, side, 0, {},
                               "kept its lockstep group waiting for its next turn for more than " +
                                   Seconds(turn_timeout_) + " (limits.turn_timeout); the other side(s) went on without it"});
    }
  }
  if (first_join_ && now >= *first_join_ + turn_timeout_) {
    for (Side& s : sides_) {
      if (!s.joined) s.ended = true;  // never came: the group goes on without it
    }
  }
  Pump(now, effects);
  return effects;
}

}  // namespace bakeoff::worker
