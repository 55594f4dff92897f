// Durations as users write them in sweep files and flags: "90" or "90s", "10m", "2h",
// "1h30m", "1500ms" (rounded up to whole seconds). Thread-safety: reentrant.
#pragma once

#include <chrono>
#include <string>

#include "protocol/status.h"

namespace bakeoff::spec {

// InvalidArgument (saying what a duration looks like) for anything else, for negative
// or zero durations, and above 30 days.
Result<std::chrono::seconds> ParseDuration(const std::string& text);
// The same, not rounded: for flags below a second ("5ms").
Result<std::chrono::milliseconds> ParseDurationMs(const std::string& text);

// The inverse for messages and JSON: "1h30m", "10m", "45s".
std::string FormatDuration(std::chrono::seconds duration);

}  // namespace bakeoff::spec
