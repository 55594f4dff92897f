// Clock: the coordinator's source of monotonic time, injected so that heartbeat expiry,
// recovery grace and scheduling are tested deterministically (FakeClock::Advance)
// instead of by sleeping. Thread-safety: SystemClock is stateless; FakeClock is for
// single-threaded tests.
#pragma once

#include <chrono>

namespace bakeoff::coordinator {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class SystemClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

class FakeClock : public Clock {
 public:
  TimePoint Now() const override { return now_; }
  void Advance(std::chrono::milliseconds by) { now_ += by; }

 private:
  TimePoint now_{std::chrono::hours(1)};
};

}  // namespace bakeoff::coordinator
