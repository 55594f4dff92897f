// The shipped dashboards as data, for the static test (dashboards_test.cc) and the
// end-to-end test against a real Prometheus (metrics_end_to_end_slow_test.cc): every
// dashboard file, its template variables, and every PromQL expression of every panel.
// Thread-safety: values.
#pragma once

#include <filesystem>
#include <map>
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

// What a template variable is set to: its values (several when multi-valued), or All.
struct VariableSelection {
  std::vector<std::string> values;
  bool all = false;
};

// Grafana's @grafana/data escapeRegex, used by the `:regex` format.
inline std::string GrafanaEscapeRegex(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (std::string("/.*+?|()[]{}\\").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// The Prometheus datasource's default formatting (no `:format` given), classic behaviour
// (prometheusSpecialRegexEscape for multi/All variables, prometheusRegularEscape for the
// others): it does not escape '"', which is the reviewed failure (F4).
inline std::string GrafanaPrometheusDefault(const std::vector<std::string>& values, bool regex_context) {
  auto escape = [&](const std::string& v) {
    std::string out;
    for (char c : v) {
      if (c == '\\') {
        out += regex_context ? "\\\\\\\\" : "\\\\";
      } else if (regex_context && std::string("$^*{}[]'+?.()|").find(c) != std::string::npos) {
        out += "\\\\";
        out += c;
      } else if (!regex_context && c == '\'') {
        out += "\\\\'";
      } else {
        out += c;
      }
    }
    return out;
  };
  if (values.size() == 1) return escape(values[0]);
  std::string joined;
  for (const auto& v : values) joined += (joined.empty() ? "" : "|") + escape(v);
  return "(" + joined + ")";
}

// Interpolates `text` as Grafana does before it sends a query: $name, ${name},
// ${name:format} (regex, doublequote, raw) and [[name]], with the dashboard's variable
// definitions (multi, includeAll, allValue) and `builtins` for $__rate_interval and the
// like. A custom allValue is inserted unformatted, as Grafana does.
inline std::string GrafanaInterpolate(const std::string& text, const nlohmann::json& dashboard,
                                      const std::map<std::string, VariableSelection>& selections,
                                      const std::map<std::string, std::string>& builtins) {
  static const std::regex kUse(R"(\$\{(\w+)(?::(\w+))?\}|\$(\w+)|\[\[(\w+)\]\])");
  std::string out;
  auto begin = text.cbegin();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kUse); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const std::string name = m[1].matched ? m[1].str() : m[3].matched ? m[3].str() : m[4].str();
    const std::string format = m[2].matched ? m[2].str() : "";
    out.append(begin, m[0].first);
    begin = m[0].second;
    if (auto b = builtins.find(name); b != builtins.end()) {
      out += b->second;
      continue;
    }
    nlohmann::json variable;
    for (const auto& v : dashboard["templating"]["list"]) {
      if (v.value("name", "") == name) variable = v;
    }
    auto sel = selections.find(name);
    if (variable.is_null() || sel == selections.end()) {
      out += m[0].str();  // left as is, like Grafana does for unknown names
      continue;
    }
    if (sel->second.all && variable.contains("allValue") && !variable["allValue"].get<std::string>().empty()) {
      out += variable["allValue"].get<std::string>();
      continue;
    }
    const std::vector<std::string>& values = sel->second.values;
    if (format == "regex") {
      if (values.size() == 1) {
        out += GrafanaEscapeRegex(values[0]);
      } else {
        std::string joined;
        for (const auto& v : values) joined += (joined.empty() ? "" : "|") + GrafanaEscapeRegex(v);
        out += "(" + joined + ")";
      }
    } else if (format == "doublequote") {
      std::string joined;
      for (const auto& v : values) {
        std::string quoted = "\"";
        for (char c : v) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
        joined += (joined.empty() ? "" : ",") + quoted + "\"";
      }
      out += joined;
    } else if (format == "raw") {
      std::string joined;
      for (const auto& v : values) joined += (joined.empty() ? "" : ",") + v;
      out += joined;
    } else {
      out += GrafanaPrometheusDefault(values, variable.value("multi", false) || variable.value("includeAll", false));
    }
  }
  out.append(begin, text.cend());
  return out;
}

}  // namespace bakeoff::testing
