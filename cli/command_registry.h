// The registry of `bakeoff` subcommands. Each subcommand lives in its own
// cli/<name>_command.cc and registers itself with BAKEOFF_REGISTER_COMMAND, so adding
// a command touches no shared file. Registration runs during static initialisation
// (single-threaded); Commands() is read once by main.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>

#include "cli/exit_codes.h"

namespace bakeoff::cli {

// Adds the subcommand to `root`. The subcommand's callback stores its exit code in
// *exit_code (which outlives the parse).
using CommandSetup = std::function<void(CLI::App& root, int* exit_code)>;

inline std::map<std::string, CommandSetup>& Commands() {
  static std::map<std::string, CommandSetup> commands;
  return commands;
}

inline bool RegisterCommand(const std::string& name, CommandSetup setup) {
  Commands().emplace(name, std::move(setup));
  return true;
}

}  // namespace bakeoff::cli

#define BAKEOFF_CONCAT_INNER(a, b) a##b
#define BAKEOFF_CONCAT(a, b) BAKEOFF_CONCAT_INNER(a, b)
// Use once per *_command.cc at namespace scope: BAKEOFF_REGISTER_COMMAND("validate", SetupValidate);
#define BAKEOFF_REGISTER_COMMAND(name, setup) \
  static const bool BAKEOFF_CONCAT(bakeoff_command_registered_, __COUNTER__) = \
      ::bakeoff::cli::RegisterCommand(name, setup)
