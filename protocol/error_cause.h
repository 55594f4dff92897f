// The cause of an error message, short enough for a trial's reason: LibTorch's c10::Error
// text is the message followed by "Exception raised from ..." and a dozen "frame #N"
// lines; a Python trainer's is a traceback whose last line names the exception. The
// reason keeps the cause; the full text stays in the rank's log (docs/trainer.md,
// "Errors"). Header-only and dependency-free (the trainer-only build uses it).
// Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bakeoff::protocol {

// Longest cause kept, in bytes; a longer one ends in "...".
inline constexpr std::size_t kMaxErrorCauseBytes = 500;

// The cause of `message`: its first non-empty line (trimmed), or for a Python traceback
// ("Traceback (most recent call last):" first) its last non-empty line; a C++ backtrace
// that shares the first line ("... Exception raised from f at x.cpp:1") is cut off.
// Truncated to kMaxErrorCauseBytes.
inline std::string ErrorCause(std::string_view message) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string_view::npos) end = message.size();
    std::string_view line = message.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  if (lines.empty()) return "";
  std::string_view cause = lines.front();
  if (cause.rfind("Traceback (most recent call last)", 0) == 0) cause = lines.back();
  const std::size_t trace = cause.find("Exception raised from ");
  if (trace != std::string_view::npos) {
    cause = cause.substr(0, trace);
    while (!cause.empty() && cause.back() == ' ') cause.remove_suffix(1);
  }
  std::string out(cause);
  if (out.size() > kMaxErrorCauseBytes) {
    std::size_t cut = kMaxErrorCauseBytes - 3;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
    out = out.substr(0, cut) + "...";
  }
  return out;
}

}  // namespace bakeoff::protocol
