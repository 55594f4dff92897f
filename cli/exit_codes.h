// The exit codes of `bakeoff` (docs/cli.md, "Exit codes"), the one mapping from a
// failed Status to them, and the line a subcommand prints with it, shared by every
// subcommand.
#pragma once

#include <iostream>
#include <string_view>

#include "cli/terminal_escape.h"
#include "protocol/status.h"

namespace bakeoff::cli {

// Process exit codes of `bakeoff` (documented in docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // the operation ran and failed
inline constexpr int kExitUsage = 2;        // bad flags or invalid input (a sweep file)
inline constexpr int kExitUnavailable = 3;  // coordinator unreachable, database missing
inline constexpr int kExitIncomplete = 4;   // submit --wait: the sweep ended with trials
                                            // that did not succeed (oom, failed, ...)
inline constexpr int kExitInterrupted = 130;  // Ctrl-C (or SIGTERM): the shell's 128 + SIGINT

// The one mapping from a failed Status to the exit code (docs/cli.md, "Exit codes"):
// unreachable, timed out or unreadable -> kExitUnavailable; bad input -> kExitUsage;
// anything else -> kExitFailure. A command whose NotFound means "the results database
// is missing" says so itself (kExitUnavailable).
inline int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk: return kExitOk;
    case Status::Code::kUnavailable:
    case Status::Code::kTimeout:
    case Status::Code::kIoError: return kExitUnavailable;
    case Status::Code::kInvalidArgument: return kExitUsage;
    default: return kExitFailure;
  }
}

// Exit 0 for a sweep: it finished (no user cancelled it) and every trial succeeded, but
// those that adaptive repeats found not needed (the only trials a finished sweep cancels).
inline bool SweepSucceeded(bool finished, long long succeeded, long long cancelled, long long trial_count) {
  return finished && succeeded + cancelled == trial_count;
}

// The one way a failure line reaches the screen: "bakeoff COMMAND: MESSAGE" on stderr,
// the message's control characters escaped (it may quote a database's text, a SQL error,
// a path or a peer's answer).
inline void PrintFailure(std::string_view command, std::string_view message) {
  std::cerr << "bakeoff " << command << ": " << EscapeControlCharacters(message) << "\n";
}

// How a subcommand ends on a failed Status: "bakeoff COMMAND: MESSAGE" on stderr, and
// the exit code ExitCodeFor gives it.
inline int ReportFailure(std::string_view command, const Status& status) {
  PrintFailure(command, status.message());
  return ExitCodeFor(status);
}

}  // namespace bakeoff::cli
