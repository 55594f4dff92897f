// The coordinator's live side: GET /metrics (state figures from the service, dispatch
// and store latency, HTTP requests), its token exemption, and GET /api/v1/sd.
#include "coordinator/coordinator_metrics.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <boost/asio/io_context.hpp>

#include "coordinator/coordinator_service.h"
#include "coordinator/http_server.h"
#include "protocol/version.h"
#include "tests/coordinator/coordinator_test_util.h"
#include "tests/coordinator/exposition_value.h"
#include "tests/metrics/prometheus/promtool_check.h"

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::ExpositionValue;

class NullLink : public WorkerLink {
 public:
  Status Send(const json& frame) override {
    frames.push_back(frame);
    return Status::Ok();
  }
  void Close() override {}
  std::vector<json> frames;
};

const std::string kSweep = std::string(R"(name: live
question: do the live metrics count trials?
)") + testing::kTinyWorkload + R"(parameters:
  micro_batch: {values: [1, 2, 4]}
  world_size: {value: 1}
baseline: {micro_batch: 1}
repeats: 1
limits: {trial_timeout: 60s, max_attempts: 2}
)";

class CoordinatorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-cmetrics");
    config_.submit_tokens = config_.worker_tokens = {"secret"};
    config_.heartbeat_timeout = 1000ms;
    ASSERT_NO_FATAL_FAILURE(testing::OpenTestStore(dir_, store_));
    Restart();
  }
  void Restart() {
    http_.reset();
    ASSERT_NO_FATAL_FAILURE(testing::StartService(service_, io_, config_, *store_, env_));
    http_ = std::make_unique<HttpServer>(io_.get_executor(), *service_, nullptr);
  }
  void TearDown() override {
    http_.reset();
    service_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::shared_ptr<NullLink> Register(const std::string& name, int metrics_port, const std::string& metrics_host = "",
                                     int slots = 1) {
    auto link = std::make_shared<NullLink>();
    protocol::RegisterMessage m;
    m.token = "secret";
    m.worker_name = name;
    m.host = "10.0.0." + std::to_string(links_.size() + 1);
    m.resources.cpu_slots = slots;
    m.store_ports = {30000, 30010};
    m.metrics_port = metrics_port;
    m.metrics_host = metrics_host;
    EXPECT_EQ(service_->OnRegister(m, link)["type"], "registered");
    links_[name] = link;
    return link;
  }
  void Pump() {
    io_.restart();
    io_.poll();
  }
  std::vector<json> Assigns(const std::string& worker) {
    std::vector<json> out;
    for (const auto& f : links_[worker]->frames) {
      if (f.value("type", "") == "assign") out.push_back(f);
    }
    return out;
  }
  void Frame(const std::string& worker, const json& frame) {
    service_->OnFrame(worker, links_[worker].get(), frame);
    Pump();
  }
  std::string Metrics() {
    HttpReply reply = http_->Handle("GET", "/metrics", "", "");
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(reply.content_type.rfind("text/plain; version=0.0.4", 0), 0u);
    return reply.body;
  }

  boost::asio::io_context io_;
  FakeClock clock_;
  TestEnv env_{clock_};  // the service's time and log
  CoordinatorConfig config_;
  std::filesystem::path dir_;
  std::unique_ptr<metrics::ResultsStore> store_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<HttpServer> http_;
  std::map<std::string, std::shared_ptr<NullLink>> links_;
};

TEST(CoordinatorMetricsRouteTest, RoutesAreLabelledByPatternNotByPath) {
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/api/v1/sweeps"), "/api/v1/sweeps");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/api/v1/sweeps/compile-vs-eager"), "/api/v1/sweeps/{sweep}");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/api/v1/sweeps/3/report?format=json"), "/api/v1/sweeps/{sweep}/report");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/api/v1/sweeps/3/cancel"), "/api/v1/sweeps/{sweep}/cancel");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/api/v1/workers/node-7/drain"), "/api/v1/workers/{worker}/drain");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/api/v1/sd"), "/api/v1/sd");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/metrics"), "/metrics");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/healthz?x=1"), "/healthz");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/wp-admin/../etc/passwd"), "other");
  EXPECT_EQ(CoordinatorMetrics::RouteOf("/api/v1/sweeps/a/b/c"), "other");
}

TEST_F(CoordinatorMetricsTest, MetricsNeedNoTokenByDefault) {
  EXPECT_EQ(http_->Handle("GET", "/metrics", "", "").status, 200);
  EXPECT_EQ(http_->Handle("GET", "/api/v1/sd", "", "").status, 401) << "discovery reveals addresses: token";
  EXPECT_EQ(http_->Handle("GET", "/api/v1/sd", "Bearer secret", "").status, 200);
  EXPECT_EQ(http_->Handle("POST", "/api/v1/sd", "Bearer secret", "").status, 405);
}

TEST_F(CoordinatorMetricsTest, MetricsNeedTheTokenWhenConfigured) {
  config_.metrics_require_token = true;
  Restart();
  HttpReply anonymous = http_->Handle("GET", "/metrics", "", "");
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_TRUE(anonymous.bearer_challenge);
  EXPECT_EQ(http_->Handle("GET", "/metrics", "Bearer wrong", "").status, 401);
  EXPECT_EQ(http_->Handle("GET", "/metrics", "Bearer secret", "").status, 200);
}

TEST_F(CoordinatorMetricsTest, SweepNamesAppearOnlyWhenMetricsNeedTheToken) {
  config_.metrics_require_token = true;
  Restart();
  auto submitted = service_->SubmitSweep(kSweep);
  ASSERT_TRUE(std::holds_alternative<json>(submitted));
  const std::string sweep = std::to_string(std::get<json>(submitted)["id"].get<int>());
  HttpReply reply = http_->Handle("GET", "/metrics", "Bearer secret", "");
  EXPECT_EQ(ExpositionValue(reply.body, "bakeoff_sweep_info{active=\"true\",name=\"live\",sweep=\"" + sweep + "\"}"), 1);
}

TEST_F(CoordinatorMetricsTest, ServiceDiscoveryListsLiveWorkersWithMetricsEndpoints) {
  Register("w1", 9101);
  Register("w2", 0);                // serves no /metrics
  Register("w3", 9103, "192.168.7.3");  // a separate metrics address
  Register("w4", 9104, "fd00::4");
  json sd = ServiceDiscoveryJson(service_->State());
  ASSERT_EQ(sd.size(), 3u) << sd.dump();
  std::map<std::string, std::string> targets;
  for (const auto& group : sd) {
    ASSERT_EQ(group["targets"].size(), 1u);
    targets[group["labels"]["worker"]] = group["targets"][0];
    EXPECT_EQ(group["labels"]["__meta_bakeoff_worker_state"], "alive");
  }
  EXPECT_EQ(targets["w1"], "10.0.0.1:9101");
  EXPECT_EQ(targets["w3"], "192.168.7.3:9103");
  EXPECT_EQ(targets["w4"], "[fd00::4]:9104");

  // A worker silent past the heartbeat timeout is lost and leaves the list.
  clock_.Advance(1500ms);
  for (const auto& name : {"w1", "w3"}) Frame(name, protocol::ToJson(protocol::HeartbeatMessage{}));
  service_->Tick();
  sd = ServiceDiscoveryJson(service_->State());
  ASSERT_EQ(sd.size(), 2u) << sd.dump();
  for (const auto& group : sd) EXPECT_NE(group["labels"]["worker"], "w4");
}

TEST_F(CoordinatorMetricsTest, StateFiguresFollowTrialsAndWorkers) {
  auto submitted = service_->SubmitSweep(kSweep);
  ASSERT_TRUE(std::holds_alternative<json>(submitted));
  const std::string sweep = std::to_string(std::get<json>(submitted)["id"].get<int>());
  Pump();
  std::string text = Metrics();
  EXPECT_EQ(ExpositionValue(text, "bakeoff_sweep_trials{state=\"queued\",sweep=\"" + sweep + "\"}"), 3);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trials{state=\"queued\"}"), 3);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_queue_depth"), 3);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_sweeps_active"), 1);
  // The open /metrics names no sweep: the id only.
  EXPECT_EQ(ExpositionValue(text, "bakeoff_sweep_info{active=\"true\",sweep=\"" + sweep + "\"}"), 1);
  EXPECT_EQ(text.find("name=\"live\""), std::string::npos);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_workers{state=\"alive\"}"), 0);

  Register("w1", 9101, "", 2);
  Pump();
  auto assigns = Assigns("w1");
  ASSERT_EQ(assigns.size(), 2u) << "two slots, two trials";
  text = Metrics();
  EXPECT_EQ(ExpositionValue(text, "bakeoff_sweep_trials{state=\"assigned\",sweep=\"" + sweep + "\"}"), 2);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_queue_depth"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_workers{state=\"alive\"}"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_workers_connected"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_cluster_cpu_slots{state=\"used\"}"), 2);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_cluster_cpu_slots{state=\"free\"}"), 0);

  // 2.5 s after submission the first rank starts: that is the dispatch latency.
  clock_.Advance(2500ms);
  const protocol::AttemptRef ref{assigns[0]["trial_id"], assigns[0]["attempt"]};
  protocol::EventsMessage events;
  events.events.push_back({ref, 0, {{"event", "started"}, {"pid", 1}}, 1});
  events.outbox_seq = 1;
  Frame("w1", protocol::ToJson(events));
  const json done = testing::FinishedFrame(ref, "oom", 2);
  Frame("w1", done);
  text = Metrics();
  EXPECT_EQ(ExpositionValue(text, "bakeoff_dispatch_latency_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(ExpositionValue(text, "bakeoff_dispatch_latency_seconds_sum"), 2.5);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_sweep_trial_outcomes{outcome=\"oom\",sweep=\"" + sweep + "\"}"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_sweep_trials{state=\"finished\",sweep=\"" + sweep + "\"}"), 1);
  EXPECT_GE(ExpositionValue(text, "bakeoff_store_write_seconds_count{operation=\"create_sweep\"}"), 1);
  EXPECT_GE(ExpositionValue(text, "bakeoff_store_write_seconds_count{operation=\"assign_trial\"}"), 2);
  EXPECT_GE(ExpositionValue(text, "bakeoff_store_write_seconds_count{operation=\"finish_trial\"}"), 1);
}

TEST_F(CoordinatorMetricsTest, LostAttemptsCountAsRequeues) {
  ASSERT_TRUE(std::holds_alternative<json>(service_->SubmitSweep(kSweep)));
  Register("w1", 9101);
  Pump();
  ASSERT_EQ(Assigns("w1").size(), 1u);
  clock_.Advance(1500ms);  // no heartbeat: w1 is lost, its attempt requeued
  service_->Tick();
  std::string text = Metrics();
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trials_requeued_total"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_workers{state=\"lost\"}"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_queue_depth"), 3);
}

TEST_F(CoordinatorMetricsTest, HttpRequestsAreCountedByRouteAndCode) {
  CoordinatorMetrics& m = service_->metrics();
  m.ObserveHttpRequest("/api/v1/sweeps/abc", 404);
  m.ObserveHttpRequest("/api/v1/sweeps/def", 404);
  m.ObserveHttpRequest("/api/v1/sweeps", 200);
  const std::string text = Metrics();
  EXPECT_EQ(ExpositionValue(text, R"(bakeoff_http_requests_total{code="404",route="/api/v1/sweeps/{sweep}"})"), 2);
  EXPECT_EQ(ExpositionValue(text, R"(bakeoff_http_requests_total{code="200",route="/api/v1/sweeps"})"), 1);
}

TEST_F(CoordinatorMetricsTest, BuildInfoNamesThisBuildsVersionAndCommit) {
  const std::string text = Metrics();
  const std::string series = std::string("bakeoff_build_info{commit=\"") + kBakeoffGitCommit +
                             "\",component=\"coordinator\",version=\"" + kBakeoffVersion + "\"}";
  EXPECT_EQ(ExpositionValue(text, series), 1) << text;
}

TEST_F(CoordinatorMetricsTest, ExpositionPassesPromtool) {
  ASSERT_TRUE(std::holds_alternative<json>(service_->SubmitSweep(kSweep)));
  Register("w1", 9101);
  Pump();
  service_->metrics().ObserveHttpRequest("/api/v1/sweeps", 201);
  const std::string text = Metrics();
  auto lint = testing::PromtoolCheckMetrics(text);
  EXPECT_EQ(lint.exit_code, 0) << lint.output << "\n" << text;
}

}  // namespace
}  // namespace bakeoff::coordinator
