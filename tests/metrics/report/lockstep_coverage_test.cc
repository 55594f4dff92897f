// Lockstep pairs hold what they claim on a machine whose CPU slows down for seconds at a
// time (lockstep_simulation.h), checked on seeded simulated sweeps through the real
// report code, and they need fewer repeats there than interleaved pairs:
//   - A/A (identical variants): a verdict ("faster"/"slower") in at most 5% of sweeps;
//   - a true speedup of 1.05: the interval contains it in 93-97% of sweeps;
//   - the sd of a pair's log ratio, and so the repeats a 5% difference needs, is several
//     times smaller in lockstep than in interleaved pairs under the same slowdowns.
//
// Tolerances are binomial: a rate p estimated from n sweeps is allowed 2.58 sd
// (sqrt(p (1 - p) / n)), a two-sided 1% band, so a correct interval fails a check in
// about 1 run of 100 seeds; the seeds are fixed, so the test never flakes (a change in
// the report's numbers that moves a rate past its band is a real change).
//
// BAKEOFF_SIM_TABLE=N prints the table of docs/statistics.md ("Lockstep pairs") from N
// sweeps per cell.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "tests/metrics/report/lockstep_simulation.h"

namespace bakeoff::metrics {
namespace {

using testing::LockstepCase;
using testing::LockstepTally;
using testing::Slack;

constexpr int kSweeps = 2000;

std::uint64_t Seed(const LockstepCase& c, int salt) {
  return static_cast<std::uint64_t>(c.repeats * 1000003 + (c.order == "lockstep" ? 7 : 13) * 10007 + salt) +
         static_cast<std::uint64_t>(c.true_ratio * 1000) * 7919;
}

std::string Describe(const LockstepCase& c) {
  return c.order + ", " + std::to_string(c.repeats) + " repeats, true ratio " + std::to_string(c.true_ratio);
}

TEST(LockstepCoverageTest, LockstepIntervalsHoldUnderSecondsLongSlowdowns) {
  for (int n : {2, 3, 5, 10}) {
    for (double truth : {1.0, 1.05}) {
      LockstepCase c{n, "lockstep", truth};
      LockstepTally t = testing::SimulateLockstep(c, kSweeps, Seed(c, 1));
      const testing::SimTally& s = t.tally;
      EXPECT_EQ(t.lockstep_method, s.sweeps) << Describe(c) << ": every interval from lockstep pairs";
      if (truth == 1.0) {
        EXPECT_LE(s.VerdictRate(), 0.05 + Slack(0.05, s.sweeps)) << Describe(c) << ": false verdicts";
      }
      EXPECT_GE(s.CoverageRate(), 0.93 - Slack(0.95, s.sweeps)) << Describe(c) << ": coverage";
      EXPECT_LE(s.CoverageRate(), 0.97 + Slack(0.95, s.sweeps)) << Describe(c) << ": coverage";
      EXPECT_EQ(s.unclear, 0) << Describe(c);
    }
  }
}

// The same slowdowns, interleaved: the two trials of a pair meet different episodes, so a
// pair's ratio varies far more and a 5% difference needs several times the repeats. The
// medians over 2000 sweeps of 10 pairs are estimated to a few percent; the factor of 3
// required is far inside what the model gives (docs/statistics.md: about 4-5x the sd).
TEST(LockstepCoverageTest, InterleavedPairsNeedMoreRepeatsUnderTheSameSlowdowns) {
  LockstepCase lockstep{10, "lockstep", 1.05}, interleaved{10, "interleaved", 1.05};
  LockstepTally l = testing::SimulateLockstep(lockstep, kSweeps, Seed(lockstep, 2));
  LockstepTally i = testing::SimulateLockstep(interleaved, kSweeps, Seed(interleaved, 2));
  ASSERT_EQ(l.sd_log_ratio.size(), static_cast<std::size_t>(kSweeps));
  ASSERT_EQ(i.sd_log_ratio.size(), static_cast<std::size_t>(kSweeps));
  const double sd_l = Median(l.sd_log_ratio), sd_i = Median(i.sd_log_ratio);
  const double need_l = Median(l.repeats_needed), need_i = Median(i.repeats_needed);
  std::printf("median pair sd: lockstep %.4f, interleaved %.4f; median repeats needed: %.0f vs %.0f; "
              "power at 10 pairs: %.1f%% vs %.1f%%\n",
              sd_l, sd_i, need_l, need_i, 100 * l.tally.PowerRate(), 100 * i.tally.PowerRate());
  EXPECT_GT(sd_i, 3 * sd_l);
  EXPECT_GT(need_i, 3 * need_l);
  EXPECT_GT(l.tally.PowerRate(), i.tally.PowerRate());
}

// Not a check: prints the table of docs/statistics.md ("Lockstep pairs").
TEST(LockstepCoverageTest, PrintTable) {
  const char* env = std::getenv("BAKEOFF_SIM_TABLE");
  if (env == nullptr) GTEST_SKIP() << "set BAKEOFF_SIM_TABLE=N (sweeps per cell) to print the table";
  const int sweeps = std::atoi(env);
  std::printf("| order | repeats | A/A false verdicts | coverage 1.05 | power 1.05 | median pair sd | "
              "median repeats needed (5%%) |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const char* order : {"lockstep", "interleaved"}) {
    for (int n : {2, 3, 5, 10}) {
      LockstepCase aa{n, order, 1.0}, five{n, order, 1.05};
      LockstepTally ta = testing::SimulateLockstep(aa, sweeps, Seed(aa, 11));
      LockstepTally t5 = testing::SimulateLockstep(five, sweeps, Seed(five, 12));
      std::printf("| %s | %d | %.1f%% | %.1f%% | %.1f%% | %.4f | %.0f |\n", order, n, 100 * ta.tally.VerdictRate(),
                  100 * t5.tally.CoverageRate(), 100 * t5.tally.PowerRate(), Median(t5.sd_log_ratio),
                  Median(t5.repeats_needed));
    }
  }
}

}  // namespace
}  // namespace bakeoff::metrics
