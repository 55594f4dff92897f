// Static checks of the shipped dashboards/ (Grafana is not packaged for Debian, so no
// Grafana runs here; metrics_end_to_end_slow_test.cc runs every panel's PromQL through
// a real Prometheus): valid JSON, stable uids, unique panel ids, every datasource
// reference resolves to the provisioned datasource, every variable used is defined,
// every metric a panel queries is documented, and promtool accepts prometheus.yml.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "tests/dashboards/dashboard_files.h"

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

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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
        EXPECT_TRUE(defined.count(used)) << f.path << ": variable '" << name << "' uses $" << used
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
  const std::string doc = Slurp(std::filesystem::path(BAKEOFF_SOURCE_DIR) / "docs" / "metrics.md");
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
