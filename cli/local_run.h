// Runs one sweep on this machine: a coordinator and N workers in this process (one io
// thread, loopback, free ports), with a progress line on stderr, to the sweep's end.
// Shared by `bakeoff local` (which then prints the report) and `bakeoff calibrate`
// (which then computes and stores the noise it measured).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/exit_codes.h"
#include "metrics/store/store_records.h"

namespace bakeoff::cli {

struct LocalRun;

struct LocalRunFlags {
  std::string command = "local";  // for messages: "bakeoff <command>: ..."
  int workers = 2;
  int slots = 1;
  // Whether --workers / --slots were given: a lockstep sweep otherwise gets slots as
  // wide as its widest trial (docs/lockstep.md), so that each group fits one worker.
  bool workers_given = false;
  bool slots_given = false;
  std::string db = "results.db";
  std::string trainer;
  std::string work_dir;
  std::string data_root;
  std::string executors;
  std::string cache_dir;
  bool share_cores = false;
  bool verbose = false;
  std::string log_file;  // "" = the --db path with .log
  // After the sweep ends, the page stays up this long when someone opened it, so that
  // it shows the final state and the report (Ctrl-C ends it sooner); 0: no wait.
  int linger_s = 20;
  std::string argv0;  // set by AddLocalRunFlags when the command is parsed
  // Called once when the sweep has ended, before the page's linger (e.g. to print the
  // report at once); on the run's io thread.
  std::function<void(const LocalRun&)> on_sweep_end;
};

struct LocalRun {
  // kExitOk once the sweep ran to an end (finished or cancelled), else the exit code of
  // what stopped it first (already explained on stderr).
  int exit_code = 0;
  std::int64_t sweep_id = 0;
  metrics::SweepRecord final_state;
  bool interrupted = false;  // Ctrl-C or SIGTERM cancelled it
};

// Runs `yaml` (named `source` in messages). Log lines go to flags.log_file (the screen
// too with flags.verbose) until it returns. A trial that none of the workers could ever
// place refuses the sweep at once, with the reason.
LocalRun RunSweepLocally(const std::string& yaml, const std::string& source, const LocalRunFlags& flags);

// The --workers, --slots, --db, --trainer, ... flags of `local` and `calibrate`.
void AddLocalRunFlags(CLI::App* cmd, LocalRunFlags* flags);

}  // namespace bakeoff::cli
