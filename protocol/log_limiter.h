// LogLimiter: at most one log line per interval for a kind of line that a peer can cause
// as often as it likes (a connection that ends before registering, a failed TLS
// handshake, a connection over its address's cap), with how many were left out since the
// last one written (security review 2026-12-07, A13: silent worker connections wrote
// 21 MB of log in 40 s). Each listener owns one, so one kind of flood does not silence
// another listener's lines.
//
// Pure policy: the caller passes the time (steady clock), so tests step it by hand.
// Thread-safety: Admit may be called from any thread (an internal mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>

namespace bakeoff::logging {

class LogLimiter {
 public:
  static constexpr std::chrono::seconds kDefaultInterval{10};
  explicit LogLimiter(std::chrono::seconds interval = kDefaultInterval) : interval_(interval) {}

  // The line to write now, or nothing when a line was written less than the interval ago
  // (this one is then counted as left out). A line written after some were left out ends
  // with " (N such lines left out in the last 10 s)".
  std::optional<std::string> Admit(const std::string& line, std::chrono::steady_clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (written_ && now < next_) {
      ++left_out_;
      return std::nullopt;
    }
    written_ = true;
    next_ = now + interval_;
    std::string out = line;
    if (left_out_ > 0) {
      out += " (" + std::to_string(left_out_) + " such lines left out in the last " +
             std::to_string(interval_.count()) + " s)";
    }
    left_out_ = 0;
    return out;
  }

 private:
  const std::chrono::seconds interval_;
  std::mutex mu_;
  bool written_ = false;
  std::chrono::steady_clock::time_point next_{};
  std::size_t left_out_ = 0;
};

}  // namespace bakeoff::logging
