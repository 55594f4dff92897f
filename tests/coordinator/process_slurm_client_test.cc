#include "coordinator/process_slurm_client.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace bakeoff::coordinator {
namespace {

using namespace std::chrono_literals;

TEST(ProcessSlurmClientTest, ParsesSqueueLinesAndSkipsMalformedOnes) {
  auto entries = ProcessSlurmClient::ParseQueue(
      "12|PENDING|2|Resources\n13|RUNNING|1|None\ngarbage\n14_3|PENDING|1|Priority|extra\n|RUNNING|1|None\n");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].id, "12");
  EXPECT_EQ(entries[0].state, "PENDING");
  EXPECT_EQ(entries[0].nodes, 2);
  EXPECT_EQ(entries[0].reason, "Resources");
  EXPECT_EQ(entries[1].state, "RUNNING");
  EXPECT_EQ(entries[2].id, "14_3");
  EXPECT_EQ(entries[2].reason, "Priority|extra");
}

TEST(ProcessSlurmClientTest, ReadsTheJobIdOfParsableSbatchOutput) {
  EXPECT_EQ(ProcessSlurmClient::ParseJobId("4711\n"), "4711");
  EXPECT_EQ(ProcessSlurmClient::ParseJobId("4711;cluster\n"), "4711");
  EXPECT_EQ(ProcessSlurmClient::ParseJobId("Submitted batch job 4711\n"), "");
}

TEST(ProcessSlurmClientTest, RunCommandCapturesOutputAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(ProcessSlurmClientTest, RunCommandKillsACommandPastItsTimeout) {
  auto start = std::chrono::steady_clock::now();
  auto r = RunCommand({"sleep", "30"}, 200ms);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("did not finish"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);  // a bound, not a timing assertion
}

TEST(ProcessSlurmClientTest, MissingCommandSaysSo) {
  auto r = RunCommand({"/nonexistent/sbatch"}, 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/sbatch"), std::string::npos);
}

// Issue 32, hole 12: squeue lists every user's jobs of a name unless asked for the
// caller's own, so another user's `bakeoff-worker` job would be adopted and cancelled.
// The fake squeue prints such a job unless it gets --me.
TEST(ProcessSlurmClientTest, TheQueueHoldsOnlyThisUsersJobs) {
  char dir_template[] = "/tmp/bakeoff-squeue-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::filesystem::path dir = dir_template;
  const std::string squeue = (dir / "squeue").string();
  {
    std::ofstream out(squeue);
    out << "#!/bin/sh\n"
           "for a in \"$@\"; do [ \"$a\" = --me ] && exit 0; done\n"
           "echo '4242|RUNNING|1|None'\n";
  }
  std::filesystem::permissions(squeue, std::filesystem::perms::owner_all);
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);  // the answer comes from the client's own thread
  ProcessSlurmClient client(io.get_executor(), "/bin/false", squeue, "/bin/false", 10s);
  std::optional<Result<std::vector<SlurmQueueEntry>>> got;
  client.Query("bakeoff-worker", [&](Result<std::vector<SlurmQueueEntry>> r) { got = std::move(r); });
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!got && std::chrono::steady_clock::now() < deadline) io.run_one_for(1s);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok()) << got->status().ToString();
  EXPECT_TRUE((*got)->empty()) << "another user's job " << (*got)->front().id << " was listed as ours";
}

}  // namespace
}  // namespace bakeoff::coordinator
