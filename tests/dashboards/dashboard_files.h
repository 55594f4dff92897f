// The shipped dashboards as data, for the static test (dashboards_test.cc) and the
// end-to-end test against a real Prometheus (metrics_end_to_end_slow_test.cc): every
// dashboard file, its template variables, and every PromQL expression of every panel.
// Thread-safety: values.
#pragma once

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bakeoff::testing {

struct DashboardFile {
  std::string path;
  nlohmann::json json;  // discarded when the file is not valid JSON
};

struct PanelQuery {
  std::string dashboard;  // uid
  std::string panel;      // title
  std::string ref_id;
  std::string expr;
};

inline std::filesystem::path DashboardsDir() {
  return std::filesystem::path(BAKEOFF_SOURCE_DIR) / "dashboards";
}

inline std::vector<DashboardFile> LoadDashboards() {
  std::vector<DashboardFile> out;
  for (const auto& entry : std::filesystem::directory_iterator(DashboardsDir() / "grafana" / "dashboards")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    out.push_back({entry.path().string(), nlohmann::json::parse(in, nullptr, false)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

// Panels, including those nested in collapsed rows.
inline std::vector<nlohmann::json> Panels(const nlohmann::json& dashboard) {
  std::vector<nlohmann::json> out;
  for (const auto& panel : dashboard.value("panels", nlohmann::json::array())) {
    out.push_back(panel);
    for (const auto& nested : panel.value("panels", nlohmann::json::array())) out.push_back(nested);
  }
  return out;
}

inline std::vector<PanelQuery> PanelQueries(const std::vector<DashboardFile>& files) {
  std::vector<PanelQuery> out;
  for (const auto& file : files) {
    for (const auto& panel : Panels(file.json)) {
      for (const auto& target : panel.value("targets", nlohmann::json::array())) {
        out.push_back({file.json.value("uid", ""), panel.value("title", ""), target.value("refId", ""),
                       target.value("expr", "")});
      }
    }
  }
  return out;
}

// The query of a template variable: a string, or {"query": "..."} in newer Grafana.
inline std::string VariableQuery(const nlohmann::json& variable) {
  const auto& q = variable.contains("query") ? variable["query"] : nlohmann::json();
  if (q.is_string()) return q.get<std::string>();
  if (q.is_object()) return q.value("query", "");
  return "";
}

// Names used as $name, ${name}, ${name:format} or [[name]] in `text`.
inline std::set<std::string> VariablesUsed(const std::string& text) {
  static const std::regex kUse(R"(\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\])");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kUse); it != std::sregex_iterator(); ++it) {
    for (int group = 1; group <= 3; ++group) {
      if ((*it)[group].matched) out.insert((*it)[group].str());
    }
  }
  return out;
}

// Grafana's own variables that a Prometheus query may use.
inline bool IsGrafanaBuiltin(const std::string& name) {
  static const std::set<std::string> kBuiltins = {"__rate_interval", "__interval", "__interval_ms", "__range",
                                                  "__range_s", "__range_ms", "__dashboard", "__from", "__to"};
  return kBuiltins.count(name) > 0;
}

}  // namespace bakeoff::testing
