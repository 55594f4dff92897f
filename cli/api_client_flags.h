// The flags every command that reads a coordinator's API takes (bakeoff status,
// workers, cancel): where the coordinator is, how to authenticate, and how to print.
// One definition, so their names, help and checks cannot drift (docs/cli.md).
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::cli {

struct ApiClientFlags {
  std::string coordinator;  // set by AddApiClientOptions' default unless a command clears it
  std::string token_file;
  std::string tls_ca;
  std::string format = "table";  // table | json
  std::string output;            // empty or "-": stdout
};

// Adds --coordinator (default $BAKEOFF_COORDINATOR or http://127.0.0.1:8080, set into
// flags->coordinator now), --token-file, --tls-ca, --format table|json and --output.
void AddApiClientOptions(CLI::App* cmd, ApiClientFlags* flags);

// The one request of a command that makes one (bakeoff workers, cancel): connects to
// the coordinator the flags name (URL, token, CA) and GETs `target`, or POSTs an empty
// body to it. Connection failures and non-2xx answers are the Status.
Result<nlohmann::json> GetFromCoordinator(const ApiClientFlags& flags, const std::string& target);
Result<nlohmann::json> PostToCoordinator(const ApiClientFlags& flags, const std::string& target);

}  // namespace bakeoff::cli
