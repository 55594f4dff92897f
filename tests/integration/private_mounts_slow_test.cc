// Each attempt's ranks get a /dev/shm and a /tmp of their own (docs/security.md,
// "Private /tmp and /dev/shm"): what one attempt's script leaves there is seen neither
// by a later attempt nor on the host. The CI flake of issue 51 was a DeepSpeed segment in
// /dev/shm named after a store port that a later trial reused. Real `bakeoff local` with
// the stand-in trainer, which lists and leaves probe files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "metrics/store/results_reader.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"
#include "worker/rank_process.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::ProcessGuard;

const std::string kBin = BAKEOFF_BINARY_DIR;

// Probe files anywhere in the host's `dir`.
int HostProbes(const char* dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("bakeoff-probe-", 0) == 0) ++n;
  }
  return n;
}

// Removes the probe files (only the stand-in trainer's, by their name) from the host's
// /dev/shm and /tmp.
void RemoveHostProbes() {
  for (const char* dir : {"/dev/shm", "/tmp"}) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().filename().string().rfind("bakeoff-probe-", 0) == 0) std::filesystem::remove(entry.path(), ec);
    }
  }
}

TEST(PrivateMountsTest, NothingAnAttemptLeavesInDevShmOrTmpReachesTheNextAttemptOrTheHost) {
  if (!worker::PrivateMountsAvailable()) GTEST_SKIP() << "no mount namespaces here (needs root with CAP_SYS_ADMIN)";
  RemoveHostProbes();  // an earlier run's, had it stopped halfway
  // A path the ranks need under /tmp (this build, when it lives there) keeps the host's
  // /tmp (a private one would hide it): then only /dev/shm is private.
  const bool private_tmp = std::string(BAKEOFF_BINARY_DIR).rfind("/tmp/", 0) != 0;
  // Outside /tmp, so that /tmp can be private too (a path the ranks need under /tmp
  // keeps the host's /tmp).
  const std::filesystem::path dir = "/var/tmp/bakeoff-private-mounts-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "sweep.yaml") << "name: private-mounts\nworkload: {executor: lora, model: tiny, steps: 2, "
                                       "world_size: 2}\nparameters:\n  micro_batch: {values: [1, 2]}\n"
                                       "baseline: {micro_batch: 1}\nrepeats: 2\norder: sequential\n";
  ProcessGuard local({kBin + "/bakeoff", "local", (dir / "sweep.yaml").string(), "--workers", "1", "--slots", "2",
                      "--db", (dir / "results.db").string(), "--trainer", kBin + "/bakeoff-fake-trainer",
                      "--work-dir", (dir / "work").string()},
                     {"FAKE_TRAINER_PROBE_DIRS=1"}, (dir / "local.log").string());
  auto code = local.WaitExit(120s);
  ASSERT_TRUE(code.has_value());
  ASSERT_EQ(*code, 0) << testing::ReadFile(dir / "local.log");

  auto reader = metrics::ResultsReader::Open((dir / "results.db").string());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto trials = (*reader)->ListTrialResults(1);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 4u);
  int summaries = 0;
  for (const auto& t : *trials) {
    for (const auto& s : t.summaries) {
      const nlohmann::json& summary = s.body;
      ASSERT_TRUE(summary.contains("probes_seen")) << summary.dump();
      // A rank may see its own attempt's files (its peer rank's), never another's.
      for (const auto& seen : summary["probes_seen"]) {
        if (!private_tmp && seen.get<std::string>().rfind("/tmp/", 0) == 0) continue;
        EXPECT_NE(seen.get<std::string>().find("bakeoff-probe-" + std::to_string(t.trial.id) + "-"), std::string::npos)
            << "trial " << t.trial.id << " saw " << seen;
      }
      ++summaries;
    }
  }
  EXPECT_EQ(summaries, 8) << "4 trials x 2 ranks";
  EXPECT_EQ(HostProbes("/dev/shm"), 0) << "an attempt's /dev/shm reached the host";
  if (private_tmp) {
    EXPECT_EQ(HostProbes("/tmp"), 0) << "an attempt's /tmp reached the host";
  }
  RemoveHostProbes();  // this test's own, when /tmp was the host's
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bakeoff
