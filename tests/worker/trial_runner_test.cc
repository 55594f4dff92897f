#include "worker/trial_runner.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <boost/asio/io_context.hpp>

#include "tests/protocol/test_env.h"

namespace bakeoff::worker {
namespace {
using namespace std::chrono_literals;

// A loopback TCP listener on a port the kernel chose: held while it lives.
class HeldPort {
 public:
  HeldPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && listen(fd_, 1) == 0) {
      socklen_t len = sizeof addr;
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
      port_ = ntohs(addr.sin_port);
    }
  }
  ~HeldPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class TrialRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.coordinator_address = "127.0.0.1:1";
    config_.trainer_path = std::string(BAKEOFF_BINARY_DIR) + "/bakeoff-fake-trainer";
    ASSERT_TRUE(config_.Finalize("").ok());  // a fresh temp work dir
  }
  void TearDown() override { std::filesystem::remove_all(config_.work_dir); }

  protocol::AssignMessage Assign(nlohmann::json config, int local_ranks = 1, int world_size = 1,
                                 std::int64_t timeout_ms = 20000) {
    protocol::AssignMessage a;
    a.attempt = {next_trial_++, 1};
    a.config = std::move(config);
    for (int r = 0; r < local_ranks; ++r) a.ranks.push_back({r, r, {}});
    a.world_size = world_size;
    a.store_address = "127.0.0.1:" + std::to_string(HeldPort().port());  // free now (released at once)
    a.timeout_ms = timeout_ms;
    return a;
  }

  // Runs the attempt to its end (deadline 30 s) and returns its report.
  protocol::AttemptFinishedMessage Run(protocol::AssignMessage assign,
                                       std::function<void(TrialRunner&)> after_start = nullptr) {
    std::optional<protocol::AttemptFinishedMessage> finished;
    TrialRunner::Callbacks callbacks;
    callbacks.on_event = [this](int rank, protocol::TrainerEvent e) {
      if (e.body.is_null()) {  // typed only (the simulated workload's steps)
        nlohmann::json typed = {{"event", e.kind}, {"typed_only", true}};
        if (const auto* step = e.step()) typed.update({{"step", step->row.step}, {"phase", step->phase}});
        events_.push_back({rank, std::move(typed)});
        return;
      }
      events_.push_back({rank, std::move(e.body)});
    };
    callbacks.on_finished = [&](protocol::AttemptFinishedMessage m) {
      EXPECT_FALSE(finished.has_value()) << "reported twice";
      finished = std::move(m);
    };
    auto runner = std::make_shared<TrialRunner>(io_.get_executor(), config_, std::move(assign), callbacks, env_);
    runner->PinRanks(pin_);
    runner->Start();
    if (after_start) after_start(*runner);
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!finished && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(20ms);
      if (io_.stopped()) io_.restart();
    }
    EXPECT_TRUE(finished.has_value()) << "attempt did not finish within 30 s";
    return finished.value_or(protocol::AttemptFinishedMessage{});
  }

  std::vector<nlohmann::json> EventsOfKind(const std::string& kind) const {
    std::vector<nlohmann::json> out;
    for (const auto& [rank, e] : events_) {
      if (e.value("event", "") == kind) out.push_back(e);
    }
    return out;
  }

  FakeClock clock_;  // first: the runners read it until they are destroyed
  TestEnv env_{clock_};
  boost::asio::io_context io_;
  WorkerConfig config_;
  std::vector<std::pair<int, nlohmann::json>> events_;
  std::int64_t next_trial_ = 1;
  std::vector<std::vector<int>> pin_;  // PinRanks before each Start
};

TEST_F(TrialRunnerTest, SuccessfulRankForwardsEveryEventAndSucceeds) {
  auto done = Run(Assign({{"steps", 4}}));
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  EXPECT_EQ(EventsOfKind("started").size(), 1u);
  EXPECT_EQ(EventsOfKind("ready").size(), 1u);
  EXPECT_EQ(EventsOfKind("step").size(), 4u);
  EXPECT_EQ(EventsOfKind("summary").size(), 1u);
  ASSERT_EQ(done.exits.size(), 1u);
  EXPECT_EQ(done.exits[0].exit_code, 0);
}

TEST_F(TrialRunnerTest, StartedEventsAreStampedWithTheClocksWallTime) {
  clock_.Advance(1500ms);
  const double expected_s = std::chrono::duration<double>(clock_.WallNow().time_since_epoch()).count();
  ASSERT_EQ(Run(Assign({{"steps", 1}})).outcome, "succeeded");
  config_.simulate = true;  // the simulated workload stamps its own
  config_.simulate_step = 1ms;
  ASSERT_EQ(Run(Assign({{"steps", 1}})).outcome, "succeeded");
  const auto started = EventsOfKind("started");
  ASSERT_EQ(started.size(), 2u);
  for (const auto& s : started) EXPECT_DOUBLE_EQ(s.value("at", 0.0), expected_s) << s.dump();
}

TEST_F(TrialRunnerTest, PassesRankFlagsAndEnvironment) {
  auto assign = Assign({{"steps", 1}}, 2, 4);
  const std::string store = assign.store_address;
  auto done = Run(assign);
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  auto ready = EventsOfKind("ready");
  ASSERT_EQ(ready.size(), 2u);
  std::set<int> ranks;
  for (const auto& r : ready) {
    ranks.insert(r["rank"].get<int>());
    EXPECT_EQ(r["world_size"], 4);
    EXPECT_EQ(r["store"], store);
    EXPECT_EQ(r["env_rank"], std::to_string(r["rank"].get<int>()));
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  // Both ranks share one process group, led by the first.
  EXPECT_EQ(ready[0]["pgid"], ready[1]["pgid"]);
}

// Issue 33, isolation: each rank runs on its slot's CPUs alone, set before its program
// starts (its affinity mask), and is told so (BAKEOFF_RANK_CPUS sizes its threads).
TEST_F(TrialRunnerTest, EachRankRunsPinnedToItsOwnCpus) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs two CPUs; this process may use " << allowed.size();
  pin_ = {{allowed[0]}, {allowed[1]}};
  auto done = Run(Assign({{"steps", 1}}, 2, 2));
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  auto ready = EventsOfKind("ready");
  ASSERT_EQ(ready.size(), 2u);
  for (const auto& r : ready) {
    const int rank = r["rank"].get<int>();
    EXPECT_EQ(r["affinity"], nlohmann::json::array({allowed[static_cast<std::size_t>(rank)]})) << r.dump();
    EXPECT_EQ(r["env_rank_cpus"], std::to_string(allowed[static_cast<std::size_t>(rank)]));
  }
  // Without a pin a rank keeps the worker's whole mask.
  events_.clear();
  pin_.clear();
  ASSERT_EQ(Run(Assign({{"steps", 1}})).outcome, "succeeded");
  ASSERT_EQ(EventsOfKind("ready").size(), 1u);
  EXPECT_EQ(EventsOfKind("ready")[0]["affinity"].size(), allowed.size());
  EXPECT_EQ(EventsOfKind("ready")[0]["env_rank_cpus"], "");
}

// Issue 33 item 6: a store port another program holds is Bakeoff's machinery failing,
// not the variant: the attempt ends `lost` (requeued on the coordinator's next port)
// before any rank runs. A worker whose ranks do not host the store does not check.
TEST_F(TrialRunnerTest, AStorePortInUseEndsTheAttemptLostBeforeAnythingRuns) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  auto assign = Assign({{"steps", 1}});
  assign.store_address = "127.0.0.1:" + std::to_string(held.port());
  auto done = Run(assign);
  EXPECT_EQ(done.outcome, "lost") << done.reason;
  EXPECT_TRUE(done.infrastructure) << "so that the retry does not use up max_attempts";
  EXPECT_NE(done.reason.find("infrastructure: the rank store's port " + std::to_string(held.port())),
            std::string::npos) << done.reason;
  EXPECT_TRUE(EventsOfKind("ready").empty()) << "no rank ran";
  events_.clear();
  auto elsewhere = Assign({{"steps", 1}}, 1, 2);
  elsewhere.ranks = {{1, 0, {}}};  // rank 1 only: rank 0, the store's host, runs elsewhere
  elsewhere.store_address = "127.0.0.1:" + std::to_string(held.port());
  EXPECT_NE(Run(elsewhere).outcome, "lost") << "only the store's host checks its port";
}

TEST_F(TrialRunnerTest, EveryRankGetsThisHostsAddressAndMasterAddrIsRankZeros) {
  config_.rank_address = "127.0.0.1";
  config_.rank_interface = "lo";
  auto assign = Assign({{"steps", 1}}, 2, 4);
  assign.store_address = "10.9.8.7:29555";  // rank 0 runs on another host
  auto done = Run(assign);
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  auto ready = EventsOfKind("ready");
  ASSERT_EQ(ready.size(), 2u);
  for (const auto& r : ready) {
    EXPECT_EQ(r["env_master_addr"], "10.9.8.7");
    EXPECT_EQ(r["env_rank_addr"], "127.0.0.1");
    EXPECT_EQ(r["env_rank_iface"], "lo");
    if (!std::getenv("NCCL_SOCKET_IFNAME")) {
      EXPECT_EQ(r["env_nccl_socket_ifname"], "lo");
    }
  }
  // The worker's own `started` events record where each rank runs.
  for (const auto& s : EventsOfKind("started")) {
    EXPECT_EQ(s["address"], "127.0.0.1");
    EXPECT_EQ(s["host"], config_.advertise_host);
  }
}

TEST_F(TrialRunnerTest, ReasonIsTheErrorsFirstLineAndPointsToTheRanksLog) {
  auto done = Run(Assign({{"fake_behavior", "error_backtrace"}}));
  EXPECT_EQ(done.outcome, "failed");
  EXPECT_EQ(done.reason.find("Exception raised from"), std::string::npos) << done.reason;
  EXPECT_EQ(done.reason.find("frame #"), std::string::npos) << done.reason;
  EXPECT_EQ(done.reason.find('\n'), std::string::npos) << done.reason;
  EXPECT_NE(done.reason.find("rank 0: unavailable: rank 0 cannot bind: Cannot resolve 10.0.0.9"), std::string::npos)
      << done.reason;
  // The log it names holds the full text.
  const auto at = done.reason.find("(full text in ");
  ASSERT_NE(at, std::string::npos) << done.reason;
  const std::string log = done.reason.substr(at + 14, done.reason.size() - at - 15);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("frame #1: c10::detail::torchCheckFail"), std::string::npos) << log;
}

// A rank printing 8 MiB to stderr against a 64 KiB cap: it is drained (never blocked:
// the attempt ends), its log stays within the cap with the first and the last line and
// a marker of what was dropped, and the reason still points to it.
TEST_F(TrialRunnerTest, ARankLogIsCappedAndKeepsItsHeadAndTail) {
  config_.max_rank_log_bytes = 64 * 1024;
  auto done = Run(Assign({{"fake_behavior", "flood_stderr"}, {"fake_stderr_bytes", 8 << 20}}));
  EXPECT_EQ(done.outcome, "failed");
  EXPECT_NE(done.reason.find("printed too much (fake)"), std::string::npos) << done.reason;
  const auto at = done.reason.find("(full text in ");
  ASSERT_NE(at, std::string::npos) << done.reason;
  const std::string log = done.reason.substr(at + 14, done.reason.size() - at - 15);
  EXPECT_LE(std::filesystem::file_size(log), 64u * 1024);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("FIRST LINE: the rank's configuration\n", 0), 0u) << text.substr(0, 200);
  const std::string last = "LAST LINE: the error a user needs\n";
  ASSERT_GE(text.size(), last.size());
  EXPECT_EQ(text.substr(text.size() - last.size()), last);
  EXPECT_NE(text.find("bytes of this rank's output dropped here"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(log + ".tail"));
  EXPECT_FALSE(std::filesystem::exists(log + ".tail.old"));
}

// The log is drained until the rank has been reaped, not until every process holding
// its stderr has gone: a child left writing to it does not hold the attempt back.
TEST_F(TrialRunnerTest, AChildKeepingTheRanksStderrOpenDoesNotHoldTheAttempt) {
  auto done = Run(Assign({{"fake_behavior", "child_keeps_stderr"}, {"steps", 1}}));
  auto child = EventsOfKind("child");
  if (!child.empty()) kill(child[0]["pid"].get<pid_t>(), SIGKILL);
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  ASSERT_EQ(child.size(), 1u);
}

// Without the worker's stray reaper (this test process is not a subreaper): a child in
// a session of its own that keeps the events pipe holds the attempt for
// kEventsPipeGrace only, and the rank's log says so.
TEST_F(TrialRunnerTest, AChildKeepingTheEventsPipeHoldsTheAttemptForTheGraceOnly) {
  const auto start = std::chrono::steady_clock::now();
  auto done = Run(Assign({{"fake_behavior", "child_keeps_events"}, {"steps", 1}}));
  const auto took = std::chrono::steady_clock::now() - start;
  auto child = EventsOfKind("child");
  if (!child.empty()) kill(child[0]["pid"].get<pid_t>(), SIGKILL);
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  ASSERT_EQ(child.size(), 1u);
  EXPECT_LT(took, TrialRunner::kEventsPipeGrace + std::chrono::seconds(20));
  std::ifstream in(std::filesystem::path(config_.work_dir) / "trial-1-attempt-1" / "rank-0.log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("still holds its events pipe"), std::string::npos) << log;
}

TEST_F(TrialRunnerTest, TheWorkersTokenNeverReachesARank) {
  setenv("BAKEOFF_TOKEN", "worker-secret", 1);
  auto done = Run(Assign({{"steps", 1}}));
  unsetenv("BAKEOFF_TOKEN");
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  auto ready = EventsOfKind("ready");
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0]["env_token_present"], false);
}

TEST_F(TrialRunnerTest, AFileDatasetWithoutADataRootIsRefusedBeforeAnyRankStarts) {
  auto done = Run(Assign({{"steps", 1}, {"dataset", "tokens.bin"}}));
  EXPECT_EQ(done.outcome, "failed");
  EXPECT_NE(done.reason.find("no --data-root"), std::string::npos) << done.reason;
  EXPECT_TRUE(EventsOfKind("ready").empty()) << "no rank ran";
}

TEST_F(TrialRunnerTest, OomErrorEventIsOom) {
  auto done = Run(Assign({{"fake_behavior", "error_oom"}}));
  EXPECT_EQ(done.outcome, "oom");
  EXPECT_NE(done.reason.find("out of memory"), std::string::npos);
}

TEST_F(TrialRunnerTest, SigkillWithoutEventIsOom) {
  auto done = Run(Assign({{"fake_behavior", "sigkill_self"}}));
  EXPECT_EQ(done.outcome, "oom") << done.reason;
  EXPECT_EQ(done.exits[0].signal, SIGKILL);
}

TEST_F(TrialRunnerTest, ExitCodeFourWithoutEventIsUnsupported) {
  auto done = Run(Assign({{"fake_behavior", "exit_code"}, {"fake_exit_code", 4}}));
  EXPECT_EQ(done.outcome, "unsupported") << done.reason;
}

TEST_F(TrialRunnerTest, TimeoutKillsTheWholeProcessGroup) {
  auto done = Run(Assign({{"fake_behavior", "hang_with_child"}}, 1, 1, 500));
  EXPECT_EQ(done.outcome, "timeout");
  auto child = EventsOfKind("child");
  ASSERT_EQ(child.size(), 1u);
  pid_t grandchild = child[0]["pid"];
  // The grandchild was in the group, so it got SIGKILL too; it is reparented (not our
  // child), so wait for it to vanish with a deadline.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (kill(grandchild, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_NE(kill(grandchild, 0), 0) << "the trainer's child survived the timeout";
}

TEST_F(TrialRunnerTest, CancelKillsRanksAndReportsCancelled) {
  auto done = Run(Assign({{"fake_behavior", "hang"}}, 2, 2), [](TrialRunner& r) { r.Cancel("sweep cancelled"); });
  EXPECT_EQ(done.outcome, "cancelled");
  EXPECT_EQ(done.reason, "sweep cancelled");
}

TEST_F(TrialRunnerTest, FailedRankStopsItsSiblingsAndDecides) {
  auto done = Run(Assign({{"fake_behavior", "rank1_fails"}}, 2, 2));
  EXPECT_EQ(done.outcome, "failed");
  EXPECT_NE(done.reason.find("rank 1"), std::string::npos);
}

TEST_F(TrialRunnerTest, NonJsonLinesAreIgnored) {
  auto done = Run(Assign({{"fake_behavior", "garbage"}, {"steps", 1}}));
  EXPECT_EQ(done.outcome, "succeeded") << done.reason;
  for (const auto& [rank, e] : events_) EXPECT_TRUE(e.contains("event"));
}

TEST_F(TrialRunnerTest, MissingTrainerIsFailedNotACrash) {
  config_.trainer_path = "/nonexistent/bakeoff-trainer";
  auto done = Run(Assign({{"steps", 1}}));
  EXPECT_EQ(done.outcome, "failed");
}

TEST_F(TrialRunnerTest, SimulatedWorkloadMarksEveryEvent) {
  config_.simulate = true;
  config_.simulate_step = 1ms;
  auto done = Run(Assign({{"steps", 3}, {"warmup_steps", 1}}));
  EXPECT_EQ(done.outcome, "succeeded");
  EXPECT_EQ(EventsOfKind("step").size(), 4u);
  // Steps come typed, without a body (they travel in step blocks); every other event
  // says it was simulated.
  for (const auto& [rank, e] : events_) {
    if (e.value("typed_only", false)) {
      EXPECT_EQ(e["event"], "step");
    } else {
      EXPECT_EQ(e.value("simulated", false), true) << e.dump();
    }
  }
}

}  // namespace
}  // namespace bakeoff::worker
