// The report's intervals hold what they claim, checked on seeded simulated sweeps whose
// truth is known, through the real report code (report_simulation.h): at 2, 3, 5 and 10
// repeats, paired and unpaired, with equal and unequal repeats, under drift shared
// within a pair, slow AR drift over the run order and heavy-tailed step times:
//   - A/A (identical variants): a verdict ("faster"/"slower") in at most 5% of sweeps;
//   - a true speedup of 1.05: the interval contains it in 93-97% of sweeps;
// each with binomial slack (2.58 sd). The same for marginal effects and `bakeoff compare`.
// One repeat gives no verdict at all.
//
// BAKEOFF_SIM_TABLE=N prints the table of docs/statistics.md from N sweeps per cell.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "tests/metrics/report/report_simulation.h"

namespace bakeoff::metrics {
namespace {

using testing::Noise;
using testing::NoiseName;
using testing::SimCase;
using testing::SimTally;
using testing::Slack;

constexpr int kSweeps = 400;

std::string Describe(const SimCase& c, const char* what) {
  return std::string(what) + " " + std::to_string(c.variant_repeats) + " vs " +
         std::to_string(c.counterpart_repeats) + " repeats, " + c.order + ", " + NoiseName(c.noise) +
         ", true ratio " + std::to_string(c.true_ratio);
}

void ExpectHolds(const SimCase& c, const SimTally& t, const char* what) {
  std::string name = Describe(c, what);
  if (c.true_ratio == 1.0) {
    EXPECT_LE(t.VerdictRate(), 0.05 + Slack(0.05, t.sweeps)) << name << ": false verdicts";
  }
  EXPECT_GE(t.CoverageRate(), 0.93 - Slack(0.95, t.sweeps)) << name << ": coverage";
  EXPECT_LE(t.CoverageRate(), 0.97 + Slack(0.95, t.sweeps)) << name << ": coverage";
  EXPECT_EQ(t.unclear, 0) << name;
}

std::uint64_t Seed(const SimCase& c, int salt) {
  return static_cast<std::uint64_t>(c.variant_repeats * 1000003 + c.counterpart_repeats * 10007 +
                                    static_cast<int>(c.noise) * 101 + salt) +
         static_cast<std::uint64_t>(c.true_ratio * 1000) * 7919;
}

// The intervals of `order` hold for equal repeat counts 2, 3, 5 and 10, with and
// without a true 5% difference, under each of `noises`; `salt` seeds, `name` labels.
void ExpectHoldsAtEveryRepeatCount(std::initializer_list<Noise> noises, const std::string& order,
                                   int salt, const char* name) {
  for (Noise noise : noises) {
    for (int n : {2, 3, 5, 10}) {
      for (double truth : {1.0, 1.05}) {
        SimCase c{n, n, order, truth, noise};
        SimTally t = testing::SimulateSpeedup(c, kSweeps, Seed(c, salt));
        ExpectHolds(c, t, name);
      }
    }
  }
}

TEST(ReportCoverageTest, PairedIntervalsHoldAtEveryRepeatCount) {
  ExpectHoldsAtEveryRepeatCount({Noise::kPairDrift, Noise::kArDrift, Noise::kHeavyTail},
                                "interleaved", 1, "paired");
}

TEST(ReportCoverageTest, UnpairedIntervalsHoldAtEveryRepeatCount) {
  // Random order: drift over the run order hits both sides alike on average. (Sequential
  // order under drift is biased whatever the interval: docs/statistics.md.)
  ExpectHoldsAtEveryRepeatCount({Noise::kIndependent, Noise::kArDrift, Noise::kHeavyTail}, "random",
                                2, "unpaired");
}

// Unequal sizes: the unpaired interval must not be sized by the larger side (the review's
// mutant 2 covered 89% at 3 vs 10); interleaved with a side that ran fewer repeats pairs
// only the repeats both have.
TEST(ReportCoverageTest, IntervalsHoldWithUnequalRepeats) {
  for (auto [nv, nc] : {std::pair{3, 10}, std::pair{10, 3}, std::pair{5, 2}, std::pair{3, 5}}) {
    for (double truth : {1.0, 1.05}) {
      for (Noise noise : {Noise::kIndependent, Noise::kHeavyTail}) {
        SimCase c{nv, nc, "random", truth, noise};
        ExpectHolds(c, testing::SimulateSpeedup(c, kSweeps, Seed(c, 3)), "unpaired");
      }
      SimCase paired{nv, nc, "interleaved", truth, Noise::kPairDrift};
      ExpectHolds(paired, testing::SimulateSpeedup(paired, kSweeps, Seed(paired, 4)), "paired");
    }
  }
}

// A known limit, documented in docs/statistics.md: with 2 trials on one side and many on
// the other, Welch-Satterthwaite's df leans on one variance with 1 df and the interval is
// liberal (~89%, as the review found for the old bootstrap too). Guarded so that it does
// not get worse unnoticed; paired interleaved repeats do not have it.
TEST(ReportCoverageTest, WelchIsLiberalAtTwoVersusTen) {
  SimCase c{2, 10, "random", 1.05, Noise::kIndependent};
  SimTally t = testing::SimulateSpeedup(c, kSweeps, Seed(c, 14));
  EXPECT_GE(t.CoverageRate(), 0.86);
  EXPECT_LE(t.CoverageRate(), 0.93);
}

TEST(ReportCoverageTest, OneRepeatNeverGivesAVerdict) {
  for (Noise noise : {Noise::kPairDrift, Noise::kIndependent}) {
    for (double truth : {1.0, 1.3}) {
      SimCase c{1, 1, "interleaved", truth, noise};
      SimTally t = testing::SimulateSpeedup(c, 100, Seed(c, 5));
      EXPECT_EQ(t.verdicts, 0) << Describe(c, "one repeat");
      EXPECT_EQ(t.unclear, t.sweeps) << Describe(c, "one repeat");
    }
  }
}

TEST(ReportCoverageTest, MarginalEffectIntervalsHold) {
  for (int n : {2, 3, 5, 10}) {
    for (double truth : {1.0, 1.05}) {
      SimCase paired{n, n, "interleaved", truth, Noise::kPairDrift};
      ExpectHolds(paired, testing::SimulateMarginal(paired, kSweeps, Seed(paired, 6)), "marginal");
      SimCase ar{n, n, "interleaved", truth, Noise::kArDrift};
      ExpectHolds(ar, testing::SimulateMarginal(ar, kSweeps, Seed(ar, 7)), "marginal");
      SimCase unpaired{n, n, "random", truth, Noise::kHeavyTail};
      ExpectHolds(unpaired, testing::SimulateMarginal(unpaired, kSweeps, Seed(unpaired, 8)),
                  "marginal");
    }
  }
}

TEST(ReportCoverageTest, CompareIntervalsHold) {
  for (int n : {2, 3, 5, 10}) {
    for (double truth : {1.0, 1.05}) {
      for (Noise noise : {Noise::kPairDrift, Noise::kHeavyTail}) {
        SimCase c{n, n, "interleaved", truth, noise};
        ExpectHolds(c, testing::SimulateCompare(c, kSweeps, Seed(c, 9)), "compare");
      }
    }
  }
  SimCase uneven{3, 10, "interleaved", 1.05, Noise::kIndependent};
  ExpectHolds(uneven, testing::SimulateCompare(uneven, kSweeps, Seed(uneven, 10)), "compare");
}

// Not a check: prints the coverage table of docs/statistics.md.
TEST(ReportCoverageTest, PrintTable) {
  const char* env = std::getenv("BAKEOFF_SIM_TABLE");
  if (env == nullptr) GTEST_SKIP() << "set BAKEOFF_SIM_TABLE=N (sweeps per cell) to print the table";
  int sweeps = std::atoi(env);
  std::printf("| method | noise | repeats | A/A false verdicts | coverage 1.05 | power 1.05 | power 1.10 |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  struct Row {
    const char* method;
    std::string order;
    Noise noise;
  };
  for (const Row& row : {Row{"paired", "interleaved", Noise::kPairDrift},
                         Row{"paired", "interleaved", Noise::kArDrift},
                         Row{"paired", "interleaved", Noise::kHeavyTail},
                         Row{"unpaired", "random", Noise::kIndependent},
                         Row{"unpaired", "random", Noise::kArDrift},
                         Row{"unpaired", "random", Noise::kHeavyTail}}) {
    for (int n : {1, 2, 3, 5, 10}) {
      SimCase aa{n, n, row.order, 1.0, row.noise}, five{n, n, row.order, 1.05, row.noise},
          ten{n, n, row.order, 1.10, row.noise};
      SimTally ta = testing::SimulateSpeedup(aa, sweeps, Seed(aa, 11));
      SimTally t5 = testing::SimulateSpeedup(five, sweeps, Seed(five, 12));
      SimTally t10 = testing::SimulateSpeedup(ten, sweeps, Seed(ten, 13));
      if (n == 1) {
        std::printf("| %s | %s | 1 | 0%% (no verdict) | within-run only: %.1f%% | 0%% | 0%% |\n", row.method,
                    NoiseName(row.noise), 100 * t5.CoverageRate());
        continue;
      }
      std::printf("| %s | %s | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", row.method, NoiseName(row.noise), n,
                  100 * ta.VerdictRate(), 100 * t5.CoverageRate(), 100 * t5.PowerRate(),
                  100 * t10.PowerRate());
    }
  }
}

}  // namespace
}  // namespace bakeoff::metrics
