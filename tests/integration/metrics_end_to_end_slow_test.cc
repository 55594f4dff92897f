// Live metrics end to end, against a real Prometheus server (Debian's `prometheus`):
// a coordinator and two workers (real processes on loopback; the stand-in trainer and
// a stand-in NVML so that every per-rank and GPU series exists without a GPU), the
// shipped dashboards/prometheus/prometheus.yml with only its addresses, token path and
// intervals rewritten, and a sweep of gang trials that runs for several scrapes. Then:
// promtool lints the coordinator's and a worker's /metrics taken mid-run; every target
// Prometheus discovered through /api/v1/sd is up; every PromQL expression of every
// shipped dashboard panel, with the template variables substituted, returns at least
// one series with a value; and the per-trial series are gone from the workers'
// /metrics once the trials ended.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cli/coordinator_client.h"
#include "tests/dashboards/dashboard_files.h"
#include "tests/integration/loopback_cluster_test.h"
#include "tests/integration/loopback_port.h"
#include "tests/integration/test_sweeps.h"
#include "tests/metrics/prometheus/promtool_check.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::FreeLoopbackPort;
using testing::ProcessGuard;
using testing::WaitFor;

const std::string kToken = "metrics-e2e-secret";

// Two variants, two repeats, world size 2 over two one-GPU workers: every trial is a
// gang across both workers, so both serve per-rank series and collective figures.
// 800 steps of the stand-in trainer's 5 ms make each trial run about 4 s, several
// one-second scrapes.
const std::string kSweep = testing::TinyLoraSweep{.name = "live-metrics",
                                                  .question = "can a sweep be watched live?",
                                                  .warmup_steps = 0,
                                                  .steps = 800,
                                                  .one_thread = false,
                                                  .parameters = {"micro_batch: {values: [1, 2]}",
                                                                 "world_size: {value: 2}"},
                                                  .more = "resources: {device: cuda}\n",
                                                  .trial_timeout = "2m",
                                                  .max_attempts = 1}
                               .Yaml();

std::string ReplaceAll(std::string text, const std::string& from, const std::string& to, int* count) {
  *count = 0;
  for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
    ++*count;
  }
  return text;
}

// Escapes regex metacharacters the way Grafana formats a multi-value variable for a
// Prometheus =~ matcher.
std::string RegexEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += "\\\\";
    out += c;
  }
  return out;
}

class MetricsEndToEndTest : public testing::LoopbackClusterTest {
 protected:
  MetricsEndToEndTest() : LoopbackClusterTest("bakeoff-metrics-e2e", kToken) {}
  void TearDown() override {
    prometheus_.reset();
    LoopbackClusterTest::TearDown();
  }

  void StartCluster() {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    for (int i = 1; i <= 2; ++i) {
      StartWorker("w" + std::to_string(i), 1, kBin + "/bakeoff-fake-trainer",
                  std::to_string(29300 + 50 * i) + "-" + std::to_string(29349 + 50 * i),
                  {"--cuda-devices", "0", "--metrics-listen", "127.0.0.1:0", "--nvml-library", BAKEOFF_FAKE_NVML});
    }
    ASSERT_NO_FATAL_FAILURE(Connect("127.0.0.1:" + std::to_string(http_port_)));
    ASSERT_TRUE(WaitFor(
        [&] {
          auto sd = client_->GetJson("/api/v1/sd");
          return sd.ok() && sd->size() == 2;
        },
        30s))
        << "the workers did not register with their metrics endpoints";
  }

  // The shipped configuration with the test's coordinator address, token file and
  // one-second intervals; each rewrite must find its text, so a changed prometheus.yml
  // fails here instead of silently testing something else.
  void StartPrometheus() {
    std::ifstream in(testing::DashboardsDir() / "prometheus" / "prometheus.yml");
    std::stringstream shipped;
    shipped << in.rdbuf();
    std::string config = shipped.str();
    int n = 0;
    config = ReplaceAll(config, "127.0.0.1:8080", "127.0.0.1:" + std::to_string(http_port_), &n);
    EXPECT_EQ(n, 3) << "the static target, the /api/v1/sd URL, and the header comment";
    // Both token references: the discovery's, and the commented one for the coordinator.
    config = ReplaceAll(config, "credentials_file: bakeoff-token", "credentials_file: " + (dir_ / "token").string(), &n);
    EXPECT_EQ(n, 2);
    config = ReplaceAll(config, "scrape_interval: 5s", "scrape_interval: 1s", &n);
    EXPECT_EQ(n, 1);
    config = ReplaceAll(config, "evaluation_interval: 5s", "evaluation_interval: 1s", &n);
    EXPECT_EQ(n, 1);
    config = ReplaceAll(config, "refresh_interval: 10s", "refresh_interval: 1s", &n);
    EXPECT_EQ(n, 1);
    std::ofstream(dir_ / "prometheus.yml") << config;
    prometheus_port_ = FreeLoopbackPort();
    prometheus_ = std::make_unique<ProcessGuard>(
        std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + (dir_ / "prometheus.yml").string(),
                                 "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port_)},
        std::vector<std::string>{}, (dir_ / "prometheus.log").string());
    auto client = cli::CoordinatorClient::Create("127.0.0.1:" + std::to_string(prometheus_port_), "", 10s);
    ASSERT_TRUE(client.ok());
    prometheus_client_ = std::make_unique<cli::CoordinatorClient>(*client);
    ASSERT_TRUE(WaitFor(
        [&] {
          auto ready = prometheus_client_->Get("/-/ready");
          return ready.ok() && ready->status == 200;
        },
        30s))
        << "Prometheus did not become ready; see " << (dir_ / "prometheus.log");
  }

  Result<json> PrometheusApi(const std::string& target) {
    auto response = prometheus_client_->GetJson(target);
    if (!response.ok()) return response.status();
    if (response->value("status", "") != "success") return Status::Internal(response->dump());
    return (*response)["data"];
  }

  std::vector<std::string> WorkerMetricsUrls() {
    std::vector<std::string> out;
    auto sd = client_->GetJson("/api/v1/sd");
    if (!sd.ok()) return out;
    for (const auto& group : *sd) out.push_back(group["targets"][0]);
    return out;
  }

  std::string Scrape(const std::string& host_port) {
    auto client = cli::CoordinatorClient::Create(host_port, "", 10s);
    if (!client.ok()) return "";
    auto text = client->GetText("/metrics");
    return text.ok() ? *text : "";
  }

  std::unique_ptr<ProcessGuard> prometheus_;
  std::unique_ptr<cli::CoordinatorClient> prometheus_client_;
  int prometheus_port_ = 0;
};

TEST_F(MetricsEndToEndTest, PrometheusScrapesASweepAndEveryDashboardQueryHasData) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/prometheus")) << "install the prometheus package (scripts/setup)";
  StartCluster();
  if (HasFatalFailure()) return;
  StartPrometheus();
  if (HasFatalFailure()) return;
  // Every discovered target is up: the coordinator and both workers (via /api/v1/sd).
  // Waited for before the sweep starts: Prometheus hands discovered targets to its
  // scrape loop at most every 5 s, and the first trial must not run unobserved.
  json targets;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto got = PrometheusApi("/api/v1/targets?state=active");
        if (!got.ok()) return false;
        targets = (*got)["activeTargets"];
        int up = 0;
        for (const auto& t : targets) up += t.value("health", "") == "up";
        return targets.size() == 3 && up == 3;
      },
      30s))
      << targets.dump(2);
  std::set<std::string> discovered;
  for (const auto& t : targets) {
    if (t["labels"].value("job", "") == "bakeoff-workers") discovered.insert(t["labels"].value("worker", ""));
  }
  EXPECT_EQ(discovered, (std::set<std::string>{"w1", "w2"}));

  const auto start = std::chrono::system_clock::now();

  auto created = client_->PostJson("/api/v1/sweeps", kSweep, "application/yaml");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string sweep_id = std::to_string((*created)["id"].get<int>());

  // Mid-run: a trial's series are live on a worker; lint both expositions then.
  const auto workers = WorkerMetricsUrls();
  ASSERT_EQ(workers.size(), 2u);
  std::string worker_text;
  ASSERT_TRUE(WaitFor(
      [&] {
        worker_text = Scrape(workers[0]);
        return worker_text.find("bakeoff_trial_tokens_total{") != std::string::npos;
      },
      60s))
      << "no live trial series on " << workers[0];
  auto worker_lint = testing::PromtoolCheckMetrics(worker_text);
  EXPECT_EQ(worker_lint.exit_code, 0) << worker_lint.output;
  EXPECT_NE(worker_text.find("bakeoff_gpu_utilization_ratio{"), std::string::npos) << "NVML series";
  // The coordinator hears of the run up to one event batch (100 ms) later.
  std::string coordinator_text;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto got = client_->GetText("/metrics");
        coordinator_text = got.ok() ? *got : "";
        return coordinator_text.find("bakeoff_sweep_trials{state=\"running\",sweep=\"" + sweep_id + "\"} 1") !=
               std::string::npos;
      },
      30s))
      << coordinator_text;
  auto coordinator_lint = testing::PromtoolCheckMetrics(coordinator_text);
  EXPECT_EQ(coordinator_lint.exit_code, 0) << coordinator_lint.output;

  const json sweep = WaitForSweepEnd(sweep_id, 90s);
  ASSERT_EQ(sweep.value("state", ""), "finished") << sweep.dump();
  EXPECT_EQ(sweep["counts"]["succeeded"], 4) << sweep.dump();

  // The trials ended: their series are gone from both workers' /metrics (their
  // history is in SQLite), while the worker's own series remain.
  for (const auto& worker : workers) {
    const std::string text = Scrape(worker);
    EXPECT_NE(text.find("bakeoff_worker_trials_finished_total{outcome=\"succeeded\"} 4"), std::string::npos) << text;
    EXPECT_EQ(text.find("trial=\""), std::string::npos) << worker << " still exports per-trial series:\n" << text;
  }

  // Template variables as Grafana would fill them for this sweep.
  auto trials = client_->GetJson("/api/v1/sweeps/" + sweep_id + "/trials");
  ASSERT_TRUE(trials.ok() && !trials->empty());
  std::set<std::string> variants;
  for (const auto& t : *trials) variants.insert(t["variant_key"].get<std::string>());
  std::string variant_regex;
  for (const auto& v : variants) variant_regex += (variant_regex.empty() ? "" : "|") + RegexEscape(v);
  std::string variant_raw_regex;  // ${variant:regex} in a backquoted (raw) PromQL string
  for (const auto& v : variants) {
    variant_raw_regex += (variant_raw_regex.empty() ? "" : "|") + testing::GrafanaEscapeRegex(v);
  }
  std::set<std::string> trial_ids;
  for (const auto& t : *trials) trial_ids.insert(std::to_string(t["id"].get<std::int64_t>()));
  const std::string trial_id = std::to_string((*trials)[0]["id"].get<std::int64_t>());
  const auto end = std::chrono::system_clock::now();
  const auto range_s = std::chrono::duration_cast<std::chrono::seconds>(end - start).count() + 5;
  const std::map<std::string, std::string> values = {
      {"sweep", sweep_id},          {"variant", "(" + variant_regex + ")"},
      {"variant:regex", "(" + variant_raw_regex + ")"}, {"worker:regex", "(w1|w2)"},
      {"trial", trial_id},          {"worker", "(w1|w2)"},
      {"__rate_interval", "4s"},    {"__interval", "1s"},
      {"__range", std::to_string(range_s) + "s"}};
  auto substitute = [&](std::string expr) {
    for (const auto& [name, value] : values) {
      int n = 0;
      expr = ReplaceAll(expr, "${" + name + "}", value, &n);
      expr = ReplaceAll(expr, "$" + name, value, &n);
    }
    return expr;
  };
  const double from = std::chrono::duration<double>(start.time_since_epoch()).count() - 5;
  auto query_range = [&](const std::string& expr) {
    // Up to now: the samples of the last scrapes arrive while the test waits below.
    const double to = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::ostringstream target;
    target.precision(15);
    target << "/api/v1/query_range?query=" << cli::UrlEncode(expr) << "&start=" << from << "&end=" << to
           << "&step=1";
    return PrometheusApi(target.str());
  };

  // Prometheus has every sample up to the end once one more scrape passed.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto got = query_range("bakeoff_sweep_trials{sweep=\"" + sweep_id + "\",state=\"finished\"} == 4");
        return got.ok() && !(*got)["result"].empty();
      },
      15s))
      << "Prometheus never saw the sweep finish";

  const auto files = testing::LoadDashboards();
  ASSERT_EQ(files.size(), 4u);
  // The variables' own queries find what they list.
  for (const auto& file : files) {
    for (const auto& variable : file.json["templating"]["list"]) {
      const std::string query = substitute(testing::VariableQuery(variable));
      static const std::regex kLabelValues(R"(^label_values\((.*),\s*(\w+)\)$)");
      static const std::regex kQueryResult(R"(^query_result\((.*)\)$)");
      std::smatch m;
      if (std::regex_match(query, m, kLabelValues)) {
        auto got = query_range(m[1].str());
        ASSERT_TRUE(got.ok()) << query << ": " << got.status().ToString();
        bool has_label = false;
        for (const auto& series : (*got)["result"]) has_label = has_label || series["metric"].contains(m[2].str());
        EXPECT_TRUE(has_label) << file.json["uid"] << " variable " << variable["name"] << ": " << query;
      } else if (std::regex_match(query, m, kQueryResult)) {
        auto got = query_range(m[1].str());
        ASSERT_TRUE(got.ok()) << query << ": " << got.status().ToString();
        // Grafana matches its regex against `name{label="value", ...}`; the sweep
        // variable must capture this sweep's id, the trial variable one of its trials.
        std::string pattern = variable.value("regex", "");
        pattern = std::regex_replace(pattern.substr(1, pattern.size() - 2), std::regex(R"(\?<\w+>)"), "");
        bool found = false;
        for (const auto& series : (*got)["result"]) {
          std::string text = series["metric"].value("__name__", "") + "{";
          for (const auto& [k, v] : series["metric"].items()) {
            if (k != "__name__") text += k + "=\"" + v.get<std::string>() + "\", ";
          }
          text += "}";
          std::smatch captured;
          const bool is_trial = variable.value("name", "") == "trial";
          if (std::regex_search(text, captured, std::regex(pattern)) && captured.size() >= 3 &&
              (is_trial ? trial_ids.count(captured[2].str()) > 0 : captured[2].str() == sweep_id)) {
            found = true;
          }
        }
        EXPECT_TRUE(found) << file.json["uid"] << " variable " << variable["name"] << " lists nothing of sweep " << sweep_id;
      } else {
        ADD_FAILURE() << "unknown variable query form: " << query;
      }
    }
  }

  // Every panel's every expression returns a series with at least one number.
  int checked = 0;
  for (const auto& q : testing::PanelQueries(files)) {
    const std::string expr = substitute(q.expr);
    EXPECT_EQ(expr.find('$'), std::string::npos) << "unsubstituted variable in " << expr;
    auto got = query_range(expr);
    ASSERT_TRUE(got.ok()) << q.dashboard << " / " << q.panel << ": " << expr << ": " << got.status().ToString();
    bool has_number = false;
    for (const auto& series : (*got)["result"]) {
      for (const auto& point : series["values"]) {
        const double v = std::stod(point[1].get<std::string>());
        has_number = has_number || std::isfinite(v);
      }
    }
    EXPECT_TRUE(has_number) << q.dashboard << " / " << q.panel << " (" << q.ref_id << "): no data for\n  " << expr;
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace bakeoff
