// The `bakeoff coordinator --slurm-*` flags (docs/slurm.md, docs/cli.md): added to the
// coordinator command by AddSlurmFlags and turned into CoordinatorConfig::slurm by
// FinishSlurmFlags once the command line is parsed. Thread-safety: CLI parsing only.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "coordinator/coordinator_config.h"
#include "protocol/status.h"

namespace bakeoff::cli {

struct SlurmFlags {
  coordinator::SlurmConfig config;
  std::string idle_grace = "5m";
  std::string worker_start_timeout = "10m";
  std::string poll_interval = "10s";
  std::string command_timeout = "30s";
  std::string worker_args;  // split on whitespace
};

void AddSlurmFlags(CLI::App* cmd, SlurmFlags* flags);

// Fills `config.slurm` (defaults: the worker token file, this binary, a `slurm` directory
// next to the database) and validates it. InvalidArgument naming the flag.
Status FinishSlurmFlags(SlurmFlags& flags, const std::string& worker_token_file, coordinator::CoordinatorConfig& config);

}  // namespace bakeoff::cli
