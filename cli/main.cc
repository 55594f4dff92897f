// `bakeoff`: the one CLI binary (no LibTorch). Subcommands register themselves from
// cli/*_command.cc (see command_registry.h); main only parses and returns their code.
#include <CLI/CLI.hpp>

#include "cli/command_registry.h"
#include "protocol/version.h"

int main(int argc, char** argv) {
  CLI::App app{"Bakeoff: comparative training experiments on a cluster"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("bakeoff ") + bakeoff::kBakeoffVersion + " (" +
                                        bakeoff::kBakeoffGitCommit + ")");
  int exit_code = bakeoff::cli::kExitOk;
  for (auto& [name, setup] : bakeoff::cli::Commands()) setup(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : bakeoff::cli::kExitUsage;
  }
  return exit_code;
}
