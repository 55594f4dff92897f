// EventWriter: the trainer's event stream, one JSON object a line on a stream (stdout),
// flushed per event so the worker sees each step as it happens. Exit codes live here too
// because each error kind has one (docs/trainer.md).
// Thread-safety: one writer thread.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace bakeoff::trainer {

inline constexpr int kExitSucceeded = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitInvalidConfig = 2;
inline constexpr int kExitOom = 3;
inline constexpr int kExitUnsupported = 4;
inline constexpr int kExitDiverged = 5;

class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) {}

  // Writes {"event": name, ...fields} as one line.
  void Write(const std::string& name, nlohmann::json fields = nlohmann::json::object());
  // Writes an error event; returns the exit code of its kind.
  int Error(const std::string& kind, const std::string& message);

 private:
  std::ostream& out_;
};

}  // namespace bakeoff::trainer
