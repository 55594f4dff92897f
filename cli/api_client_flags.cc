#include "cli/api_client_flags.h"

#include "cli/coordinator_client.h"

namespace bakeoff::cli {

void AddApiClientOptions(CLI::App* cmd, ApiClientFlags* flags) {
  flags->coordinator = DefaultCoordinatorUrl();
  cmd->add_option("--coordinator", flags->coordinator,
                  "coordinator URL (default $BAKEOFF_COORDINATOR or http://127.0.0.1:8080)");
  cmd->add_option("--token-file", flags->token_file, "file holding the API token (else $BAKEOFF_TOKEN)");
  cmd->add_option("--tls-ca", flags->tls_ca, kTlsCaHelp);
  cmd->add_option("--format", flags->format, "table|json")->capture_default_str()->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--output", flags->output, "write the result to this file instead of stdout");
}

Result<nlohmann::json> GetFromCoordinator(const ApiClientFlags& flags, const std::string& target) {
  auto client = ConnectCoordinator(flags.coordinator, flags.token_file, flags.tls_ca);
  if (!client.ok()) return client.status();
  return client->GetJson(target);
}

Result<nlohmann::json> PostToCoordinator(const ApiClientFlags& flags, const std::string& target) {
  auto client = ConnectCoordinator(flags.coordinator, flags.token_file, flags.tls_ca);
  if (!client.ok()) return client.status();
  return client->PostJson(target, "");
}

}  // namespace bakeoff::cli
