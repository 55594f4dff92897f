// Shared-secret tokens of the HTTP API and the worker protocol: where they come from
// (a file or the BAKEOFF_TOKEN environment variable, never the command line, where
// `ps` would show them), how they are compared (constant time, so response timing
// does not leak how much of a guess was right) and how new ones are made. Tokens are
// never logged.
//
// A token file holds one token per line; blank lines and lines starting with '#' are
// ignored. A client (CLI, worker) presents the first; the coordinator accepts every
// one, so that a token can be rotated without a moment where nobody gets in
// (docs/security.md, "Rotating a token").
// Thread-safety: pure functions (LoadToken* read the environment and one file;
// RandomToken reads the system's random source).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/status.h"

namespace bakeoff::protocol {

inline constexpr const char* kTokenEnvVar = "BAKEOFF_TOKEN";

// The first token of `token_file` when given, else BAKEOFF_TOKEN (trimmed), else ""
// (no token: only valid for a coordinator that requires none). Fails when the file
// cannot be read or holds no token.
Result<std::string> LoadToken(const std::string& token_file);

// Every token of `token_file` (REQUIRES: not empty), in file order. Fails when the file
// cannot be read or holds no token.
Result<std::vector<std::string>> LoadTokenList(const std::string& token_file);

// True when both are equal; the time taken depends only on the lengths.
bool TokensEqual(std::string_view expected, std::string_view given);

// True when `given` equals one of `accepted`; every entry is compared, whichever matches.
bool TokenInList(const std::vector<std::string>& accepted, std::string_view given);

// A new secret: `bytes` random bytes from the system's random source, in hex.
std::string RandomToken(std::size_t bytes = 16);

// SHA-256 of `text`, 64 lowercase hex digits: what is stored of a secret that must
// survive a restart (a worker's secret) without being readable from the database.
std::string Sha256Hex(std::string_view text);

}  // namespace bakeoff::protocol
