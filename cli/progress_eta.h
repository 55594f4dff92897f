// The "remaining" figure of the progress lines of `bakeoff local` and `submit --wait`.
// An estimate is made only when a trial finishes (elapsed / finished x left) and then
// counts down, so it never grows while nothing finishes; it stays at 0 once the
// countdown runs out, until the next finish gives a new estimate.
#pragma once

#include <algorithm>
#include <cstdint>

namespace bakeoff::cli {

class ProgressEta {
 public:
  // Seconds left, or -1 while no trial has finished (unknown).
  double Update(std::int64_t finished, std::int64_t total, double elapsed_s) {
    if (finished != finished_) {
      finished_ = finished;
      at_s_ = elapsed_s;
      estimate_s_ = finished > 0 ? elapsed_s / static_cast<double>(finished) * static_cast<double>(total - finished)
                                 : -1;
    }
    return estimate_s_ < 0 ? -1 : std::max(0.0, estimate_s_ - (elapsed_s - at_s_));
  }

 private:
  std::int64_t finished_ = 0;
  double at_s_ = 0;
  double estimate_s_ = -1;
};

}  // namespace bakeoff::cli
