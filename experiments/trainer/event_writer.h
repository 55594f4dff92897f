// EventWriter: the trainer's event stream, one JSON object a line on a stream (stdout),
// flushed per event so the worker sees each step as it happens. Exit codes live here too
// because each error kind has one (docs/trainer.md). An error event carries the cause
// (protocol/error_cause.h); its full text (a LibTorch backtrace) goes to the log stream,
// stderr, which the worker keeps as the rank's log.
// Thread-safety: one writer thread.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "protocol/trainer_exit.h"

namespace bakeoff::trainer {

// The exit codes, from the one table the worker reads them back by (protocol/trainer_exit.h).
inline constexpr int kExitSucceeded = 0;
inline constexpr int kExitFailed = protocol::TrainerExitForErrorKind("failed");
inline constexpr int kExitInvalidConfig = protocol::TrainerExitForErrorKind("config");
inline constexpr int kExitOom = protocol::TrainerExitForErrorKind("oom");
inline constexpr int kExitUnsupported = protocol::TrainerExitForErrorKind("unsupported");
inline constexpr int kExitDiverged = protocol::TrainerExitForErrorKind("diverged");

class EventWriter {
 public:
  // `log` (may be null) receives the full text of every error.
  explicit EventWriter(std::ostream& out, std::ostream* log = nullptr) : out_(out), log_(log) {}

  // Writes {"event": name, ...fields} as one line.
  void Write(const std::string& name, nlohmann::json fields = nlohmann::json::object());
  // Writes an error event whose message is the cause of `message`, and `message` whole to
  // the log; returns the exit code of its kind.
  int Error(const std::string& kind, const std::string& message);

 private:
  std::ostream& out_;
  std::ostream* log_;
};

}  // namespace bakeoff::trainer
