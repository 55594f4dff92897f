// The trainer's exit codes are one table (protocol/trainer_exit.h): the worker's reading
// of a code, docs/trainer.md's table and the Python workloads' EXIT_CODES agree with it.
#include "protocol/trainer_exit.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace bakeoff::protocol {
namespace {

std::string Read(const std::string& relative) {
  std::ifstream in(std::string(BAKEOFF_SOURCE_DIR) + "/" + relative);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TrainerExitTest, EachErrorKindExitsWithTheCodeTheWorkerReadsBackAsItsOutcome) {
  EXPECT_EQ(TrainerExitForErrorKind("oom"), 3);
  EXPECT_EQ(OutcomeForTrainerExit(3), Outcome::kOom);
  EXPECT_EQ(TrainerExitForErrorKind("unsupported"), 4);
  EXPECT_EQ(OutcomeForTrainerExit(4), Outcome::kUnsupported);
  EXPECT_EQ(TrainerExitForErrorKind("diverged"), 5);
  EXPECT_EQ(OutcomeForTrainerExit(5), Outcome::kDiverged);
  EXPECT_EQ(TrainerExitForErrorKind("failed"), 1);
  EXPECT_EQ(TrainerExitForErrorKind("anything else"), 1);
  EXPECT_EQ(OutcomeForTrainerExit(2), Outcome::kFailed) << "invalid configuration";
  EXPECT_EQ(OutcomeForTrainerExit(0), Outcome::kSucceeded);
  EXPECT_EQ(OutcomeForTrainerExit(6), std::nullopt);
  EXPECT_EQ(OutcomeForTrainerExit(-1), std::nullopt);
}

TEST(TrainerExitTest, TheDocsTableListsEveryCode) {
  const std::string docs = Read("docs/trainer.md");
  ASSERT_FALSE(docs.empty());
  for (const TrainerExit& e : kTrainerExits) {
    EXPECT_NE(docs.find("\n| " + std::to_string(e.code) + " | "), std::string::npos)
        << "docs/trainer.md, Exit codes, has no row for " << e.code;
  }
}

TEST(TrainerExitTest, ThePythonWorkloadsExitWithTheSameCodes) {
  const std::string python = Read("experiments/python/bakeoff_report/__init__.py");
  std::smatch line;
  ASSERT_TRUE(std::regex_search(python, line, std::regex("EXIT_CODES = \\{([^}]*)\\}")));
  const std::string table = line[1];
  int entries = 0;
  const std::regex entry("\"(\\w+)\": (\\d+)");
  for (std::sregex_iterator it(table.begin(), table.end(), entry), end; it != end; ++it) {
    ++entries;
    EXPECT_EQ(TrainerExitForErrorKind((*it)[1].str()), std::stoi((*it)[2].str())) << (*it)[1].str();
  }
  EXPECT_EQ(entries, static_cast<int>(kTrainerExits.size()) - 1) << "every kind but success: " << table;
}

}  // namespace
}  // namespace bakeoff::protocol
