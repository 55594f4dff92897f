// The results database failing under a real coordinator in the middle of a sweep
// (issue 13): its disk full (a tmpfs of its own, filled from the test and then freed)
// or the database read-only (chattr +i, then writable again). While it is broken
// /healthz says 503; once it is fixed the coordinator is healthy again by itself (the
// same process, no restart), the sweep finishes, every trial ends exactly once and
// every event of every final attempt is stored once. Simulated workers
// (docs/protocol.md) keep the events coming. Root only (a tmpfs in a mount namespace,
// chattr).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::TestCluster;
using testing::WaitFor;

constexpr int kTrials = 24;  // 2 variants x 12 repeats
constexpr int kWarmupSteps = 2;
constexpr int kSteps = 40;
constexpr int kWorkers = 2;

const std::string kSweep = testing::TinyLoraSweep{.name = "store-faults",
                                                  .question = "does a sweep survive its database failing?",
                                                  .seq_len = 64, .warmup_steps = kWarmupSteps, .steps = kSteps,
                                                  .one_thread = false, .repeats = kTrials / 2, .max_attempts = 10}
                               .Yaml();

const testing::WorkerHost kSimulatedWorker{{}, "127.0.0.1", {"--simulate", "--simulate-step-ms", "20"}};

class StoreFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (a mount namespace, chattr +i)";
    dir_ = testing::FreshTestDir("bakeoff-store-faults");
    cluster_ = std::make_unique<TestCluster>(dir_, std::string(BAKEOFF_BINARY_DIR) + "/bakeoff-fake-trainer");
  }
  void TearDown() override {
    cluster_.reset();
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Workers up, the sweep submitted, and some trials already finished: the fault then
  // strikes mid-sweep.
  void StartSweep() {
    for (int w = 1; w <= kWorkers; ++w) cluster_->StartWorker("w" + std::to_string(w), w, 0, kSimulatedWorker);
    ASSERT_TRUE(WaitFor([&] { return cluster_->WorkersConnected(kWorkers); }, 30s));
    ASSERT_NE(cluster_->Submit(kSweep), 0);
    ASSERT_TRUE(WaitFor([&] { return FinishedTrials() >= 4; }, 120s)) << cluster_->Trials().dump();
  }
  int FinishedTrials() {
    int finished = 0;
    for (const auto& t : cluster_->Trials()) finished += t.value("state", "") == "finished" ? 1 : 0;
    return finished;
  }
  // /healthz's status code (0 when it did not answer) and body.
  std::pair<int, std::string> Health() {
    auto h = cluster_->client().Get("/healthz");
    return h.ok() ? std::make_pair(h->status, h->body) : std::make_pair(0, h.status().ToString());
  }
  // How far each worker's log had got: what it logs later happened during the fault.
  std::map<std::string, std::size_t> WorkerLogOffsets() {
    std::map<std::string, std::size_t> offsets;
    for (int w = 1; w <= kWorkers; ++w) {
      const std::string name = "w" + std::to_string(w);
      offsets[name] = testing::ReadFile(cluster_->WorkerLog(name)).size();
    }
    return offsets;
  }
  // Holds the fault until it has bitten every worker: an attempt of its ended after the
  // fault began, and after that the coordinator closed its connection rather than
  // acknowledge what it could not store, so the worker holds that attempt's finish to
  // send again. Returns how long the fault was held.
  double WaitUntilTheFaultBit(const std::map<std::string, std::size_t>& log_offsets, int status,
                              const std::string& body, std::chrono::steady_clock::time_point since) {
    EXPECT_TRUE(WaitFor(
        [&] {
          for (const auto& [name, offset] : log_offsets) {
            const std::string log = testing::ReadFile(cluster_->WorkerLog(name));
            const auto ended = log.find("finished trial=", offset);
            if (ended == std::string::npos) return false;
            if (log.find("connection to the coordinator lost", ended) == std::string::npos) return false;
          }
          return true;
        },
        60s))
        << "the fault did not reach every worker";
    // A frame the store refused closes its connection; with group commit the refusal
    // usually loses the turn's whole group, which closes every connection.
    const std::string coordinator_log = testing::ReadFile(cluster_->CoordinatorLog());
    EXPECT_TRUE(coordinator_log.find("closing the connection so that the worker sends it") != std::string::npos ||
                coordinator_log.find("so that the workers send again what was not acknowledged") != std::string::npos)
        << "the coordinator never said it closed connections for a write it could not store";
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    std::printf("fault held %.1f s; /healthz %d %s; %d of %d trials finished\n", seconds, status, body.c_str(),
                FinishedTrials(), kTrials);
    return seconds;
  }

  // The fault is fixed: healthy again by itself, the sweep finishes, once each.
  void ExpectTheSweepFinishesWithEveryTrialAndEventOnce(pid_t coordinator) {
    const auto fixed = std::chrono::steady_clock::now();
    EXPECT_TRUE(WaitFor([&] { return Health().first == 200; }, 60s)) << Health().second;
    const double healthy_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - fixed).count();
    ASSERT_TRUE(WaitFor([&] { return cluster_->SweepFinished(); }, 300s)) << cluster_->Trials().dump();
    const double finished_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - fixed).count();
    EXPECT_EQ(cluster_->coordinator().pid(), coordinator);
    EXPECT_FALSE(cluster_->coordinator().WaitExit(0ms).has_value()) << "the coordinator died";
    cluster_->ExpectEveryTrialSucceededOnce(kTrials);
    cluster_->ExpectEveryEventStoredOnce(kWarmupSteps, kSteps);
    auto lost = cluster_->Query("SELECT count(*) FROM attempts a JOIN trials t ON t.id = a.trial_id WHERE "
                                "t.sweep_id = " + std::to_string(cluster_->sweep_id()) + " AND a.outcome = 'lost'");
    std::printf("fixed: /healthz 200 after %.1f s, sweep finished after %.1f s; %d trials finished once each; "
                "%lld attempts lost and rerun\n",
                healthy_s, finished_s, kTrials, static_cast<long long>(lost.empty() ? -1 : lost[0][0].get<std::int64_t>()));
  }

  std::filesystem::path dir_;
  std::unique_ptr<TestCluster> cluster_;
};

// Writes zeros to `path` until the file system is full. True when it filled up (ENOSPC).
bool FillDisk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::vector<char> zeros(1 << 16, 0);
  bool full = false;
  while (true) {
    const ssize_t n = ::write(fd, zeros.data(), zeros.size());
    if (n < 0) {
      full = errno == ENOSPC;
      break;
    }
  }
  ::close(fd);
  return full;
}

// A small tmpfs at `dir`, seen only by this thread and the processes it starts from
// now on: the thread moves into a mount namespace of its own (unshare(CLONE_NEWNS)
// affects the calling thread only), so nothing outside the test sees the mount, and it
// goes with the test process whatever happens. False when this host does not allow it.
bool MountPrivateTmpfs(const std::filesystem::path& dir, const std::string& size) {
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  return ::mount("bakeoff-test-disk", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
}

// The coordinator's database on a 32 MiB tmpfs of its own, filled mid-sweep and freed.
TEST_F(StoreFaultsTest, AFullDiskMidSweepIs503UntilFreedAndTheSweepFinishesOnce) {
  const std::filesystem::path disk = dir_ / "disk";
  std::filesystem::create_directories(disk);
  if (!MountPrivateTmpfs(disk, "32m")) GTEST_SKIP() << "cannot mount a tmpfs in a mount namespace here";
  cluster_->set_database((disk / "results.db").string());
  ASSERT_TRUE(cluster_->StartCoordinator(testing::kFastFailureArgs));
  const pid_t coordinator = cluster_->coordinator().pid();
  ASSERT_NO_FATAL_FAILURE(StartSweep());

  const std::string filler = (disk / "filler").string();
  const auto ended = WorkerLogOffsets();
  const auto since = std::chrono::steady_clock::now();
  ASSERT_TRUE(FillDisk(filler));
  EXPECT_TRUE(WaitFor([&] { return Health().first == 503; }, 60s)) << Health().second;
  const auto [status, body] = Health();
  EXPECT_NE(body.find("full"), std::string::npos) << body;
  WaitUntilTheFaultBit(ended, status, body, since);
  EXPECT_FALSE(cluster_->SweepFinished());
  std::filesystem::remove(filler);
  ExpectTheSweepFinishesWithEveryTrialAndEventOnce(coordinator);
  cluster_.reset();  // the coordinator and workers, before the disk goes
  ::umount2(disk.c_str(), MNT_DETACH);
}

// The database and its write-ahead log made immutable (chattr +i: root ignores file
// permissions) mid-sweep, and writable again.
TEST_F(StoreFaultsTest, AReadOnlyDatabaseMidSweepIs503UntilWritableAndTheSweepFinishesOnce) {
  ASSERT_TRUE(cluster_->StartCoordinator(testing::kFastFailureArgs));
  const pid_t coordinator = cluster_->coordinator().pid();
  ASSERT_NO_FATAL_FAILURE(StartSweep());
  const std::vector<std::string> files{cluster_->db(), cluster_->db() + "-wal"};
  auto make_read_only = [&](bool read_only) {
    bool ok = true;
    for (const auto& f : files) {
      const std::string command = std::string("chattr ") + (read_only ? "+i" : "-i") + " '" + f + "' 2>/dev/null";
      ok = std::system(command.c_str()) == 0 && ok;
    }
    return ok;
  };
  const auto ended = WorkerLogOffsets();
  const auto since = std::chrono::steady_clock::now();
  if (!make_read_only(true)) {
    make_read_only(false);
    GTEST_SKIP() << "this file system does not support chattr +i";
  }
  const bool went_503 = WaitFor([&] { return Health().first == 503; }, 60s);
  const auto [status, body] = Health();
  WaitUntilTheFaultBit(ended, status, body, since);
  const bool sweep_finished = cluster_->SweepFinished();
  ASSERT_TRUE(make_read_only(false));
  EXPECT_TRUE(went_503) << body;
  EXPECT_FALSE(sweep_finished);
  ExpectTheSweepFinishesWithEveryTrialAndEventOnce(coordinator);
}

}  // namespace
}  // namespace bakeoff
