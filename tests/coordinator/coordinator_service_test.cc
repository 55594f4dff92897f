#include "coordinator/coordinator_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "coordinator/http_server.h"
#include "metrics/store/read_only_query.h"
#include "metrics/report/report_builder.h"
#include "metrics/report/report_loader.h"
#include "protocol/token.h"
#include "tests/coordinator/coordinator_test_util.h"
#include "tests/integration/test_sweeps.h"  // EveryCombinationOfSevenAxes

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;

class RecordingLink : public WorkerLink {
 public:
  Status Send(const json& frame) override {
    if (closed) return Status::Unavailable("closed");
    frames.push_back(frame);
    return Status::Ok();
  }
  void Close() override { closed = true; }
  std::vector<json> Take(const std::string& type) {
    std::vector<json> out, rest;
    for (auto& f : frames) (f.value("type", "") == type ? out : rest).push_back(f);
    frames = rest;
    return out;
  }
  std::vector<json> frames;
  bool closed = false;
};

// A sweep of the tiny workload: `name`, its question when one is given, the lines under
// `parameters:` down to the baseline, `repeats` as written, and limits of 60 s and
// `max_attempts` a trial.
std::string TinySweep(const std::string& name, const std::string& parameters, const std::string& repeats,
                      int max_attempts = 2, const std::string& question = "") {
  return "name: " + name + "\n" + (question.empty() ? "" : "question: " + question + "\n") + testing::kTinyWorkload +
         "parameters:\n" + parameters + "repeats: " + repeats + "\nlimits: {trial_timeout: 60s, max_attempts: " +
         std::to_string(max_attempts) + "}\n";
}

// micro_batch 1 (the baseline) against 2, on one rank.
const std::string kOneRankPair = "  micro_batch: {values: [1, 2]}\n  world_size: {value: 1}\nbaseline: {micro_batch: 1}\n";

const std::string kSweep = TinySweep("svc", kOneRankPair, "1", 2, "does the service work?");

// Two pair groups (repeat 0's and repeat 1's), so that two one-slot workers each get a
// trial at once: a pair's two sides wait for one worker (docs/sweep.md, "Placement").
const std::string kTwoPairSweep = TinySweep("svc2", kOneRankPair, "2");

// Runs the reply's deferred work as the session would: blocking_work (off the
// executor), then what its reply leaves for the executor; and, as once the reply is
// written, lets go of what it held (a query's or report's slot).
HttpReply Complete(HttpReply reply) {
  if (reply.blocking_work) reply = reply.blocking_work();
  if (reply.then_on_executor) reply = reply.then_on_executor();
  reply.hold.reset();
  return reply;
}

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-svc");
    config_.submit_tokens = {"secret"};
    config_.read_tokens = {"reader"};
    config_.worker_tokens = {"worker-secret"};
    config_.heartbeat_timeout = 1000ms;
    config_.recovery_grace = 5000ms;
    ASSERT_NO_FATAL_FAILURE(testing::OpenTestStore(dir_, store_));
    ASSERT_NO_FATAL_FAILURE(RestartService());
  }
  void TearDown() override {
    service_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // The coordinator (re)starts: a new service over the same store, with config_.
  void RestartService() { testing::StartService(service_, io_, config_, *store_, env_); }
  // The coordinator restarts on its database capped `spare_pages` pages above its size
  // now: a disk that fills up.
  void RestartOnACappedStore(std::int64_t spare_pages) {
    service_.reset();
    store_.reset();
    const auto pages = std::filesystem::file_size(dir_ / "results.db") / 4096;
    ASSERT_NO_FATAL_FAILURE(testing::OpenTestStore(dir_, store_, static_cast<std::int64_t>(pages) + spare_pages));
    RestartService();
  }
  std::shared_ptr<RecordingLink> Register(const std::string& name, std::vector<protocol::AttemptRef> running = {}) {
    auto link = std::make_shared<RecordingLink>();
    protocol::RegisterMessage m;
    m.token = "worker-secret";
    m.worker_name = name;
    m.worker_secret = secrets_[name];  // a reconnect of the same worker
    m.host = "127.0.0.1";
    m.resources.cpu_slots = 1;
    m.store_ports = {30000, 30010};
    m.running = std::move(running);
    json reply = service_->OnRegister(m, link);
    EXPECT_EQ(reply["type"], "registered") << reply.dump();
    secrets_[name] = reply.value("worker_secret", "");
    links_[name] = link;
    Pump();  // the end of the turn: its group commits and what waited for it is sent
    return link;
  }
  // A registration of `name` with the worker credential and one CPU slot, and no secret:
  // what a second process taking that name sends.
  static protocol::RegisterMessage Registration(const std::string& name) {
    protocol::RegisterMessage m;
    m.token = "worker-secret";
    m.worker_name = name;
    m.resources.cpu_slots = 1;
    return m;
  }
  // After a restart: time passes beyond the recovery grace while `name` heartbeats
  // `running`, and the service ticks.
  void HeartbeatPastTheRecoveryGrace(const std::string& name, const protocol::AttemptRef& running) {
    clock_.Advance(6000ms);
    Frame(name, protocol::ToJson(protocol::HeartbeatMessage{{running}}));
    service_->Tick();
    Pump();
  }
  // Sends `events` with a block of `steps` measured steps (`step_s` each) of
  // `block_of`'s rank 0 as outbox frame 1 from worker `name`: the worker stays connected
  // and the frame is acknowledged, whatever of it was stored.
  void SendStepsAndExpectAcked(const std::string& name, protocol::EventsMessage events,
                               const protocol::AttemptRef& block_of, int steps, double step_s) {
    protocol::StepBlock block{block_of, 0, "measure", {}};
    for (int s = 0; s < steps; ++s) block.rows.push_back(protocol::StepRow{s, step_s, 64, 1e6});
    events.steps = {block};
    events.outbox_seq = 1;
    Frame(name, protocol::ToJson(events));
    EXPECT_FALSE(links_[name]->closed);
    auto acks = links_[name]->Take("ack");
    ASSERT_FALSE(acks.empty());
    EXPECT_EQ(acks.back()["outbox_seq"], 1);
  }
  // Worker `name` (one slot) registers and kSweep is submitted: it gets the sweep's
  // first trial, whose assignment goes to `assign`. Returns the worker's link;
  // `sweep_id` gets the sweep's id.
  std::shared_ptr<RecordingLink> RegisterAndSubmit(const std::string& name, json& assign,
                                                   std::int64_t* sweep_id = nullptr,
                                                   const std::string& yaml = kSweep) {
    auto link = Register(name);
    const auto id = Submit(yaml);
    if (sweep_id) *sweep_id = id;
    auto assigns = link->Take("assign");
    EXPECT_EQ(assigns.size(), 1u);
    assign = assigns.empty() ? json() : assigns[0];
    return link;
  }
  std::int64_t Submit(const std::string& yaml = kSweep) {
    auto result = service_->SubmitSweep(yaml);
    EXPECT_TRUE(std::holds_alternative<json>(result))
        << (std::holds_alternative<ApiError>(result) ? std::get<ApiError>(result).message : "");
    Pump();
    return std::get<json>(result)["id"];
  }
  void Pump() {
    io_.restart();
    io_.poll();
  }
  void Frame(const std::string& worker, const json& frame) {
    service_->OnFrame(worker, links_[worker].get(), frame);
    Pump();
  }
  // The worker's rank `rank` reports events, then the worker reports its part of the
  // attempt finished with `outcome`.
  void Succeed(const std::string& worker, const json& assign, std::int64_t seq, int rank = 0,
               const std::string& outcome = "succeeded", const std::string& reason = "",
               std::optional<double> tokens_per_s = std::nullopt) {
    protocol::AttemptRef ref{assign["trial_id"], assign["attempt"]};
    protocol::EventsMessage events;
    events.events.push_back({ref, rank, {{"event", "started"}, {"pid", 1}}, 1});
    events.events.push_back({ref, rank, {{"event", "step"}, {"step", 0}, {"phase", "measure"}, {"step_s", 0.1}, {"tokens", 16}, {"loss", 4.0}}, 2});
    if (outcome == "succeeded") {
      events.events.push_back({ref, rank, {{"event", "summary"}, {"tokens_per_s", tokens_per_s.value_or(160.0 + rank)}, {"step_s_median", 0.1}}, 3});
    }
    events.outbox_seq = seq;
    Frame(worker, protocol::ToJson(events));
    const json done = testing::FinishedFrame(ref, outcome, seq + 1, reason);
    Frame(worker, done);
  }
  metrics::TrialRecord Trial(std::int64_t id) { return store_->Reader()->GetTrial(id).value(); }
  // Two one-slot workers and one two-rank trial: the gang is split across them. Returns
  // each worker's assignment (w1's, w2's); `sweep_id` gets the sweep's id.
  std::pair<json, json> StartGang(const char* yaml, std::int64_t* sweep_id = nullptr) {
    auto w1 = Register("w1");
    auto w2 = Register("w2");
    const auto id = Submit(yaml);
    if (sweep_id) *sweep_id = id;
    auto a1 = w1->Take("assign");
    auto a2 = w2->Take("assign");
    EXPECT_EQ(a1.size(), 1u);
    EXPECT_EQ(a2.size(), 1u);
    if (a1.size() != 1 || a2.size() != 1) return {json(), json()};
    EXPECT_EQ(a1[0]["trial_id"], a2[0]["trial_id"]) << "one trial, two parts";
    return {a1[0], a2[0]};
  }

  std::filesystem::path dir_;
  boost::asio::io_context io_;
  FakeClock clock_;
  TestEnv env_{clock_};  // the service's time and log
  CoordinatorConfig config_;
  std::unique_ptr<metrics::ResultsStore> store_;
  std::unique_ptr<CoordinatorService> service_;
  std::map<std::string, std::shared_ptr<RecordingLink>> links_;
  std::map<std::string, std::string> secrets_;  // name -> the secret its last registration got
};

TEST_F(CoordinatorServiceTest, WrongTokenIsRejected) {
  auto link = std::make_shared<RecordingLink>();
  protocol::RegisterMessage m;
  m.token = "guess";
  m.worker_name = "intruder";
  m.resources.cpu_slots = 1;
  EXPECT_EQ(service_->OnRegister(m, link)["type"], "rejected");
  EXPECT_EQ(service_->connected_workers(), 0u);
}

TEST_F(CoordinatorServiceTest, AnApiTokenCannotRegisterAWorker) {
  for (const std::string token : {"secret", "reader"}) {
    auto link = std::make_shared<RecordingLink>();
    protocol::RegisterMessage m;
    m.token = token;
    m.worker_name = "w1";
    m.resources.cpu_slots = 1;
    auto reply = service_->OnRegister(m, link);
    EXPECT_EQ(reply["type"], "rejected") << token;
    EXPECT_NE(reply.dump().find("wrong worker token"), std::string::npos) << reply.dump();
  }
  EXPECT_EQ(service_->connected_workers(), 0u);
}

TEST_F(CoordinatorServiceTest, ALiveWorkersNameNeedsItsSecretUntilTheWorkerIsLost) {
  auto w1 = Register("w1");
  const std::string secret = secrets_["w1"];
  EXPECT_EQ(secret.size(), 32u);
  auto intruder = std::make_shared<RecordingLink>();
  protocol::RegisterMessage m = Registration("w1");
  for (const std::string guess : {"", "0123456789abcdef0123456789abcdef"}) {
    m.worker_secret = guess;
    auto reply = service_->OnRegister(m, intruder);
    EXPECT_EQ(reply["type"], "rejected");
    EXPECT_NE(reply.value("reason", "").find("in use by a live worker"), std::string::npos) << reply.dump();
    EXPECT_GT(reply.value("retry_after_ms", 0), 0) << "a temporary refusal";
  }
  EXPECT_FALSE(w1->closed) << "the live worker keeps its connection";
  Register("w1");  // the same worker, with its secret: accepted, same secret
  EXPECT_EQ(secrets_["w1"], secret);
  // Once the worker is lost, the name is free again, with a new secret.
  clock_.Advance(2000ms);
  service_->Tick();
  m.worker_secret = "";
  auto reply = service_->OnRegister(m, intruder);
  EXPECT_EQ(reply["type"], "registered") << reply.dump();
  EXPECT_NE(reply.value("worker_secret", ""), secret);
}

TEST_F(CoordinatorServiceTest, ReadTokenReadsButCannotSubmitCancelOrDrain) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  ASSERT_EQ(Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", kSweep)).status, 201);
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps", "Bearer reader", "").status, 200);
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps/svc/trials", "Bearer reader", "").status, 200);
  EXPECT_EQ(http.Handle("GET", "/api/v1/workers", "Bearer reader", "").status, 200);
  EXPECT_EQ(http.Handle("GET", "/api/v1/sd", "Bearer reader", "").status, 200);
  auto submit = http.Handle("POST", "/api/v1/sweeps", "Bearer reader", kSweep);
  EXPECT_EQ(submit.status, 403);
  EXPECT_NE(submit.body.find("read role"), std::string::npos) << submit.body;
  EXPECT_EQ(http.Handle("POST", "/api/v1/sweeps/svc/cancel", "Bearer reader", "").status, 403);
  EXPECT_EQ(http.Handle("POST", "/api/v1/workers/w1/drain", "Bearer reader", "").status, 403);
  EXPECT_EQ(http.Handle("DELETE", "/api/v1/sweeps", "Bearer reader", "").status, 403);
  EXPECT_EQ(http.Handle("POST", "/api/v1/sweeps/svc/cancel", "Bearer secret", "").status, 200);
}

// Issue 31: the page and its files need no token (they hold no data; the page asks for
// one and sends it in the Authorization header); the live figures need the read role;
// a wrong method on a known path is 405 with the methods it takes.
TEST_F(CoordinatorServiceTest, ThePageNeedsNoTokenTheLiveFiguresTheReadRoleAndAWrongMethodIs405) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  for (const std::string path : {"/", "/ui/app.js", "/ui/app.css", "/api/v1/openapi.json"}) {
    auto reply = http.Handle("GET", path, "", "");
    EXPECT_EQ(reply.status, 200) << path;
    EXPECT_FALSE(reply.body.empty()) << path;
  }
  EXPECT_TRUE(http.Handle("GET", "/", "", "").page);
  EXPECT_EQ(http.Handle("GET", "/", "", "").content_type, "text/html; charset=utf-8");
  EXPECT_EQ(http.Handle("GET", "/ui/other.js", "", "").status, 404);
  ASSERT_EQ(Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", kSweep)).status, 201);
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps/svc/live", "", "").status, 401);
  auto deferred = http.Handle("GET", "/api/v1/sweeps/svc/live", "Bearer reader", "");
  // Summing a sweep's steps may take seconds: never on the executor (review 2026-12-07, A5).
  ASSERT_TRUE(static_cast<bool>(deferred.blocking_work)) << "the live figures must not be summed on the executor";
  auto live = Complete(deferred);
  ASSERT_EQ(live.status, 200) << live.body;
  EXPECT_EQ(nlohmann::json::parse(live.body)["trials"], nlohmann::json::array()) << "no steps yet";
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps/nope/live", "Bearer reader", "").status, 404);
  auto wrong = http.Handle("PUT", "/api/v1/sweeps", "Bearer secret", "");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.allow, "GET or POST");
  EXPECT_EQ(http.Handle("POST", "/healthz", "", "").status, 405) << "a known path that needs no token";
  EXPECT_EQ(http.Handle("GET", "/api/v1/nothing", "Bearer reader", "").status, 404);
}

TEST_F(CoordinatorServiceTest, TheWorkerCredentialCannotCallTheApi) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  for (const std::string route : {"/api/v1/sweeps", "/api/v1/workers", "/api/v1/sd"}) {
    auto reply = http.Handle("GET", route, "Bearer worker-secret", "");
    EXPECT_EQ(reply.status, 401) << route;
    EXPECT_NE(reply.body.find("worker credential"), std::string::npos) << reply.body;
  }
  EXPECT_EQ(http.Handle("POST", "/api/v1/sweeps", "Bearer worker-secret", kSweep).status, 401);
}

TEST_F(CoordinatorServiceTest, AWorkerNameThatCouldForgeALogLineIsRejected) {
  for (const std::string& name : {std::string("w1\nbakeoff coordinator: sweep 1 (x) finished"), std::string(""),
                                 std::string(65, 'a'), std::string("w 1"), std::string("w\x1b[2J")}) {
    auto link = std::make_shared<RecordingLink>();
    protocol::RegisterMessage m;
    m.token = "worker-secret";
    m.worker_name = name;
    m.resources.cpu_slots = 1;
    auto reply = service_->OnRegister(m, link);
    EXPECT_EQ(reply["type"], "rejected") << name;
    EXPECT_NE(reply.dump().find("invalid worker name"), std::string::npos) << reply.dump();
  }
  EXPECT_EQ(service_->connected_workers(), 0u);
  Register(std::string(64, 'a'));  // the longest valid name
  EXPECT_EQ(service_->connected_workers(), 1u);
}

TEST_F(CoordinatorServiceTest, SweepRunsToTheEndAndIsAcknowledged) {
  auto w1 = Register("w1");
  auto w2 = Register("w2");
  const auto sweep_id = Submit();
  auto a1 = w1->Take("assign");
  ASSERT_EQ(a1.size(), 1u);
  EXPECT_TRUE(w2->Take("assign").empty()) << "the pair's other side waits for the first one's worker";
  EXPECT_EQ(a1[0]["timeout_ms"], 60000);
  EXPECT_EQ(a1[0]["store_address"].get<std::string>().rfind("127.0.0.1:300", 0), 0u);
  Succeed("w1", a1[0], 1);
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], 2);
  auto a2 = w1->Take("assign");
  ASSERT_EQ(a2.size(), 1u);
  EXPECT_NE(a1[0]["trial_id"], a2[0]["trial_id"]);
  Succeed("w1", a2[0], 3);
  auto sweep = store_->Reader()->GetSweep(sweep_id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->state, metrics::SweepState::kFinished);
  auto results = store_->Reader()->ListTrialResults(sweep_id).value();
  for (const auto& r : results) {
    EXPECT_EQ(r.trial.outcome, metrics::Outcome::kSucceeded);
    ASSERT_EQ(r.summaries.size(), 1u);
    EXPECT_EQ(r.summaries[0].body["tokens_per_s"], 160.0);
  }
  EXPECT_EQ(results[0].attempt->worker_id, results[1].attempt->worker_id) << "both sides of the pair on one worker";
}

// A running sweep's counts come from the trial table (a status read of a large sweep
// counted every trial in the store): they must say what the store says at every step.
TEST_F(CoordinatorServiceTest, LiveTrialCountsAgreeWithTheStoresCounts) {
  auto expect_same = [&](std::int64_t sweep_id, const char* when) {
    auto stored = store_->Reader()->GetSweep(sweep_id);
    ASSERT_TRUE(stored.ok());
    auto live = service_->State().table.LiveCounts(sweep_id);
    ASSERT_TRUE(live.has_value()) << when;
    EXPECT_EQ(live->queued, stored->counts.queued) << when;
    EXPECT_EQ(live->assigned, stored->counts.assigned) << when;
    EXPECT_EQ(live->running, stored->counts.running) << when;
    EXPECT_EQ(live->finished, stored->counts.finished) << when;
    EXPECT_EQ(live->succeeded, stored->counts.succeeded) << when;
    EXPECT_EQ(live->unsuccessful, stored->counts.unsuccessful) << when;
  };
  auto w1 = Register("w1");
  auto w2 = Register("w2");
  std::string yaml = kSweep;
  yaml.replace(yaml.find("repeats: 1"), 10, "repeats: 3");  // 6 trials: some stay queued
  const auto sweep_id = Submit(yaml);
  auto a1 = w1->Take("assign");
  auto a2 = w2->Take("assign");
  ASSERT_EQ(a1.size(), 1u);
  ASSERT_EQ(a2.size(), 1u);
  expect_same(sweep_id, "two assigned, four queued");
  ASSERT_TRUE(service_->State().table.LiveCounts(sweep_id).has_value());
  EXPECT_EQ(service_->State().table.LiveCounts(sweep_id)->assigned, 2);
  EXPECT_EQ(service_->State().table.LiveCounts(sweep_id)->queued, 4);
  Succeed("w1", a1[0], 1);
  expect_same(sweep_id, "one succeeded, the next assigned");
  Succeed("w2", a2[0], 1, 0, "failed", "the trainer crashed");
  expect_same(sweep_id, "one failed");
  ASSERT_TRUE(service_->State().table.LiveCounts(sweep_id).has_value());
  EXPECT_EQ(service_->State().table.LiveCounts(sweep_id)->succeeded, 1);
  EXPECT_EQ(service_->State().table.LiveCounts(sweep_id)->finished, 2);
}

// Events arrive as JSON in a frame and are read into their types once: one that does
// not read (a worker that skipped the checks) is dropped, the rest of the frame stored
// and acknowledged; typed fields go to columns, the event as written to storage.
TEST_F(CoordinatorServiceTest, AnUnreadableEventIsDroppedAndTheRestOfItsFrameStored) {
  json assign;
  std::int64_t sweep_id = 0;
  auto w1 = RegisterAndSubmit("w1", assign, &sweep_id);
  protocol::AttemptRef ref{assign["trial_id"], assign["attempt"]};
  protocol::EventsMessage events;
  events.events.push_back({ref, 0, {{"event", "started"}, {"pid", 1}, {"at", 1234.5}, {"host", "n1"}}, 1});
  events.events.push_back({ref, 0, {{"event", "step"}, {"step", 0}, {"step_s", "fast"}}, 2});
  events.events.push_back(
      {ref, 0, {{"event", "step"}, {"step", 1}, {"phase", "warmup"}, {"step_s", 0.25}, {"tokens", 16}, {"note", 1}}, 3});
  events.events.push_back({ref, 0, {{"event", "summary"}, {"tokens_per_s", 64.0}, {"custom", {{"graphs", 2}}}}, 4});
  events.outbox_seq = 1;
  Frame("w1", protocol::ToJson(events));
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], 1) << "the frame is acknowledged";
  EXPECT_EQ(Trial(ref.trial_id).state, metrics::TrialState::kRunning);

  auto steps = store_->Reader()->ReadStepMetrics(ref.trial_id).value();
  ASSERT_EQ(steps.size(), 1u) << "the mistyped step is dropped";
  EXPECT_EQ(steps[0].row.step, 1);
  EXPECT_EQ(steps[0].phase, "warmup");
  EXPECT_EQ(steps[0].row.step_s, 0.25);
  EXPECT_EQ(steps[0].row.tokens, 16);
  auto stored = store_->Reader()->ReadEvents(ref.trial_id).value();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].kind, "started");
  EXPECT_EQ(stored[0].at, 1234.5);
  EXPECT_EQ(stored[0].data["host"], "n1");
  auto results = store_->Reader()->ListTrialResults(sweep_id).value();
  bool found = false;
  for (const auto& r : results) {
    if (r.trial.id != ref.trial_id) continue;
    ASSERT_EQ(r.summaries.size(), 1u);
    EXPECT_EQ(r.summaries[0].body["custom"]["graphs"], 2) << "unknown fields are stored as written";
    found = true;
  }
  EXPECT_TRUE(found);
}

// A step whose phase is neither warmup nor measure cannot be stored (step_metrics.phase);
// it is dropped on reading, so the rest of the frame is acknowledged rather than the
// connection closed and the same frame resent forever.
TEST_F(CoordinatorServiceTest, AStepOfAnUnknownPhaseDoesNotHoldItsFrameBack) {
  json assign;
  auto w1 = RegisterAndSubmit("w1", assign);
  protocol::AttemptRef ref{assign["trial_id"], assign["attempt"]};
  protocol::EventsMessage events;
  events.events.push_back({ref, 0, {{"event", "step"}, {"step", 0}, {"phase", "eval"}, {"step_s", 0.1}}, 1});
  events.events.push_back({ref, 0, {{"event", "step"}, {"step", 1}, {"phase", "measure"}, {"step_s", 0.1}}, 2});
  events.outbox_seq = 1;
  Frame("w1", protocol::ToJson(events));
  EXPECT_FALSE(w1->closed);
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], 1);
  auto steps = store_->Reader()->ReadStepMetrics(ref.trial_id).value();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].row.step, 1);
}

// Steps in blocks (protocol 2): stored once a row per step; a block sent again is kept
// once; a block with a value that does not read is dropped alone and the frame is
// acknowledged; a block of another attempt is stale.
TEST_F(CoordinatorServiceTest, StepBlocksAreStoredOnceAndABadBlockIsDroppedAlone) {
  json assign;
  auto w1 = RegisterAndSubmit("w1", assign);
  protocol::AttemptRef ref{assign["trial_id"], assign["attempt"]};
  auto block = [&](protocol::AttemptRef attempt, int first, int n) {
    protocol::StepBlock b{attempt, 0, "measure", {}};
    for (int s = first; s < first + n; ++s) b.rows.push_back(protocol::StepRow{s, 0.1 * (s + 1), 64, 5.0 - s});
    return b;
  };
  protocol::EventsMessage events;
  events.steps = {block(ref, 0, 3), block({ref.trial_id, ref.attempt + 1}, 0, 3)};
  events.outbox_seq = 1;
  json frame = protocol::ToJson(events);
  Frame("w1", frame);
  Frame("w1", frame);  // a resend after a reconnect
  protocol::EventsMessage more;
  more.steps = {block(ref, 3, 2), block(ref, 5, 2)};
  more.outbox_seq = 2;
  json with_bad = protocol::ToJson(more);
  with_bad["steps"][1]["step_s"][0] = "slow";
  Frame("w1", with_bad);
  EXPECT_FALSE(w1->closed);
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], 2);
  auto steps = store_->Reader()->ReadStepMetrics(ref.trial_id).value();
  ASSERT_EQ(steps.size(), 5u) << "steps 0-4 once each; not the bad block's 5-6, nor the other attempt's";
  for (int s = 0; s < 5; ++s) {
    EXPECT_EQ(steps[s].row.step, s);
    EXPECT_DOUBLE_EQ(steps[s].row.step_s, 0.1 * (s + 1));
    EXPECT_EQ(steps[s].row.tokens, 64);
    EXPECT_DOUBLE_EQ(*steps[s].row.loss, 5.0 - s);
    EXPECT_FALSE(steps[s].row.lr.has_value());
  }
}

// One two-rank trial over two one-slot workers: a gang split across nodes.
const char* kGangSweep = R"(name: gang
question: does a gang finish only when all of it has?
workload:
  executor: lora
  model: tiny
  seq_len: 16
  warmup_steps: 1
  steps: 2
parameters:
  micro_batch: {values: [1]}
  world_size: {value: 2}
baseline: {micro_batch: 1}
repeats: 1
limits: {trial_timeout: 60s, max_attempts: 2}
)";

TEST_F(CoordinatorServiceTest, GangTrialSucceedsOnlyWhenEveryWorkersPartHasFinished) {
  std::int64_t sweep_id = 0;
  auto [a1, a2] = StartGang(kGangSweep, &sweep_id);
  ASSERT_FALSE(a1.is_null());
  const std::int64_t trial = a1["trial_id"];
  const int rank1 = a1["ranks"][0]["rank"];
  const int rank2 = a2["ranks"][0]["rank"];
  ASSERT_NE(rank1, rank2);
  Succeed("w1", a1, 1, rank1);
  // w1's part is done, w2's rank is still training: the trial is not over.
  EXPECT_EQ(Trial(trial).state, metrics::TrialState::kRunning);
  EXPECT_TRUE(links_["w2"]->Take("cancel").empty()) << "the other part must not be stopped";
  Succeed("w2", a2, 1, rank2);
  EXPECT_EQ(Trial(trial).state, metrics::TrialState::kFinished);
  EXPECT_EQ(Trial(trial).outcome, metrics::Outcome::kSucceeded);
  auto results = store_->Reader()->ListTrialResults(sweep_id).value();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].summaries.size(), 2u) << "each rank's summary is stored";
}

TEST_F(CoordinatorServiceTest, GangTrialFailsWhenALaterPartFailsAfterAnotherSucceeded) {
  auto [a1, a2] = StartGang(kGangSweep);
  ASSERT_FALSE(a1.is_null());
  const std::int64_t trial = a1["trial_id"];
  Succeed("w1", a1, 1, a1["ranks"][0]["rank"]);
  Succeed("w2", a2, 1, a2["ranks"][0]["rank"], "failed", "rank 1: boom");
  EXPECT_EQ(Trial(trial).state, metrics::TrialState::kFinished);
  EXPECT_EQ(Trial(trial).outcome, metrics::Outcome::kFailed);
  EXPECT_EQ(Trial(trial).reason, "worker w2: rank 1: boom");
}

TEST_F(CoordinatorServiceTest, GangWorkerLostAfterTheOtherPartFinishedLosesTheAttempt) {
  auto [a1, a2] = StartGang(kGangSweep);
  ASSERT_FALSE(a1.is_null());
  const std::int64_t trial = a1["trial_id"];
  Succeed("w1", a1, 1, a1["ranks"][0]["rank"]);
  clock_.Advance(600ms);
  Frame("w1", protocol::ToJson(protocol::HeartbeatMessage{}));
  clock_.Advance(600ms);  // w2 silent past the heartbeat timeout
  service_->Tick();
  Pump();
  EXPECT_EQ(Trial(trial).state, metrics::TrialState::kQueued) << "lost, requeued for attempt 2";
  EXPECT_EQ(store_->Reader()->ListAttempts(trial).value()[0].outcome, metrics::Outcome::kLost);
}

// Issue 33 item 6: an attempt that Bakeoff's own machinery lost before the variant ran
// (the worker says so) is retried without using up max_attempts, a bounded number of
// times; a lost attempt the worker does not call infrastructure uses one up.
TEST_F(CoordinatorServiceTest, AnInfrastructureFailureIsRetriedWithoutUsingUpMaxAttempts) {
  const std::string one_attempt = TinySweep("infra", kOneRankPair, "1", 1);
  json a;
  auto w1 = RegisterAndSubmit("w1", a, nullptr, one_attempt);
  const std::int64_t trial = a["trial_id"];
  std::int64_t seq = 1;
  // w1 says the attempt it holds was lost to Bakeoff's own machinery.
  auto infrastructure_loss = [&](const std::string& reason) {
    protocol::AttemptFinishedMessage lost;
    lost.attempt = {trial, a["attempt"]};
    lost.outcome = "lost";
    lost.reason = "infrastructure: " + reason;
    lost.infrastructure = true;
    lost.outbox_seq = seq++;
    Frame("w1", protocol::ToJson(lost));
  };
  for (int i = 0; i < kMaxInfrastructureRetries; ++i) {
    infrastructure_loss("the rank store's port 30000 on this host is in use");
    auto again = w1->Take("assign");
    ASSERT_EQ(again.size(), 1u) << "retry " << i << " of a one-attempt trial";
    EXPECT_EQ(again[0]["trial_id"], trial);
    EXPECT_EQ(again[0]["attempt"], i + 2);
    a = again[0];
  }
  EXPECT_EQ(Trial(trial).max_attempts, 1 + kMaxInfrastructureRetries) << "the grant is stored";
  // Past the bound, an infrastructure loss ends the trial like any other.
  infrastructure_loss("again");
  EXPECT_EQ(Trial(trial).state, metrics::TrialState::kFinished);
  EXPECT_EQ(Trial(trial).outcome, metrics::Outcome::kLost);

  // The sweep's other trial: a plain lost attempt uses up its only attempt.
  auto next = w1->Take("assign");
  ASSERT_EQ(next.size(), 1u);
  Frame("w1", testing::FinishedFrame({next[0]["trial_id"], next[0]["attempt"]}, "lost", seq++, "rank died"));
  EXPECT_EQ(Trial(next[0]["trial_id"]).state, metrics::TrialState::kFinished);
  EXPECT_EQ(Trial(next[0]["trial_id"]).outcome, metrics::Outcome::kLost);
}

TEST_F(CoordinatorServiceTest, AWorkerThatSaysGoodbyeIsGoneNotLostAndItsAttemptIsRequeuedAtOnce) {
  json a;
  auto w1 = RegisterAndSubmit("w1", a);
  const std::int64_t trial = a["trial_id"];
  Frame("w1", protocol::ToJson(protocol::GoodbyeMessage{}));
  EXPECT_TRUE(w1->closed);
  EXPECT_EQ(Trial(trial).state, metrics::TrialState::kQueued) << "requeued now, not after the heartbeat timeout";
  auto worker = [&] {
    const auto workers = store_->Reader()->ListWorkers().value();  // a local: value() of a temporary dangles
    for (const auto& w : workers) {
      if (w.id == "w1") return w.state;
    }
    return metrics::WorkerState::kIdle;
  };
  EXPECT_EQ(worker(), metrics::WorkerState::kGone);
  clock_.Advance(5000ms);  // far past the heartbeat timeout
  service_->Tick();
  Pump();
  EXPECT_EQ(worker(), metrics::WorkerState::kGone) << "a gone worker is never reported lost";
}

TEST_F(CoordinatorServiceTest, SilentWorkerIsLostAndItsTrialRequeuedElsewhere) {
  json a1;
  auto w1 = RegisterAndSubmit("w1", a1, nullptr, kTwoPairSweep);
  const std::int64_t trial = a1["trial_id"];
  auto w2 = Register("w2");
  Pump();
  ASSERT_EQ(w2->Take("assign").size(), 1u);  // the second pair's first trial
  clock_.Advance(600ms);
  Frame("w2", protocol::ToJson(protocol::HeartbeatMessage{}));
  clock_.Advance(600ms);  // w1 silent 1.2 s > 1 s TTL; w2 heard 0.6 s ago
  service_->Tick();
  Pump();
  EXPECT_TRUE(w1->closed);
  auto t = Trial(trial);
  EXPECT_EQ(t.state, metrics::TrialState::kQueued);
  EXPECT_EQ(t.attempts_used, 1);
  auto attempts = store_->Reader()->ListAttempts(trial).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome, metrics::Outcome::kLost);
}

TEST_F(CoordinatorServiceTest, LostTwiceWithTwoAttemptsFinishesLost) {
  json a;
  auto w1 = RegisterAndSubmit("w1", a);
  const std::int64_t trial = a["trial_id"];
  for (int i = 0; i < 2; ++i) {
    clock_.Advance(1500ms);
    service_->Tick();
    Pump();
    if (i == 0) {
      w1 = Register("w1");  // comes back; gets the trial again (attempt 2)
      Pump();
    }
  }
  EXPECT_EQ(Trial(trial).state, metrics::TrialState::kFinished);
  EXPECT_EQ(Trial(trial).outcome, metrics::Outcome::kLost);
  EXPECT_EQ(Trial(trial).attempts_used, 2);
}

TEST_F(CoordinatorServiceTest, StaleAttemptEventsAndResultsAreIgnored) {
  json a;
  auto w1 = RegisterAndSubmit("w1", a);
  const std::int64_t trial = a["trial_id"];
  clock_.Advance(1500ms);
  service_->Tick();
  Pump();
  auto w2 = Register("w2");
  Pump();
  auto again = w2->Take("assign");
  ASSERT_FALSE(again.empty());
  // The old attempt's late result arrives through a reconnected w1: ignored.
  w1 = Register("w1", {{trial, 1}});
  EXPECT_FALSE(w1->Take("cancel").empty()) << "a stale attempt is told to stop";
  const json late = testing::FinishedFrame({trial, 1}, "oom", 1);
  Frame("w1", late);
  EXPECT_NE(Trial(trial).state, metrics::TrialState::kFinished);
  EXPECT_FALSE(w1->Take("ack").empty()) << "stale results are acknowledged so they are not resent";
}

// Security review 2026-12-02, test gap: the stale-attempt check at ingest, on its own.
// After a requeue the old worker's events for attempt 1 (started, steps, summary) change
// nothing: the trial stays with attempt 2 on w2, no step or summary of attempt 1 is
// stored, and the frame is still acknowledged (so it is not resent).
TEST_F(CoordinatorServiceTest, EventsOfAStaleAttemptAreNeitherStoredNorAppliedAtIngest) {
  json a;
  std::int64_t sweep_id = 0;
  auto w1 = RegisterAndSubmit("w1", a, &sweep_id);
  const std::int64_t trial = a["trial_id"];
  clock_.Advance(1500ms);
  service_->Tick();
  Pump();
  auto w2 = Register("w2");
  auto again = w2->Take("assign");
  ASSERT_FALSE(again.empty());
  ASSERT_EQ(again[0]["attempt"], 2);
  w1 = Register("w1", {{trial, 1}});
  const protocol::AttemptRef stale{trial, 1};
  protocol::EventsMessage events;
  events.events.push_back({stale, 0, {{"event", "started"}, {"pid", 4242}}, 1});
  events.events.push_back({stale, 0, {{"event", "summary"}, {"tokens_per_s", 1.0}, {"step_s_median", 9.0}}, 2});
  SendStepsAndExpectAcked("w1", events, stale, 3, 9.0);
  EXPECT_TRUE(store_->Reader()->ReadStepMetrics(trial).value().empty()) << "no step of the stale attempt is stored";
  for (const auto& r : store_->Reader()->ListTrialResults(sweep_id).value()) {
    if (r.trial.id == trial) {
      EXPECT_TRUE(r.summaries.empty()) << "no summary of the stale attempt is stored";
    }
  }
  const auto stored = Trial(trial);
  EXPECT_EQ(stored.attempts_used, 2) << "the stale started event did not take the trial back";
  EXPECT_NE(stored.state, metrics::TrialState::kFinished);
  const std::string metrics = service_->MetricsText();
  EXPECT_EQ(metrics.find("bakeoff_worker_foreign_events_total 3"), std::string::npos)
      << "stale events are not counted as forged ones";
}

// Security review 2026-12-02, hole 1: a worker speaks only for the ranks of the current
// attempts it was given. Another worker's trial, a rank its trial does not have and a
// rank given to another worker are dropped; its own ranks' events in the same frame are
// stored and the frame acknowledged.
TEST_F(CoordinatorServiceTest, AWorkerCannotWriteEventsForRanksItWasNotGiven) {
  json victim_assign;
  std::int64_t sweep_id = 0;
  RegisterAndSubmit("good", victim_assign, &sweep_id, kTwoPairSweep);
  auto evil = Register("evil");
  auto evil_assigns = evil->Take("assign");
  ASSERT_EQ(evil_assigns.size(), 1u) << "the second pair's first trial";
  const protocol::AttemptRef victim{victim_assign["trial_id"], victim_assign["attempt"]};
  const protocol::AttemptRef own{evil_assigns[0]["trial_id"], evil_assigns[0]["attempt"]};
  const json forged = {{"event", "summary"}, {"tokens_per_s", 1.0}, {"step_s_median", 99.0},
                       {"peak_mem_bytes", 1e15}, {"applied", {{"fell_back", true}, {"fallback_reason", "forged"}}}};
  protocol::EventsMessage events;
  events.events.push_back({victim, 0, forged, 1});   // another worker's trial
  // Ranks its one-rank trial does not have, at the edges: rank == world_size (an
  // off-by-one there once passed every test, which used rank 7) and a negative one.
  events.events.push_back({own, 1, forged, 2});
  events.events.push_back({own, -1, forged, 4});
  events.events.push_back({own, 0, {{"event", "summary"}, {"tokens_per_s", 150.0}, {"step_s_median", 0.1}}, 3});
  // Its own rank's summary is stored and the frame acknowledged.
  SendStepsAndExpectAcked("evil", events, victim, 5, 50.0);
  EXPECT_TRUE(store_->Reader()->ReadStepMetrics(victim.trial_id).value().empty()) << "no forged steps";

  Succeed("good", victim_assign, 1, 0, "succeeded", "", 160.0);
  for (const auto& r : store_->Reader()->ListTrialResults(sweep_id).value()) {
    if (r.trial.id != victim.trial_id && r.trial.id != own.trial_id) continue;  // not run yet
    ASSERT_EQ(r.summaries.size(), 1u) << "trial " << r.trial.id << ": one summary, of rank 0";
    EXPECT_EQ(r.summaries[0].rank, 0);
    const double tps = r.summaries[0].body.value("tokens_per_s", 0.0);
    EXPECT_EQ(tps, r.trial.id == victim.trial_id ? 160.0 : 150.0) << "the real summary, not the forged one";
  }
  const std::string metrics = service_->MetricsText();
  EXPECT_NE(metrics.find("bakeoff_worker_foreign_events_total 4"), std::string::npos)
      << "three summaries and one step block were foreign";
}

// Review 2026-12-02, hole 7 (the store's half): one trial's flood of undocumented events
// stored 519,000 rows. Each (attempt, rank) stores at most its quota; the rest is
// dropped and counted, and the frame is still acknowledged.
TEST_F(CoordinatorServiceTest, ARanksEventsOverItsQuotaAreDroppedAndCounted) {
  json assign;
  RegisterAndSubmit("w1", assign);
  const protocol::AttemptRef attempt{assign["trial_id"], assign["attempt"]};
  const std::size_t quota = EventIngest::kMaxOtherEventsPerRank;
  protocol::EventsMessage events;
  events.events.push_back({attempt, 0, {{"event", "started"}, {"pid", 1}}, 1});  // one of the quota
  for (std::size_t i = 0; i < quota + 5; ++i) {
    events.events.push_back({attempt, 0, {{"event", "x"}, {"i", i}}, static_cast<std::int64_t>(i + 2)});
  }
  events.events.push_back({attempt, 0, {{"event", "summary"}, {"tokens_per_s", 150.0}, {"step_s_median", 0.1}},
                           static_cast<std::int64_t>(quota + 7)});
  SendStepsAndExpectAcked("w1", events, attempt, 5, 0.1);
  auto stored = store_->Reader()->ReadEvents(attempt.trial_id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  std::size_t floods = 0;
  for (const auto& e : *stored) floods += e.kind == "x";
  EXPECT_EQ(floods, quota - 1);
  EXPECT_EQ(store_->Reader()->ReadStepMetrics(attempt.trial_id).value().size(), 5u) << "steps have their own quota";
  Frame("w1", testing::FinishedFrame(attempt, "succeeded", 2, ""));
  EXPECT_EQ(Trial(attempt.trial_id).outcome, metrics::Outcome::kSucceeded);
  auto results = store_->Reader()->ListTrialResults(Trial(attempt.trial_id).sweep_id).value();
  bool summary_stored = false;
  for (const auto& r : results) summary_stored |= r.trial.id == attempt.trial_id && r.summaries.size() == 1;
  EXPECT_TRUE(summary_stored) << "a summary is not one of the capped kinds";
  EXPECT_NE(service_->MetricsText().find("bakeoff_worker_over_quota_events_total 6"), std::string::npos);
}

// Security review 2026-12-07, A6: the quota is in bytes too. 40 events of 1 MB each are
// within the count quota (1,000) but not the byte quota (16 MiB): at most 16 of them are
// stored, the rest dropped and counted, and every frame is still acknowledged. (The
// other direction, many small events, is the count quota's test above.)
TEST_F(CoordinatorServiceTest, ARanksEventsOverItsByteQuotaAreDroppedAndCounted) {
  json assign;
  RegisterAndSubmit("w1", assign);
  const protocol::AttemptRef attempt{assign["trial_id"], assign["attempt"]};
  const std::string megabyte(1'000'000, 'x');
  std::int64_t seq = 1;
  for (int frame = 0; frame < 4; ++frame) {
    protocol::EventsMessage events;
    for (int i = 0; i < 10; ++i) events.events.push_back({attempt, 0, {{"event", "big"}, {"pad", megabyte}}, seq++});
    SendStepsAndExpectAcked("w1", events, attempt, 1, 0.1);
  }
  auto stored = store_->Reader()->ReadEvents(attempt.trial_id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  std::size_t big = 0, bytes = 0;
  for (const auto& e : *stored) {
    if (e.kind != "big") continue;
    ++big;
    bytes += e.data.dump().size();
  }
  EXPECT_EQ(big, 16u) << "16 of 1,000,024 bytes fit in 16 MiB, the 17th does not";
  EXPECT_LE(bytes, EventIngest::kMaxEventBytesPerRank);
  EXPECT_NE(service_->MetricsText().find("bakeoff_worker_over_quota_events_total 24"), std::string::npos)
      << service_->MetricsText();
}

// Issue 33, balanced placement: with two one-slot workers and an interleaved sweep,
// both sides of every pair (a variant's repeat r and its baseline's repeat r) run on
// one worker, whichever finishes first, and the pairs alternate between the workers.
TEST_F(CoordinatorServiceTest, BothSidesOfEveryPairRunOnOneWorker) {
  auto w1 = Register("w1");
  auto w2 = Register("w2");
  const std::string yaml = std::string("name: pairs\n") + testing::kTinyWorkload + R"(parameters:
  micro_batch: {values: [1, 2]}
baseline: {micro_batch: 1}
repeats: 4
order: interleaved
)";
  const std::int64_t sweep_id = Submit(yaml);
  std::map<std::string, std::shared_ptr<RecordingLink>> links{{"w1", w1}, {"w2", w2}};
  std::map<std::string, std::int64_t> seq{{"w1", 10}, {"w2", 10}};
  // Finish whatever each worker holds, w2 first on odd rounds: the order of finishing
  // must not decide where a pair's second side runs.
  for (int round = 0; round < 12; ++round) {
    for (const std::string& name : round % 2 ? std::vector<std::string>{"w2", "w1"} : std::vector<std::string>{"w1", "w2"}) {
      for (const json& a : links[name]->Take("assign")) {
        Succeed(name, a, seq[name]);
        seq[name] += 2;
      }
    }
  }
  auto results = store_->Reader()->ListTrialResults(sweep_id).value();
  ASSERT_EQ(results.size(), 8u);
  std::map<int, std::set<std::string>> workers_of_repeat;
  std::set<std::string> used;
  for (const auto& r : results) {
    EXPECT_EQ(r.trial.outcome, metrics::Outcome::kSucceeded) << r.trial.reason;
    ASSERT_TRUE(r.attempt.has_value());
    workers_of_repeat[static_cast<int>(r.trial.repeat)].insert(r.attempt->worker_id);
    used.insert(r.attempt->worker_id);
  }
  for (const auto& [repeat, workers] : workers_of_repeat) {
    EXPECT_EQ(workers.size(), 1u) << "repeat " << repeat << "'s pair was split across workers";
  }
  EXPECT_EQ(used.size(), 2u) << "both workers ran pairs";
}

// Security review 2026-12-02, hole 2: a registration claiming more than the operator
// allows is refused with the flag to raise, and the worker is not registered.
TEST_F(CoordinatorServiceTest, AWorkerOfferingMoreThanTheCoordinatorAllowsIsRefused) {
  protocol::RegisterMessage m;
  m.token = "worker-secret";
  m.worker_name = "rogue";
  m.host = "127.0.0.1";
  m.resources.cpu_slots = 1000000;
  json reply = service_->OnRegister(m, std::make_shared<RecordingLink>());
  EXPECT_EQ(reply["type"], "rejected") << reply.dump();
  EXPECT_NE(reply.dump().find("--max-worker-slots"), std::string::npos) << reply.dump();
  m.resources.cpu_slots = 1;
  m.resources.cuda_devices = std::vector<int>(17, 0);
  EXPECT_EQ(service_->OnRegister(m, std::make_shared<RecordingLink>())["type"], "rejected") << "17 GPUs";
  m.resources.cpu_slots = static_cast<int>(config_.max_worker_slots);
  m.resources.cuda_devices.clear();
  EXPECT_EQ(service_->OnRegister(m, std::make_shared<RecordingLink>())["type"], "registered") << "at the cap";
}

// Security review 2026-12-02, hole 2: a worker that heartbeats but never ends its attempt
// held trials past their timeout. The coordinator keeps its own deadline: trial_timeout
// plus the grace after assignment, the attempt ends `timeout` and a cancel is sent.
TEST_F(CoordinatorServiceTest, AnAttemptItsWorkerNeverEndsEndsTimeoutAtTheCoordinatorsDeadline) {
  json a;
  auto w1 = RegisterAndSubmit("w1", a);
  const std::int64_t trial = a["trial_id"];
  const auto deadline = 60000ms + config_.attempt_deadline_grace;
  for (auto waited = 0ms; waited < deadline - 1000ms; waited += 500ms) {
    clock_.Advance(500ms);
    Frame("w1", protocol::ToJson(protocol::HeartbeatMessage{{{trial, 1}}}));
    service_->Tick();
    Pump();
  }
  EXPECT_NE(Trial(trial).state, metrics::TrialState::kFinished) << "not before its deadline";
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(500ms);
    Frame("w1", protocol::ToJson(protocol::HeartbeatMessage{{{trial, 1}}}));
    service_->Tick();
    Pump();
  }
  auto t = Trial(trial);
  EXPECT_EQ(t.state, metrics::TrialState::kFinished);
  EXPECT_EQ(t.outcome, metrics::Outcome::kTimeout);
  EXPECT_NE(t.reason.find("coordinator's deadline"), std::string::npos) << t.reason;
  bool cancelled = false;
  for (const json& c : w1->Take("cancel")) cancelled = cancelled || c["trial_id"] == trial;
  EXPECT_TRUE(cancelled) << "its worker is told to stop it";
}

// Issue 33 item 7: a trial wider than every live worker together waits with its reason
// (status, the API's "waiting", the progress line), and the reason goes once it fits.
TEST_F(CoordinatorServiceTest, ATrialNoLiveWorkerCanPlaceSaysWhyItWaits) {
  auto w1 = Register("w1");
  std::string yaml = kSweep;
  yaml.replace(yaml.find("world_size: {value: 1}"), 22, "world_size: {value: 2}");
  const auto sweep_id = Submit(yaml);
  EXPECT_TRUE(w1->Take("assign").empty());
  const std::string reason = WaitingReason(service_->State(), sweep_id);
  EXPECT_NE(reason.find("needs 2 CPU slots and the 1 live worker offer 1 in all"), std::string::npos) << reason;
  auto w2 = Register("w2");
  EXPECT_EQ(WaitingReason(service_->State(), sweep_id), "") << "two one-slot workers can place it";
  EXPECT_FALSE(w1->Take("assign").empty());
}

TEST_F(CoordinatorServiceTest, ATrialNamingAGpuTypeNoLiveWorkerHasSaysWhyAndWaitsForOne) {
  auto register_gpu = [&](const std::string& name, const std::string& model) {
    auto link = std::make_shared<RecordingLink>();
    protocol::RegisterMessage m;
    m.token = "worker-secret";
    m.worker_name = name;
    m.host = "127.0.0.1";
    m.resources.cuda_devices = {0};
    m.resources.gpu_model = model;
    m.store_ports = {30000, 30010};
    EXPECT_EQ(service_->OnRegister(m, link)["type"], "registered");
    links_[name] = link;
    Pump();
    return link;
  };
  auto h100 = register_gpu("h", "NVIDIA H100 80GB HBM3");
  std::string yaml = kSweep;
  yaml += "resources: {device: cuda, gpu_type: A100}\n";
  const auto sweep_id = Submit(yaml);
  EXPECT_TRUE(h100->Take("assign").empty()) << "an H100 took a trial that asked for an A100";
  const std::string reason = WaitingReason(service_->State(), sweep_id);
  EXPECT_NE(reason.find("needs 1 A100 CUDA device and the 1 live worker offer 0 in all (they have NVIDIA H100 80GB "
                        "HBM3 x1)"),
            std::string::npos)
      << reason;
  auto a100 = register_gpu("a", "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(WaitingReason(service_->State(), sweep_id), "");
  EXPECT_FALSE(a100->Take("assign").empty());
  EXPECT_TRUE(h100->Take("assign").empty());
}

TEST_F(CoordinatorServiceTest, OomIsFinalNotRetried) {
  json a;
  auto w1 = RegisterAndSubmit("w1", a);
  const json done = testing::FinishedFrame({a["trial_id"], a["attempt"]}, "oom", 0, "CUDA out of memory");
  Frame("w1", done);
  auto t = Trial(a["trial_id"]);
  EXPECT_EQ(t.state, metrics::TrialState::kFinished);
  EXPECT_EQ(t.outcome, metrics::Outcome::kOom);
  EXPECT_EQ(t.reason, "CUDA out of memory");
}

TEST_F(CoordinatorServiceTest, CancelStopsRunningAndCancelsQueued) {
  json a;
  std::int64_t sweep_id = 0;
  auto w1 = RegisterAndSubmit("w1", a, &sweep_id);
  auto result = service_->CancelSweep("svc");
  ASSERT_TRUE(std::holds_alternative<json>(result));
  auto cancels = w1->Take("cancel");
  ASSERT_EQ(cancels.size(), 1u);
  const json done = testing::FinishedFrame({a["trial_id"], a["attempt"]}, "cancelled");
  Frame("w1", done);
  EXPECT_EQ(store_->Reader()->GetSweep(sweep_id)->state, metrics::SweepState::kCancelled);
  const auto trials = store_->Reader()->ListTrials(sweep_id).value();  // a temporary's value() would dangle in the loop
  for (const auto& t : trials) EXPECT_EQ(t.outcome, metrics::Outcome::kCancelled);
}

TEST_F(CoordinatorServiceTest, RestartReclaimsReportedAttemptsAndRequeuesTheRest) {
  auto w1 = Register("w1");
  auto w2 = Register("w2");
  Submit(kTwoPairSweep);
  auto a1 = w1->Take("assign");
  auto a2 = w2->Take("assign");
  const std::int64_t t1 = a1[0]["trial_id"];
  const std::int64_t t2 = a2[0]["trial_id"];
  // The coordinator restarts: a new service over the same store.
  ASSERT_NO_FATAL_FAILURE(RestartService());
  w1 = Register("w1", {{t1, 1}});  // w1 reclaims its attempt; w2 never comes back
  HeartbeatPastTheRecoveryGrace("w1", {t1, 1});
  EXPECT_NE(Trial(t1).state, metrics::TrialState::kQueued) << "reclaimed, not requeued";
  EXPECT_EQ(Trial(t1).attempts_used, 1);
  EXPECT_EQ(Trial(t2).attempts_used, 1);
  EXPECT_EQ(store_->Reader()->ListAttempts(t2).value()[0].outcome, metrics::Outcome::kLost);
  Succeed("w1", a1[0], 1);
  EXPECT_EQ(Trial(t1).outcome, metrics::Outcome::kSucceeded);
}

// Review 2026-12-02, hole 5: after a restart, secrets lived only in memory, so the first
// process to register a name reclaimed (and could forge or lose) its attempts.
TEST_F(CoordinatorServiceTest, AfterARestartOnlyTheSecretTakesANameWhoseAttemptsAwaitReclaim) {
  json assign;
  RegisterAndSubmit("w1", assign, nullptr, kTwoPairSweep);
  const std::int64_t t1 = assign["trial_id"];
  const std::string secret = secrets_["w1"];
  ASSERT_NO_FATAL_FAILURE(RestartService());
  auto impostor = std::make_shared<RecordingLink>();
  protocol::RegisterMessage m = Registration("w1");
  m.running = {{t1, 1}};
  for (const std::string& guess : {std::string(), std::string("0123456789abcdef0123456789abcdef"),
                                  protocol::Sha256Hex(secret)}) {
    m.worker_secret = guess;
    auto reply = service_->OnRegister(m, impostor);
    EXPECT_EQ(reply["type"], "rejected") << "guess '" << guess << "': " << reply.dump();
    EXPECT_NE(reply.value("reason", "").find("awaiting reclaim"), std::string::npos) << reply.dump();
  }
  // The worker that ran the attempt comes back with its secret, keeps it and reclaims.
  Register("w1", {{t1, 1}});
  EXPECT_EQ(secrets_["w1"], secret);
  HeartbeatPastTheRecoveryGrace("w1", {t1, 1});
  EXPECT_EQ(Trial(t1).attempts_used, 1) << "reclaimed by its worker, not requeued";
  Succeed("w1", assign, 1);
  EXPECT_EQ(Trial(t1).outcome, metrics::Outcome::kSucceeded);
}

TEST_F(CoordinatorServiceTest, AfterARestartAHeldNameIsFreeOnceItsGraceEnds) {
  json assign;
  RegisterAndSubmit("w1", assign, nullptr, kTwoPairSweep);
  const std::int64_t t1 = assign["trial_id"];
  ASSERT_NO_FATAL_FAILURE(RestartService());
  clock_.Advance(6000ms);  // the worker never came back: its attempt is requeued
  service_->Tick();
  Pump();
  EXPECT_EQ(store_->Reader()->ListAttempts(t1).value()[0].outcome, metrics::Outcome::kLost);
  auto reply = service_->OnRegister(Registration("w1"), std::make_shared<RecordingLink>());
  EXPECT_EQ(reply["type"], "registered") << reply.dump();
}

TEST_F(CoordinatorServiceTest, DrainedWorkerGetsNoNewTrials) {
  auto w1 = Register("w1");
  auto drained = service_->DrainWorker("w1");
  ASSERT_TRUE(std::holds_alternative<json>(drained));
  EXPECT_EQ(w1->Take("drain").size(), 1u);
  Submit();
  EXPECT_TRUE(w1->Take("assign").empty());
  EXPECT_EQ(service_->queued_trials(), 2u);
  EXPECT_TRUE(std::holds_alternative<ApiError>(service_->DrainWorker("nobody")));
}

TEST_F(CoordinatorServiceTest, InvalidSweepIsA400WithTheParserMessage) {
  auto result = service_->SubmitSweep("name: x\nparameters: {micro_batch: {values: [1]}}\nbogus_field: 1\n");
  ASSERT_TRUE(std::holds_alternative<ApiError>(result));
  EXPECT_EQ(std::get<ApiError>(result).http_status, 400);
  EXPECT_NE(std::get<ApiError>(result).message.find("bogus_field"), std::string::npos);
}

TEST_F(CoordinatorServiceTest, HttpRequiresTheBearerTokenExceptHealthz) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  auto denied = http.Handle("GET", "/api/v1/sweeps", "", "");
  EXPECT_EQ(denied.status, 401);
  EXPECT_TRUE(denied.bearer_challenge);
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps", "Bearer wrong", "").status, 401);
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps", "Bearer secret", "").status, 200);
  EXPECT_EQ(http.Handle("GET", "/healthz", "", "").status, 200);
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps/nope", "Bearer secret", "").status, 404);
  auto created = Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", kSweep));
  EXPECT_EQ(created.status, 201) << created.body;
  auto trials = http.Handle("GET", "/api/v1/sweeps/svc/trials", "Bearer secret", "");
  EXPECT_EQ(trials.status, 200);
  EXPECT_EQ(json::parse(trials.body).size(), 2u);
  EXPECT_EQ(http.Handle("DELETE", "/api/v1/sweeps", "Bearer secret", "").status, 405);
}

TEST_F(CoordinatorServiceTest, QueryRouteRunsReadOnlySqlOffTheExecutor) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  ASSERT_EQ(Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", kSweep)).status, 201);
  EXPECT_EQ(http.Handle("POST", "/api/v1/query", "", R"({"sql": "SELECT 1"})").status, 401);
  auto deferred = http.Handle("POST", "/api/v1/query", "Bearer secret",
                              R"({"sql": "SELECT count(*) AS n FROM trials"})");
  ASSERT_TRUE(static_cast<bool>(deferred.blocking_work)) << "a user's SQL must not run on the executor";
  auto answer = Complete(std::move(deferred));
  ASSERT_EQ(answer.status, 200) << answer.body;
  json body = json::parse(answer.body);
  EXPECT_EQ(body["columns"], json::array({"n"}));
  EXPECT_EQ(body["rows"][0][0], 2);
  EXPECT_EQ(body["truncated"], false);
  // Row bound from the request, never above the coordinator's.
  auto limited = Complete(http.Handle("POST", "/api/v1/query", "Bearer secret",
                                      R"({"sql": "SELECT id FROM trials", "max_rows": 1})"));
  ASSERT_EQ(limited.status, 200) << limited.body;
  EXPECT_EQ(json::parse(limited.body)["rows"].size(), 1u);
  EXPECT_EQ(json::parse(limited.body)["truncated"], true);
  // Writes are refused and change nothing.
  auto write = Complete(http.Handle("POST", "/api/v1/query", "Bearer secret", R"({"sql": "DELETE FROM trials"})"));
  EXPECT_EQ(write.status, 400);
  EXPECT_NE(write.body.find("read-only"), std::string::npos) << write.body;
  auto after = Complete(http.Handle("POST", "/api/v1/query", "Bearer secret", R"({"sql": "SELECT count(*) FROM trials"})"));
  EXPECT_EQ(json::parse(after.body)["rows"][0][0], 2);
  // Malformed requests.
  EXPECT_EQ(http.Handle("POST", "/api/v1/query", "Bearer secret", "SELECT 1").status, 400);
  EXPECT_EQ(http.Handle("POST", "/api/v1/query", "Bearer secret", R"({"sql": 1})").status, 400);
  EXPECT_EQ(http.Handle("POST", "/api/v1/query", "Bearer secret", R"({"sql": "SELECT 1", "max_rows": 0})").status, 400);
  EXPECT_EQ(http.Handle("GET", "/api/v1/query", "Bearer secret", "").status, 405);
}

// The route hands its query to the report library (metrics::ParseReportQuery) and
// renders the real report of the stored sweep with those options.
TEST_F(CoordinatorServiceTest, ReportRouteRendersTheStoredSweepWithEveryQueryOption) {
  HttpServer http(io_.get_executor(), *service_);
  ASSERT_EQ(Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", kSweep)).status, 201);
  // The report is built off the executor: the reply carries the work to run.
  auto complete = [](HttpReply reply) { return reply.blocking_work ? reply.blocking_work() : reply; };
  auto reply = complete(http.Handle(
      "GET", "/api/v1/sweeps/svc/report?format=json&memory_budget=8GiB&seed=7&resamples=500&loss_threshold=0.05",
      "Bearer secret", ""));
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.content_type.rfind("application/json", 0), 0u);
  const json report = json::parse(reply.body);
  EXPECT_EQ(report["sweep"]["name"], "svc");
  EXPECT_EQ(report["options"]["memory_budget_bytes"], 8LL << 30);
  EXPECT_EQ(report["options"]["seed"], 7);
  EXPECT_EQ(report["options"]["bootstrap_resamples"], 500);
  EXPECT_EQ(report["options"]["loss_parity_threshold"], 0.05);
  auto csv = complete(http.Handle("GET", "/api/v1/sweeps/svc/report?format=csv", "Bearer secret", ""));
  EXPECT_EQ(csv.content_type.rfind("text/csv", 0), 0u);
  auto table = complete(http.Handle("GET", "/api/v1/sweeps/svc/report", "Bearer secret", ""));
  EXPECT_EQ(table.content_type.rfind("text/plain", 0), 0u) << "table by default";
  // A bad option is refused before any work is queued.
  auto bad = http.Handle("GET", "/api/v1/sweeps/svc/report?loss_threshold=x", "Bearer secret", "");
  EXPECT_EQ(bad.status, 400);
  EXPECT_FALSE(bad.blocking_work);
  EXPECT_NE(bad.body.find("loss_threshold=x"), std::string::npos) << bad.body;
}

// Security review 2026-12-07, A3: a query's slot is held by its answer until the
// answer is written (HttpReply::hold), not only while the query runs: two built answers
// nobody has read yet keep a third query out (503); once one is let go, it runs.
TEST_F(CoordinatorServiceTest, AQuerysSlotIsHeldUntilItsAnswerIsLetGo) {
  HttpServer http(io_.get_executor(), *service_);
  const std::string sql = R"({"sql": "SELECT 1"})";
  std::vector<HttpReply> built;
  for (int i = 0; i < kMaxQueriesInFlight; ++i) {
    HttpReply deferred = http.Handle("POST", "/api/v1/query", "Bearer secret", sql);
    ASSERT_TRUE(static_cast<bool>(deferred.blocking_work));
    built.push_back(deferred.blocking_work());  // run, not yet written
    ASSERT_EQ(built.back().status, 200) << built.back().body;
    ASSERT_TRUE(built.back().hold != nullptr) << "the answer holds its slot";
  }
  EXPECT_EQ(http.Handle("POST", "/api/v1/query", "Bearer secret", sql).status, 503)
      << "two answers unwritten: the queries' slots are still taken";
  built.front().hold.reset();  // written
  EXPECT_TRUE(http.Handle("POST", "/api/v1/query", "Bearer secret", sql).blocking_work);
}

TEST_F(CoordinatorServiceTest, ReportsAreBuiltOffTheExecutorAtMostFourAtOnce) {
  HttpServer http(io_.get_executor(), *service_);
  ASSERT_EQ(Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", kSweep)).status, 201);
  std::vector<HttpReply> pending;
  for (int i = 0; i < kMaxReportsInFlight; ++i) {
    pending.push_back(http.Handle("GET", "/api/v1/sweeps/svc/report", "Bearer secret", ""));
    ASSERT_TRUE(pending.back().blocking_work) << "built on the executor";
  }
  HttpReply busy = http.Handle("GET", "/api/v1/sweeps/svc/report", "Bearer secret", "");
  EXPECT_EQ(busy.status, 503);
  EXPECT_FALSE(busy.blocking_work);
  EXPECT_NE(busy.body.find("already building 4 reports"), std::string::npos) << busy.body;
  EXPECT_EQ(pending.front().blocking_work().status, 200);
  EXPECT_TRUE(http.Handle("GET", "/api/v1/sweeps/svc/report", "Bearer secret", "").blocking_work)
      << "a finished report frees its place";
  pending.push_back(http.Handle("GET", "/api/v1/sweeps/svc/report", "Bearer secret", ""));
  EXPECT_EQ(http.Handle("GET", "/api/v1/sweeps/svc/report", "Bearer secret", "").status, 503) << "four held again";
  pending.pop_back();  // dropped unrun, as when the pool stops before it runs
  EXPECT_TRUE(http.Handle("GET", "/api/v1/sweeps/svc/report", "Bearer secret", "").blocking_work)
      << "a report dropped unrun frees its place";
}

// One HTTP request to 127.0.0.1:`port`, answered or failed; {status, body}.
std::pair<int, std::string> Call(int port, const std::string& method, const std::string& target,
                                 const std::string& body = "") {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  boost::system::error_code ec;
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                static_cast<unsigned short>(port)), ec);
  if (ec) return {0, ec.message()};
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::authorization, "Bearer secret");
  request.keep_alive(false);
  request.body() = body;
  request.prepare_payload();
  http::write(stream, request, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!ec) http::read(stream, buffer, response, ec);
  if (ec) return {0, ec.message()};
  return {static_cast<int>(response.result_int()), response.body()};
}

// GET /api/v1/sweeps on 127.0.0.1:`port` with no token and the given Host and Origin
// (none when empty); the answer's status, 0 when it failed.
int OpenRead(int port, const std::string& host, const std::string& origin, const std::string& method = "GET") {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  boost::system::error_code ec;
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                static_cast<unsigned short>(port)), ec);
  if (ec) return 0;
  http::request<http::string_body> request{http::string_to_verb(method),
                                           method == "GET" ? "/api/v1/sweeps" : "/api/v1/query", 11};
  request.set(http::field::host, host);
  if (!origin.empty()) request.set(http::field::origin, origin);
  if (method != "GET") {
    request.set(http::field::content_type, "text/plain");
    request.body() = R"({"sql": "SELECT 1"})";
  }
  request.keep_alive(false);
  request.prepare_payload();
  http::write(stream, request, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!ec) http::read(stream, buffer, response, ec);
  return ec ? 0 : static_cast<int>(response.result_int());
}

// Security review 2026-12-07, A12: `bakeoff local` reads without a token (open_reads),
// and answered any Host and cross-origin POSTs, so a DNS-rebinding page could read the
// local results. Now a request must name a loopback Host, and carry this origin when it
// carries one: from two directions, a rebound name and another site's page.
TEST_F(CoordinatorServiceTest, OpenReadsAnswerOnlyALoopbackHostAndTheirOwnOrigin) {
  config_.open_reads = true;
  ASSERT_NO_FATAL_FAILURE(RestartService());
  HttpServer http(io_.get_executor(), *service_, nullptr);
  ASSERT_TRUE(http.Listen("127.0.0.1:0").ok());
  http.Start();
  auto guard = boost::asio::make_work_guard(io_);
  io_.restart();
  std::thread loop([this] { io_.run(); });
  const int port = http.port();
  const std::string self = "127.0.0.1:" + std::to_string(port);
  std::map<std::string, int> got;
  for (const std::string& host : {self, "localhost:" + std::to_string(port), "[::1]:" + std::to_string(port),
                                 std::string("127.0.0.1"), std::string("attacker.example"),
                                 "attacker.example:" + std::to_string(port), std::string("127.0.0.1.nip.io"),
                                 std::string("10.0.0.1:80")}) {
    got["host " + host] = OpenRead(port, host, "");
  }
  got["same origin"] = OpenRead(port, self, "http://" + self);
  got["other origin"] = OpenRead(port, self, "http://attacker.example");
  got["other origin, POST"] = OpenRead(port, self, "http://attacker.example", "POST");
  got["null origin, POST"] = OpenRead(port, self, "null", "POST");
  boost::asio::post(io_, [&http] { http.Stop(); });
  guard.reset();
  io_.stop();
  loop.join();
  EXPECT_EQ(got["host " + self], 200);
  EXPECT_EQ(got["host localhost:" + std::to_string(port)], 200);
  EXPECT_EQ(got["host [::1]:" + std::to_string(port)], 200);
  EXPECT_EQ(got["host 127.0.0.1"], 200);
  EXPECT_EQ(got["host attacker.example"], 403);
  EXPECT_EQ(got["host attacker.example:" + std::to_string(port)], 403);
  EXPECT_EQ(got["host 127.0.0.1.nip.io"], 403);
  EXPECT_EQ(got["host 10.0.0.1:80"], 403);
  EXPECT_EQ(got["same origin"], 200);
  EXPECT_EQ(got["other origin"], 403);
  EXPECT_EQ(got["other origin, POST"], 403);
  EXPECT_EQ(got["null origin, POST"], 403);
}

// A submitted sweep is parsed and expanded off the executor: while one is held in the
// middle of its preparation, the executor still answers /healthz and lists the sweeps
// (without it: it is stored only once prepared). Were the preparation on the
// executor, /healthz could not be answered until it was released.
TEST_F(CoordinatorServiceTest, ASweepBeingPreparedDoesNotHoldTheExecutor) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  std::promise<void> preparing, release;
  auto released = release.get_future().share();
  http.set_sweep_preparer([&preparing, released](const SweepSubmission& submission, std::string yaml) {
    preparing.set_value();
    released.wait();
    return CoordinatorService::PrepareSweep(submission, std::move(yaml));
  });
  ASSERT_TRUE(http.Listen("127.0.0.1:0").ok());
  http.Start();
  auto guard = boost::asio::make_work_guard(io_);
  io_.restart();
  std::thread loop([this] { io_.run(); });
  const int port = http.port();
  auto submit = std::async(std::launch::async, [port] { return Call(port, "POST", "/api/v1/sweeps", kSweep); });
  const bool held = preparing.get_future().wait_for(30s) == std::future_status::ready;
  std::future<std::pair<int, std::string>> health, listing;
  if (held) {
    health = std::async(std::launch::async, [port] { return Call(port, "GET", "/healthz"); });
    listing = std::async(std::launch::async, [port] { return Call(port, "GET", "/api/v1/sweeps"); });
  }
  const bool answered = held && health.wait_for(30s) == std::future_status::ready &&
                        listing.wait_for(30s) == std::future_status::ready;
  release.set_value();  // always: the loop and the submit must end
  auto created = submit.get();
  auto after = Call(port, "GET", "/api/v1/sweeps");
  boost::asio::post(io_, [&http] { http.Stop(); });
  guard.reset();
  io_.stop();
  loop.join();
  ASSERT_TRUE(held) << "the submit never reached its preparation";
  ASSERT_TRUE(answered) << "the executor waited on the sweep's preparation";
  EXPECT_EQ(health.get().first, 200);
  auto before = listing.get();
  EXPECT_EQ(before.first, 200);
  EXPECT_EQ(json::parse(before.second).size(), 0u) << "stored before it was prepared";
  EXPECT_EQ(created.first, 201) << created.second;
  EXPECT_EQ(json::parse(created.second)["trial_count"], 2);
  EXPECT_EQ(json::parse(after.second).size(), 1u) << after.second;
}

// The route defers the parse and expansion to the pool, in arrival order (its ids then
// follow the order requests arrived in), and keeps the errors' status codes.
TEST_F(CoordinatorServiceTest, ASubmittedSweepIsPreparedInOrderOffTheExecutorAndKeepsItsErrors) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  auto deferred = http.Handle("POST", "/api/v1/sweeps", "Bearer secret", kSweep);
  EXPECT_TRUE(deferred.blocking_work && deferred.in_order) << "parsed on the executor";
  EXPECT_EQ(service_->live_trials(), 0u) << "stored before it was prepared";
  auto created = Complete(std::move(deferred));
  EXPECT_EQ(created.status, 201) << created.body;
  auto bad = Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", "name: x\nbogus_field: 1\n"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("bogus_field"), std::string::npos) << bad.body;
  std::string values;
  for (int i = 1; i <= 30; ++i) values += (i > 1 ? ", " : "") + std::to_string(i);
  const std::string huge = "name: huge\nworkload: {executor: lora, model: tiny}\nparameters:\n  micro_batch: {values: [" +
                           values + "]}\n  steps: {values: [" + values + "]}\n  grad_accum: {values: [" + values +
                           "]}\n";
  auto over = Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", huge));
  EXPECT_EQ(over.status, 413) << over.body;
}

// Exclude rules whose work is over the limit (1,000,000 grid points against a rule for
// each of the 127 combinations of 7 axes: 448,000,000 steps) are refused with 413 and
// the limit, before a point is visited.
TEST_F(CoordinatorServiceTest, ExcludeRulesOverTheWorkLimitAreRefusedWith413) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  const std::string yaml = testing::EveryCombinationOfSevenAxes();
  auto over = Complete(http.Handle("POST", "/api/v1/sweeps", "Bearer secret", yaml));
  EXPECT_EQ(over.status, 413) << over.body;
  EXPECT_NE(over.body.find("over the limit of 200000000 steps"), std::string::npos) << over.body;
  EXPECT_EQ(service_->live_trials(), 0u);
}

// Finished sweeps leave memory: their trials are evicted once the store has them
// finished, every read is served from the store (as after a restart), and late frames
// about them are acknowledged and ignored.
TEST_F(CoordinatorServiceTest, FinishedSweepsLeaveMemoryAndAreStillServedFromTheStore) {
  HttpServer http(io_.get_executor(), *service_, nullptr);
  auto w1 = Register("w1");
  auto w2 = Register("w2");
  std::vector<std::int64_t> ids;
  std::int64_t seq = 1;
  json late;
  for (int n = 0; n < 5; ++n) {
    std::string yaml = kSweep;
    yaml.replace(yaml.find("name: svc"), 9, "name: done" + std::to_string(n));
    ids.push_back(Submit(yaml.c_str()));
    EXPECT_EQ(service_->live_trials(), 2u);
    auto a1 = w1->Take("assign");
    ASSERT_EQ(a1.size(), 1u);
    EXPECT_TRUE(w2->Take("assign").empty()) << "the pair's other side waits for w1";
    Succeed("w1", a1[0], seq);
    auto a2 = w1->Take("assign");
    ASSERT_EQ(a2.size(), 1u);
    Succeed("w1", a2[0], seq + 2);
    seq += 4;
    late = a1[0];
    Pump();
    EXPECT_EQ(service_->live_trials(), 0u) << "sweep " << n << " finished";
  }
  service_->Tick();
  EXPECT_EQ(service_->live_trials(), 0u);
  for (std::size_t n = 0; n < ids.size(); ++n) {
    HttpReply status = http.Handle("GET", "/api/v1/sweeps/" + std::to_string(ids[n]), "Bearer secret", "");
    ASSERT_EQ(status.status, 200);
    EXPECT_EQ(json::parse(status.body)["state"], "finished");
    EXPECT_EQ(json::parse(status.body)["counts"]["succeeded"], 2);
    HttpReply trials = http.Handle("GET", "/api/v1/sweeps/done" + std::to_string(n) + "/trials", "Bearer secret", "");
    ASSERT_EQ(trials.status, 200);
    EXPECT_EQ(json::parse(trials.body).size(), 2u);
    auto cancelled = service_->CancelSweep(std::to_string(ids[n]));
    ASSERT_TRUE(std::holds_alternative<json>(cancelled));
    EXPECT_EQ(std::get<json>(cancelled)["state"], "finished");
  }
  // A duplicate result of an evicted trial: acknowledged, changes nothing.
  Succeed("w1", late, seq);
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], seq + 1);
  EXPECT_EQ(service_->live_trials(), 0u);
  // The last finished sweeps' figures stay on /metrics.
  EXPECT_NE(service_->MetricsText().find("bakeoff_sweep_trial_outcomes{outcome=\"succeeded\",sweep=\"" +
                                         std::to_string(ids.back()) + "\"} 2"),
            std::string::npos)
      << service_->MetricsText();
}

TEST_F(CoordinatorServiceTest, FullDatabaseRefusesNewSweepsAndKeepsWhatItStored) {
  // A database capped a little above its size now stands for a disk that fills up.
  service_.reset();
  store_.reset();
  ASSERT_NO_FATAL_FAILURE(testing::OpenTestStore(dir_, store_));  // opened and closed once more first
  config_.store_probe_interval = 0ms;
  ASSERT_NO_FATAL_FAILURE(RestartOnACappedStore(40));
  HttpServer http(io_.get_executor(), *service_, nullptr);

  // Sweeps of many trials fill it; the first refusal says why and what is kept.
  std::string big = kSweep;
  big.replace(big.find("repeats: 1"), 10, "repeats: 300");
  int accepted = 0;
  std::optional<ApiError> refused;
  for (int i = 0; i < 50 && !refused; ++i) {
    auto result = service_->SubmitSweep(big);
    if (auto* error = std::get_if<ApiError>(&result)) {
      refused = *error;
    } else {
      ++accepted;
    }
  }
  ASSERT_TRUE(refused.has_value()) << "the capped database never filled";
  ASSERT_GE(accepted, 1);
  EXPECT_EQ(refused->http_status, 503) << refused->message;
  EXPECT_FALSE(store_->healthy());
  // Every later sweep is refused with the reason, even a small one; healthz says so.
  auto again = service_->SubmitSweep(kSweep);
  ASSERT_TRUE(std::holds_alternative<ApiError>(again));
  EXPECT_EQ(std::get<ApiError>(again).http_status, 503);
  EXPECT_NE(std::get<ApiError>(again).message.find("not writable"), std::string::npos);
  EXPECT_EQ(http.Handle("GET", "/healthz", "", "").status, 503);
  // Probing keeps failing while it is full, and nothing stored is lost.
  service_->Tick();
  EXPECT_FALSE(store_->healthy());
  auto sweeps = json::parse(http.Handle("GET", "/api/v1/sweeps", "Bearer secret", "").body);
  ASSERT_EQ(sweeps.size(), static_cast<std::size_t>(accepted));
  for (const auto& sweep : sweeps) EXPECT_EQ(sweep["trial_count"], 600);
}

TEST_F(CoordinatorServiceTest, EventsOverTheRateAreReadLaterNotDropped) {
  config_.max_worker_events_per_s = 1000;
  ASSERT_NO_FATAL_FAILURE(RestartService());
  auto w1 = Register("w1");
  Submit();
  auto assign = w1->Take("assign").at(0);
  protocol::AttemptRef ref{assign["trial_id"], assign["attempt"]};
  auto frame_of = [&](int first_seq, int count, std::int64_t outbox_seq) {
    protocol::EventsMessage events;
    // Steps: a rank's other events are capped at 1,000 (EventIngest's quota), steps are not.
    for (int i = 0; i < count; ++i) {
      events.events.push_back(
          {ref, 0, {{"event", "step"}, {"step", first_seq + i}, {"phase", "measure"}, {"step_s", 0.1}}, first_seq + i});
    }
    events.outbox_seq = outbox_seq;
    return protocol::ToJson(events);
  };
  // The first second's worth passes; the next 500 events wait half a second.
  auto burst = frame_of(1, 1000, 1);
  Frame("w1", burst);
  EXPECT_EQ(service_->EventsReadDelay("w1", burst), 0ms);
  auto over = frame_of(1001, 500, 2);
  Frame("w1", over);
  EXPECT_EQ(service_->EventsReadDelay("w1", over), 500ms);
  // Each step of a step block counts as one event: 250 more steps, a quarter second.
  protocol::EventsMessage steps;
  steps.steps.push_back(protocol::StepBlock{ref, 0, "measure", {}});
  for (int s = 0; s < 250; ++s) steps.steps[0].rows.push_back(protocol::StepRow{s, 0.1});
  steps.outbox_seq = 3;
  EXPECT_EQ(service_->EventsReadDelay("w1", protocol::ToJson(steps)), 750ms);
  // Heartbeats cost nothing; every event frame was stored and acknowledged.
  EXPECT_EQ(service_->EventsReadDelay("w1", json{{"type", "heartbeat"}, {"running", json::array()}}), 0ms);
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], 2);
  auto stored = metrics::RunReadOnlyQuery((dir_ / "results.db").string(),
                                          "SELECT count(*) FROM step_metrics WHERE trial_id = " +
                                              std::to_string(ref.trial_id));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->rows[0][0], 1500);
}

TEST_F(CoordinatorServiceTest, AFrameTheStoreCannotTakeClosesTheConnectionInsteadOfBeingAcknowledged) {
  // A database capped a little above its size after the trial is assigned: large log
  // events fill it, and the frame that does not fit must not be acknowledged (acks are
  // cumulative: a later ack would make the worker forget it).
  auto w1 = Register("w1");
  Submit();
  auto assign = w1->Take("assign").at(0);
  protocol::AttemptRef ref{assign["trial_id"], assign["attempt"]};
  ASSERT_NO_FATAL_FAILURE(RestartOnACappedStore(30));
  w1 = Register("w1", {ref});
  w1->frames.clear();
  std::int64_t failed_seq = 0;
  for (std::int64_t seq = 1; seq <= 40 && !w1->closed; ++seq) {
    protocol::EventsMessage events;
    events.events.push_back({ref, 0, {{"event", "log"}, {"message", std::string(20000, 'a' + seq % 26)}}, seq});
    events.outbox_seq = seq;
    Frame("w1", protocol::ToJson(events));
    if (w1->closed) failed_seq = seq;
  }
  ASSERT_GT(failed_seq, 1) << "the capped database never filled";
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], failed_seq - 1);
}

// Group commit: the frames of one turn are stored in one transaction, and nothing they
// decided leaves (acks, the next assignment) before it commits; then in order.
TEST_F(CoordinatorServiceTest, AcksAndTheNextAssignmentLeaveOnlyAfterTheTurnsGroupCommits) {
  auto w1 = Register("w1");
  Submit();
  auto assign = w1->Take("assign").at(0);
  w1->frames.clear();
  protocol::AttemptRef ref{assign["trial_id"], assign["attempt"]};
  auto count = [&](const std::string& sql) {
    auto result = metrics::RunReadOnlyQuery((dir_ / "results.db").string(), sql);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? result->rows[0][0].get<std::int64_t>() : -1;
  };
  protocol::EventsMessage first;
  first.events.push_back({ref, 0, {{"event", "started"}, {"pid", 1}}, 1});
  first.events.push_back({ref, 0, {{"event", "step"}, {"step", 0}, {"phase", "measure"}, {"step_s", 0.1}, {"tokens", 16}, {"loss", 4.0}}, 2});
  first.outbox_seq = 1;
  protocol::EventsMessage second;
  second.events.push_back({ref, 0, {{"event", "summary"}, {"tokens_per_s", 160.0}, {"step_s_median", 0.1}}, 3});
  second.outbox_seq = 2;
  const json done = testing::FinishedFrame(ref, "succeeded", 3);
  // Three frames read in one pass of the event loop, before the turn ends.
  service_->OnFrame("w1", links_["w1"].get(), protocol::ToJson(first));
  service_->OnFrame("w1", links_["w1"].get(), protocol::ToJson(second));
  service_->OnFrame("w1", links_["w1"].get(), done);
  EXPECT_TRUE(w1->frames.empty()) << "nothing leaves before the group commits: " << json(w1->frames).dump();
  EXPECT_EQ(count("SELECT COUNT(*) FROM step_metrics"), 0) << "not committed yet";
  EXPECT_EQ(count("SELECT COUNT(*) FROM trials WHERE state = 'finished'"), 0);

  Pump();  // the end of the turn: one commit, then the frames, in order
  ASSERT_EQ(w1->frames.size(), 4u);
  EXPECT_EQ(w1->frames[0]["type"], "ack");
  EXPECT_EQ(w1->frames[0]["outbox_seq"], 1);
  EXPECT_EQ(w1->frames[1]["outbox_seq"], 2);
  EXPECT_EQ(w1->frames[2]["outbox_seq"], 3);
  EXPECT_EQ(w1->frames[3]["type"], "assign") << "the freed slot takes the next trial, decided in the same group";
  EXPECT_NE(w1->frames[3]["trial_id"], ref.trial_id);
  EXPECT_EQ(count("SELECT COUNT(*) FROM step_metrics"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM trial_summaries"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM trials WHERE state = 'finished' AND outcome = 'succeeded'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM attempts"), 2) << "the assignment was stored before it was sent";
}

// A group the store cannot take (here a disk that fills up on the turn's second
// frame, from another worker) acknowledges nothing, not even the frame that fitted, and
// sends nothing it decided: the coordinator closes every connection and reloads from
// the store; the worker reconnects, re-registers its attempt and sends everything
// unacknowledged again, which is stored once the disk has room.
TEST_F(CoordinatorServiceTest, ALostGroupAcknowledgesNothingAndTheResentFramesAreStoredLater) {
  auto w1 = Register("w1");
  auto w2 = Register("w2");
  Submit(kTwoPairSweep);
  auto assign1 = w1->Take("assign").at(0);
  auto assign2 = w2->Take("assign").at(0);
  protocol::AttemptRef ref{assign1["trial_id"], assign1["attempt"]};
  protocol::AttemptRef other{assign2["trial_id"], assign2["attempt"]};
  config_.store_probe_interval = 0ms;
  ASSERT_NO_FATAL_FAILURE(RestartOnACappedStore(30));
  w1 = Register("w1", {ref});
  w2 = Register("w2", {other});
  w1->frames.clear();
  w2->frames.clear();

  protocol::EventsMessage fits;
  fits.events.push_back({ref, 0, {{"event", "started"}, {"pid", 1}}, 1});
  fits.events.push_back({ref, 0, {{"event", "summary"}, {"tokens_per_s", 160.0}, {"step_s_median", 0.1}}, 2});
  fits.outbox_seq = 1;
  protocol::EventsMessage too_big;
  for (int i = 0; i < 20; ++i) too_big.events.push_back({other, 0, {{"event", "log"}, {"message", std::string(20000, 'x')}}, 1 + i});
  too_big.outbox_seq = 1;
  // One turn: w1's frame fits, w2's overfills the disk and takes the group with it.
  service_->OnFrame("w1", links_["w1"].get(), protocol::ToJson(fits));
  service_->OnFrame("w2", links_["w2"].get(), protocol::ToJson(too_big));
  EXPECT_FALSE(w1->closed) << "w1's own frame was stored in the group";
  Pump();
  EXPECT_TRUE(w1->Take("ack").empty()) << "no frame of a lost group is acknowledged, to any worker";
  EXPECT_TRUE(w2->Take("ack").empty());
  EXPECT_TRUE(w1->closed) << "every worker is made to reconnect and resend";
  EXPECT_TRUE(w2->closed);
  auto stored = metrics::RunReadOnlyQuery((dir_ / "results.db").string(),
                                          "SELECT COUNT(*) FROM events UNION ALL SELECT COUNT(*) FROM trial_summaries");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->rows[0][0], 0) << "the frame that fitted went with its group";
  EXPECT_EQ(stored->rows[1][0], 0);
  EXPECT_EQ(Trial(ref.trial_id).state, metrics::TrialState::kAssigned);
  EXPECT_EQ(service_->live_trials(), 4u) << "state reloaded from the store";

  // The rolled-back group freed its pages: the probe finds room and the store heals.
  service_->Tick();
  Pump();
  EXPECT_TRUE(store_->healthy()) << store_->health().ToString();
  // The worker reconnects with its attempt and resends what was not acknowledged, then
  // its result.
  w1 = Register("w1", {ref});
  EXPECT_TRUE(w1->Take("cancel").empty()) << "its attempt is reclaimed, not cancelled";
  Frame("w1", protocol::ToJson(fits));
  const json done = testing::FinishedFrame(ref, "succeeded", 2);
  Frame("w1", done);
  auto acks = w1->Take("ack");
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back()["outbox_seq"], 2);
  auto trial = Trial(ref.trial_id);
  EXPECT_EQ(trial.state, metrics::TrialState::kFinished);
  EXPECT_EQ(trial.outcome, metrics::Outcome::kSucceeded);
  std::size_t with_summary = 0;
  for (const auto& r : store_->Reader()->ListTrialResults(trial.sweep_id).value()) with_summary += r.summaries.size();
  EXPECT_EQ(with_summary, 1u);
}

TEST_F(CoordinatorServiceTest, RegisteredIsTheFirstFrameEvenWhenTheRegistrationCancelsAStaleAttempt) {
  // A worker back from a partition lists an attempt the coordinator gave up on: it must
  // read `registered` first, then the cancel (else it drops the connection and retries
  // with the same list forever).
  auto w1 = Register("w1", {protocol::AttemptRef{99, 1}});
  ASSERT_GE(w1->frames.size(), 2u);
  EXPECT_EQ(w1->frames[0]["type"], "registered");
  EXPECT_EQ(w1->frames[1]["type"], "cancel");
  EXPECT_EQ(w1->frames[1]["trial_id"], 99);
}

// Adaptive repeats: micro_batch=1 is the baseline; micro_batch=2 is twice as fast (it
// stops at min pairs), micro_batch=4 is the baseline again (A/A: it runs to max).
const std::string kAdaptiveSweep =
    TinySweep("adaptive", "  micro_batch: {values: [1, 2, 4]}\nbaseline: {micro_batch: 1}\n",
              "{min: 3, max: 6, until: {ci_half_width: 0.001}}", 2, "do adaptive repeats stop early?");

// tokens/s of repeat r of each variant of kAdaptiveSweep.
double AdaptiveTokens(const std::string& variant, int repeat) {
  static const double kBaseline[] = {100, 101, 99, 100.5, 99.5, 100};
  static const double kAA[] = {103, 97, 102, 98, 101, 99};
  if (variant == "micro_batch=1") return kBaseline[repeat];
  if (variant == "micro_batch=2") return 2 * kBaseline[repeat] + repeat;
  // kTwoAxisAdaptiveSweep: micro_batch=2 doubles, seed=2 is an A/A noise.
  if (variant == "micro_batch=1,seed=1") return kBaseline[repeat];
  if (variant == "micro_batch=1,seed=2") return kAA[repeat];
  if (variant == "micro_batch=2,seed=1") return 2 * kBaseline[repeat] + repeat;
  if (variant == "micro_batch=2,seed=2") return 2 * kAA[repeat];
  if (variant == "micro_batch=1,seed=3") return 3 * kBaseline[repeat] + repeat;
  if (variant == "micro_batch=2,seed=3") return 6 * kBaseline[repeat] + 2 * repeat;
  return kAA[repeat];
}

class AdaptiveRepeatsTest : public CoordinatorServiceTest {
 protected:
  // Runs every trial the coordinator assigns to one one-slot worker, until none is left.
  void RunAll(std::int64_t sweep_id, const std::string& worker = "w1") {
    std::int64_t seq = 1;
    for (int guard = 0; guard < 100; ++guard) {
      auto assigns = links_[worker]->Take("assign");
      if (assigns.empty()) return;
      for (const auto& a : assigns) {
        auto t = Trial(a["trial_id"]);
        Succeed(worker, a, seq, 0, "succeeded", "", AdaptiveTokens(t.variant_key, static_cast<int>(t.repeat)));
        seq += 2;
      }
    }
    (void)sweep_id;
  }
  // Records in the store alone (as a coordinator that stopped before acting on them
  // would have left it) the successes of every trial below `repeats`, with
  // AdaptiveTokens' figures; `skip_variant`'s trials are left queued.
  void StoreFirstRepeats(std::int64_t sweep_id, int repeats, const std::string& skip_variant = "") {
    const auto trials = store_->Reader()->ListTrials(sweep_id).value();
    for (const auto& t : trials) {
      if (t.repeat >= repeats || t.variant_key == skip_variant) continue;
      metrics::AttemptRecord placement;
      placement.trial_id = t.id;
      placement.worker_id = "w-old";
      placement.host = "127.0.0.1";
      ASSERT_TRUE(store_->AssignTrial(t.id, 0, placement).ok());
      ASSERT_TRUE(store_->MarkRunning(t.id, 1).ok());
      metrics::TrialSummary summary{t.id, 1, 0,
                                    {{"tokens_per_s", AdaptiveTokens(t.variant_key, static_cast<int>(t.repeat))}}};
      ASSERT_TRUE(store_->RecordSummary(summary).ok());
      ASSERT_TRUE(store_->FinishTrial(t.id, 1, metrics::Outcome::kSucceeded, "").ok());
    }
  }
  // Submits `yaml`, runs it on worker w1 until it finishes (a failure otherwise) and
  // returns its trials by variant.
  std::map<std::string, std::vector<metrics::TrialRecord>> RunToTheEnd(const std::string& yaml) {
    Register("w1");
    const auto sweep_id = Submit(yaml.c_str());
    RunAll(sweep_id);
    EXPECT_EQ(store_->Reader()->GetSweep(sweep_id)->state, metrics::SweepState::kFinished);
    return ByVariant(sweep_id);
  }
  std::map<std::string, std::vector<metrics::TrialRecord>> ByVariant(std::int64_t sweep_id) {
    std::map<std::string, std::vector<metrics::TrialRecord>> out;
    const auto trials = store_->Reader()->ListTrials(sweep_id).value();  // outlives the loop
    for (const auto& t : trials) out[t.variant_key].push_back(t);
    return out;
  }
};

TEST_F(AdaptiveRepeatsTest, AVariantFarFromOneStopsAtMinAndAnAAVariantRunsOn) {
  Register("w1");
  const auto sweep_id = Submit(kAdaptiveSweep);
  RunAll(sweep_id);
  auto sweep = store_->Reader()->GetSweep(sweep_id);
  EXPECT_EQ(sweep->state, metrics::SweepState::kFinished);
  auto by_variant = ByVariant(sweep_id);
  ASSERT_EQ(by_variant.size(), 3u);
  int succeeded = 0, cancelled = 0;
  for (const auto& [key, trials] : by_variant) {
    ASSERT_EQ(trials.size(), 6u) << key << ": max trials pre-expanded";
    for (const auto& t : trials) {
      EXPECT_EQ(t.state, metrics::TrialState::kFinished) << key << " repeat " << t.repeat;
      ASSERT_TRUE(t.outcome.has_value());
      if (key == "micro_batch=2" && t.repeat >= 3) {
        EXPECT_EQ(t.outcome, metrics::Outcome::kCancelled) << "repeat " << t.repeat;
        EXPECT_EQ(t.reason, "adaptive repeats: stopped after 3 of 6 pairs (interval excludes 1)");
        EXPECT_EQ(t.attempts_used, 0) << "never ran";
      } else {
        EXPECT_EQ(t.outcome, metrics::Outcome::kSucceeded) << key << " repeat " << t.repeat;
      }
      succeeded += t.outcome == metrics::Outcome::kSucceeded;
      cancelled += t.outcome == metrics::Outcome::kCancelled;
    }
  }
  EXPECT_EQ(succeeded, 15);
  EXPECT_EQ(cancelled, 3);
  // The report, read from the store, reaches the coordinator's decisions.
  auto input = metrics::LoadReportInputFromFile((dir_ / "results.db").string(), std::to_string(sweep_id));
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  ASSERT_TRUE(input->adaptive.has_value());
  metrics::Report report = metrics::BuildReport(*input, metrics::ReportOptions{});
  const metrics::VariantReport* fast = report.FindVariant("micro_batch=2");
  ASSERT_TRUE(fast && fast->adaptive);
  EXPECT_EQ(fast->adaptive->pairs, 3);
  EXPECT_EQ(fast->adaptive->reason, "interval excludes 1");
  const metrics::VariantReport* same = report.FindVariant("micro_batch=4");
  ASSERT_TRUE(same && same->adaptive);
  EXPECT_EQ(same->adaptive->pairs, 6);
  EXPECT_EQ(same->adaptive->reason, "max pairs reached");
  EXPECT_EQ(same->comparison.verdict, metrics::Verdict::kNoMeasurableDifference);
  ASSERT_TRUE(report.adaptive.has_value());
  EXPECT_EQ(report.adaptive->trials_not_run, 3);
  EXPECT_EQ(report.adaptive->trials_max, 18);
}

TEST_F(AdaptiveRepeatsTest, ABaselineStopsOnceNoVariantPairedWithItNeedsMore) {
  // Only the fast variant: once it stops, the baseline's remaining repeats pair with
  // nothing and are cancelled too.
  std::string yaml = kAdaptiveSweep;
  yaml.replace(yaml.find("[1, 2, 4]"), 9, "[1, 2]");
  auto by_variant = RunToTheEnd(yaml);
  for (const auto& t : by_variant["micro_batch=1"]) {
    if (t.repeat < 3) {
      EXPECT_EQ(t.outcome, metrics::Outcome::kSucceeded);
    } else {
      EXPECT_EQ(t.outcome, metrics::Outcome::kCancelled);
      EXPECT_EQ(t.reason,
                "adaptive repeats: every comparison with this variant stopped after 3 of 6 pairs (interval excludes 1)");
    }
  }
}

TEST_F(AdaptiveRepeatsTest, ARestartedCoordinatorReachesTheSameDecisionFromTheStore) {
  // A coordinator recorded the first three repeats of the baseline and the fast variant,
  // then stopped before acting on them: the store alone holds the outcomes.
  const auto sweep_id = Submit(kAdaptiveSweep);
  service_.reset();
  ASSERT_NO_FATAL_FAILURE(StoreFirstRepeats(sweep_id, 3, "micro_batch=4"));
  ASSERT_NO_FATAL_FAILURE(RestartService());
  auto by_variant = ByVariant(sweep_id);
  for (const auto& t : by_variant["micro_batch=2"]) {
    if (t.repeat >= 3) {
      EXPECT_EQ(t.outcome, metrics::Outcome::kCancelled) << "repeat " << t.repeat;
      EXPECT_EQ(t.reason, "adaptive repeats: stopped after 3 of 6 pairs (interval excludes 1)");
    }
  }
  // The A/A variant still needs the baseline: the rest runs, and only it.
  Register("w1");
  Pump();
  RunAll(sweep_id);
  EXPECT_EQ(store_->Reader()->GetSweep(sweep_id)->state, metrics::SweepState::kFinished);
  by_variant = ByVariant(sweep_id);
  for (const auto& t : by_variant["micro_batch=4"]) EXPECT_EQ(t.outcome, metrics::Outcome::kSucceeded);
  for (const auto& t : by_variant["micro_batch=1"]) EXPECT_EQ(t.outcome, metrics::Outcome::kSucceeded);
  for (const auto& t : by_variant["micro_batch=2"]) {
    EXPECT_EQ(t.outcome, t.repeat < 3 ? metrics::Outcome::kSucceeded : metrics::Outcome::kCancelled);
  }
}

const std::string kTwoAxisAdaptiveSweep =
    TinySweep("adaptive-2x2", "  micro_batch: {values: [1, 2]}\n  seed: {values: [1, 2]}\nbaseline: {micro_batch: 1, seed: 1}\n",
              "{min: 3, max: 6, until: {ci_half_width: 0.001}}", 2,
              "does each comparison the answer reports get its pairs?");

TEST_F(AdaptiveRepeatsTest, AVariantRunsOnWhileAComparisonTheAnswerReportsWithItNeedsPairs) {
  // Against the baseline, micro_batch=2,seed=2 is 2x after 3 pairs; but the answer
  // compares it with micro_batch=2,seed=1 (seed alone, an A/A noise), which needs every
  // pair: it runs on, as do both sides of the other seed comparison. Only the
  // micro_batch comparisons stopped, and each of their variants is in a seed one.
  Register("w1");
  const auto sweep_id = Submit(kTwoAxisAdaptiveSweep);
  EXPECT_EQ(AnsweredComparisons(service_->State(), sweep_id), std::make_optional(std::make_pair(0, 4)));
  RunAll(sweep_id);
  EXPECT_EQ(store_->Reader()->GetSweep(sweep_id)->state, metrics::SweepState::kFinished);
  auto by_variant = ByVariant(sweep_id);
  ASSERT_EQ(by_variant.size(), 4u);
  for (const auto& [key, trials] : by_variant) {
    for (const auto& t : trials) {
      EXPECT_EQ(t.outcome, metrics::Outcome::kSucceeded) << key << " repeat " << t.repeat << ": " << t.reason;
    }
  }
  auto input = metrics::LoadReportInputFromFile((dir_ / "results.db").string(), std::to_string(sweep_id));
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  metrics::Report report = metrics::BuildReport(*input, metrics::ReportOptions{});
  ASSERT_EQ(report.axis_comparisons.size(), 4u);
  const metrics::VariantReport* diagonal = report.FindVariant("micro_batch=2,seed=2");
  ASSERT_NE(diagonal, nullptr);
  ASSERT_TRUE(diagonal->adaptive.has_value());
  EXPECT_EQ(diagonal->adaptive->pairs, 6);
  EXPECT_EQ(diagonal->adaptive->reason, "max pairs reached");
}

TEST_F(AdaptiveRepeatsTest, ARestartedCoordinatorKeepsTheAnswersComparisonsFromTheStore) {
  // The 2x2 sweep's first three repeats are in the store when a coordinator starts on it:
  // it rebuilds the comparisons from the stored variants (each axis within the other),
  // so the diagonal variant, 2x against the baseline, is not stopped.
  const auto sweep_id = Submit(kTwoAxisAdaptiveSweep);
  service_.reset();
  ASSERT_NO_FATAL_FAILURE(StoreFirstRepeats(sweep_id, 3));
  ASSERT_NO_FATAL_FAILURE(RestartService());
  // The two micro_batch comparisons (2x) have stopped; the two seed ones (A/A) run on:
  // what `status`, the API and the progress line show as "answered 2/4".
  EXPECT_EQ(AnsweredComparisons(service_->State(), sweep_id), std::make_optional(std::make_pair(2, 4)));
  for (const auto& [key, list] : ByVariant(sweep_id)) {
    for (const auto& t : list) {
      if (t.repeat < 3) continue;
      EXPECT_EQ(t.state, metrics::TrialState::kQueued) << key << " repeat " << t.repeat;
    }
  }
}

TEST_F(AdaptiveRepeatsTest, EveryVariantStopsOnceAllTheAnswersComparisonsHaveStopped) {
  // seed=3 triples the tokens: every comparison the answer reports (micro_batch within
  // each seed, seed within each micro_batch) excludes 1 after 3 pairs, so each variant's
  // later repeats are cancelled, the baseline's too.
  std::string yaml = kTwoAxisAdaptiveSweep;
  yaml.replace(yaml.find("seed: {values: [1, 2]}"), 22, "seed: {values: [1, 3]}");
  auto by_variant = RunToTheEnd(yaml);
  ASSERT_EQ(by_variant.size(), 4u);
  for (const auto& [key, trials] : by_variant) {
    for (const auto& t : trials) {
      if (t.repeat < 3) {
        EXPECT_EQ(t.outcome, metrics::Outcome::kSucceeded) << key << " repeat " << t.repeat;
        continue;
      }
      EXPECT_EQ(t.outcome, metrics::Outcome::kCancelled) << key << " repeat " << t.repeat;
      // Each variant is a side of two comparisons (one per axis).
      EXPECT_EQ(t.reason,
                "adaptive repeats: every comparison with this variant stopped after 3 of 6 pairs (interval excludes 1)")
          << key;
    }
  }
}

}  // namespace
}  // namespace bakeoff::coordinator
