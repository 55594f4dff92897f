// `bakeoff calibrate FILE`: this machine's noise floor for a sweep's workload
// (docs/statistics.md, "Calibration"). Runs an A/A sweep (the sweep's baseline variant
// twice, differing only in its seed, --pairs interleaved pairs) on this machine as
// `bakeoff local` does, measures the sd of one pair's log tokens/s ratio, and stores it
// in the results database, where `bakeoff validate` and the report find it for every
// sweep with the same workload block.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/local_run.h"
#include "cli/sweep_file.h"
#include "experiments/sweep/calibration_sweep.h"
#include "experiments/sweep/executor_catalog.h"
#include "experiments/sweep/sweep_parser.h"
#include "metrics/report/report_service.h"
#include "metrics/report/statistics.h"
#include "metrics/store/results_store.h"

namespace bakeoff::cli {
namespace {

struct CalibrateFlags {
  std::string file;
  int pairs = spec::kDefaultCalibrationPairs;
  std::string format = "table";
  std::string output;
  LocalRunFlags run;
};

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

nlohmann::json OrNull(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

// The differences a calibration is quoted for, and the repeats each needs here.
nlohmann::json RepeatsFor(double sd) {
  nlohmann::json out = nlohmann::json::object();
  for (double d : {0.05, 0.10}) {
    out[std::to_string(static_cast<int>(d * 100 + 0.5)) + "%"] = metrics::RepeatsToResolve(sd, d);
  }
  return out;
}

std::string Text(const metrics::CalibrationRecord& c, const nlohmann::json& repeats, const std::string& db) {
  char line[512];
  std::string out = "calibration " + std::to_string(c.id) + " of " + c.calibrated_sweep + "'s workload on " +
                    (c.host.empty() ? "this host" : c.host) + ": " + std::to_string(c.pairs) + " A/A pairs on " +
                    std::to_string(c.workers) + " worker(s) (sweep " + std::to_string(c.sweep_id) + ")\n";
  snprintf(line, sizeof(line), "  sd of one pair's log tokens/s ratio: %.3f (a pair's ratio varies by about +-%.1f%%)\n",
           c.sd_log_ratio, 100 * std::expm1(c.sd_log_ratio));
  out += line;
  if (c.aa_ratio && c.aa_low && c.aa_high) {
    snprintf(line, sizeof(line), "  A/A ratio %.3fx [%.3f-%.3f]%s\n", *c.aa_ratio, *c.aa_low, *c.aa_high,
             (*c.aa_low <= 1 && 1 <= *c.aa_high) ? "" : " (excludes 1: a false verdict, or a drift this machine had)");
    out += line;
  }
  out += "  interleaved pairs to resolve a 5% difference here: " + std::to_string(repeats["5%"].get<int>()) +
         "; a 10% difference: " + std::to_string(repeats["10%"].get<int>()) + "\n";
  out += "  stored in " + db + ": `bakeoff validate` and `bakeoff report` use it for sweeps with this workload\n";
  return out;
}

int RunCalibrate(const CalibrateFlags& flags) {
  auto yaml = ReadSweepFile(flags.file);
  if (!yaml.ok()) return ReportFailure("calibrate", yaml.status());
  spec::ExecutorCatalog catalog;
  const std::string catalog_path =
      flags.run.executors.empty() ? spec::DefaultExecutorCatalogPath() : flags.run.executors;
  const bool checked = !catalog_path.empty() && catalog_path != "none";
  if (checked) {
    auto loaded = spec::LoadExecutorCatalog(catalog_path);
    if (!loaded.ok()) {
      std::cerr << "bakeoff calibrate: --executors: " << loaded.status().message() << "\n";
      return kExitUsage;
    }
    catalog = std::move(*loaded);
  }
  auto original = spec::ParseSweepText(*yaml, flags.file, {}, checked ? &catalog : nullptr);
  if (!original.ok()) {
    std::cerr << original.status().message() << "\n";
    return kExitUsage;
  }
  auto aa = spec::CalibrationSweepYaml(*yaml, flags.file, flags.pairs, checked ? &catalog : nullptr);
  if (!aa.ok()) {
    std::cerr << "bakeoff calibrate: " << aa.status().message() << "\n";
    return ExitCodeFor(aa.status());
  }
  std::cerr << "bakeoff calibrate: " << flags.pairs << " A/A pairs of " << original->name
            << "'s baseline variant (two variants that differ only in their seed)\n";
  LocalRunFlags run_flags = flags.run;
  run_flags.command = "calibrate";
  const LocalRun run = RunSweepLocally(*aa, "calibrate-" + original->name, run_flags);
  if (run.exit_code != kExitOk) return run.exit_code;
  if (run.interrupted || run.final_state.state != metrics::SweepState::kFinished) {
    std::cerr << "bakeoff calibrate: sweep " << run.sweep_id << " did not finish; nothing stored\n";
    return run.interrupted ? kExitInterrupted : kExitIncomplete;
  }

  auto report = metrics::BuildSweepReport(flags.run.db, std::to_string(run.sweep_id), {});
  if (!report.ok()) return ReportFailure("calibrate", report.status());
  const metrics::Comparison* aa_pair = nullptr;
  for (const auto& v : report->variants) {
    if (!v.is_baseline && v.comparison.status == metrics::Comparison::Status::kCompared) aa_pair = &v.comparison;
  }
  if (aa_pair == nullptr || !aa_pair->sd_log_ratio || aa_pair->pairs < 2) {
    std::cerr << "bakeoff calibrate: sweep " << run.sweep_id << " gave fewer than 2 A/A pairs ("
              << run.final_state.counts.succeeded << " of " << run.final_state.trial_count
              << " trials succeeded; `bakeoff report " << run.sweep_id << "` says why); nothing stored\n";
    return kExitIncomplete;
  }
  metrics::CalibrationRecord record;
  record.workload_key = spec::CalibrationKey(*original);
  record.calibrated_sweep = original->name;
  record.sweep_id = run.sweep_id;
  record.host = HostName();
  record.workers = flags.run.workers;
  record.pairs = aa_pair->pairs;
  record.sd_log_ratio = *aa_pair->sd_log_ratio;
  record.aa_ratio = aa_pair->speedup.value;
  record.aa_low = aa_pair->speedup.low;
  record.aa_high = aa_pair->speedup.high;
  {
    metrics::StoreOptions options;
    options.path = flags.run.db;
    auto store = metrics::ResultsStore::Open(options);
    if (!store.ok()) return ReportFailure("calibrate", store.status());
    if (Status s = (*store)->RecordCalibration(record); !s.ok()) return ReportFailure("calibrate", s);
  }
  const nlohmann::json repeats = RepeatsFor(record.sd_log_ratio);
  std::string text;
  if (flags.format == "json") {
    nlohmann::json j = {{"id", record.id},
                        {"calibrated_sweep", record.calibrated_sweep},
                        {"sweep_id", record.sweep_id},
                        {"host", record.host},
                        {"workers", record.workers},
                        {"pairs", record.pairs},
                        {"sd_log_ratio", record.sd_log_ratio},
                        {"aa_ratio", {{"value", *record.aa_ratio}, {"low", OrNull(record.aa_low)}, {"high", OrNull(record.aa_high)}}},
                        {"repeats_to_resolve", repeats},
                        {"created_at", record.created_at}};
    text = j.dump(2) + "\n";
  } else {
    text = Text(record, repeats, flags.run.db);
  }
  return WriteCommandOutput("calibrate", flags.output, text);
}

void SetupCalibrate(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<CalibrateFlags>();
  auto* cmd = root.add_subcommand(
      "calibrate", "Measure this machine's run-to-run noise for a sweep's workload (an A/A run) and store it");
  cmd->add_option("file", flags->file, "sweep YAML file whose workload to calibrate")->required();
  cmd->add_option("--pairs", flags->pairs, "A/A pairs to run")
      ->check(CLI::Range(spec::kMinCalibrationPairs, spec::kMaxCalibrationPairs))
      ->capture_default_str();
  cmd->add_option("--format", flags->format, "table or json")->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->add_option("--output", flags->output, "write the result to this file instead of stdout");
  AddLocalRunFlags(cmd, &flags->run);
  cmd->callback([flags, exit_code] { *exit_code = RunCalibrate(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("calibrate", SetupCalibrate);

}  // namespace bakeoff::cli
