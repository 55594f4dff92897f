// Clock: the one source of time for the coordinator and the worker, injected so that
// heartbeat expiry, recovery grace, scheduling and the worker's stop deadline are tested
// deterministically (FakeClock::Advance) instead of by sleeping. Two kinds of time:
// Now() is steady (monotonic) time, for every deadline, timeout and interval; WallNow()
// is calendar time (system_clock), only for timestamps that are stored or shown, never
// for measuring a duration (it can jump). Header-only, in the Status-level core (no
// dependencies). Thread-safety: SystemClock is stateless and safe from any thread;
// FakeClock is for single-threaded tests (advance it on the thread that reads it).
#pragma once

#include <chrono>

namespace bakeoff {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using WallTimePoint = std::chrono::system_clock::time_point;
  virtual ~Clock() = default;
  // Monotonic time: deadlines and intervals.
  virtual TimePoint Now() const = 0;
  // Calendar time: timestamps stored or shown.
  virtual WallTimePoint WallNow() const = 0;
};

class SystemClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  WallTimePoint WallNow() const override { return std::chrono::system_clock::now(); }

  // The process's one system clock: the default for a component that takes a Clock.
  static const SystemClock& Instance() {
    static const SystemClock clock;
    return clock;
  }
};

// Starts at a fixed steady time and a fixed wall time (2026-01-01T00:00:00Z); only
// Advance moves them, both by the same amount.
class FakeClock : public Clock {
 public:
  static constexpr std::chrono::seconds kStartWallSinceEpoch{1767225600};

  TimePoint Now() const override { return now_; }
  WallTimePoint WallNow() const override { return wall_now_; }
  void Advance(std::chrono::milliseconds by) {
    now_ += by;
    wall_now_ += by;
  }

 private:
  TimePoint now_{std::chrono::hours(1)};
  WallTimePoint wall_now_{kStartWallSinceEpoch};
};

}  // namespace bakeoff
