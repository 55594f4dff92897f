// Shared-secret tokens of the HTTP API and the worker protocol: where they come from
// (a file or the BAKEOFF_TOKEN environment variable, never the command line, where
// `ps` would show them) and how they are compared (constant time, so response timing
// does not leak how much of a guess was right). Tokens are never logged.
// Thread-safety: pure functions (LoadToken reads the environment and one file).
#pragma once

#include <string>
#include <string_view>

#include "protocol/status.h"

namespace bakeoff::protocol {

inline constexpr const char* kTokenEnvVar = "BAKEOFF_TOKEN";

// The token from `token_file` when given (surrounding whitespace trimmed), else from
// BAKEOFF_TOKEN, else "" (no token: only valid for a coordinator that requires none).
// Fails when the file cannot be read or is empty.
Result<std::string> LoadToken(const std::string& token_file);

// True when both are equal; the time taken depends only on the lengths.
bool TokensEqual(std::string_view expected, std::string_view given);

}  // namespace bakeoff::protocol
