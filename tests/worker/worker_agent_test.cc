// WorkerAgent against a scripted coordinator on loopback: registration, assignment,
// acknowledged events, reconnection that keeps the trial running, lists it for
// reclaim and redelivers what was not acknowledged, and a stop whose grace is measured
// by the injected clock.
#include "worker/worker_agent.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "tests/protocol/test_env.h"

namespace bakeoff::worker {
namespace {
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;
using nlohmann::json;

class WorkerAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    acceptor_.listen();
    config_.coordinator_address = "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
    config_.token = "t";
    config_.name = "agent-test";
    config_.trainer_path = std::string(BAKEOFF_BINARY_DIR) + "/bakeoff-fake-trainer";
    config_.backoff_initial = 20ms;
    config_.backoff_max = 100ms;
    config_.flush_interval = 10ms;
    Configure(config_);
    const Status finalized = config_.Finalize("");
    if (!finalized.ok() && skip_unless_finalized_) GTEST_SKIP() << finalized.ToString();
    ASSERT_TRUE(finalized.ok()) << finalized.ToString();
    agent_ = std::make_shared<WorkerAgent>(io_.get_executor(), config_, env_);
    asio::co_spawn(io_, agent_->Run(), [this](std::exception_ptr, Status s) { run_status_ = s; });
  }
  // What a test changes in the worker's configuration before it starts.
  virtual void Configure(WorkerConfig&) {}
  void TearDown() override {
    if (!agent_) return;  // skipped
    agent_->Stop(100ms);
    clock_.Advance(100ms);  // the grace is over: what is still unacknowledged is given up
    RunUntil([&] { return run_status_.has_value(); }, 10s);
    std::filesystem::remove_all(config_.work_dir);
  }

  // Runs the io_context until `done` or the deadline.
  template <typename F>
  bool RunUntil(F done, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(10ms);
    }
    return done();
  }

  // Accepts the worker's connection and reads its register frame.
  std::shared_ptr<protocol::FrameConnection> Accept(json* reg) {
    std::shared_ptr<protocol::FrameConnection> conn;
    asio::co_spawn(io_, [&]() -> asio::awaitable<void> {
      auto socket = co_await acceptor_.async_accept(asio::use_awaitable);
      conn = std::make_shared<protocol::FrameConnection>(std::move(socket));
    }, asio::detached);
    EXPECT_TRUE(RunUntil([&] { return conn != nullptr; }, 10s));
    *reg = Read(conn);
    return conn;
  }

  json Read(const std::shared_ptr<protocol::FrameConnection>& conn) {
    std::optional<Result<json>> frame;
    asio::co_spawn(io_, [&]() -> asio::awaitable<void> { frame.emplace(co_await conn->Read(5000ms)); },
                   asio::detached);
    RunUntil([&] { return frame.has_value(); }, 10s);
    if (!frame || !frame->ok()) return json::object();
    return frame->value();
  }

  // Reads frames until one of `type` arrives (heartbeats are skipped).
  json ReadType(const std::shared_ptr<protocol::FrameConnection>& conn, const std::string& type) {
    for (int i = 0; i < 200; ++i) {
      json f = Read(conn);
      if (f.empty()) return f;
      if (f.value("type", "") == type) return f;
    }
    return json::object();
  }

  FakeClock clock_;  // first: the agent and its trials read it until they are destroyed
  TestEnv env_{clock_};
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  WorkerConfig config_;
  std::shared_ptr<WorkerAgent> agent_;
  std::optional<Status> run_status_;
  bool skip_unless_finalized_ = false;  // a host that cannot give the test's configuration
};

protocol::AssignMessage Assign(json config) {
  protocol::AssignMessage a;
  a.attempt = {7, 1};
  a.config = std::move(config);
  a.ranks = {{0, 0, {}}};
  a.store_address = "127.0.0.1:29999";
  a.timeout_ms = 30000;
  return a;
}

TEST_F(WorkerAgentTest, RegistersRunsAnAttemptAndReportsIt) {
  json reg;
  auto conn = Accept(&reg);
  EXPECT_EQ(reg["type"], "register");
  EXPECT_EQ(reg["token"], "t");
  EXPECT_EQ(reg["worker_name"], "agent-test");
  conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
  conn->Send(protocol::ToJson(Assign({{"steps", 2}})));
  json finished;
  std::vector<json> events;
  for (int i = 0; i < 500 && finished.empty(); ++i) {
    json f = Read(conn);
    if (f.empty()) break;
    if (f["type"] == "events") {
      for (auto& e : f["events"]) events.push_back(e);
      conn->Send(protocol::ToJson(protocol::AckMessage{f["outbox_seq"]}));
    }
    if (f["type"] == "attempt_finished") finished = f;
  }
  ASSERT_FALSE(finished.empty());
  EXPECT_EQ(finished["outcome"], "succeeded") << finished.dump();
  EXPECT_EQ(finished["trial_id"], 7);
  bool summary = false;
  for (const auto& e : events) {
    EXPECT_EQ(e["trial_id"], 7);
    EXPECT_EQ(e["attempt"], 1);
    summary = summary || e["event"]["event"] == "summary";
  }
  EXPECT_TRUE(summary);
}

TEST_F(WorkerAgentTest, RegistrationAdvertisesMetricsAndTrialSeriesLastAsLongAsTheAttempt) {
  json reg;
  auto conn = Accept(&reg);
  ASSERT_NE(agent_->metrics(), nullptr) << "metrics_listen defaults to the advertised host, port 0";
  EXPECT_GT(agent_->metrics_port(), 0);
  EXPECT_EQ(reg["metrics_port"], agent_->metrics_port());
  EXPECT_EQ(reg["metrics_host"], "127.0.0.1");
  conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
  // 200 steps of 5 ms: long enough to see the live series.
  conn->Send(protocol::ToJson(Assign({{"steps", 200}})));
  EXPECT_TRUE(RunUntil([&] { return agent_->metrics()->Render().find("trial=\"7\"") != std::string::npos; }, 10s))
      << "no live series for trial 7";
  json finished;
  for (int i = 0; i < 2000 && finished.empty(); ++i) {
    json f = Read(conn);
    if (f.empty()) break;
    if (f["type"] == "events") conn->Send(protocol::ToJson(protocol::AckMessage{f["outbox_seq"]}));
    if (f["type"] == "attempt_finished") finished = f;
  }
  ASSERT_EQ(finished.value("outcome", ""), "succeeded") << finished.dump();
  const std::string text = agent_->metrics()->Render();
  EXPECT_EQ(text.find("trial=\"7\""), std::string::npos) << text;
  EXPECT_NE(text.find("bakeoff_worker_trials_finished_total{outcome=\"succeeded\"} 1"), std::string::npos) << text;
}

TEST_F(WorkerAgentTest, AStoppingWorkerSaysGoodbyeAfterItsLastReport) {
  json reg;
  auto conn = Accept(&reg);
  conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
  ASSERT_FALSE(ReadType(conn, "heartbeat").empty());
  agent_->Stop(2000ms);
  json bye = ReadType(conn, "goodbye");
  EXPECT_EQ(bye.value("type", ""), "goodbye") << "a clean stop tells the coordinator, which marks it gone";
  EXPECT_TRUE(RunUntil([&] { return run_status_.has_value(); }, 10s));
}

TEST_F(WorkerAgentTest, WrongTokenRejectionEndsRun) {
  json reg;
  auto conn = Accept(&reg);
  conn->Send(protocol::ToJson(protocol::RejectedMessage{"wrong worker token"}));
  ASSERT_TRUE(RunUntil([&] { return run_status_.has_value(); }, 10s));
  EXPECT_EQ(run_status_->code(), Status::Code::kInvalidArgument);
  EXPECT_NE(run_status_->message().find("wrong worker token"), std::string::npos);
}

TEST_F(WorkerAgentTest, ReconnectKeepsTheTrialRunningAndRedeliversUnacknowledgedEvents) {
  json reg;
  auto conn = Accept(&reg);
  conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
  // A slow trial: 40 steps of 50 ms.
  conn->Send(protocol::ToJson(Assign({{"steps", 40}, {"fake_step_ms", 50}})));
  json first = ReadType(conn, "events");  // never acknowledged
  ASSERT_FALSE(first.empty());
  const auto first_seq = first["events"][0]["seq"];
  conn->Close();  // the coordinator "restarts"

  json reg2;
  auto conn2 = Accept(&reg2);
  ASSERT_EQ(reg2["type"], "register");
  ASSERT_EQ(reg2["running"].size(), 1u) << reg2.dump();
  EXPECT_EQ(reg2["running"][0]["trial_id"], 7);
  conn2->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
  json again = ReadType(conn2, "events");
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(again["events"][0]["seq"], first_seq) << "unacknowledged events are sent again, same seq";
  EXPECT_EQ(agent_->running_attempts(), 1u) << "the trial kept running through the outage";
}

TEST_F(WorkerAgentTest, CancelKillsTheAttempt) {
  json reg;
  auto conn = Accept(&reg);
  conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
  conn->Send(protocol::ToJson(Assign({{"fake_behavior", "hang"}})));
  ASSERT_FALSE(ReadType(conn, "events").empty());
  conn->Send(protocol::ToJson(protocol::CancelMessage{{7, 1}, "sweep cancelled"}));
  json finished = ReadType(conn, "attempt_finished");
  EXPECT_EQ(finished["outcome"], "cancelled");
}

TEST_F(WorkerAgentTest, AStopWaitsForAcknowledgementsUntilTheClockPassesTheGrace) {
  json reg;
  auto conn = Accept(&reg);
  // A heartbeat timeout longer than the test: only the stop deadline can end the run.
  conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 600000}));
  conn->Send(protocol::ToJson(Assign({{"fake_behavior", "hang"}})));
  ASSERT_FALSE(ReadType(conn, "events").empty());  // never acknowledged
  agent_->Stop(1h);  // far longer than the test waits: only the fake clock can pass it
  ASSERT_EQ(ReadType(conn, "attempt_finished").value("outcome", ""), "cancelled");
  // The report is not acknowledged either and the clock stands still: the agent keeps
  // its connection (it heartbeats on) instead of ending.
  ASSERT_FALSE(ReadType(conn, "heartbeat").empty());
  ASSERT_FALSE(ReadType(conn, "heartbeat").empty());
  EXPECT_FALSE(run_status_.has_value()) << "ended before the grace was over";
  EXPECT_TRUE(agent_->connected());
  clock_.Advance(1h + 1ms);
  ASSERT_TRUE(RunUntil([&] { return run_status_.has_value(); }, 10s)) << "still waiting past the grace";
  EXPECT_TRUE(run_status_->ok()) << run_status_->ToString();
  EXPECT_FALSE(agent_->outbox().empty()) << "it ended by the deadline, not because all was acknowledged";
}

}  // namespace
}  // namespace bakeoff::worker

namespace bakeoff::worker {
namespace {

// The worker flushes every second: the trainer's events pile up in the outbox first, as
// they did behind the review's slow link, so that one flush must cut them.
class WorkerAgentFrameBytesTest : public WorkerAgentTest {
 protected:
  void Configure(WorkerConfig& config) override { config.flush_interval = 1000ms; }
  // Runs one attempt of the fake trainer's big_events and returns its frames' encoded
  // sizes and events, all read from the one connection (a worker that reconnected would
  // end it); `finished` is the attempt_finished frame, empty when none came.
  void RunBigEvents(long long count, std::size_t bytes, std::vector<std::size_t>* frame_bytes, int* notes,
                    json* finished) {
    json reg;
    auto conn = Accept(&reg);
    conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
    conn->Send(protocol::ToJson(Assign({{"steps", 2},
                                        {"fake_behavior", "big_events"},
                                        {"fake_event_count", count},
                                        {"fake_event_bytes", bytes}})));
    for (int i = 0; i < 500 && finished->empty(); ++i) {
      json f = Read(conn);  // a frame over 4 MiB fails here, and so does a closed connection
      if (f.empty()) break;
      if (f["type"] == "events") {
        frame_bytes->push_back(f.dump().size());
        for (auto& e : f["events"]) *notes += e["event"].value("event", "") == "note" ? 1 : 0;
        conn->Send(protocol::ToJson(protocol::AckMessage{f["outbox_seq"]}));
      }
      if (f["type"] == "attempt_finished") *finished = f;
    }
  }
};

// Security review 2026-12-07, A4: six 900 KB events made one 5.4 MB frame, which the
// worker could not send; it reconnected and resent it forever. Frames are cut by bytes:
// the six arrive in frames under the limit, on the first connection, and so does the
// attempt's report.
TEST_F(WorkerAgentFrameBytesTest, LargeEventsAreCutIntoFramesUnderTheLimit) {
  std::vector<std::size_t> frames;
  int notes = 0;
  json finished;
  RunBigEvents(6, 900'000, &frames, &notes, &finished);
  ASSERT_FALSE(finished.empty()) << "no attempt_finished on the first connection";
  EXPECT_EQ(finished["outcome"], "succeeded") << finished.dump();
  EXPECT_EQ(notes, 6);
  EXPECT_GE(frames.size(), 2u);
  for (std::size_t b : frames) EXPECT_LE(b, protocol::kDefaultMaxFrameBytes);
}

// The same wall from another direction: many mid-sized events (40 of 200 KB, 8 MB in
// all), each frame cut by bytes before its 500-event count. (An event larger than any
// frame cannot come from one 1 MiB line: Outbox's own test drops one.)
TEST_F(WorkerAgentFrameBytesTest, ManyMidSizedEventsAreCutByBytesNotByCount) {
  std::vector<std::size_t> frames;
  int notes = 0;
  json finished;
  RunBigEvents(40, 200'000, &frames, &notes, &finished);
  ASSERT_FALSE(finished.empty()) << "no attempt_finished on the first connection";
  EXPECT_EQ(notes, 40);
  EXPECT_GE(frames.size(), 2u);
  for (std::size_t b : frames) EXPECT_LE(b, protocol::kDefaultMaxFrameBytes);
}

// Two CPU slots pinned to a core each (no host claims: other tests' workers may hold
// this host's). Issue 51, item 5: a rank's cores not released after its attempt was
// caught only by a slow end-to-end test.
class WorkerAgentPinnedSlotsTest : public WorkerAgentTest {
 protected:
  void Configure(WorkerConfig& config) override {
    config.cpu_slots = 2;
    config.cpus = {0, 1};
    config.host_lock_dir = "off";
    skip_unless_finalized_ = true;  // a host without two physical cores
  }
};

// Three attempts one after the other, each one rank: each gets a slot's one core, which
// it gives back when it ends. Were the cores kept, the third would find both slots taken
// and run unpinned, on both CPUs.
TEST_F(WorkerAgentPinnedSlotsTest, EachAttemptGivesItsCoresBack) {
  json reg;
  auto conn = Accept(&reg);
  conn->Send(protocol::ToJson(protocol::RegisteredMessage{"agent-test", 50, 5000}));
  for (std::int64_t trial = 7; trial <= 9; ++trial) {
    auto assign = Assign({{"steps", 1}});
    assign.attempt = {trial, 1};
    conn->Send(protocol::ToJson(assign));
    json finished, affinity;
    for (int i = 0; i < 500 && finished.empty(); ++i) {
      json f = Read(conn);
      if (f.empty()) break;
      if (f["type"] == "events") {
        for (auto& e : f["events"]) {
          if (e["event"].contains("affinity")) affinity = e["event"]["affinity"];
        }
        conn->Send(protocol::ToJson(protocol::AckMessage{f["outbox_seq"]}));
      }
      if (f["type"] == "attempt_finished") finished = f;
    }
    ASSERT_FALSE(finished.empty()) << "trial " << trial;
    EXPECT_EQ(finished["outcome"], "succeeded") << finished.dump();
    ASSERT_TRUE(affinity.is_array()) << "trial " << trial << ": the fake trainer reports its affinity";
    EXPECT_EQ(affinity.size(), 1u) << "trial " << trial << " ran on " << affinity.dump() << ", not one slot's core";
  }
}

}  // namespace
}  // namespace bakeoff::worker
