// LogLimiter: at most one log line per interval for a kind of line that a peer can cause
// as often as it likes (a connection that ends before registering, a failed TLS
// handshake, a connection over its address's cap), with how many were left out since the
// last one written (security review 2026-12-07, A13: silent worker connections wrote
// 21 MB of log in 40 s). Each listener owns one, so one kind of flood does not silence
// another listener's lines.
//
// Admit is pure policy: the caller passes the time (steady), so tests step it by hand;
// Warning reads it from the Env of the Logger it writes through.
// Thread-safety: Admit may be called from any thread (an internal mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "protocol/env.h"
#include "protocol/log.h"

namespace bakeoff::logging {

class LogLimiter {
 public:
  static constexpr std::chrono::seconds kDefaultInterval{10};
  explicit LogLimiter(std::chrono::seconds interval = kDefaultInterval) : interval_(interval) {}

  // Whether to write a line now: the number of such lines left out since the last one
  // written (0 when none), to be logged as the line's `left_out` field; nothing when a
  // line was written less than the interval ago (this one is then counted as left out).
  std::optional<std::size_t> Admit(std::chrono::steady_clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (written_ && now < next_) {
      ++left_out_;
      return std::nullopt;
    }
    written_ = true;
    next_ = now + interval_;
    return std::exchange(left_out_, 0);
  }
  std::chrono::seconds interval() const { return interval_; }

  // The peer-triggered line as the listeners write it, when Admit lets it through:
  // `message peer=ADDRESS error="..." left_out=N`, a warning of `log`'s component, on
  // the clock of `log`'s Env.
  void Warning(const Logger& log, std::string_view message, std::string_view peer, std::string_view error) {
    if (auto left_out = Admit(log.env().clock().Now())) {
      log.Warning(message, {{"peer", peer}, {"error", error}, {"left_out", *left_out}});
    }
  }

 private:
  const std::chrono::seconds interval_;
  std::mutex mu_;
  bool written_ = false;
  std::chrono::steady_clock::time_point next_{};
  std::size_t left_out_ = 0;
};

}  // namespace bakeoff::logging
