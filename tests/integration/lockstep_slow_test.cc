// order: lockstep end to end (docs/lockstep.md): `bakeoff local` with one two-slot
// worker runs each pair group's trials at once on the same cores, taking turns; the
// stand-in trainer logs every step it computed, so the test sees from the steady clock
// that the sides never computed at the same time. Failure paths: one side failing, one
// hanging in its turn, one that does not take turns; and the native trainer on two ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "metrics/store/results_reader.h"
#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using testing::ProcessGuard;

const std::string kBin = BAKEOFF_BINARY_DIR;

// One step a rank computed: [start, end) on the steady clock.
struct Interval {
  std::int64_t trial = 0;
  int rank = 0;
  std::string phase;
  std::int64_t start = 0;
  std::int64_t end = 0;
};

class LockstepTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::FreshTestDir("bakeoff-lockstep"); }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // A sweep of micro_batch 1 (the baseline) against 2, two ranks, lockstep; `extra`
  // adds top-level lines.
  std::string WriteSweep(const std::string& name, int steps, const std::string& extra = "",
                         const std::string& model = "tiny", int world = 2) {
    const std::string path = (dir_ / (name + ".yaml")).string();
    std::ofstream(path) << "name: " << name << "\nworkload: {executor: lora, model: " << model
                        << ", seq_len: 16, warmup_steps: 2, steps: " << steps << ", world_size: " << world
                        << "}\nparameters:\n  micro_batch: {values: [1, 2]}\nbaseline: {micro_batch: 1}\n"
                           "order: lockstep\n"
                        << extra;
    return path;
  }

  // Runs `bakeoff local` on `sweep` with one worker of two slots; returns its exit code.
  // `topology`: --workers/--slots (none: `bakeoff local` picks them for lockstep).
  int RunLocal(const std::string& sweep, const std::string& trainer, const std::vector<std::string>& env,
               std::chrono::seconds limit = 180s,
               const std::vector<std::string>& topology = {"--workers", "1", "--slots", "2"}) {
    std::vector<std::string> argv = {kBin + "/bakeoff", "local", sweep, "--db", db(), "--trainer", trainer,
                                     "--work-dir", (dir_ / "work").string(), "--format", "json",
                                     "--output", (dir_ / "report.json").string()};
    argv.insert(argv.end(), topology.begin(), topology.end());
    ProcessGuard local(argv, env, (dir_ / "local.log").string());
    auto code = local.WaitExit(limit);
    EXPECT_TRUE(code.has_value()) << "bakeoff local did not finish; see " << (dir_ / "local.log");
    return code.value_or(-1);
  }

  std::vector<Interval> Intervals() const {
    std::vector<Interval> out;
    std::ifstream in(dir_ / "intervals");
    for (Interval i; in >> i.trial >> i.rank >> i.phase >> i.start >> i.end;) out.push_back(i);
    return out;
  }

  std::map<std::int64_t, metrics::TrialResult> Trials() const {
    auto reader = metrics::ResultsReader::Open(db());
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    std::map<std::int64_t, metrics::TrialResult> by_id;
    if (!reader.ok()) return by_id;
    auto trials = (*reader)->ListTrialResults(1);
    EXPECT_TRUE(trials.ok());
    if (trials.ok()) {
      for (auto& t : *trials) by_id[t.trial.id] = t;
    }
    return by_id;
  }

  // The measured steps' turns of `trial`, rank 0, in step order.
  std::vector<std::int64_t> Turns(std::int64_t trial) const {
    auto reader = metrics::ResultsReader::Open(db());
    std::vector<std::int64_t> turns;
    if (!reader.ok()) return turns;
    auto steps = (*reader)->ReadStepMetrics(trial);
    if (!steps.ok()) return turns;
    for (const auto& s : *steps) {
      if (s.rank == 0 && s.phase == "measure" && s.row.turn) turns.push_back(*s.row.turn);
    }
    return turns;
  }

  std::string db() const { return (dir_ / "results.db").string(); }
  std::string intervals_env() const { return "FAKE_TRAINER_INTERVALS=" + (dir_ / "intervals").string(); }
  std::filesystem::path dir_;
};

TEST_F(LockstepTest, TheSidesOfAGroupNeverComputeAtOnceAndTheirStepsCarryAlternatingTurns) {
  const std::string sweep = WriteSweep("lockstep-turns", 6, "repeats: 2\n");
  ASSERT_EQ(RunLocal(sweep, kBin + "/bakeoff-fake-trainer", {intervals_env()}), 0)
      << testing::ReadFile(dir_ / "local.log");
  const auto trials = Trials();
  ASSERT_EQ(trials.size(), 4u);
  for (const auto& [id, t] : trials) EXPECT_EQ(t.trial.outcome, metrics::Outcome::kSucceeded) << t.trial.reason;

  // Every step of one trial against every step of another: never overlapping.
  const auto intervals = Intervals();
  ASSERT_EQ(intervals.size(), 4u * 2 * (2 + 6)) << "4 trials x 2 ranks x (2 warm-up + 6 measured)";
  int checked = 0;
  for (const auto& a : intervals) {
    for (const auto& b : intervals) {
      if (a.trial >= b.trial) continue;
      ++checked;
      EXPECT_TRUE(a.end <= b.start || b.end <= a.start)
          << "trial " << a.trial << " rank " << a.rank << " (" << a.phase << ") and trial " << b.trial << " rank "
          << b.rank << " (" << b.phase << ") computed at once";
    }
  }
  EXPECT_GT(checked, 100);

  // Each group's measured steps go in rounds: step i of both sides in round i (turns 2i+2
  // and 2i+3 after the two warm-up turns), in an order drawn for each round.
  for (auto [first, second] : {std::pair<std::int64_t, std::int64_t>{1, 2}, {3, 4}}) {
    const auto a = Turns(first);
    const auto b = Turns(second);
    ASSERT_EQ(a.size(), 6u);
    ASSERT_EQ(b.size(), 6u);
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::min(a[i], b[i]), 2 + 2 * static_cast<std::int64_t>(i)) << "step " << i;
      EXPECT_EQ(std::abs(a[i] - b[i]), 1) << "step " << i << " of trials " << first << " and " << second;
    }
  }

  const std::string report = testing::ReadFile(dir_ / "report.json");
  EXPECT_NE(report.find("lockstep"), std::string::npos) << "the interval is from lockstep pairs";
}

TEST_F(LockstepTest, WithoutWorkersOrSlotsGivenLocalMakesSlotsAsWideAsTheTrialsSoGroupsStayWhole) {
  const std::string sweep = WriteSweep("lockstep-topology", 3, "repeats: 2\n");
  ASSERT_EQ(RunLocal(sweep, kBin + "/bakeoff-fake-trainer", {}, 180s, {}), 0) << testing::ReadFile(dir_ / "local.log");
  EXPECT_NE(testing::ReadFile(dir_ / "local.log").find("x 2 slot(s)"), std::string::npos);
  for (auto [first, second] : {std::pair<std::int64_t, std::int64_t>{1, 2}, {3, 4}}) {
    const auto a = Turns(first);
    const auto b = Turns(second);
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), 3u);
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(std::abs(a[i] - b[i]), 1) << "step " << i;
  }
}

TEST_F(LockstepTest, WhenOneSideFailsTheSurvivorFinishesAloneAndThePairIsUnpaired) {
  const std::string sweep = WriteSweep("lockstep-fails", 6, "repeats: 1\n");
  ASSERT_NE(RunLocal(sweep, kBin + "/bakeoff-fake-trainer",
                     {intervals_env(), "FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH=2=fail_midway"}),
            -1);
  const auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& [id, t] : trials) {
    if (t.trial.variant_key == "micro_batch=2") {
      EXPECT_EQ(t.trial.outcome, metrics::Outcome::kFailed) << t.trial.reason;
    } else {
      EXPECT_EQ(t.trial.outcome, metrics::Outcome::kSucceeded) << t.trial.reason;
      EXPECT_EQ(Turns(id).size(), 6u) << "the survivor ran every measured step";
    }
  }
}

TEST_F(LockstepTest, ASideHangingInItsTurnIsTimedOutAfterTheTurnTimeoutAndTheOtherFinishes) {
  const std::string sweep = WriteSweep("lockstep-hangs", 4, "repeats: 1\nlimits: {turn_timeout: 3s}\n");
  const auto started = std::chrono::steady_clock::now();
  RunLocal(sweep, kBin + "/bakeoff-fake-trainer", {"FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH=2=hang_in_turn"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 120s) << "not the 300 s the hang would take";
  const auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& [id, t] : trials) {
    if (t.trial.variant_key == "micro_batch=2") {
      EXPECT_EQ(t.trial.outcome, metrics::Outcome::kTimeout);
      EXPECT_NE(t.trial.reason.find("held its lockstep turn for more than 3 s"), std::string::npos)
          << t.trial.reason;
    } else {
      EXPECT_EQ(t.trial.outcome, metrics::Outcome::kSucceeded) << t.trial.reason;
    }
  }
}

TEST_F(LockstepTest, ASideThatDoesNotTakeTurnsLeavesTheRotationAndNobodyWaitsForIt) {
  const std::string sweep = WriteSweep("lockstep-no-turns", 4, "repeats: 1\nlimits: {turn_timeout: 10m}\n");
  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(RunLocal(sweep, kBin + "/bakeoff-fake-trainer", {"FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH=2=no_turns"}),
            0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 120s) << "never the 10-minute turn timeout";
  const auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& [id, t] : trials) {
    EXPECT_EQ(t.trial.outcome, metrics::Outcome::kSucceeded) << t.trial.reason;
    if (t.trial.variant_key == "micro_batch=2") {
      EXPECT_TRUE(Turns(id).empty());
    }
  }
  const std::string log = testing::ReadFile(dir_ / "results.log");
  EXPECT_NE(log.find("reported a measured step without a turn"), std::string::npos) << log;
}

TEST_F(LockstepTest, TheNativeTrainerTakesTurnsOnTwoRanks) {
  const std::string trainer = kBin + "/bakeoff-trainer";
  if (!std::filesystem::exists(trainer)) GTEST_SKIP() << "bakeoff-trainer is not built in " << kBin;
  const std::string sweep = WriteSweep("lockstep-native", 4, "repeats: 1\n");
  ASSERT_EQ(RunLocal(sweep, trainer, {}, 300s), 0) << testing::ReadFile(dir_ / "local.log");
  const auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& [id, t] : trials) EXPECT_EQ(t.trial.outcome, metrics::Outcome::kSucceeded) << t.trial.reason;
  const auto a = Turns(1);
  const auto b = Turns(2);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(std::abs(a[i] - b[i]), 1) << "step " << i;
}

}  // namespace
}  // namespace bakeoff
