#include "metrics/statistics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace bakeoff::metrics {
namespace {

TEST(StatisticsTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({7}), 7.0);
}

TEST(StatisticsTest, PercentileInterpolatesBetweenClosestRanks) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 10), 1.4);
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 2.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 4.6);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 5.0);
}

TEST(StatisticsTest, MeanStdDevAndCoefficientOfVariation) {
  std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(Mean(v), 5.0);
  EXPECT_NEAR(SampleStdDev(v), std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_NEAR(CoefficientOfVariation(v), std::sqrt(32.0 / 7.0) / 5.0, 1e-12);
  EXPECT_DOUBLE_EQ(SampleStdDev({3}), 0.0);
}

TEST(StatisticsTest, GeometricMeanOfPowers) {
  EXPECT_NEAR(GeometricMean({1, 4, 16}), 4.0, 1e-12);
  EXPECT_NEAR(GeometricMean({0.5, 2}), 1.0, 1e-12);
}

TEST(StatisticsTest, NormalAndStudentQuantilesMatchTables) {
  EXPECT_NEAR(NormalQuantile(0.975), 1.959964, 1e-6);
  EXPECT_NEAR(NormalQuantile(0.8), 0.841621, 1e-6);
  EXPECT_NEAR(NormalQuantile(0.001), -3.090232, 1e-6);
  EXPECT_NEAR(NormalCdf(1.959964), 0.975, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.7062, 1e-3);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.302653, 1e-5);
  EXPECT_NEAR(StudentTQuantile(0.975, 9), 2.262157, 1e-5);
  EXPECT_NEAR(StudentTQuantile(0.025, 30), -2.042272, 1e-5);
}

TEST(StatisticsTest, ExpandedTailShrinksForSmallSamplesOnly) {
  EXPECT_NEAR(ExpandedTailProbability(0.95, 0), 0.025, 1e-12);
  EXPECT_NEAR(ExpandedTailProbability(0.95, 1), 0.025, 1e-12);
  // n = 10: Phi(-sqrt(10/9) * t_{0.975,9}) = Phi(-2.3845).
  EXPECT_NEAR(ExpandedTailProbability(0.95, 10), NormalCdf(-std::sqrt(10.0 / 9) * 2.262157),
              1e-6);
  EXPECT_LT(ExpandedTailProbability(0.95, 3), ExpandedTailProbability(0.95, 10));
  EXPECT_NEAR(ExpandedTailProbability(0.95, 100000), 0.025, 1e-3);
}

TEST(StatisticsTest, DrawIndexStaysInRangeAndIsDeterministic) {
  std::mt19937_64 a(42), b(42);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 7000; ++i) {
    std::size_t x = DrawIndex(a, 7);
    ASSERT_LT(x, 7u);
    ASSERT_EQ(x, DrawIndex(b, 7));
    ++counts[x];
  }
  for (int c : counts) EXPECT_GT(c, 800);  // roughly uniform: 1000 expected each
}

TEST(StatisticsTest, BootstrapIsDeterministicBySeed) {
  std::vector<double> num = {1.10, 1.21, 0.98, 1.31, 1.12, 1.05};
  std::vector<double> den = {1.00, 1.02, 0.97, 1.05, 1.01, 0.99};
  BootstrapOptions options;
  options.seed = 7;
  RatioEstimate first = PairedRatio(num, den, options);
  RatioEstimate again = PairedRatio(num, den, options);
  ASSERT_TRUE(first.interval && again.interval);
  EXPECT_EQ(first.interval->low, again.interval->low);
  EXPECT_EQ(first.interval->high, again.interval->high);
  options.seed = 8;
  RatioEstimate other = PairedRatio(num, den, options);
  EXPECT_NE(first.interval->low, other.interval->low);
  EXPECT_LT(first.interval->low, first.ratio);
  EXPECT_GT(first.interval->high, first.ratio);
}

TEST(StatisticsTest, PairedRatioIsGeometricMeanOfPairRatios) {
  RatioEstimate exact = PairedRatio({2, 4, 8}, {1, 2, 4}, BootstrapOptions{});
  EXPECT_NEAR(exact.ratio, 2.0, 1e-12);
  ASSERT_TRUE(exact.interval);
  EXPECT_NEAR(exact.interval->low, 2.0, 1e-12);
  EXPECT_NEAR(exact.interval->high, 2.0, 1e-12);
  RatioEstimate mixed = PairedRatio({2, 1}, {1, 2}, BootstrapOptions{});
  EXPECT_NEAR(mixed.ratio, 1.0, 1e-12);  // sqrt(2 * 0.5)
  EXPECT_FALSE(PairedRatio({2}, {1}, BootstrapOptions{}).interval);
}

TEST(StatisticsTest, UnpairedRatioIsRatioOfGeometricMeans) {
  RatioEstimate e = UnpairedRatio({2, 8}, {1, 4}, BootstrapOptions{});
  EXPECT_NEAR(e.ratio, 2.0, 1e-12);  // 4 / 2
  ASSERT_TRUE(e.interval);
  EXPECT_LE(e.interval->low, 2.0);
  EXPECT_GE(e.interval->high, 2.0);
  EXPECT_FALSE(UnpairedRatio({2}, {1, 4}, BootstrapOptions{}).interval);
}

TEST(StatisticsTest, StepRatioKeepsThePointEstimateAndBracketsIt) {
  std::vector<double> fast = {0.09, 0.10, 0.11, 0.10, 0.10, 0.12, 0.09};
  std::vector<double> slow = {0.20, 0.21, 0.19, 0.20, 0.22, 0.20, 0.18};
  RatioEstimate e = StepRatio(2000, fast, 1000, slow, BootstrapOptions{});
  EXPECT_DOUBLE_EQ(e.ratio, 2.0);
  ASSERT_TRUE(e.interval);
  EXPECT_LT(e.interval->low, 2.0);
  EXPECT_GT(e.interval->high, 2.0);
  EXPECT_GT(e.interval->low, 1.5);
}

TEST(StatisticsTest, BreakEvenCases) {
  BreakEven pays = ComputeBreakEven(100.0, 0.5);
  EXPECT_EQ(pays.kind, BreakEven::Kind::kAfterSteps);
  EXPECT_DOUBLE_EQ(pays.steps, 200.0);
  EXPECT_EQ(pays.ToString(), "200 steps");
  EXPECT_EQ(ComputeBreakEven(10.0, 3.0).ToString(), "4 steps");  // 3.33 rounds up
  EXPECT_EQ(ComputeBreakEven(100.0, -0.1).kind, BreakEven::Kind::kNever);  // slower
  EXPECT_EQ(ComputeBreakEven(100.0, 0.0).kind, BreakEven::Kind::kNever);   // not faster
  EXPECT_EQ(ComputeBreakEven(-5.0, -0.1).ToString(), "never");  // shorter warm-up, slower
  EXPECT_EQ(ComputeBreakEven(0.0, 0.2).kind, BreakEven::Kind::kImmediately);  // equal warm-up
  EXPECT_EQ(ComputeBreakEven(-3.0, 0.2).ToString(), "immediately");
}

TEST(StatisticsTest, LossParityUsesCommonStepsOnly) {
  std::vector<std::pair<std::int64_t, double>> variant = {{1, 2.0}, {2, 1.9}, {4, 1.5}, {5, 9.0}};
  std::vector<std::pair<std::int64_t, double>> counterpart = {{0, 2.1}, {1, 2.0}, {2, 2.0}, {4, 1.5}};
  LossParity parity = ComputeLossParity(variant, counterpart);
  EXPECT_EQ(parity.common_steps, 3u);  // steps 1, 2, 4; step 5 has no counterpart
  EXPECT_NEAR(parity.max_relative_deviation, 0.05, 1e-12);
  EXPECT_EQ(parity.at_step, 2);
  EXPECT_EQ(ComputeLossParity({{1, 1.0}}, {{2, 1.0}}).common_steps, 0u);
  EXPECT_DOUBLE_EQ(ComputeLossParity({{1, 3.0}}, {{1, 3.0}}).max_relative_deviation, 0.0);
}

TEST(StatisticsTest, RepeatsToResolveFollowsThePowerFormula) {
  // ((1.95996 + 0.84162) * 0.05 / ln 1.05)^2 = 8.24 -> 9
  EXPECT_EQ(RepeatsToResolve(0.05, 0.05), 9);
  EXPECT_EQ(RepeatsToResolve(0.001, 0.05), 2);
  EXPECT_GT(RepeatsToResolve(0.10, 0.05), 30);
}

// Simulated experiments with a known true ratio: the 95% interval must contain it
// about 95% of the time (92-98% over 1,000 seeded simulations).
TEST(StatisticsCoverageTest, PairedIntervalCoversTheTrueRatio) {
  const double kTrue = 1.07;
  std::mt19937_64 rng(1234);
  std::normal_distribution<double> noise(0, 0.03), drift(0, 0.05);
  int covered = 0;
  for (int sweep = 0; sweep < 1000; ++sweep) {
    std::vector<double> variant, counterpart;
    for (int repeat = 0; repeat < 10; ++repeat) {
      double shared = std::exp(drift(rng));  // drift that pairing cancels
      variant.push_back(1000 * kTrue * shared * std::exp(noise(rng)));
      counterpart.push_back(1000 * shared * std::exp(noise(rng)));
    }
    BootstrapOptions options;
    options.seed = static_cast<std::uint64_t>(sweep);
    RatioEstimate e = PairedRatio(variant, counterpart, options);
    covered += e.interval->Contains(kTrue) ? 1 : 0;
  }
  EXPECT_GE(covered, 920);
  EXPECT_LE(covered, 980);
}

TEST(StatisticsCoverageTest, UnpairedIntervalCoversTheTrueRatio) {
  const double kTrue = 0.9;
  std::mt19937_64 rng(99);
  std::normal_distribution<double> noise(0, 0.04);
  int covered = 0;
  for (int sweep = 0; sweep < 1000; ++sweep) {
    std::vector<double> variant, counterpart;
    for (int repeat = 0; repeat < 5; ++repeat) {
      variant.push_back(500 * kTrue * std::exp(noise(rng)));
      counterpart.push_back(500 * std::exp(noise(rng)));
    }
    BootstrapOptions options;
    options.seed = static_cast<std::uint64_t>(sweep);
    covered += UnpairedRatio(variant, counterpart, options).interval->Contains(kTrue) ? 1 : 0;
  }
  EXPECT_GE(covered, 920);
  EXPECT_LE(covered, 980);
}

TEST(StatisticsCoverageTest, StepIntervalCoversTheTrueRatio) {
  const double kTrue = 1.07;
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> step_s(std::log(0.1), 0.05);
  int covered = 0;
  for (int sweep = 0; sweep < 1000; ++sweep) {
    std::vector<double> variant, counterpart;
    for (int step = 0; step < 20; ++step) {
      variant.push_back(step_s(rng) / kTrue);
      counterpart.push_back(step_s(rng));
    }
    BootstrapOptions options;
    options.seed = static_cast<std::uint64_t>(sweep);
    options.resamples = 1000;  // keeps the suite fast; coverage is unchanged
    RatioEstimate e = StepRatio(4096 / Median(variant), variant, 4096 / Median(counterpart),
                                counterpart, options);
    covered += e.interval->Contains(kTrue) ? 1 : 0;
  }
  EXPECT_GE(covered, 920);
  EXPECT_LE(covered, 980);
}

}  // namespace
}  // namespace bakeoff::metrics
