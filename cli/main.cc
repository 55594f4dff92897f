// `bakeoff`: the one CLI binary (no LibTorch). Subcommands register themselves from
// cli/*_command.cc (see command_registry.h); main only parses and returns their code,
// answers `bakeoff help [COMMAND]`, and names the nearest command or flag after a typo.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command_registry.h"
#include "cli/did_you_mean.h"
#include "cli/terminal_escape.h"
#include "protocol/log.h"
#include "protocol/version.h"

namespace {

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (const auto& [name, setup] : bakeoff::cli::Commands()) names.push_back(name);
  return names;
}

std::vector<std::string> LongFlags(const CLI::App& command) {
  std::vector<std::string> flags;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) flags.push_back("--" + name);
  }
  return flags;
}

using bakeoff::cli::EscapeControlCharacters;

// Every message below quotes what was typed: escaped (cli/terminal_escape.h), so that a
// control sequence in an argument is shown, never run by the terminal.
int UnknownCommand(const std::string& typed) {
  std::cerr << "bakeoff: '" << EscapeControlCharacters(typed) << "' is not a bakeoff command."
            << bakeoff::cli::DidYouMean(bakeoff::cli::Nearest(typed, CommandNames()))
            << " Run 'bakeoff help' for the list.\n";
  return bakeoff::cli::kExitUsage;
}

// --log-format text|json (any command; $BAKEOFF_LOG_FORMAT when not given): set before
// parsing, since a command runs inside the parse. False after printing why the value is
// refused.
bool SetLogFormat(const std::vector<std::string>& args) {
  std::string value;
  if (const char* env = std::getenv("BAKEOFF_LOG_FORMAT"); env != nullptr && *env != '\0') value = env;
  bool given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "--log-format" && i + 1 < args.size()) {
      value = args[++i];
      given = true;
    } else if (args[i].rfind("--log-format=", 0) == 0) {
      value = args[i].substr(std::string("--log-format=").size());
      given = true;
    }
  }
  if (value.empty()) return true;
  auto format = bakeoff::logging::ParseFormat(value);
  if (!format) {
    std::cerr << "bakeoff: " << (given ? "--log-format" : "BAKEOFF_LOG_FORMAT") << ": expected text or json, got '"
              << EscapeControlCharacters(value) << "'\n";
    return false;
  }
  bakeoff::logging::SetFormat(*format);
  return true;
}

// CLI11's own failure message (FailureMessage::simple), its text escaped.
std::string EscapedFailure(const CLI::App* app, const CLI::Error& e) {
  std::string message = EscapeControlCharacters(e.what()) + "\n";
  if (app->get_help_ptr() != nullptr) message += "Run with " + app->get_help_ptr()->get_name() + " for more information.\n";
  return message;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Bakeoff: comparative training experiments on a cluster", "bakeoff"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("bakeoff ") + bakeoff::kBakeoffVersion + " (" +
                                        bakeoff::kBakeoffGitCommit + ")");
  app.footer("Run 'bakeoff help COMMAND' (or 'bakeoff COMMAND --help') for a command's flags.");
  app.failure_message(EscapedFailure);
  int exit_code = bakeoff::cli::kExitOk;
  for (auto& [name, setup] : bakeoff::cli::Commands()) setup(app, &exit_code);
  // Log lines' form, for every command that logs (local, coordinator, worker): accepted
  // after the command's name too (fallthrough), applied before parsing (SetLogFormat).
  std::string log_format = "text";
  app.add_option("--log-format", log_format, "log lines as text (default) or json, one object per line")
      ->check(CLI::IsMember({"text", "json"}));
  for (CLI::App* command : app.get_subcommands({})) command->fallthrough();
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!SetLogFormat(args)) return bakeoff::cli::kExitUsage;
  // `bakeoff help [COMMAND]`, as git, cargo and kubectl answer it.
  if (!args.empty() && args[0] == "help") {
    if (args.size() == 1) {
      std::cout << app.help();
      return bakeoff::cli::kExitOk;
    }
    if (!bakeoff::cli::Commands().count(args[1])) return UnknownCommand(args[1]);
    // Exactly what `bakeoff COMMAND --help` prints (its usage line names the program).
    try {
      std::vector<std::string> reversed{"--help", args[1]};  // CLI11 takes them last first
      app.parse(reversed);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
    return bakeoff::cli::kExitOk;
  }
  // A first word that is no command (CLI11 would only say it "was not expected").
  if (!args.empty() && !args[0].empty() && args[0][0] != '-' && !bakeoff::cli::Commands().count(args[0])) {
    return UnknownCommand(args[0]);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    // A mistyped flag: the nearest of the command's own flags.
    std::cerr << EscapeControlCharacters(e.what()) << "\n";
    const std::vector<CLI::App*> parsed = app.get_subcommands();
    if (!parsed.empty()) {
      const std::vector<std::string> flags = LongFlags(*parsed.front());
      for (const std::string& extra : app.remaining(true)) {
        if (extra.rfind("--", 0) != 0) continue;
        const std::string flag = extra.substr(0, extra.find('='));
        const std::string hint = bakeoff::cli::DidYouMean(bakeoff::cli::Nearest(flag, flags));
        if (!hint.empty()) std::cerr << EscapeControlCharacters(flag) << ":" << hint << "\n";
      }
      std::cerr << "Run 'bakeoff help " << parsed.front()->get_name() << "' for its flags.\n";
    }
    return bakeoff::cli::kExitUsage;
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : bakeoff::cli::kExitUsage;
  }
  return exit_code;
}
