// EventRateLimiter: a token bucket over the trainer events one worker sends (issue 7:
// "events per second per worker"). The coordinator does not drop what is over the
// rate (every event is a result); it reads that worker's connection later instead, so
// TCP and the worker's bounded outbox absorb the burst (worker/outbox.h, flow control).
// Pure logic on explicit time points, so it is tested without sleeping.
// Thread-safety: a value; one per worker connection.
#pragma once

#include <chrono>
#include <cstddef>

namespace bakeoff::coordinator {

class EventRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // `events_per_second` 0: no limit. The bucket holds one second's worth, so a burst
  // up to the rate passes at once.
  explicit EventRateLimiter(std::size_t events_per_second) : rate_(static_cast<double>(events_per_second)) {}

  // Takes `events` from the bucket at `now` and returns how long to wait before reading
  // more from this worker (zero while within the rate).
  std::chrono::milliseconds Take(std::size_t events, Clock::time_point now);

 private:
  double rate_;
  bool started_ = false;  // the bucket is full at the first Take
  double tokens_ = 0;     // below zero: a debt the next reads wait for
  Clock::time_point last_{};
};

}  // namespace bakeoff::coordinator
