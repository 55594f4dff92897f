// Two workers started by hand on one host (the README's `bakeoff worker` line, twice)
// never pin ranks to the same cores: the second is refused with what to do, unless it
// names CPUs of its own or shares on purpose (docs/sweep.md, "Isolation"). Real
// `bakeoff worker` processes with a lock directory of their own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"
#include "worker/core_partition.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::ProcessGuard;

const std::string kBin = BAKEOFF_BINARY_DIR;

class HostIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-host-isolation");
    std::ofstream(dir_ / "token") << "worker-token-of-this-test";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A worker that keeps trying a coordinator port nobody listens on: it claims at start
  // and holds its claims while it retries.
  std::unique_ptr<ProcessGuard> StartWorker(const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> argv{kBin + "/bakeoff", "worker", "--coordinator", "127.0.0.1:9", "--name", name,
                                  "--slots", "1", "--token-file", (dir_ / "token").string(),
                                  "--work-dir", (dir_ / name).string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<ProcessGuard>(argv, std::vector<std::string>{"BAKEOFF_HOST_LOCK_DIR=" + locks()},
                                          log(name).string());
  }
  std::filesystem::path log(const std::string& name) const { return dir_ / (name + ".log"); }
  std::string locks() const { return (dir_ / "locks").string(); }
  // Waits for the start-up line that reports the worker's pinned CPUs.
  bool Started(const std::string& name) {
    return testing::WaitFor([&] { return testing::ReadFile(log(name)).find("ranks pinned") != std::string::npos; },
                            20s);
  }

  std::filesystem::path dir_;
};

TEST_F(HostIsolationTest, ASecondWorkerOnTheSameCoresIsRefusedWithWhatToDo) {
  auto first = StartWorker("first", {});
  ASSERT_TRUE(Started("first")) << testing::ReadFile(log("first"));
  auto second = StartWorker("second", {});
  auto code = second->WaitExit(20s);
  ASSERT_TRUE(code.has_value()) << "the second worker ran on cores the first holds";
  EXPECT_EQ(*code, 2);
  const std::string out = testing::ReadFile(log("second"));
  EXPECT_NE(out.find("held by another Bakeoff worker (bakeoff worker pid " + std::to_string(first->pid())),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--cpus"), std::string::npos) << out;
  // Sharing on purpose is the operator's choice: the worker starts, unpinned.
  auto sharing = StartWorker("sharing", {"--share-cores"});
  EXPECT_FALSE(sharing->WaitExit(3s).has_value()) << testing::ReadFile(log("sharing"));
  // The first worker's claims end with it: a new worker gets the cores.
  first->Kill(SIGKILL);
  sharing->Kill(SIGKILL);
  auto third = StartWorker("third", {});
  EXPECT_TRUE(Started("third")) << testing::ReadFile(log("third"));
}

TEST_F(HostIsolationTest, WorkersGivenCpusOfTheirOwnBothRun) {
  const std::vector<int> cpus = worker::AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  auto a = StartWorker("a", {"--cpus", std::to_string(cpus[0])});
  auto b = StartWorker("b", {"--cpus", std::to_string(cpus[1])});
  EXPECT_TRUE(Started("a")) << testing::ReadFile(log("a"));
  EXPECT_TRUE(Started("b")) << testing::ReadFile(log("b"));
  // Their store-port windows differ too, though both have the default range.
  const std::string la = testing::ReadFile(log("a")), lb = testing::ReadFile(log("b"));
  auto window = [](const std::string& text) {
    auto at = text.find("store ports ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find_first_of(";\n", at) - at);
  };
  EXPECT_FALSE(window(la).empty()) << la;
  EXPECT_NE(window(la), window(lb)) << la << lb;
}

}  // namespace
}  // namespace bakeoff
