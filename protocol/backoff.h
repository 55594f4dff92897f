// Backoff: capped exponential delays with jitter, for whatever retries after a failure
// (the worker's reconnects, a listener out of file descriptors, a failing sbatch).
// Each Next() is the current step times a uniform draw from [1 - jitter, 1 + jitter],
// after which the step doubles up to `max`; Reset() after a success goes back to
// `initial`. The seed is injectable so a test can check the sequence exactly.
// Header-only, in the Status-level core (no dependencies). Thread-safety: one owner.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace bakeoff {

class Backoff {
 public:
  struct Options {
    std::chrono::milliseconds initial{100};
    std::chrono::milliseconds max{std::chrono::seconds(30)};
    double jitter = 0.2;  // in [0, 1)
  };

  explicit Backoff(Options options, std::uint64_t seed = std::random_device{}())
      : options_(options), step_(options.initial), rng_(seed) {}

  // The delay to wait now.
  std::chrono::milliseconds Next() {
    std::uniform_real_distribution<double> draw(1.0 - options_.jitter, 1.0 + options_.jitter);
    const auto delay = std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(step_.count()) * draw(rng_)));
    step_ = std::min(step_ * 2, options_.max);
    return delay;
  }

  void Reset() { step_ = options_.initial; }

  // The step the next delay is drawn around.
  std::chrono::milliseconds step() const { return step_; }

 private:
  Options options_;
  std::chrono::milliseconds step_;
  std::mt19937_64 rng_;
};

}  // namespace bakeoff
