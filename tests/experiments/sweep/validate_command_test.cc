// `bakeoff validate` as a user runs it: a real process on a real file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/bakeoff_command.h"

namespace {

using ::testing::HasSubstr;

using bakeoff::metrics::testing::CommandRun;
using bakeoff::metrics::testing::Slurp;

// ctest runs each test of this file as its own process, in parallel: every path a test
// writes carries the test's name so two tests never share a capture file.
std::string PerTestPath(const std::string& suffix) {
  return ::testing::TempDir() + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + suffix;
}

// Runs `bakeoff ARGS` (words separated by spaces; no test passes an argument with a
// space) with stdout and stderr captured in this test's files.
CommandRun RunCommand(const std::string& args) {
  std::vector<std::string> words;
  std::istringstream in(args);
  for (std::string word; in >> word;) words.push_back(word);
  return bakeoff::metrics::testing::RunBakeoff(words, PerTestPath("validate.out"),
                                               PerTestPath("validate.err"));
}

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = PerTestPath(name);
  std::ofstream(path) << text;
  return path;
}

class ValidateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!bakeoff::metrics::testing::BakeoffBuilt()) GTEST_SKIP() << "bakeoff not built";
  }
};

TEST_F(ValidateCommandTest, PrintsVariantsCounterpartsAndTrialCount) {
  std::string path = WriteFile("validate_ok.yaml", R"(name: v
question: does jit help?
workload: {model: tiny}
parameters:
  compile_mode: {values: [eager, jit]}
  micro_batch: {values: [1, 4]}
exclude:
  - {compile_mode: eager, micro_batch: 4}
baseline: {compile_mode: eager}
repeats: 2
)");
  CommandRun run = RunCommand("validate " + path);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("3 variants (1 excluded) x 2 repeats = 6 trials"));
  // Legal, so exit 0, but 2 repeats rarely give a verdict: said so.
  EXPECT_THAT(run.out, HasSubstr("warning: repeats: 2 rarely gives a verdict"));
  EXPECT_THAT(run.out, HasSubstr("compile_mode=eager,micro_batch=1"));
  EXPECT_THAT(run.out, HasSubstr("baseline"));
  EXPECT_THAT(run.out, HasSubstr("excluded counterpart (compile_mode=eager,micro_batch=4)"));
  EXPECT_THAT(run.out, HasSubstr("order interleaved"));
  EXPECT_THAT(run.out, HasSubstr("every variant: model=tiny"));
  EXPECT_THAT(run.out, HasSubstr("run order (variant#.repeat): 0.0 1.0 2.0 2.1 1.1 0.1"));
}

TEST_F(ValidateCommandTest, JsonFormatToAnOutputFile) {
  std::string path = BAKEOFF_SOURCE_DIR "/experiments/sweeps/cpu-example.yaml";
  std::string output = PerTestPath("validate_out.json");
  std::remove(output.c_str());
  CommandRun run = RunCommand("validate " + path + " --format json --output " + output);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.empty());
  auto j = nlohmann::json::parse(Slurp(output));
  EXPECT_EQ(j["sweep"]["name"], "cpu-example");
  EXPECT_EQ(j["expanded"]["trial_count"].get<size_t>(), j["expanded"]["trials"].size());
  EXPECT_EQ(j["expanded"]["variants"][0]["config"]["world_size"], 2);
}

// Every command ends its output through WriteCommandOutput (cli/coordinator_client.h): an
// --output it cannot write is named on stderr with exit 1 ("the operation ran and
// failed"), never a silent failure.
TEST_F(ValidateCommandTest, AnOutputFileThatCannotBeWrittenIsNamedAndExitsOne) {
  std::string path = BAKEOFF_SOURCE_DIR "/experiments/sweeps/cpu-example.yaml";
  std::string output = PerTestPath("no-such-dir") + "/validate.txt";
  CommandRun run = RunCommand("validate " + path + " --output " + output);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("bakeoff validate: cannot write '" + output + "'"));
  EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST_F(ValidateCommandTest, InvalidSweepExitsTwoWithLocatedErrorsOnStderr) {
  std::string path = WriteFile("validate_bad.yaml", "name: v\nworkload: {micro_bach: 2}\n");
  CommandRun run = RunCommand("validate " + path);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(run.out.empty());
  EXPECT_THAT(run.err, HasSubstr(path + ":2:12: workload.micro_bach: not a field of the native "
                                        "trainer; did you mean micro_batch?"));
}

TEST_F(ValidateCommandTest, TrialCapFromTheCommandLine) {
  std::string path = WriteFile("validate_cap.yaml",
                               "name: v\nworkload: {}\nparameters:\n  micro_batch: {values: [1, 2, 3]}\nrepeats: 2\n");
  CommandRun run = RunCommand("validate " + path + " --max-trials 5");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("6 trials (3 variants x 2 repeats) is over the cap of 5"));
}

TEST_F(ValidateCommandTest, MissingFileExitsTwo) {
  CommandRun run = RunCommand("validate /nonexistent/sweep.yaml");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("/nonexistent/sweep.yaml: cannot open"));
}

TEST_F(ValidateCommandTest, WarnsWhenRepeatsCannotGiveAVerdict) {
  const std::string sweep = "name: v\nworkload: {model: tiny}\nparameters:\n"
                            "  compile_mode: {values: [eager, jit]}\nbaseline: {compile_mode: eager}\n";
  CommandRun one = RunCommand("validate " + WriteFile("one.yaml", sweep + "repeats: 1\n"));
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("warning: repeats: 1 cannot give a verdict"));
  CommandRun json = RunCommand("validate --format json " + WriteFile("one_json.yaml", sweep + "repeats: 1\n"));
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(nlohmann::json::parse(json.out)["sweep"]["warnings"].dump(), HasSubstr("cannot give a verdict"));
  // The default and 3 or more: no warning.
  CommandRun by_default = RunCommand("validate " + WriteFile("default.yaml", sweep));
  EXPECT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_THAT(by_default.out, HasSubstr("x 5 repeats = 10 trials"));
  EXPECT_EQ(by_default.out.find("warning: repeats"), std::string::npos);
  CommandRun three = RunCommand("validate " + WriteFile("three.yaml", sweep + "repeats: 3\n"));
  EXPECT_EQ(three.out.find("warning: repeats"), std::string::npos);
  // One variant: nothing to compare, nothing to warn about.
  CommandRun single = RunCommand("validate " + WriteFile("single.yaml",
      "name: v\nworkload: {model: tiny}\nparameters:\n  compile_mode: {value: jit}\nrepeats: 1\n"));
  EXPECT_EQ(single.out.find("warning: repeats"), std::string::npos);
}

}  // namespace
