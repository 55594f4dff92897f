#include "worker/lockstep_group.h"

#include <functional>

namespace bakeoff::worker {

using Effect = TurnArbiter::Effect;

LockstepGroup::LockstepGroup(boost::asio::any_io_executor executor, std::string name, int sides,
                             std::chrono::milliseconds turn_timeout, const Env& env)
    : executor_(std::move(executor)),
      name_(std::move(name)),
      clock_(env.clock()),
      log_(env, "worker"),
      arbiter_(sides, turn_timeout, std::hash<std::string>{}(name_)),
      timer_(executor_) {}

LockstepGroup::~LockstepGroup() { timer_.cancel(); }

void LockstepGroup::Join(int side, int ranks, SideHooks hooks) {
  hooks_[side] = std::move(hooks);
  Apply(arbiter_.Join(side, ranks, clock_.Now()));
}

void LockstepGroup::OnLine(int side, int rank, std::string_view line) {
  const auto now = clock_.Now();
  if (line == "warmup") {
    Apply(arbiter_.Ask(side, rank, TurnArbiter::Request::kWarmup, now));
  } else if (line == "step") {
    Apply(arbiter_.Ask(side, rank, TurnArbiter::Request::kStep, now));
  } else if (line == "done") {
    Apply(arbiter_.Done(side, rank, now));
  } else {
    // `end`, or a line that is not the protocol: the rank takes no more turns.
    if (line != "end") {
      log_.Warning("unknown turn message: the rank takes no more turns",
                   {{"group", name_}, {"side", std::to_string(side)}, {"rank", std::to_string(rank)}});
    }
    Apply(arbiter_.EndRank(side, rank, now));
  }
}

void LockstepGroup::OnRankClosed(int side, int rank) { Apply(arbiter_.EndRank(side, rank, clock_.Now())); }

void LockstepGroup::OnMeasuredStep(int side, int rank) { Apply(arbiter_.StepReported(side, rank, clock_.Now())); }

void LockstepGroup::OnSideEnded(int side) {
  Apply(arbiter_.EndSide(side, clock_.Now()));
  hooks_.erase(side);  // its runner is going away: nothing more is sent to it
}

void LockstepGroup::Apply(std::vector<Effect> effects) {
  for (Effect& effect : effects) {
    auto hooks = hooks_.find(effect.side);
    if (hooks == hooks_.end()) continue;
    switch (effect.kind) {
      case Effect::Kind::kGo:
        for (int rank : effect.ranks) {
          if (hooks->second.go) hooks->second.go(rank, effect.turn);
        }
        break;
      case Effect::Kind::kTimedOut:
        log_.Warning("lockstep side timed out",
                     {{"group", name_}, {"side", std::to_string(effect.side)}, {"reason", effect.reason}});
        if (hooks->second.time_out) hooks->second.time_out(effect.reason);
        break;
      case Effect::Kind::kLeftRotation:
        log_.Warning("lockstep side left the turns",
                     {{"group", name_}, {"side", std::to_string(effect.side)}, {"reason", effect.reason}});
        if (hooks->second.left_rotation) hooks->second.left_rotation(effect.reason);
        break;
    }
  }
  Rearm();
}

void LockstepGroup::Rearm() {
  const auto deadline = arbiter_.Deadline();
  timer_.cancel();
  if (!deadline) return;
  const auto delay = *deadline - clock_.Now();
  timer_.expires_after(delay.count() > 0 ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(delay)
                                         : std::chrono::steady_clock::duration::zero());
  std::weak_ptr<LockstepGroup> weak = weak_from_this();
  timer_.async_wait([weak](const boost::system::error_code& ec) {
    auto group = weak.lock();
    if (ec || !group) return;
    group->Apply(group->arbiter_.Expire(group->clock_.Now()));
  });
}

}  // namespace bakeoff::worker
