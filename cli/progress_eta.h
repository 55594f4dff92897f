// The progress line of `bakeoff local` and `submit --wait`, and its "remaining" figure.
// An estimate is made only when a trial finishes (elapsed / finished x left) and then
// counts down, so it never grows while nothing finishes; it stays at 0 once the
// countdown runs out, until the next finish gives a new estimate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace bakeoff::cli {

// What one progress line says; both commands fill it from their own source (the local
// store, the API's sweep JSON) and print FormatProgressLine.
struct ProgressFigures {
  std::int64_t done = 0;
  std::int64_t total = 0;
  std::int64_t running = 0;  // assigned or running
  std::int64_t queued = 0;
  double elapsed_s = 0;
  double remaining_s = -1;  // -1: unknown (ProgressEta)
  struct Answered {
    int answered = 0;
    int total = 0;
  };
  std::optional<Answered> comparisons;  // the answer's comparisons with an answer so far
  std::string waiting;                   // why queued trials cannot start; "" = they can
};

// "done 3/16 · running 1 · queued 12 · elapsed 1m05s · remaining ~4m20s · answered 1/4"
// (then " · waiting: REASON" when there is one).
std::string FormatProgressLine(const ProgressFigures& figures);

// "4m05s", "1h02m": a duration as the progress line shows it.
std::string FormatClock(double seconds);

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
