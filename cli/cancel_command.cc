// `bakeoff cancel SWEEP`: cancels a sweep's queued trials and stops its running ones.
#include "cli/api_client_flags.h"
#include "cli/command_registry.h"
#include "cli/coordinator_client.h"

namespace bakeoff::cli {
namespace {

struct CancelFlags {
  std::string sweep;
  ApiClientFlags api;
};

int RunCancel(const CancelFlags& flags) {
  auto result = PostToCoordinator(flags.api, "/api/v1/sweeps/" + UrlEncode(flags.sweep) + "/cancel");
  if (!result.ok()) return ReportFailure("cancel", result.status());
  std::string text = flags.api.format == "json"
                         ? result->dump(2)
                         : "sweep " + std::to_string(result->value("id", 0)) + " (" + result->value("name", "") +
                               "): " + result->value("state", "") + "; " +
                               std::to_string(result->value("cancelled_trials", 0)) + " queued trial(s) cancelled, " +
                               std::to_string(result->value("stopping_trials", 0)) + " running trial(s) stopping";
  return WriteCommandOutput("cancel", flags.api.output, text);
}

void SetupCancel(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<CancelFlags>();
  auto* cmd = root.add_subcommand("cancel", "Cancel a sweep (by id or name)");
  cmd->add_option("sweep", flags->sweep, "sweep id or name")->required();
  AddApiClientOptions(cmd, &flags->api);
  cmd->callback([flags, exit_code]() { *exit_code = RunCancel(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("cancel", SetupCancel);

}  // namespace bakeoff::cli
