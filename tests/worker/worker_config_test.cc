#include "worker/worker_config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

namespace bakeoff::worker {
namespace {

class WorkerConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.coordinator_address = "127.0.0.1:7070";
    config_.trainer_path = "/bin/true";
    config_.work_dir = (std::filesystem::temp_directory_path() / ("bakeoff-wconfig-" + std::to_string(getpid()))).string();
  }
  void TearDown() override { std::filesystem::remove_all(config_.work_dir); }

  // Finalize refuses the config as bad input, with a message naming each of `parts`
  // (the flag to fix, the value given).
  void ExpectRejectedNaming(std::initializer_list<const char*> parts) {
    Status s = config_.Finalize("bakeoff");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    for (const char* part : parts) EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  }

  // The --metrics-listen that Finalize derives when the worker advertises `host`.
  std::string DefaultMetricsListenFor(const std::string& host) {
    config_.advertise_host = host;
    EXPECT_TRUE(config_.Finalize("bakeoff").ok());
    return config_.metrics_listen;
  }

  WorkerConfig config_;
};

TEST_F(WorkerConfigTest, MetricsListenDefaultsToTheAdvertisedAddressWithAFreePort) {
  EXPECT_EQ(DefaultMetricsListenFor("10.1.2.3"), "10.1.2.3:0");
}

TEST_F(WorkerConfigTest, MetricsListenBracketsAnIpv6Address) {
  EXPECT_EQ(DefaultMetricsListenFor("fd00::7"), "[fd00::7]:0");
}

TEST_F(WorkerConfigTest, MetricsListenOnEveryInterfaceWhenTheHostIsAName) {
  // A host name is fine for rendezvous but cannot be bound.
  EXPECT_EQ(DefaultMetricsListenFor("gpu-node-7.cluster.example"), "0.0.0.0:0");
}

TEST_F(WorkerConfigTest, MetricsListenOffAndExplicitAddressesAreKept) {
  // Copied before Finalize, and the first one's host claims (store ports, CPUs) let go
  // before the second claims its own, as when one worker exits and the next starts.
  WorkerConfig other = config_;
  config_.metrics_listen = "off";
  ASSERT_TRUE(config_.Finalize("bakeoff").ok());
  EXPECT_EQ(config_.metrics_listen, "off");
  config_.claims.reset();
  other.metrics_listen = "192.168.0.9:9400";
  const Status finalized = other.Finalize("bakeoff");
  ASSERT_TRUE(finalized.ok()) << finalized.message();
  EXPECT_EQ(other.metrics_listen, "192.168.0.9:9400");
}

TEST_F(WorkerConfigTest, MalformedMetricsListenIsRejectedNamingTheFlag) {
  config_.metrics_listen = "nonsense";
  ExpectRejectedNaming({"--metrics-listen"});
}

TEST_F(WorkerConfigTest, ARankLogCapUnderTheMinimumIsRejectedNamingTheFlag) {
  config_.max_rank_log_bytes = 1000;
  ExpectRejectedNaming({"--max-rank-log-bytes"});
}

TEST_F(WorkerConfigTest, RanksBindToTheHostAddressAndTheInterfaceHoldingIt) {
  config_.advertise_host = "127.0.0.1";
  ASSERT_TRUE(config_.Finalize("bakeoff").ok());
  EXPECT_EQ(config_.rank_address, "127.0.0.1");
  EXPECT_EQ(config_.rank_interface, "lo");
  EXPECT_EQ(config_.RankAddressWarning(), "");
}

TEST_F(WorkerConfigTest, RankInterfaceGivesTheRankAddress) {
  config_.advertise_host = "gpu-node-7.cluster.example";
  config_.rank_interface = "lo";
  ASSERT_TRUE(config_.Finalize("bakeoff").ok());
  EXPECT_EQ(config_.rank_address, "127.0.0.1");
}

TEST_F(WorkerConfigTest, UnknownRankInterfaceIsRejectedNamingIt) {
  config_.rank_interface = "bakeoff-none0";
  ExpectRejectedNaming({"--rank-interface", "bakeoff-none0"});
}

TEST_F(WorkerConfigTest, RankAddressOfNoLocalInterfaceIsKeptWithAWarning) {
  // Behind NAT the advertised address may be no local one: allowed, but the operator is told.
  config_.advertise_host = "192.0.2.77";
  ASSERT_TRUE(config_.Finalize("bakeoff").ok());
  EXPECT_EQ(config_.rank_address, "192.0.2.77");
  EXPECT_EQ(config_.rank_interface, "");
  EXPECT_NE(config_.RankAddressWarning().find("--rank-interface"), std::string::npos);
}

// --rank-uids: fewer uids than attempts that run at once is refused (as root; a worker
// that is not root is refused for that first).
TEST_F(WorkerConfigTest, RankUidsFewerThanSlotsAreRefusedNamingBothCounts) {
  config_.host_lock_dir = "off";
  config_.cpu_slots = 2;
  config_.rank_uid_first = 61000;
  config_.rank_uid_count = 1;
  config_.cache_dir = config_.work_dir + "-cache";
  if (geteuid() != 0) {
    ExpectRejectedNaming({"--rank-uids needs root"});
  } else {
    ExpectRejectedNaming({"--rank-uids has 1 uid(s)", "up to 2 attempts"});
  }
  std::filesystem::remove_all(config_.cache_dir);
}

// A directory ranks must pass through but cannot (root's home, 0700) is refused at
// startup with the path and the chmod, instead of every rank failing later.
TEST_F(WorkerConfigTest, RankUidsRefuseAWorkDirectoryOtherUsersCannotReach) {
  if (geteuid() != 0) GTEST_SKIP() << "--rank-uids needs root";
  const std::filesystem::path closed = config_.work_dir + "-closed";
  std::filesystem::create_directories(closed);
  std::filesystem::permissions(closed, std::filesystem::perms::owner_all);
  config_.host_lock_dir = "off";
  config_.rank_uid_first = 61000;
  config_.rank_uid_count = 1;
  config_.work_dir = (closed / "work").string();
  config_.cache_dir = (closed / "cache").string();
  ExpectRejectedNaming({closed.string().c_str(), "mode 0700", "chmod o+x"});
  std::filesystem::remove_all(closed);
}

}  // namespace
}  // namespace bakeoff::worker
