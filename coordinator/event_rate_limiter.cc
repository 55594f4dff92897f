#include "coordinator/event_rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace bakeoff::coordinator {

std::chrono::milliseconds EventRateLimiter::Take(std::size_t events, Clock::time_point now) {
  if (rate_ <= 0) return std::chrono::milliseconds(0);
  if (!started_) {
    started_ = true;
    tokens_ = rate_;
  } else {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(rate_, tokens_ + std::max(0.0, elapsed) * rate_);
  }
  last_ = now;
  tokens_ -= static_cast<double>(events);
  if (tokens_ >= 0) return std::chrono::milliseconds(0);
  // The debt is repaid at the rate: wait until the bucket is back at zero.
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(-tokens_ / rate_ * 1000.0)));
}

}  // namespace bakeoff::coordinator
