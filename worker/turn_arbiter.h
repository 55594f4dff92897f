// TurnArbiter: who may compute now in one lockstep group (docs/lockstep.md). Pure
// policy: it is told what the group's ranks asked for and when, and answers with the
// turns it grants and the sides it gives up on; LockstepGroup applies them to the real
// sockets and processes. The policy:
//  - A side's turn begins when every live rank of the side has asked for it, and ends
//    when every live rank has given it back (`done`, `end`, or its socket closed).
//  - Warm-up turns go one side at a time, in side order (compilation is measured alone).
//    A side whose first request is a measured step had no warm-up. No measured turn is
//    granted while a live side has not finished its warm-up.
//  - Measured turns go in rounds: each live side once per round, in an order drawn at
//    random for every round (randomized multiple interleaved trials, Abedi and Brecht
//    2017). A fixed A, B, A, B lets the OS scheduler lock into a pattern against a
//    competing process on the same core (the side that slept longer is woken with more
//    credit and runs faster, so its partner sleeps less and runs slower, step after
//    step: bench/validity/README.md, "Lockstep"); a random order breaks that pattern.
//  - Turn timeout: a side holding a measured turn, or the next to go that has not asked,
//    for longer than `turn_timeout` is given up on (Effect::kTimedOut) and the rest go
//    on. The warm-up turn and waiting for a side to start are bounded by the trial
//    timeout, not here: compiling may take many minutes.
//  - A rank that reported more measured steps than it was granted turns does not take
//    turns (a script that bypasses the library): its side leaves the rotation.
//  - A side that has not joined `turn_timeout` after the first side joined is absent.
// Thread-safety: not thread-safe; one group's calls come from the worker's executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "protocol/clock.h"

namespace bakeoff::worker {

class TurnArbiter {
 public:
  using TimePoint = Clock::TimePoint;
  enum class Request { kWarmup, kStep };

  struct Effect {
    enum class Kind {
      kGo,           // write `go turn` to each of `ranks` of `side`
      kTimedOut,     // end `side`'s attempt `timeout` with `reason`
      kLeftRotation  // `side` does not take turns (`reason`); it runs on, unarbitrated
    };
    Kind kind = Kind::kGo;
    int side = 0;
    std::int64_t turn = 0;
    std::vector<int> ranks;  // kGo: the side's local rank indices told to go
    std::string reason;
  };

  // REQUIRES: 1 <= sides. `seed` draws each round's order.
  TurnArbiter(int sides, std::chrono::milliseconds turn_timeout, std::uint64_t seed = 0);

  // Side `side` started `ranks` local ranks (its attempt's processes).
  std::vector<Effect> Join(int side, int ranks, TimePoint now);
  // Rank `rank` of `side` asks for a turn.
  std::vector<Effect> Ask(int side, int rank, Request request, TimePoint now);
  // Rank `rank` of `side` gives back the turn it holds (a `done` without one is ignored).
  std::vector<Effect> Done(int side, int rank, TimePoint now);
  // Rank `rank` of `side` takes no more turns (`end`, its socket closed, its process ended).
  std::vector<Effect> EndRank(int side, int rank, TimePoint now);
  // The side's attempt ended (finished, failed, cancelled): all its ranks end.
  std::vector<Effect> EndSide(int side, TimePoint now);
  // Rank `rank` of `side` reported a measured step (its event stream): a rank with more
  // measured steps than measured turns granted does not take turns.
  std::vector<Effect> StepReported(int side, int rank, TimePoint now);
  // When the next timeout may fire (nullopt: none pending); call Expire then.
  std::optional<TimePoint> Deadline() const;
  std::vector<Effect> Expire(TimePoint now);

  // The side holding the turn, if any.
  std::optional<int> holder() const { return holder_; }
  std::int64_t turns_granted() const { return next_turn_; }
  // Every side has ended (or never came): the group may be dropped.
  bool finished() const;

 private:
  enum class RankState { kIdle, kWaiting, kHolding, kEnded };
  struct Rank {
    RankState state = RankState::kIdle;
    Request asked = Request::kStep;
    std::int64_t measured_turns = 0;  // measured turns granted to it
    std::int64_t measured_steps = 0;  // measured steps it reported
  };
  struct Side {
    bool joined = false;
    bool ended = false;       // finished, timed out, absent, or left the rotation
    bool warmed_up = false;   // its warm-up turn is over (or it had none)
    std::vector<Rank> ranks;
  };

  // nullptr for a side or rank number out of range (a rank of a side not joined yet has none).
  Side* SideOf(int side);
  Rank* RankOf(int side, int rank);
  bool Live(const Side& side) const;
  bool AllAsked(const Side& side, Request request) const;
  bool AnyHolding(const Side& side) const;
  void EndSideInternal(int side);
  // Grants whatever the rules allow now.
  void Pump(TimePoint now, std::vector<Effect>& effects);
  // Once every side of the current round has had its turn (or ended), draws the next.
  void StartRoundIfDone();
  // The side expected to go next (warm-up or measured), or nullopt when none is.
  std::optional<int> Expected() const;
  void Grant(int side, Request request, TimePoint now, std::vector<Effect>& effects);

  std::vector<Side> sides_;
  std::chrono::milliseconds turn_timeout_;
  std::optional<int> holder_;
  Request holder_request_ = Request::kStep;
  TimePoint holder_since_{};
  // The current round's remaining sides, next first (drawn when a round begins).
  std::vector<int> round_;
  std::mt19937_64 random_;
  std::int64_t next_turn_ = 0;
  std::optional<TimePoint> expected_since_;  // when the expected side became expected
  std::optional<int> expected_side_;
  std::optional<TimePoint> first_join_;
};

}  // namespace bakeoff::worker
