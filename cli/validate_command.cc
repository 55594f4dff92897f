// `bakeoff validate FILE [--format table|json] [--output FILE] [--max-trials N]`: parses
// and expands a sweep exactly as the coordinator will, and prints its variants (key,
// ranks, baseline counterpart), trial count and run order, and this machine's noise for
// its workload when `bakeoff calibrate` stored it in --db. Nothing runs. Problems go to
// stderr, one per line with file:line:column, and the exit code is 2. Warnings (legal but
// probably unintended, e.g. too few repeats for a verdict) are printed and exit 0.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "experiments/sweep/calibration_sweep.h"
#include "experiments/sweep/duration.h"
#include "experiments/sweep/expanded_sweep.h"
#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"
#include "metrics/report/statistics.h"
#include "metrics/store/results_reader.h"

namespace bakeoff::cli {
namespace {

struct ValidateOptions {
  std::string file;
  std::string format = "table";
  std::string output;
  std::string executors;  // --executors; "" = the default catalog
  size_t max_trials = spec::ExpandOptions{}.max_trials;
  std::string db = "results.db";  // where `bakeoff calibrate` stored this machine's noise
};

// The order name a calibration of `sweep`'s own order has.
std::string CalibrationOrder(const spec::SweepSpec& sweep) {
  return sweep.order == spec::Order::kLockstep ? "lockstep" : "interleaved";
}

// This machine's noise for the sweep's workload in `order`, from the newest calibration
// in `db`: null when the file or such a calibration is missing.
nlohmann::json CalibrationOf(const spec::SweepSpec& sweep, const std::string& db, const std::string& order) {
  std::error_code ec;
  if (db.empty() || !std::filesystem::exists(db, ec)) return nullptr;
  auto store = metrics::ResultsReader::Open(db);
  if (!store.ok()) return nullptr;
  auto found = (*store)->LatestCalibration(spec::CalibrationKey(sweep), order);
  if (!found.ok() || !*found) return nullptr;
  const metrics::CalibrationRecord& c = **found;
  return {{"id", c.id},
          {"order", c.order},
          {"calibrated_sweep", c.calibrated_sweep},
          {"host", c.host},
          {"pairs", c.pairs},
          {"sd_log_ratio", c.sd_log_ratio},
          {"created_at", c.created_at},
          {"repeats_to_resolve",
           {{"5%", metrics::RepeatsToResolve(c.sd_log_ratio, 0.05)},
            {"10%", metrics::RepeatsToResolve(c.sd_log_ratio, 0.10)}}}};
}

std::string CalibrationText(const spec::SweepSpec& sweep, const nlohmann::json& c, const std::string& db) {
  if (c.is_null()) {
    return "noise here: not calibrated in " + db + " (`bakeoff calibrate " + sweep.source_name +
           "` measures how many repeats a difference needs on this machine)\n";
  }
  char line[512];
  snprintf(line, sizeof(line),
           "noise here: calibration %lld in %s (%d A/A pairs on %s): sd of a pair's log ratio %.3f; a 5%% "
           "difference needs %d %s pairs, 10%% needs %d; this sweep runs %d%s\n",
           static_cast<long long>(c["id"].get<std::int64_t>()), db.c_str(), c["pairs"].get<int>(),
           c["host"].get<std::string>().c_str(), c["sd_log_ratio"].get<double>(),
           c["repeats_to_resolve"]["5%"].get<int>(), c["order"].get<std::string>().c_str(),
           c["repeats_to_resolve"]["10%"].get<int>(), sweep.repeats, sweep.adaptive ? " at most (adaptive)" : "");
  return line;
}

// Both orders calibrated here: which needs fewer pairs for a 5% difference ("" when
// either is missing).
std::string OrderAdvice(const spec::SweepSpec& sweep, const nlohmann::json& interleaved, const nlohmann::json& lockstep) {
  if (interleaved.is_null() || lockstep.is_null()) return "";
  const int i = interleaved["repeats_to_resolve"]["5%"].get<int>();
  const int l = lockstep["repeats_to_resolve"]["5%"].get<int>();
  const std::string better = l < i ? "lockstep" : i < l ? "interleaved" : "";
  std::string text = "orders here: a 5% difference needs " + std::to_string(l) + " lockstep pairs, " +
                     std::to_string(i) + " interleaved pairs";
  if (better.empty()) return text + "; either order\n";
  text += "; " + better + " needs fewer";
  if (better != CalibrationOrder(sweep)) text += " (this sweep is " + std::string(spec::OrderName(sweep.order)) + ")";
  return text + "\n";
}

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string CounterpartText(const spec::Variant& v, bool has_baseline) {
  if (!has_baseline) return "-";
  if (v.is_baseline) return "baseline";
  if (v.counterpart_excluded) return "excluded counterpart (" + v.counterpart_key + ")";
  return v.counterpart_key;
}

std::string Table(const spec::SweepSpec& sweep, const spec::ExpandedSweep& expanded,
                  const std::string& calibration) {
  std::ostringstream out;
  out << "sweep " << sweep.name << " (" << sweep.source_name << ")\n";
  if (!sweep.question.empty()) out << "question: " << sweep.question << "\n";
  std::string executor = spec::ExecutorName(sweep.workload.executor);
  if (sweep.workload.executor == spec::Executor::kCommand) executor += " " + sweep.workload.command_template;
  if (const spec::ParameterAxis* axis = sweep.FindAxis(spec::kExecutorAxis)) {
    executor = "per variant (";
    for (size_t i = 0; i < axis->values.size(); ++i) executor += (i ? ", " : "") + axis->values[i].get<std::string>();
    executor += ")";
  }
  out << "executor " << executor << ", device "
      << sweep.resources.device
      << (sweep.resources.gpu_type.empty() ? "" : " (" + sweep.resources.gpu_type + ")")
      << ", method " << spec::MethodName(sweep.method) << ", order "
      << spec::OrderName(sweep.order) << ", trial timeout "
      << spec::FormatDuration(sweep.limits.trial_timeout) << ", max attempts "
      << sweep.limits.max_attempts << "\n";
  // What every variant shares: the workload and the constant axes.
  std::string shared;
  for (const auto& [field, value] : sweep.workload.defaults.items()) {
    if (sweep.FindAxis(field) == nullptr) shared += " " + field + "=" + spec::CanonicalValue(value);
  }
  for (const auto& axis : sweep.parameters) {
    if (!axis.Varies()) shared += " " + axis.name + "=" + spec::CanonicalValue(axis.values.front());
  }
  if (!shared.empty()) out << "every variant:" << shared << "\n";
  out << expanded.variants.size() << " variants (" << expanded.excluded_count << " excluded) x "
      << sweep.repeats << " repeats = " << expanded.trials.size() << " trials";
  if (sweep.adaptive) {
    out << " at most (adaptive repeats: each variant stops after " << sweep.adaptive->min << " to "
        << sweep.adaptive->max << " pairs, at an interval that excludes 1 or is +-"
        << sweep.adaptive->ci_half_width << " wide)";
  }
  out << "\n\n";

  size_t key_width = 7;
  for (const auto& v : expanded.variants) key_width = std::max(key_width, v.key.size());
  out << Pad("#", 4) << Pad("variant", key_width + 2) << Pad("ranks", 7) << "baseline counterpart\n";
  for (const auto& v : expanded.variants) {
    out << Pad(std::to_string(v.index), 4) << Pad(v.key, key_width + 2)
        << Pad(std::to_string(v.world_size), 7) << CounterpartText(v, !sweep.baseline.empty())
        << (v.added_as_counterpart ? "  [added as a counterpart]" : "") << "\n";
  }
  // The run order, as variant index (repeat), enough of it to see the pattern.
  constexpr size_t kShown = 32;
  out << "\nrun order (variant#.repeat):";
  for (size_t i = 0; i < expanded.trials.size() && i < kShown; ++i) {
    out << " " << expanded.trials[i].variant << "." << expanded.trials[i].repeat;
  }
  if (expanded.trials.size() > kShown) out << " ... (" << expanded.trials.size() - kShown << " more)";
  out << "\n";
  out << calibration;
  for (const auto& w : sweep.warnings) out << "warning: " << w << "\n";
  if (std::string w = spec::RepeatsVerdictWarning(sweep); !w.empty()) out << "warning: " << w << "\n";
  return out.str();
}

int RunValidate(const ValidateOptions& options) {
  // Command sweeps are checked against the allowlist the workers use by default.
  spec::ExecutorCatalog catalog;
  const std::string catalog_path =
      options.executors.empty() ? spec::DefaultExecutorCatalogPath() : options.executors;
  if (!catalog_path.empty() && catalog_path != "none") {
    auto loaded = spec::LoadExecutorCatalog(catalog_path);
    if (!loaded.ok()) {
      std::cerr << EscapeControlCharacters(loaded.status().message()) << "\n";
      return kExitUsage;
    }
    catalog = std::move(*loaded);
  }
  auto sweep = spec::ParseSweepFile(options.file, {}, catalog_path.empty() || catalog_path == "none" ? nullptr : &catalog);
  if (!sweep.ok()) {
    std::cerr << EscapeControlCharacters(sweep.status().message()) << "\n";
    return kExitUsage;
  }
  spec::ExpandOptions expand_options;
  expand_options.max_trials = options.max_trials;
  auto expanded = spec::Expand(*sweep, expand_options);
  if (!expanded.ok()) {
    std::cerr << EscapeControlCharacters(expanded.status().message()) << "\n";
    return kExitUsage;
  }
  std::string text;
  const nlohmann::json interleaved = CalibrationOf(*sweep, options.db, "interleaved");
  const nlohmann::json lockstep = CalibrationOf(*sweep, options.db, "lockstep");
  const nlohmann::json& calibration = sweep->order == spec::Order::kLockstep ? lockstep : interleaved;
  const std::string advice = OrderAdvice(*sweep, interleaved, lockstep);
  if (options.format == "json") {
    nlohmann::json j = {{"sweep", spec::ToJson(*sweep)}, {"expanded", spec::ToJson(*expanded)},
                        {"calibration", calibration},
                        {"calibrations", {{"interleaved", interleaved}, {"lockstep", lockstep}}}};
    if (std::string w = spec::RepeatsVerdictWarning(*sweep); !w.empty()) {
      j["sweep"]["warnings"].push_back(w);
    }
    text = j.dump(2) + "\n";
  } else {
    text = Table(*sweep, *expanded, CalibrationText(*sweep, calibration, options.db) + advice);
  }
  return WriteCommandOutput("validate", options.output, text);
}

void SetupValidate(CLI::App& root, int* exit_code) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* cmd = root.add_subcommand(
      "validate", "Check a sweep file and print its variants, counterparts and trial order");
  cmd->add_option("file", options->file, "Sweep YAML file")->required();
  cmd->add_option("--format", options->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--output", options->output, "Write to this file instead of stdout");
  cmd->add_option("--executors", options->executors,
                  "command allowlist that executor: command sweeps are checked against (default: "
                  "$BAKEOFF_EXECUTORS, else the shipped experiments/executors.yaml; \"none\": unchecked)");
  cmd->add_option("--db", options->db,
                  "results database whose calibrations (`bakeoff calibrate`) say this machine's noise")
      ->capture_default_str();
  cmd->add_option("--max-trials", options->max_trials, "Cap on trials per sweep")
      ->check(CLI::PositiveNumber);
  cmd->callback([options, exit_code] { *exit_code = RunValidate(*options); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("validate", SetupValidate);

}  // namespace bakeoff::cli
