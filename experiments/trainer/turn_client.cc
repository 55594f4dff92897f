#include "experiments/trainer/turn_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace bakeoff::trainer {

TurnClient TurnClient::FromEnvironment() {
  const char* value = std::getenv("BAKEOFF_TURN_FD");
  if (value == nullptr || *value == '\0') return TurnClient(-1);
  char* end = nullptr;
  const long fd = std::strtol(value, &end, 10);
  if (*end != '\0' || fd < 0 || fd > 1 << 20) return TurnClient(-1);
  return TurnClient(static_cast<int>(fd));
}

bool TurnClient::Send(const std::string& line) {
  const char* data = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    // MSG_NOSIGNAL: a worker that is gone must not kill the rank with SIGPIPE.
    const ssize_t n = send(fd_, data, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

bool TurnClient::ReadLine(std::string& line) {
  while (true) {
    if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
      line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return true;
    }
    if (buffer_.size() > 64) return false;
    char chunk[64];
    const ssize_t n = read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::optional<std::int64_t> TurnClient::Acquire(bool warmup) {
  if (!active()) return std::nullopt;
  Release();
  std::string line;
  if (!Send(warmup ? "warmup\n" : "step\n") || !ReadLine(line) || line.rfind("go ", 0) != 0) {
    TurnOff();  // the worker is gone, or speaks another protocol: run on without turns
    return std::nullopt;
  }
  char* end = nullptr;
  const long long turn = std::strtoll(line.c_str() + 3, &end, 10);
  if (*end != '\0' || turn < 0) {
    TurnOff();  // `go -1`: this side no longer takes turns
    return std::nullopt;
  }
  holding_ = true;
  return static_cast<std::int64_t>(turn);
}

void TurnClient::Release() {
  if (!active() || !holding_) return;
  holding_ = false;
  if (!Send("done\n")) TurnOff();
}

void TurnClient::End() {
  if (!active()) return;
  Release();
  if (active()) (void)Send("end\n");
  TurnOff();
}

}  // namespace bakeoff::trainer
