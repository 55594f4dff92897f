// Static checks of the shipped dashboards/ (Grafana is not packaged for Debian, so no
// Grafana runs here; metrics_end_to_end_slow_test.cc runs every panel's PromQL through
// a real Prometheus): valid JSON, stable uids, unique panel ids, every datasource
// reference resolves to the provisioned datasource, every variable used is defined,
// every metric a panel queries is documented, and promtool accepts prometheus.yml.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "tests/dashboards/dashboard_files.h"
#include "tests/integration/test_files.h"  // ReadFile

namespace bakeoff {
namespace {
using nlohmann::json;
using testing::DashboardsDir;
using testing::LoadDashboards;
using testing::Panels;

struct ProvisionedDatasource {
  std::string uid;
  std::string type;
};

ProvisionedDatasource LoadDatasource() {
  YAML::Node file = YAML::LoadFile((DashboardsDir() / "grafana/provisioning/datasources/bakeoff.yml").string());
  EXPECT_EQ(file["apiVersion"].as<int>(), 1);
  EXPECT_EQ(file["datasources"].size(), 1u);
  return {file["datasources"][0]["uid"].as<std::string>(), file["datasources"][0]["type"].as<std::string>()};
}

// Every {"datasource": ...} object anywhere in `node`, with a path for messages.
void CollectDatasourceRefs(const json& node, const std::string& path, std::vector<std::pair<std::string, json>>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key == "datasource") out.emplace_back(path + "/datasource", value);
      CollectDatasourceRefs(value, path + "/" + key, out);
    }
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) CollectDatasourceRefs(node[i], path + "/" + std::to_string(i), out);
  }
}

TEST(DashboardsTest, EveryDashboardIsValidJsonWithItsStableUid) {
  auto files = LoadDashboards();
  std::set<std::string> uids;
  for (const auto& f : files) {
    ASSERT_FALSE(f.json.is_discarded()) << f.path << " is not valid JSON";
    ASSERT_TRUE(f.json.is_object()) << f.path;
    const std::string uid = f.json.value("uid", "");
    EXPECT_FALSE(uid.empty()) << f.path << " has no uid (links and provisioning need a stable one)";
    EXPECT_LE(uid.size(), 40u) << "Grafana limits uids to 40 characters";
    EXPECT_TRUE(uids.insert(uid).second) << "duplicate uid " << uid;
    EXPECT_FALSE(f.json.value("title", "").empty()) << f.path;
    EXPECT_TRUE(f.json.contains("schemaVersion")) << f.path;
    EXPECT_EQ(f.json.value("id", json()).is_null(), true) << f.path << ": a provisioned dashboard has no numeric id";
  }
  EXPECT_EQ(uids, (std::set<std::string>{"bakeoff-sweep-overview", "bakeoff-variant-comparison",
                                         "bakeoff-trial-detail", "bakeoff-cluster"}));
}

TEST(DashboardsTest, PanelIdsAreUniqueAndEveryPanelHasAQuery) {
  for (const auto& f : LoadDashboards()) {
    std::set<int> ids;
    for (const auto& panel : Panels(f.json)) {
      ASSERT_TRUE(panel.contains("id") && panel["id"].is_number_integer()) << f.path << ": panel without id";
      EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << f.path << ": duplicate panel id " << panel["id"];
      if (panel.value("type", "") == "row") continue;
      const auto targets = panel.value("targets", json::array());
      EXPECT_FALSE(targets.empty()) << f.path << ": panel '" << panel.value("title", "") << "' has no query";
      std::set<std::string> refs;
      for (const auto& t : targets) {
        EXPECT_FALSE(t.value("expr", "").empty()) << f.path << ": panel '" << panel.value("title", "") << "'";
        EXPECT_TRUE(refs.insert(t.value("refId", "")).second) << "duplicate refId in " << panel.value("title", "");
      }
      ASSERT_TRUE(panel.contains("gridPos")) << f.path;
      EXPECT_LE(panel["gridPos"].value("x", 0) + panel["gridPos"].value("w", 0), 24) << panel.value("title", "");
    }
    EXPECT_GE(ids.size(), 4u) << f.path;
  }
}

TEST(DashboardsTest, EveryDatasourceReferenceResolvesToTheProvisionedOne) {
  const ProvisionedDatasource ds = LoadDatasource();
  EXPECT_EQ(ds.type, "prometheus");
  for (const auto& f : LoadDashboards()) {
    std::vector<std::pair<std::string, json>> refs;
    CollectDatasourceRefs(f.json, "", refs);
    EXPECT_FALSE(refs.empty()) << f.path;
    for (const auto& [where, ref] : refs) {
      // A plain string is a datasource name (legacy) and would not follow a rename.
      ASSERT_TRUE(ref.is_object()) << f.path << where << ": " << ref.dump();
      EXPECT_EQ(ref.value("uid", ""), ds.uid) << f.path << where;
      EXPECT_EQ(ref.value("type", ""), ds.type) << f.path << where;
    }
  }
}

TEST(DashboardsTest, EveryVariableUsedIsDefinedBeforeUse) {
  for (const auto& f : LoadDashboards()) {
    std::set<std::string> defined;
    for (const auto& variable : f.json["templating"].value("list", json::array())) {
      const std::string name = variable.value("name", "");
      for (const auto& used : testing::VariablesUsed(testing::VariableQuery(variable))) {
        EXPECT_TRUE(defined.count(used) || testing::IsGrafanaBuiltin(used)) << f.path << ": variable '" << name << "' uses $" << used
                                         << " before it is defined";
      }
      EXPECT_FALSE(testing::VariableQuery(variable).empty()) << f.path << ": variable " << name << " has no query";
      EXPECT_TRUE(defined.insert(name).second) << f.path << ": variable " << name << " defined twice";
    }
    for (const auto& panel : Panels(f.json)) {
      std::string text = panel.value("title", "");
      for (const auto& t : panel.value("targets", json::array())) text += " " + t.value("expr", "") + " " + t.value("legendFormat", "");
      for (const auto& used : testing::VariablesUsed(text)) {
        EXPECT_TRUE(defined.count(used) || testing::IsGrafanaBuiltin(used))
            << f.path << ": panel '" << panel.value("title", "") << "' uses undefined $" << used;
      }
    }
  }
  // The issue's three: sweep, variant, worker appear somewhere.
  std::set<std::string> all;
  for (const auto& f : LoadDashboards()) {
    for (const auto& v : f.json["templating"]["list"]) all.insert(v.value("name", ""));
  }
  for (const char* name : {"sweep", "variant", "worker"}) EXPECT_TRUE(all.count(name)) << name;
}

TEST(DashboardsTest, EveryQueriedMetricIsDocumented) {
  const std::string doc = testing::ReadFile(std::filesystem::path(BAKEOFF_SOURCE_DIR) / "docs" / "metrics.md");
  ASSERT_FALSE(doc.empty()) << "docs/metrics.md is missing";
  static const std::regex kMetric(R"(\bbakeoff_[a-z_]+)");
  std::set<std::string> queried;
  std::vector<std::string> texts;
  for (const auto& q : testing::PanelQueries(LoadDashboards())) texts.push_back(q.expr);
  for (const auto& f : LoadDashboards()) {
    for (const auto& v : f.json["templating"]["list"]) texts.push_back(testing::VariableQuery(v));
  }
  for (const auto& text : texts) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kMetric); it != std::sregex_iterator(); ++it) {
      std::string name = it->str();
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
            doc.find("`" + name + "`") == std::string::npos) {
          name = name.substr(0, name.size() - s.size());
        }
      }
      queried.insert(name);
    }
  }
  EXPECT_GE(queried.size(), 20u);
  for (const auto& name : queried) {
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos) << name << " is queried but not in docs/metrics.md";
  }
}

// The PromQL Grafana sends for a variable's query: label_values(selector, label) asks
// for the selector's series, query_result(expr) evaluates expr.
std::string VariableExpr(const std::string& query) {
  static const std::regex kLabelValues(R"(^label_values\((.*),\s*\w+\)$)");
  static const std::regex kQueryResult(R"(^query_result\((.*)\)$)");
  std::smatch m;
  if (std::regex_match(query, m, kLabelValues) || std::regex_match(query, m, kQueryResult)) return m[1].str();
  return query;
}

// Runs `promtool check rules` on one recording rule per expression: promtool parses each
// with Prometheus' own PromQL parser. Returns promtool's output; `ok` tells success.
std::string PromtoolCheckExprs(const std::vector<std::string>& exprs, bool* ok) {
  static int counter = 0;
  json rules = json::array();
  for (std::size_t i = 0; i < exprs.size(); ++i) {
    rules.push_back({{"record", "bakeoff:dashboard_query_" + std::to_string(i)}, {"expr", exprs[i]}});
  }
  const json file = {{"groups", json::array({{{"name", "dashboards"}, {"rules", rules}}})}};
  const auto path = std::filesystem::temp_directory_path() /
                    ("bakeoff-dashboard-rules-" + std::to_string(getpid()) + "-" + std::to_string(++counter) + ".yml");
  std::ofstream(path) << file.dump(2);  // JSON is YAML
  FILE* pipe = popen(("promtool check rules " + path.string() + " 2>&1").c_str(), "r");
  std::string output;
  int status = -1;
  if (pipe) {
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
    status = pclose(pipe);
  }
  std::filesystem::remove(path);
  *ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return output;
}

bool PromtoolInstalled() { return std::system("promtool --version > /dev/null 2>&1") == 0; }

// A variant key of the shipped h5-lora-rank sweeps: quotes, brackets and commas.
const std::string kQuotedKey = R"(compile_mode=jit,lora_rank=8,lora_targets=["q","k","v","o"])";
const std::map<std::string, std::string> kBuiltins = {
    {"__rate_interval", "20s"}, {"__interval", "5s"}, {"__range", "3600s"}, {"__range_s", "3600"}};

// Every expression (panels and variable queries) of every dashboard, interpolated with
// `selections`.
std::vector<std::string> InterpolatedExprs(const std::map<std::string, testing::VariableSelection>& selections) {
  std::vector<std::string> out;
  for (const auto& f : LoadDashboards()) {
    for (const auto& v : f.json["templating"]["list"]) {
      out.push_back(VariableExpr(testing::GrafanaInterpolate(testing::VariableQuery(v), f.json, selections, kBuiltins)));
    }
    for (const auto& panel : Panels(f.json)) {
      for (const auto& t : panel.value("targets", json::array())) {
        out.push_back(testing::GrafanaInterpolate(t.value("expr", ""), f.json, selections, kBuiltins));
      }
    }
  }
  return out;
}

TEST(DashboardsTest, EveryQueryStaysValidPromqlWhenOneVariantKeyHasQuotes) {
  if (!PromtoolInstalled()) GTEST_SKIP() << "promtool is not installed";
  const std::string other = "compile_mode=eager,lora_rank=8,lora_targets=[\"q\",\"v\"]";
  const std::vector<std::map<std::string, testing::VariableSelection>> cases = {
      // One quoted variant, one worker whose name has a regex metacharacter.
      {{"sweep", {{"12"}}}, {"variant", {{kQuotedKey}}}, {"trial", {{"42"}}}, {"worker", {{"gpu-node.7"}}}},
      // Two quoted variants, two workers.
      {{"sweep", {{"12"}}}, {"variant", {{kQuotedKey, other}}}, {"trial", {{"42"}}}, {"worker", {{"w1", "w2"}}}},
      // All.
      {{"sweep", {{"12"}}}, {"variant", {{}, true}}, {"trial", {{"42"}}}, {"worker", {{}, true}}},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    std::vector<std::string> exprs = InterpolatedExprs(cases[c]);
    ASSERT_GE(exprs.size(), 40u);
    for (const auto& e : exprs) EXPECT_EQ(e.find('$'), std::string::npos) << "case " << c << ": uninterpolated: " << e;
    bool ok = false;
    std::string output = PromtoolCheckExprs(exprs, &ok);
    EXPECT_TRUE(ok) << "case " << c << ": promtool rejects an interpolated query:\n" << output;
  }

  // The check is not vacuous: the old form, a bare "$variant" that Grafana formats by
  // default, is rejected with this key (the review's F4).
  json old_style = {{"templating", {{"list", json::array({{{"name", "variant"}, {"multi", true},
                                                           {"includeAll", true}, {"allValue", ".*"}}})}}}};
  std::string old_expr = testing::GrafanaInterpolate(R"(bakeoff_trial_loss{variant=~"$variant"})", old_style,
                                                     {{"variant", {{kQuotedKey}}}}, kBuiltins);
  bool old_ok = true;
  std::string old_output = PromtoolCheckExprs({old_expr}, &old_ok);
  EXPECT_FALSE(old_ok) << old_expr << "\n" << old_output;
}

TEST(DashboardsTest, VariantMatchersMatchExactlyTheSelectedKeys) {
  // Every use of $variant and $worker is an explicit regex format in a raw (backquoted)
  // PromQL string, so no value is re-escaped by PromQL's string rules.
  for (const auto& q : testing::PanelQueries(LoadDashboards())) {
    for (const std::string name : {"variant", "worker"}) {
      if (!testing::VariablesUsed(q.expr).count(name)) continue;
      EXPECT_NE(q.expr.find(name + "=~`${" + name + ":regex}`"), std::string::npos) << q.dashboard << " / " << q.panel;
    }
  }
  // The regex Grafana then sends (RE2, anchored by Prometheus) matches the key itself
  // and not a key that only shares a prefix.
  const std::string formatted = testing::GrafanaEscapeRegex(kQuotedKey);
  EXPECT_TRUE(std::regex_match(kQuotedKey, std::regex(formatted))) << formatted;
  EXPECT_FALSE(std::regex_match(kQuotedKey + ",micro_batch=2", std::regex(formatted)));
  EXPECT_FALSE(std::regex_match(std::string(R"(compile_mode=jit,lora_rank=8,lora_targets=q)"), std::regex(formatted)));
}

TEST(DashboardsTest, SweepPickerDefaultsToTheNewestAndTellsSameNamesApart) {
  for (const auto& f : LoadDashboards()) {
    for (const auto& v : f.json["templating"]["list"]) {
      if (v.value("name", "") != "sweep") continue;
      // Grafana selects the first option when nothing is saved: sorted numerically
      // descending on the text, whose first number is the sweep id, the newest is first.
      EXPECT_EQ(v.value("sort", 0), 4) << f.path;
      EXPECT_TRUE(v.value("current", json::object()).empty()) << f.path << ": a saved selection overrides the default";
      const std::string query = testing::VariableQuery(v);
      EXPECT_NE(query.find(R"(label_join(bakeoff_sweep_info, "picker", " · ", "sweep", "name"))"), std::string::npos)
          << query;
      // Grafana applies the variable's regex to query_result's lines; two sweeps that
      // share a name get different texts.
      std::string pattern = v.value("regex", "");
      pattern = std::regex_replace(pattern.substr(1, pattern.size() - 2), std::regex(R"(\?<(\w+)>)"), "");
      std::set<std::string> texts;
      for (const std::string id : {"1", "2"}) {
        const std::string line = R"(bakeoff_sweep_info{active="true", instance="c:8080", job="bakeoff-coordinator", name="eco-live", picker=")" +
                                 id + R"( · eco-live", sweep=")" + id + R"("} 1 1700000000000)";
        std::smatch m;
        ASSERT_TRUE(std::regex_search(line, m, std::regex(pattern))) << pattern;
        EXPECT_EQ(m[2].str(), id);                       // value: the id
        EXPECT_EQ(m[1].str().rfind(id + " · ", 0), 0u);  // text leads with the id
        texts.insert(m[1].str());
      }
      EXPECT_EQ(texts.size(), 2u);
      // The open /metrics carries no names (no --metrics-require-token): the id alone.
      const std::string unnamed = R"(bakeoff_sweep_info{active="true", instance="c:8080", job="bakeoff-coordinator", picker="7 · ", sweep="7"} 1 1700000000000)";
      std::smatch m;
      ASSERT_TRUE(std::regex_search(unnamed, m, std::regex(pattern))) << pattern;
      EXPECT_EQ(m[1].str(), "7");
      EXPECT_EQ(m[2].str(), "7");
    }
  }
}

TEST(DashboardsTest, TrialPickerListsRunningTrialsFirst) {
  bool seen = false;
  for (const auto& f : LoadDashboards()) {
    for (const auto& v : f.json["templating"]["list"]) {
      if (v.value("name", "") != "trial") continue;
      seen = true;
      const std::string query = testing::VariableQuery(v);
      // Running trials (series present now) get 1, ended ones in the range 0; sort_desc
      // puts the running first and Grafana keeps that order (sort 0) and selects the first.
      EXPECT_EQ(query.rfind("query_result(sort_desc(", 0), 0u) << query;
      EXPECT_NE(query.find(R"("state", "running")"), std::string::npos) << query;
      EXPECT_NE(query.find("[$__range]"), std::string::npos) << query;
      EXPECT_EQ(v.value("sort", -1), 0) << f.path;
      EXPECT_TRUE(v.value("current", json::object()).empty()) << f.path;
    }
  }
  EXPECT_TRUE(seen);
}

TEST(DashboardsTest, ClusterShowsWorkersByTheirOwnStateAndCountsLostAttempts) {
  // The coordinator's /metrics says gone for a worker that stopped cleanly and lost for
  // one whose heartbeats stopped (docs/metrics.md): the dashboard shows its state as it
  // is (no relabelling), and separately whether any attempt was lost with a worker.
  bool gone = false, lost_attempts = false;
  for (const auto& q : testing::PanelQueries(LoadDashboards())) {
    if (q.dashboard != "bakeoff-cluster") continue;
    if (q.expr.find("bakeoff_workers)") != std::string::npos) {
      gone = q.expr == "sum by (state) (bakeoff_workers)";
    }
    lost_attempts = lost_attempts || q.expr.find("increase(bakeoff_trials_requeued_total[$__range])") != std::string::npos;
  }
  EXPECT_TRUE(gone);
  EXPECT_TRUE(lost_attempts);
}

TEST(DashboardsTest, ProvisioningFilesUseApiVersionOneAndPointAtTheDashboards) {
  YAML::Node providers = YAML::LoadFile((DashboardsDir() / "grafana/provisioning/dashboards/bakeoff.yml").string());
  EXPECT_EQ(providers["apiVersion"].as<int>(), 1);
  ASSERT_EQ(providers["providers"].size(), 1u);
  EXPECT_EQ(providers["providers"][0]["type"].as<std::string>(), "file");
  EXPECT_FALSE(providers["providers"][0]["options"]["path"].as<std::string>().empty());
}

TEST(DashboardsTest, PromtoolAcceptsTheShippedPrometheusConfig) {
  const auto config = DashboardsDir() / "prometheus" / "prometheus.yml";
  FILE* pipe = popen(("promtool check config " + config.string() + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  // It scrapes the coordinator and discovers the workers through /api/v1/sd.
  YAML::Node parsed = YAML::LoadFile(config.string());
  std::set<std::string> jobs;
  bool discovers_workers = false;
  for (const auto& job : parsed["scrape_configs"]) {
    jobs.insert(job["job_name"].as<std::string>());
    for (const auto& sd : job["http_sd_configs"]) {
      discovers_workers = discovers_workers || sd["url"].as<std::string>().find("/api/v1/sd") != std::string::npos;
    }
  }
  EXPECT_EQ(jobs, (std::set<std::string>{"bakeoff-coordinator", "bakeoff-workers"}));
  EXPECT_TRUE(discovers_workers);
}

}  // namespace
}  // namespace bakeoff
