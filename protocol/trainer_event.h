// ParseTrainerEvent: one line of a trainer's stdout (docs/trainer.md) as the event the
// worker forwards. A line is an event when it is a JSON object whose "event" is a string;
// the fields of the documented kinds are checked for type, so a malformed or hostile
// trainer cannot put a string where the store and the report expect a number:
//   step:    "step" an integer >= 0; "step_s" a finite number >= 0; "tokens",
//            "peak_mem_bytes", "rss_bytes", "comm_bytes" integers >= 0 when present;
//            "loss", "lr", "grad_norm", "comm_s" numbers when present;
//   summary: every documented figure a number (or null) when present;
//   error:   "kind" a string, "message" a string when present.
// Other kinds ("ready", and those of other executors) pass as they are. Anything else is
// kInvalidArgument with the reason; the worker counts and drops such lines (a trainer
// may also print logs to stdout). Lines over `max_line_bytes` are refused unparsed.
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::protocol {

inline constexpr std::size_t kMaxTrainerLineBytes = 1u << 20;

struct TrainerEvent {
  std::string kind;     // the "event" field
  nlohmann::json body;  // the whole object, "event" included
};

Result<TrainerEvent> ParseTrainerEvent(std::string_view line, std::size_t max_line_bytes = kMaxTrainerLineBytes);

}  // namespace bakeoff::protocol
