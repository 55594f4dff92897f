// The sweep file a command hands to a coordinator (bakeoff submit, local), read whole
// as text: the coordinator parses and validates it. Thread-safety: a free function.
#pragma once

#include <string>

#include "protocol/status.h"

namespace bakeoff::cli {

// The file's bytes; kInvalidArgument naming the file when it cannot be read (exit
// code 2, like any bad input).
Result<std::string> ReadSweepFile(const std::string& path);

}  // namespace bakeoff::cli
