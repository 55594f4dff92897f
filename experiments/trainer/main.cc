// bakeoff-trainer: one rank of a LoRA training trial. Configuration from --config (JSON
// file or - for stdin), then torchrun's environment, then --field value flags; events on
// stdout, logs on stderr, exit codes in event_writer.h (docs/trainer.md).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "experiments/trainer/event_writer.h"
#include "experiments/trainer/process_stats.h"
#include "experiments/trainer/rendezvous_store.h"
#include "experiments/trainer/trainer.h"
#include "experiments/trainer/trainer_config.h"

namespace {

using bakeoff::Status;
using namespace bakeoff::trainer;

constexpr const char* kUsage =
    "usage: bakeoff-trainer [--config FILE|-] [--FIELD VALUE ...]\n"
    "  FIELD is any configuration field with dashes or underscores (--micro-batch 4),\n"
    "  including --rank, --world-size, --local-rank and --store HOST:PORT.\n"
    "  Events go to stdout, one JSON object a line; see docs/trainer.md.\n";

Status ReadConfigFile(const std::string& path, TrainerConfig* config) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) return Status::NotFound("--config: cannot open \"" + path + "\"");
    text << in.rdbuf();
  }
  auto json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return Status::InvalidArgument("--config " + path + ": not valid JSON");
  }
  return ApplyConfigJson(json, config);
}

// torchrun's variables, so the trainer also runs under a standard launcher, and the
// worker's own.
Status ApplyEnvironment(TrainerConfig* config) {
  auto env = [](const char* name) -> const char* { return std::getenv(name); };
  if (env("RANK")) BAKEOFF_RETURN_IF_ERROR(ApplyConfigFlag("rank", env("RANK"), config));
  if (env("WORLD_SIZE")) BAKEOFF_RETURN_IF_ERROR(ApplyConfigFlag("world_size", env("WORLD_SIZE"), config));
  if (env("LOCAL_RANK")) BAKEOFF_RETURN_IF_ERROR(ApplyConfigFlag("local_rank", env("LOCAL_RANK"), config));
  if (env("LOCAL_WORLD_SIZE")) {
    BAKEOFF_RETURN_IF_ERROR(ApplyConfigFlag("local_world_size", env("LOCAL_WORLD_SIZE"), config));
  }
  if (env("MASTER_ADDR") && env("MASTER_PORT")) {
    config->store = std::string(env("MASTER_ADDR")) + ":" + env("MASTER_PORT");
  }
  // torchrun's default launch: its agent already hosts the store at MASTER_PORT.
  config->agent_store = AgentHostsStore(env("TORCHELASTIC_USE_AGENT_STORE"));
  if (env("TORCHELASTIC_RESTART_COUNT")) config->restart_count = std::atoll(env("TORCHELASTIC_RESTART_COUNT"));
  // The worker's: where this rank binds its collectives (docs/distributed.md).
  if (env("BAKEOFF_RANK_ADDR")) config->rank_address = env("BAKEOFF_RANK_ADDR");
  if (env("BAKEOFF_RANK_IFACE")) config->rank_interface = env("BAKEOFF_RANK_IFACE");
  return Status::Ok();
}

Status ParseArguments(int argc, char** argv, TrainerConfig* config, bool* help) {
  std::vector<std::pair<std::string, std::string>> flags;
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return Status::Ok();
    }
    if (arg.rfind("--", 0) != 0) return Status::InvalidArgument("unexpected argument \"" + arg + "\"");
    std::string name = arg.substr(2);
    std::string value;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Status::InvalidArgument("--" + name + ": missing value");
    }
    for (auto& ch : name) ch = ch == '-' ? '_' : ch;
    if (name == "config") {
      config_path = value;
    } else {
      flags.emplace_back(name, value);
    }
  }
  if (!config_path.empty()) BAKEOFF_RETURN_IF_ERROR(ReadConfigFile(config_path, config));
  BAKEOFF_RETURN_IF_ERROR(ApplyEnvironment(config));
  for (const auto& [name, value] : flags) {
    BAKEOFF_RETURN_IF_ERROR(ApplyConfigFlag(name, value, config).WithContext("--" + name));
  }
  return FinalizeConfig(config);
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  EventWriter events(std::cout, &std::cerr);
  TrainerConfig config;
  bool help = false;
  Status parsed = ParseArguments(argc, argv, &config, &help);
  if (help) {
    std::cerr << kUsage;
    return kExitSucceeded;
  }
  if (!parsed.ok()) {
    std::cerr << "bakeoff-trainer: " << parsed.message() << "\n" << kUsage;
    events.Error("failed", "invalid configuration: " + parsed.message());
    return kExitInvalidConfig;
  }
  Status capped = CapHostMemory(config.max_host_memory);
  if (!capped.ok()) {
    events.Error("failed", capped.message());
    return kExitInvalidConfig;
  }
  Trainer trainer(config, &events);
  return trainer.Run();
}
