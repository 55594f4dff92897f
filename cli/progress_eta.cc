#include "cli/progress_eta.h"

#include <cstdio>

#include "cli/terminal_escape.h"

namespace bakeoff::cli {

std::string FormatClock(double seconds) {
  const long s = static_cast<long>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600) {
    snprintf(buf, sizeof(buf), "%ldh%02ldm", s / 3600, (s / 60) % 60);
  } else {
    snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  }
  return buf;
}

std::string FormatProgressLine(const ProgressFigures& f) {
  std::string line = "done " + std::to_string(f.done) + "/" + std::to_string(f.total) + " · running " +
                     std::to_string(f.running) + " · queued " + std::to_string(f.queued) + " · elapsed " +
                     FormatClock(f.elapsed_s) + " · remaining " +
                     (f.remaining_s < 0 ? std::string("?") : "~" + FormatClock(f.remaining_s));
  if (f.comparisons) {
    line += " · answered " + std::to_string(f.comparisons->answered) + "/" + std::to_string(f.comparisons->total);
  }
  // The coordinator's text (it names workers' GPU models, which workers report): escaped,
  // and kept to one line, since a TTY redraws this line in place (A13).
  if (!f.waiting.empty()) {
    std::string waiting = EscapeControlCharacters(f.waiting);
    for (char& c : waiting) {
      if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    }
    line += " · waiting: " + waiting;
  }
  return line;
}

}  // namespace bakeoff::cli
