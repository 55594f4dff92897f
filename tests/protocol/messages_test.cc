#include "protocol/messages.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "protocol/outcome.h"

namespace bakeoff::protocol {
namespace {

TEST(MessagesTest, RegisterRoundTrips) {
  RegisterMessage m;
  m.token = "t";
  m.worker_name = "w1";
  m.host = "127.0.0.1";
  m.resources.cpu_slots = 2;
  m.resources.cuda_devices = {0, 1};
  m.store_ports = {29500, 29599};
  m.running = {{7, 2}};
  auto parsed = Parse<RegisterMessage>(ToJson(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->worker_name, "w1");
  EXPECT_EQ(parsed->resources.cuda_devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(parsed->store_ports.last, 29599);
  ASSERT_EQ(parsed->running.size(), 1u);
  EXPECT_EQ(parsed->running[0], (AttemptRef{7, 2}));
  EXPECT_EQ(parsed->protocol_version, kProtocolVersion);
}

TEST(MessagesTest, RegisterCarriesTheSlurmJobIdAndRejectsOneThatIsNotAJobId) {
  RegisterMessage m;
  m.worker_name = "gpu017-4711";
  m.host = "gpu017";
  m.resources.cpu_slots = 1;
  m.slurm_job_id = "4711";
  auto parsed = Parse<RegisterMessage>(ToJson(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->slurm_job_id, "4711");
  EXPECT_FALSE(ToJson(RegisterMessage{}).contains("slurm_job_id"));  // absent outside Slurm
  nlohmann::json frame = ToJson(m);
  frame["slurm_job_id"] = "4711; rm -rf /";
  EXPECT_FALSE(Parse<RegisterMessage>(frame).ok());
}

TEST(MessagesTest, RegisterCarriesTheMetricsEndpoint) {
  RegisterMessage m;
  m.worker_name = "w1";
  m.host = "10.0.0.7";
  m.resources.cpu_slots = 1;
  m.metrics_port = 41517;
  m.metrics_host = "192.168.1.7";
  auto parsed = Parse<RegisterMessage>(ToJson(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->metrics_port, 41517);
  EXPECT_EQ(parsed->metrics_host, "192.168.1.7");
}

TEST(MessagesTest, RegisterFromAWorkerWithoutMetricsFieldsStillDecodes) {
  // A frame as workers wrote it before metrics_port / metrics_host existed.
  auto parsed = Parse<RegisterMessage>(nlohmann::json::parse(
      R"({"type":"register","token":"t","worker_name":"old","host":"10.0.0.8",)"
      R"("resources":{"cpu_slots":1},"protocol_version":1})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->metrics_port, 0);
  EXPECT_EQ(parsed->metrics_host, "");
  // Without a separate metrics address the field is not sent (the host is used).
  RegisterMessage m;
  m.worker_name = "w";
  m.host = "h";
  EXPECT_FALSE(ToJson(m).contains("metrics_host"));
}

TEST(MessagesTest, AssignRoundTripsWithRankLayout) {
  AssignMessage m;
  m.attempt = {42, 1};
  m.sweep_id = "3";
  m.variant_key = "compile_mode=jit";
  m.config = {{"model", "tiny"}, {"steps", 2}};
  m.ranks = {{0, 0, {}}, {1, 1, {}}};
  m.world_size = 4;
  m.store_address = "10.0.0.1:29500";
  m.timeout_ms = 60000;
  auto parsed = Parse<AssignMessage>(ToJson(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->attempt, (AttemptRef{42, 1}));
  EXPECT_EQ(parsed->config["steps"], 2);
  EXPECT_EQ(parsed->ranks[1].local_rank, 1);
  EXPECT_EQ(parsed->store_address, "10.0.0.1:29500");
}

TEST(MessagesTest, AssignWithRankOutsideWorldSizeIsRejected) {
  AssignMessage m;
  m.ranks = {{3, 0, {}}};
  m.world_size = 2;
  m.store_address = "h:1";
  auto parsed = Parse<AssignMessage>(ToJson(m));
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("rank 3"), std::string::npos);
}

TEST(MessagesTest, EventsCarryTrialAndAttempt) {
  EventsMessage m;
  m.events.push_back({{5, 2}, 1, {{"event", "step"}, {"step", 3}}});
  auto j = ToJson(m);
  EXPECT_EQ(j["events"][0]["trial_id"], 5);
  EXPECT_EQ(j["events"][0]["attempt"], 2);
  auto parsed = Parse<EventsMessage>(j);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->events[0].rank, 1);
  EXPECT_EQ(parsed->events[0].event["step"], 3);
}

// Step blocks read back as sent; a block with a value that does not read is left out alone
// (named in unreadable_steps), while a block that is not one at all fails the frame.
TEST(MessagesTest, StepBlocksRoundTripAndABadRowLeavesOnlyItsBlockOut) {
  EventsMessage m;
  StepBlock block;
  block.attempt = {7, 2};
  block.rank = 3;
  block.phase = "warmup";
  block.rows.push_back(StepRow{0, 0.5, 128, 2.5, 1e-4, 100, std::nullopt, 0.01, 4096});
  block.rows.push_back(StepRow{1, 0.25});
  m.steps.push_back(block);
  block.phase = "measure";
  m.steps.push_back(block);
  m.outbox_seq = 4;
  nlohmann::json frame = ToJson(m);
  auto parsed = Parse<EventsMessage>(frame);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->steps.size(), 2u);
  EXPECT_TRUE(parsed->unreadable_steps.empty());
  const StepBlock& read = parsed->steps[0];
  EXPECT_EQ(read.attempt, (AttemptRef{7, 2}));
  EXPECT_EQ(read.rank, 3);
  EXPECT_EQ(read.phase, "warmup");
  ASSERT_EQ(read.rows.size(), 2u);
  EXPECT_EQ(read.rows[0].tokens, 128);
  EXPECT_EQ(read.rows[0].lr, 1e-4);
  EXPECT_FALSE(read.rows[0].rss_bytes.has_value());
  EXPECT_EQ(read.rows[0].comm_bytes, 4096);
  EXPECT_DOUBLE_EQ(read.rows[1].step_s, 0.25);
  EXPECT_FALSE(read.rows[1].loss.has_value());

  // Absent columns are all null: the second block's rows carry no rss_bytes.
  EXPECT_FALSE(frame["steps"][1].contains("rss_bytes"));
  EXPECT_TRUE(frame["steps"][1]["tokens"][1].is_null());
  for (auto [column, value, named] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"step_s", "fast", "step_s"}, {"step_s", -1.0, "step_s"}, {"step", -1, "\"step\""},
           {"tokens", 1.5, "tokens"}, {"loss", "x", "loss"}, {"step", 0, "steps must increase"}}) {
    nlohmann::json bad = frame;
    bad["steps"][1][column][1] = value;
    auto one_left = Parse<EventsMessage>(bad);
    ASSERT_TRUE(one_left.ok()) << one_left.status().ToString();
    ASSERT_EQ(one_left->steps.size(), 1u) << bad["steps"][1].dump();
    EXPECT_EQ(one_left->steps[0].phase, "warmup");
    ASSERT_EQ(one_left->unreadable_steps.size(), 1u);
    EXPECT_NE(one_left->unreadable_steps[0].find(named), std::string::npos) << one_left->unreadable_steps[0];
  }
  nlohmann::json short_column = frame;
  short_column["steps"][0]["tokens"].erase(1);
  EXPECT_EQ(Parse<EventsMessage>(short_column)->unreadable_steps.size(), 1u);
  nlohmann::json not_a_column = frame;
  not_a_column["steps"][0]["lr"] = 0.1;
  EXPECT_EQ(Parse<EventsMessage>(not_a_column)->unreadable_steps.size(), 1u);
  nlohmann::json other_phase = frame;
  other_phase["steps"][0]["phase"] = "cooldown";
  EXPECT_EQ(Parse<EventsMessage>(other_phase)->unreadable_steps.size(), 1u);
  nlohmann::json no_steps = frame;
  no_steps["steps"][0]["step"] = nlohmann::json::array();
  EXPECT_EQ(Parse<EventsMessage>(no_steps)->unreadable_steps.size(), 1u);
  nlohmann::json too_many = frame;
  too_many["steps"][0]["step"] = nlohmann::json::array();
  for (std::size_t i = 0; i <= kMaxStepBlockRows; ++i) too_many["steps"][0]["step"].push_back(i);
  EXPECT_EQ(Parse<EventsMessage>(too_many)->unreadable_steps.size(), 1u);

  nlohmann::json not_a_block = frame;
  not_a_block["steps"][0] = 5;
  EXPECT_FALSE(Parse<EventsMessage>(not_a_block).ok());
  nlohmann::json not_a_list = frame;
  not_a_list["steps"] = "rows";
  EXPECT_FALSE(Parse<EventsMessage>(not_a_list).ok());
}

TEST(MessagesTest, AnInfrastructureLossRoundTripsAndIsOffByDefault) {
  AttemptFinishedMessage m;
  m.attempt = {3, 1};
  m.outcome = "lost";
  m.infrastructure = true;
  EXPECT_TRUE(Parse<AttemptFinishedMessage>(ToJson(m))->infrastructure);
  m.infrastructure = false;
  nlohmann::json plain = ToJson(m);
  EXPECT_FALSE(plain.contains("infrastructure")) << "an older coordinator reads the frame as before";
  EXPECT_FALSE(Parse<AttemptFinishedMessage>(plain)->infrastructure);
}

TEST(MessagesTest, MissingFieldNamesTheMessage) {
  auto parsed = Parse<AttemptFinishedMessage>({{"type", "attempt_finished"}, {"trial_id", 1}});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("attempt_finished"), std::string::npos);
}

TEST(MessagesTest, WrongFieldTypeIsAnErrorNotAnException) {
  auto parsed = Parse<HeartbeatMessage>({{"type", "heartbeat"}, {"running", "nope"}});
  EXPECT_FALSE(parsed.ok());
  auto reg = Parse<RegisterMessage>({{"type", "register"}, {"token", 5}});
  EXPECT_FALSE(reg.ok());
}

TEST(MessagesTest, WrongTypeFieldIsRejected) {
  EXPECT_FALSE(Parse<DrainMessage>({{"type", "cancel"}}).ok());
  EXPECT_FALSE(MessageType(nlohmann::json::object()).ok());
  EXPECT_EQ(*MessageType({{"type", "drain"}}), "drain");
}

TEST(MessagesTest, OutcomeNamesRoundTrip) {
  for (auto o : {Outcome::kSucceeded, Outcome::kOom, Outcome::kUnsupported, Outcome::kDiverged,
                 Outcome::kFailed, Outcome::kTimeout, Outcome::kLost, Outcome::kCancelled}) {
    EXPECT_EQ(ParseOutcome(OutcomeName(o)), o);
  }
  EXPECT_FALSE(ParseOutcome("exploded").has_value());
}

}  // namespace
}  // namespace bakeoff::protocol

namespace bakeoff::protocol {
namespace {

// metrics_host goes verbatim into Prometheus service discovery: a worker (or whoever
// holds its credential) must not point the scraper at a cloud metadata address.
TEST(AdvertisedHostTest, LinkLocalUnspecifiedAndMulticastAddressesAreRefused) {
  for (const char* host : {"169.254.169.254", "169.254.0.1", "fe80::1", "[fe80::1]", "febf::1", "0.0.0.0", "::",
                           "224.0.0.1", "ff02::1", "::ffff:169.254.169.254"}) {
    auto s = ScrapeAddress(host, "10.0.0.5");
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument) << host;
  }
  EXPECT_NE(ScrapeAddress("169.254.169.254", "").status().message().find("link-local (169.254.0.0/16)"),
            std::string::npos);
}

TEST(AdvertisedHostTest, RoutableAddressesAreScrapedAsAdvertised) {
  for (const char* host : {"10.0.0.5", "192.168.1.20", "2001:db8::7", "[2001:db8::7]"}) {
    auto s = ScrapeAddress(host, "10.0.0.9");
    ASSERT_TRUE(s.ok()) << host;
    EXPECT_EQ(*s, host);
  }
}

// Issue 32, hole 11: a name could resolve to a metadata address and loopback reaches the
// coordinator's own host, so neither goes into service discovery: a named worker is
// scraped at the address its connection came from, and loopback only when it is that.
TEST(AdvertisedHostTest, NamesAreScrapedAtTheConnectionsAddressAndLoopbackOnlyWhenItIsThat) {
  for (const char* host : {"gpu-node-07", "node7.cluster.example.org", "metadata.google.internal", "localhost"}) {
    auto s = ScrapeAddress(host, "10.0.0.9");
    ASSERT_TRUE(s.ok()) << host;
    EXPECT_EQ(*s, "10.0.0.9") << host;
    EXPECT_FALSE(ScrapeAddress(host, "").ok()) << host << ": the connection's address unknown";
  }
  for (const char* host : {"127.0.0.1", "127.0.0.53", "::1", "[::1]", "::ffff:127.0.0.1"}) {
    EXPECT_FALSE(ScrapeAddress(host, "10.0.0.9").ok()) << host;
  }
  auto own = ScrapeAddress("127.0.0.1", "127.0.0.1");
  ASSERT_TRUE(own.ok()) << "a worker on this host";
  EXPECT_EQ(*own, "127.0.0.1");
}

TEST(AdvertisedHostTest, TheConnectionsOwnAddressIsAlwaysAccepted) {
  EXPECT_TRUE(ScrapeAddress("169.254.10.20", "169.254.10.20").ok());
  EXPECT_FALSE(ScrapeAddress("169.254.10.21", "169.254.10.20").ok());
}

TEST(AdvertisedHostTest, AnythingThatIsNotAHostIsRefused) {
  for (const std::string& host : {std::string(), std::string("evil\nline"), std::string("a b"),
                                 std::string("host:80"), std::string("http://x"), std::string("-lead"),
                                 std::string("2852039166"), std::string("1.2.3"), std::string("a..b"),
                                 std::string(64, 'a') + ".example", std::string(300, 'a')}) {
    auto s = ScrapeAddress(host, "10.0.0.9");
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument) << host;
  }
}

}  // namespace
}  // namespace bakeoff::protocol
