// `bakeoff status [SWEEP]`: sweeps and their progress, or one sweep's trials; from a
// running coordinator (--coordinator URL) or straight from a results file (--db FILE),
// so finished results stay readable with no server.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/api_client_flags.h"
#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/result_source.h"
#include "coordinator/api_json.h"
#include "metrics/store/results_reader.h"

namespace bakeoff::cli {
namespace {

struct StatusFlags {
  std::string sweep;
  std::string db;
  ApiClientFlags api;  // coordinator empty unless given: --db or a coordinator (RunStatus)
};

std::string Number(double v, const char* fmt = "%.0f") {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string SweepsTable(const nlohmann::json& sweeps) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : sweeps) {
    const auto& c = s["counts"];
    rows.push_back({std::to_string(s.value("id", 0)), s.value("name", ""), s.value("state", ""),
                    std::to_string(c.value("finished", 0)) + "/" + std::to_string(s.value("trial_count", 0)),
                    std::to_string(c.value("running", 0) + c.value("assigned", 0)),
                    std::to_string(c.value("queued", 0)), std::to_string(c.value("succeeded", 0)),
                    std::to_string(c.value("unsuccessful", 0))});
  }
  std::string text = RenderTextTable({"ID", "NAME", "STATE", "DONE", "RUNNING", "QUEUED", "SUCCEEDED", "OTHER"},
                                     rows, {true, false, false, true, true, true, true, true});
  if (rows.empty()) text += "(no sweeps)\n";
  for (const auto& s : sweeps) {
    if (s.contains("waiting")) text += "sweep " + std::to_string(s.value("id", 0)) + " waits: " + s.value("waiting", "") + "\n";
  }
  return text;
}

std::string SweepDetail(const nlohmann::json& sweep, const nlohmann::json& trials) {
  std::string text = "sweep " + std::to_string(sweep.value("id", 0)) + " (" + sweep.value("name", "") + "): " +
                     sweep.value("state", "") + "\n";
  if (!sweep.value("question", "").empty()) text += "question: " + sweep.value("question", "") + "\n";
  if (sweep.contains("waiting")) text += "waiting: " + sweep.value("waiting", "") + "\n";
  std::vector<std::vector<std::string>> rows;
  std::vector<nlohmann::json> truncated;
  for (const auto& t : trials) {
    const std::string tokens = t["tokens_per_s"].is_number() ? Number(t["tokens_per_s"].get<double>()) : "-";
    std::string outcome = t["outcome"].is_string() ? t["outcome"].get<std::string>() : "-";
    if (t.value("simulated", false)) outcome += " (simulated)";
    std::string reason = t.value("reason", "");
    if (reason.size() > 60) {
      reason = reason.substr(0, 57) + "...";
      truncated.push_back(t);
    }
    // The hosts of the ranks (rank order, each once): where a gang ran.
    std::vector<std::string> hosts;
    if (t.contains("ranks") && t["ranks"].is_array()) {
      for (const auto& r : t["ranks"]) {
        const std::string host = r.value("host", "");
        if (!host.empty() && std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
      }
    }
    std::string host_list;
    for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
    rows.push_back({std::to_string(t.value("id", 0)), t.value("variant_key", ""), std::to_string(t.value("repeat", 0)),
                    t.value("state", ""), outcome,
                    t["worker_id"].is_string() ? t["worker_id"].get<std::string>() : "-",
                    host_list.empty() ? "-" : host_list, std::to_string(t.value("attempts_used", 0)), tokens, reason});
  }
  text += RenderTextTable(
      {"TRIAL", "VARIANT", "REPEAT", "STATE", "OUTCOME", "WORKER", "HOSTS", "ATTEMPTS", "TOKENS/S", "REASON"}, rows,
      {true, false, true, false, false, false, false, true, true, false});
  // Reasons cut short above, whole: the cause and the rank log that holds the full text.
  if (!truncated.empty()) {
    text += "\nreasons:\n";
    for (const auto& t : truncated) text += "  trial " + std::to_string(t.value("id", 0)) + ": " + t.value("reason", "") + "\n";
  }
  return text;
}

int Fail(const Status& status) { return ReportFailure("status", status); }

int RunStatus(const StatusFlags& flags) {
  nlohmann::json sweeps, sweep, trials;
  const ResultSource source = PickResultSource(flags.api.coordinator, flags.db);
  if (source.why != "--coordinator" && source.why != "--db") {
    std::cerr << "bakeoff status: reading " << source.Describe() << "\n";
  }
  struct stat st;
  const std::string& db = source.db;
  if (source.coordinator.empty()) {
    if (stat(db.c_str(), &st) != 0) {
      std::cerr << "bakeoff status: no results database at '" << db
                << "'; give --db FILE or --coordinator URL\n";
      return kExitUnavailable;
    }
    // Read-only: beside a running coordinator, or on a read-only copy.
    auto store = metrics::ResultsReader::Open(db);
    if (!store.ok()) return Fail(store.status());
    if (flags.sweep.empty()) {
      auto list = (*store)->ListSweeps();
      if (!list.ok()) return Fail(list.status());
      sweeps = nlohmann::json::array();
      for (const auto& s : *list) sweeps.push_back(coordinator::SweepJson(s));
    } else {
      auto found = (*store)->FindSweep(flags.sweep);
      if (!found.ok()) return Fail(found.status());
      sweep = coordinator::SweepJson(*found);
      auto list = (*store)->ListTrialResults(found->id);
      if (!list.ok()) return Fail(list.status());
      trials = coordinator::TrialsJson(*list);
    }
  } else {
    auto client = ConnectCoordinator(source.coordinator, flags.api.token_file, flags.api.tls_ca);
    if (!client.ok()) return Fail(client.status());
    if (flags.sweep.empty()) {
      auto got = client->GetJson("/api/v1/sweeps");
      if (!got.ok()) return Fail(got.status());
      sweeps = *got;
    } else {
      auto got = client->GetJson("/api/v1/sweeps/" + UrlEncode(flags.sweep));
      if (!got.ok()) return Fail(got.status());
      sweep = *got;
      auto list = client->GetJson("/api/v1/sweeps/" + UrlEncode(flags.sweep) + "/trials");
      if (!list.ok()) return Fail(list.status());
      trials = *list;
    }
  }
  std::string text;
  if (flags.api.format == "json") {
    text = flags.sweep.empty() ? sweeps.dump(2) : nlohmann::json{{"sweep", sweep}, {"trials", trials}}.dump(2);
  } else {
    text = flags.sweep.empty() ? SweepsTable(sweeps) : SweepDetail(sweep, trials);
  }
  return WriteCommandOutput("status", flags.api.output, text);
}

void SetupStatus(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<StatusFlags>();
  auto* cmd = root.add_subcommand("status", "Show sweeps, or one sweep's trials");
  cmd->add_option("sweep", flags->sweep, "sweep id or name (default: list every sweep)");
  AddApiClientOptions(cmd, &flags->api);
  flags->api.coordinator.clear();  // RunStatus picks --db, then the coordinator's default
  cmd->add_option("--db", flags->db, "read a results database instead of asking a coordinator");
  cmd->callback([flags, exit_code]() { *exit_code = RunStatus(*flags); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("status", SetupStatus);

}  // namespace bakeoff::cli
