#include "experiments/sweep/duration.h"

#include <cctype>
#include <cstdint>
#include <map>
#include <string>

namespace bakeoff::spec {
namespace {

// The units a duration may use, in milliseconds.
const std::map<std::string, int64_t> kMsPerUnit = {
    {"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 3600 * 1000}, {"d", 24 * 3600 * 1000}};

}  // namespace

Result<std::chrono::milliseconds> ParseDurationMs(const std::string& text) {
  auto invalid = [&text] {
    return Status::InvalidArgument("'" + text +
                                   "' is not a duration; write seconds (90, 90s), minutes (10m), "
                                   "hours (2h) or a sum (1h30m)");
  };
  constexpr int64_t kMaxMs = 30LL * 24 * 3600 * 1000;
  if (text.empty()) return invalid();
  int64_t total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return invalid();
    int64_t number = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      number = number * 10 + (text[i] - '0');
      if (number > kMaxMs) return invalid();
      ++i;
    }
    std::string unit;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) unit += text[i++];
    if (unit.empty() && (i != text.size() || total_ms != 0)) return invalid();  // bare number: seconds, alone
    const auto ms_per_unit = kMsPerUnit.find(unit.empty() ? "s" : unit);
    if (ms_per_unit == kMsPerUnit.end()) return invalid();
    total_ms += number * ms_per_unit->second;
    if (total_ms > kMaxMs) {
      return Status::InvalidArgument("duration '" + text + "' is over the 30-day maximum");
    }
  }
  if (total_ms <= 0) return Status::InvalidArgument("duration '" + text + "' must be positive");
  return std::chrono::milliseconds(total_ms);
}

Result<std::chrono::seconds> ParseDuration(const std::string& text) {
  auto ms = ParseDurationMs(text);
  if (!ms.ok()) return ms.status();
  return std::chrono::seconds((ms->count() + 999) / 1000);
}

std::string FormatDuration(std::chrono::seconds duration) {
  int64_t s = duration.count();
  if (s <= 0) return "0s";
  std::string out;
  if (s >= 3600) {
    out += std::to_string(s / 3600) + "h";
    s %= 3600;
  }
  if (s >= 60) {
    out += std::to_string(s / 60) + "m";
    s %= 60;
  }
  if (s > 0) out += std::to_string(s) + "s";
  return out;
}

}  // namespace bakeoff::spec
