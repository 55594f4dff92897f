// Limits on JSON a peer sends, checked before the text is parsed: nesting depth bounds
// the recursion every later copy, comparison and serialisation of the value does (an
// events frame nested 2,000,000 deep once crashed the coordinator in a recursive copy).
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "protocol/status.h"

namespace bakeoff::protocol {

// Deepest nesting of arrays and objects accepted in a frame, an event line or an API
// body (docs/protocol.md, "Limits"). The deepest message Bakeoff itself sends nests 6.
inline constexpr int kMaxJsonDepth = 64;

// Levels the events frame adds around a trainer's event line ({"events": [{"event":
// LINE}]}), and so the deepest line a worker accepts: a deeper one would make a frame
// the coordinator refuses, resent after every reconnect and never acknowledged.
inline constexpr int kEventsFrameEnvelopeDepth = 3;
inline constexpr int kMaxTrainerLineDepth = kMaxJsonDepth - kEventsFrameEnvelopeDepth;

// InvalidArgument ("JSON nested deeper than N levels at byte B") when `text` nests arrays
// and objects deeper than `max_depth`; brackets inside strings do not count. Linear in
// the text, no allocation; it does not otherwise validate the JSON.
Status CheckJsonDepth(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace bakeoff::protocol
