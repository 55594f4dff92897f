// `bakeoff calibrate FILE`: this machine's noise floor for a sweep's workload
// (docs/statistics.md, "Calibration"). Runs an A/A sweep (the sweep's baseline variant
// twice, differing only in its seed, --pairs pairs) on this machine as `bakeoff local`
// does, in each order asked (interleaved, and lockstep when the workload takes turns),
// measures the sd of one pair's log tokens/s ratio, stores it in the results database,
// where `bakeoff validate` and the report find it for every sweep with the same
// workload block, and says which order needs fewer pairs here.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

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
  std::string order = "both";  // both | interleaved | lockstep
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
  std::string out = "calibration " + std::to_string(c.id) + " (" + c.order + " pairs) of " + c.calibrated_sweep +
                    "'s workload on " +
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
  out += "  " + c.order + " pairs to resolve a 5% difference here: " + std::to_string(repeats["5%"].get<int>()) +
         "; a 10% difference: " + std::to_string(repeats["10%"].get<int>()) + "\n";
  out += "  stored in " + db + ": `bakeoff validate` and `bakeoff report` use it for sweeps with this workload\n";
  return out;
}

// The catalog a sweep is checked against: --executors, else the shipped one ("none":
// none). nullptr in `checked` when none is used.
Status LoadCatalog(const LocalRunFlags& run, spec::ExecutorCatalog& catalog, bool& checked) {
  const std::string path = run.executors.empty() ? spec::DefaultExecutorCatalogPath() : run.executors;
  checked = !path.empty() && path != "none";
  if (!checked) return Status::Ok();
  auto loaded = spec::LoadExecutorCatalog(path);
  if (!loaded.ok()) return Status::InvalidArgument("--executors: " + loaded.status().message());
  catalog = std::move(*loaded);
  return Status::Ok();
}

// One A/A run in `order`, stored: its record, or the exit code that stopped it (already
// explained on stderr).
struct Calibrated {
  int exit_code = kExitOk;
  std::optional<metrics::CalibrationRecord> record;
};

Calibrated CalibrateOneOrder(const CalibrateFlags& flags, const std::string& yaml, const spec::SweepSpec& original,
                             const spec::ExecutorCatalog* catalog, spec::Order order) {
  const char* order_name = spec::OrderName(order);
  auto aa = spec::CalibrationSweepYaml(yaml, flags.file, flags.pairs, catalog, order);
  if (!aa.ok()) {
    std::cerr << "bakeoff calibrate: " << order_name << ": " << EscapeControlCharacters(aa.status().message()) << "\n";
    return {ExitCodeFor(aa.status()), std::nullopt};
  }
  std::cerr << "bakeoff calibrate: " << flags.pairs << " A/A " << order_name << " pairs of " << original.name
            << "'s baseline variant (two variants that differ only in their seed)\n";
  LocalRunFlags run_flags = flags.run;
  run_flags.command = "calibrate";
  const LocalRun run = RunSweepLocally(*aa, "calibrate-" + original.name, run_flags);
  if (run.exit_code != kExitOk) return {run.exit_code, std::nullopt};
  if (run.interrupted || run.final_state.state != metrics::SweepState::kFinished) {
    std::cerr << "bakeoff calibrate: sweep " << run.sweep_id << " did not finish; nothing stored\n";
    return {run.interrupted ? kExitInterrupted : kExitIncomplete, std::nullopt};
  }
  auto report = metrics::BuildSweepReport(flags.run.db, std::to_string(run.sweep_id), {});
  if (!report.ok()) return {ReportFailure("calibrate", report.status()), std::nullopt};
  const metrics::Comparison* aa_pair = nullptr;
  for (const auto& v : report->variants) {
    if (!v.is_baseline && v.comparison.status == metrics::Comparison::Status::kCompared) aa_pair = &v.comparison;
  }
  if (aa_pair == nullptr || !aa_pair->sd_log_ratio || aa_pair->pairs < 2) {
    std::cerr << "bakeoff calibrate: sweep " << run.sweep_id << " gave fewer than 2 A/A pairs ("
              << run.final_state.counts.succeeded << " of " << run.final_state.trial_count
              << " trials succeeded; `bakeoff report " << run.sweep_id << "` says why); nothing stored\n";
    return {kExitIncomplete, std::nullopt};
  }
  metrics::CalibrationRecord record;
  record.workload_key = spec::CalibrationKey(original);
  record.calibrated_sweep = original.name;
  record.sweep_id = run.sweep_id;
  record.host = HostName();
  record.workers = flags.run.workers;
  record.pairs = aa_pair->pairs;
  record.sd_log_ratio = *aa_pair->sd_log_ratio;
  record.aa_ratio = aa_pair->speedup.value;
  record.aa_low = aa_pair->speedup.low;
  record.aa_high = aa_pair->speedup.high;
  record.order = order_name;
  metrics::StoreOptions options;
  options.path = flags.run.db;
  auto store = metrics::ResultsStore::Open(options);
  if (!store.ok()) return {ReportFailure("calibrate", store.status()), std::nullopt};
  if (Status s = (*store)->RecordCalibration(record); !s.ok()) return {ReportFailure("calibrate", s), std::nullopt};
  return {kExitOk, record};
}

nlohmann::json RecordJson(const metrics::CalibrationRecord& record) {
  return {{"id", record.id},
          {"order", record.order},
          {"calibrated_sweep", record.calibrated_sweep},
          {"sweep_id", record.sweep_id},
          {"host", record.host},
          {"workers", record.workers},
          {"pairs", record.pairs},
          {"sd_log_ratio", record.sd_log_ratio},
          {"aa_ratio", {{"value", OrNull(record.aa_ratio)}, {"low", OrNull(record.aa_low)}, {"high", OrNull(record.aa_high)}}},
          {"repeats_to_resolve", RepeatsFor(record.sd_log_ratio)},
          {"created_at", record.created_at}};
}

// Which order needs fewer pairs for a 5% difference here ("" unless both were measured).
std::string FewerPairs(const std::vector<metrics::CalibrationRecord>& records) {
  if (records.size() != 2) return "";
  const int a = metrics::RepeatsToResolve(records[0].sd_log_ratio, 0.05);
  const int b = metrics::RepeatsToResolve(records[1].sd_log_ratio, 0.05);
  if (a == b) return "either";
  return a < b ? records[0].order : records[1].order;
}

int RunCalibrate(const CalibrateFlags& flags) {
  auto yaml = ReadSweepFile(flags.file);
  if (!yaml.ok()) return ReportFailure("calibrate", yaml.status());
  spec::ExecutorCatalog catalog;
  bool checked = false;
  if (Status s = LoadCatalog(flags.run, catalog, checked); !s.ok()) {
    std::cerr << "bakeoff calibrate: " << EscapeControlCharacters(s.message()) << "\n";
    return kExitUsage;
  }
  const spec::ExecutorCatalog* executors = checked ? &catalog : nullptr;
  auto original = spec::ParseSweepText(*yaml, flags.file, {}, executors);
  if (!original.ok()) {
    std::cerr << EscapeControlCharacters(original.status().message()) << "\n";
    return kExitUsage;
  }
  std::vector<spec::Order> orders;
  if (flags.order != "lockstep") orders.push_back(spec::Order::kInterleaved);
  if (flags.order != "interleaved") orders.push_back(spec::Order::kLockstep);
  std::vector<metrics::CalibrationRecord> records;
  for (spec::Order order : orders) {
    // With --order both, a template that does not take turns calibrates interleaved only.
    if (order == spec::Order::kLockstep && flags.order == "both") {
      if (!spec::CalibrationSweepYaml(*yaml, flags.file, flags.pairs, executors, order).ok()) {
        std::cerr << "bakeoff calibrate: lockstep skipped: the workload does not take turns (docs/lockstep.md)\n";
        continue;
      }
    }
    Calibrated one = CalibrateOneOrder(flags, *yaml, *original, executors, order);
    if (one.exit_code != kExitOk) return one.exit_code;
    records.push_back(*one.record);
  }
  const std::string fewer = FewerPairs(records);
  std::string text;
  if (flags.format == "json") {
    nlohmann::json j = {{"calibrations", nlohmann::json::array()},
                        {"fewer_pairs", fewer.empty() ? nlohmann::json() : nlohmann::json(fewer)}};
    for (const auto& record : records) j["calibrations"].push_back(RecordJson(record));
    text = j.dump(2) + "\n";
  } else {
    for (const auto& record : records) text += Text(record, RepeatsFor(record.sd_log_ratio), flags.run.db);
    if (!fewer.empty()) {
      text += fewer == "either" ? "both orders need the same pairs here\n"
                                : fewer + " pairs need fewer trials on this machine for this workload: use order: " +
                                      fewer + "\n";
    }
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
  cmd->add_option("--order", flags->order,
                  "which pairs to measure: both (interleaved, then lockstep when the workload takes turns), "
                  "interleaved or lockstep")
      ->check(CLI::IsMember({"both", "interleaved", "lockstep"}))
      ->capture_default_str();
  AddLocalRunFlags(cmd, &flags->run);
  cmd->callback([flags, exit_code] { *exit_code = RunCalibrate(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("calibrate", SetupCalibrate);

}  // namespace bakeoff::cli
