// ExpositionValue: reads one sample off a Prometheus text exposition, for the tests of
// the coordinator's and the worker's /metrics (tests/worker/worker_metrics_test.cc).
// Thread-safety: pure.
#pragma once

#include <cstddef>
#include <string>

namespace bakeoff::testing {

// The value of the exposition line that is exactly `series` (name{labels}) followed by
// a value, or -1 when there is none.
inline double ExpositionValue(const std::string& text, const std::string& series) {
  std::size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    pos += series.size();
  }
  return -1;
}

}  // namespace bakeoff::testing
