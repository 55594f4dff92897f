// TurnClient: a rank's end of the lockstep turn channel (docs/lockstep.md, "The turn
// channel"): the worker names a Unix socket in BAKEOFF_TURN_FD; before its warm-up and
// before each measured step the rank asks for a turn and blocks until it is granted,
// and gives it back once the step's work is done and the device synchronised. Without
// the variable, or once the worker is gone or says `go -1`, every call returns at once
// and the rank runs as it always did. Torch-free and standard C++ only: the native
// trainer and the test stand-in trainer share it.
// Thread-safety: not thread-safe; call from the training loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace bakeoff::trainer {

class TurnClient {
 public:
  // The channel BAKEOFF_TURN_FD names; inactive when it is unset or not a number.
  static TurnClient FromEnvironment();
  // `fd` < 0: inactive. The client does not close `fd`.
  explicit TurnClient(int fd) : fd_(fd) {}

  bool active() const { return fd_ >= 0; }
  // Asks for the warm-up turn (held over every warm-up step) or one measured step's
  // turn, and waits for it. The turn's number, or nullopt when turns are off.
  std::optional<std::int64_t> Acquire(bool warmup);
  // Gives back the turn it holds (nothing when it holds none).
  void Release();
  // Takes no more turns (before the summary, or on an error).
  void End();

 private:
  bool Send(const std::string& line);
  // Reads one line; false on end of file, an error or a line over 64 bytes.
  bool ReadLine(std::string& line);
  void TurnOff() { fd_ = -1; }

  int fd_ = -1;
  bool holding_ = false;
  std::string buffer_;
};

}  // namespace bakeoff::trainer
