#include "coordinator/process_slurm_client.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bakeoff::coordinator
