#include "coordinator/worker_quarantine.h"

#include <algorithm>

namespace bakeoff::coordinator {

std::optional<Clock::TimePoint> WorkerQuarantine::OnAttemptEnded(const std::string& worker,
                                                                 protocol::Outcome outcome,
                                                                 std::optional<std::chrono::milliseconds> ran,
                                                                 Clock::TimePoint now) {
  if (policy_.attempts == 0 || outcome == protocol::Outcome::kCancelled) return std::nullopt;
  const bool quick = ran.has_value() && *ran < policy_.window;
  if (outcome == protocol::Outcome::kSucceeded || !quick) {
    // A good attempt: the streak and the back-off end (an unknown duration, after a
    // restart, ends the streak only). A success also lifts a quarantine it ends in: the
    // worker did the work (it ran trials because every live worker was quarantined, or
    // the attempt was placed before).
    auto it = workers_.find(worker);
    if (it == workers_.end()) return std::nullopt;
    it->second.streak = 0;
    if (outcome == protocol::Outcome::kSucceeded || ran.has_value()) it->second.quarantines = 0;
    if (outcome == protocol::Outcome::kSucceeded) it->second.until.reset();
    return std::nullopt;
  }
  State& state = workers_[worker];
  // An attempt placed before the quarantine and ending during it adds nothing more.
  if (state.until && now < *state.until) return std::nullopt;
  if (++state.streak < policy_.attempts) return std::nullopt;
  state.streak = 0;
  auto length = policy_.period;
  for (int i = 0; i < state.quarantines && length < policy_.max_period; ++i) length *= 2;
  length = std::min(length, policy_.max_period);
  ++state.quarantines;
  state.until = now + length;
  return state.until;
}

bool WorkerQuarantine::Quarantined(const std::string& worker, Clock::TimePoint now) const {
  return QuarantinedUntil(worker, now).has_value();
}

std::optional<Clock::TimePoint> WorkerQuarantine::QuarantinedUntil(const std::string& worker,
                                                                   Clock::TimePoint now) const {
  auto it = workers_.find(worker);
  if (it == workers_.end() || !it->second.until || now >= *it->second.until) return std::nullopt;
  return it->second.until;
}

std::size_t WorkerQuarantine::Streak(const std::string& worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : it->second.streak;
}

}  // namespace bakeoff::coordinator
