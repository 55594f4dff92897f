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
  // Fractional degrees of freedom (Welch): between its integer neighbours.
  EXPECT_GT(StudentTQuantile(0.975, 2.5), StudentTQuantile(0.975, 3));
  EXPECT_LT(StudentTQuantile(0.975, 2.5), StudentTQuantile(0.975, 2));
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

TEST(StatisticsTest, StepBootstrapIsDeterministicBySeed) {
  std::vector<double> fast = {0.09, 0.10, 0.11, 0.10, 0.10, 0.12, 0.09};
  std::vector<double> slow = {0.20, 0.21, 0.19, 0.20, 0.22, 0.20, 0.18};
  BootstrapOptions options;
  options.seed = 7;
  RatioEstimate first = StepRatio(2000, fast, 1000, slow, options);
  RatioEstimate again = StepRatio(2000, fast, 1000, slow, options);
  ASSERT_TRUE(first.interval && again.interval);
  EXPECT_EQ(first.interval->low, again.interval->low);
  EXPECT_EQ(first.interval->high, again.interval->high);
}

TEST(StatisticsTest, PairedRatioIsGeometricMeanOfPairRatios) {
  RatioEstimate exact = PairedRatio({2, 4, 8}, {1, 2, 4}, 0.95);
  EXPECT_NEAR(exact.ratio, 2.0, 1e-12);
  ASSERT_TRUE(exact.interval);
  EXPECT_NEAR(exact.interval->low, 2.0, 1e-12);
  EXPECT_NEAR(exact.interval->high, 2.0, 1e-12);
  RatioEstimate mixed = PairedRatio({2, 1}, {1, 2}, 0.95);
  EXPECT_NEAR(mixed.ratio, 1.0, 1e-12);  // sqrt(2 * 0.5)
  EXPECT_FALSE(PairedRatio({2}, {1}, 0.95).interval);
}

TEST(StatisticsTest, PairedIntervalIsStudentTOnTheLogRatios) {
  // The docs' worked example: 5 interleaved repeats.
  std::vector<double> eager = {1000, 1020, 985, 1010, 995};
  std::vector<double> jit = {1075, 1104, 1050, 1090, 1068};
  RatioEstimate e = PairedRatio(jit, eager, 0.95);
  std::vector<double> d;
  for (std::size_t i = 0; i < jit.size(); ++i) d.push_back(std::log(jit[i] / eager[i]));
  double half = 2.776445 * SampleStdDev(d) / std::sqrt(5.0);
  ASSERT_TRUE(e.interval && e.df);
  EXPECT_NEAR(*e.df, 4.0, 1e-12);
  EXPECT_NEAR(e.ratio, std::exp(Mean(d)), 1e-12);
  EXPECT_NEAR(std::log(e.interval->low), Mean(d) - half, 1e-9);
  EXPECT_NEAR(std::log(e.interval->high), Mean(d) + half, 1e-9);
  EXPECT_NEAR(e.ratio, 1.0752, 1e-4);
  EXPECT_NEAR(e.interval->low, 1.0674, 1e-4);
  EXPECT_NEAR(e.interval->high, 1.0829, 1e-4);
}

TEST(StatisticsTest, UnpairedRatioIsWelchOnLogs) {
  RatioEstimate e = UnpairedRatio({2, 8}, {1, 4}, 0.95);
  EXPECT_NEAR(e.ratio, 2.0, 1e-12);  // 4 / 2
  ASSERT_TRUE(e.interval);
  EXPECT_LE(e.interval->low, 2.0);
  EXPECT_GE(e.interval->high, 2.0);
  EXPECT_FALSE(UnpairedRatio({2}, {1, 4}, 0.95).interval);
  // Unequal sizes and spreads: Welch-Satterthwaite df, by hand.
  std::vector<double> a = {1.0, 1.2, 0.9}, b = {2.0, 2.1, 1.9, 2.05, 1.95, 2.02, 1.98, 2.0, 2.01, 1.99};
  std::vector<double> la, lb;
  for (double x : a) la.push_back(std::log(x));
  for (double x : b) lb.push_back(std::log(x));
  double va = SampleStdDev(la) * SampleStdDev(la) / 3, vb = SampleStdDev(lb) * SampleStdDev(lb) / 10;
  double df = (va + vb) * (va + vb) / (va * va / 2 + vb * vb / 9);
  RatioEstimate w = UnpairedRatio(a, b, 0.95);
  ASSERT_TRUE(w.df && w.interval);
  EXPECT_NEAR(*w.df, df, 1e-9);
  double half = StudentTQuantile(0.975, df) * std::sqrt(va + vb);
  EXPECT_NEAR(std::log(w.interval->high) - std::log(w.interval->low), 2 * half, 1e-9);
}

TEST(StatisticsTest, WelchContrastWithOneGroupIsTheOneSampleT) {
  TEstimate t = WelchContrast({{{1.0, 2.0, 3.0}, 1.0}}, 0.95);
  EXPECT_NEAR(t.estimate, 2.0, 1e-12);
  EXPECT_NEAR(t.df, 2.0, 1e-12);
  EXPECT_NEAR(t.se, 1.0 / std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(t.interval.high - 2.0, 4.302653 / std::sqrt(3.0), 1e-5);
  TEstimate constant = WelchContrast({{{1.0, 1.0}, 0.5}, {{3.0, 3.0}, -0.5}}, 0.95);
  EXPECT_NEAR(constant.estimate, -1.0, 1e-12);
  EXPECT_EQ(constant.interval.low, constant.interval.high);
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

TEST(StatisticsTest, RepeatsToResolveFollowsTheTPowerFormula) {
  // sd 5%, d 5%: n = 11 is the first with n >= ((t_.975,n-1 + t_.80,n-1) * 0.05 / ln 1.05)^2
  // (n = 10: (2.262 + 0.883)^2 * 1.050 = 10.39 > 10; n = 11: (2.228 + 0.879)^2 * 1.050 = 10.14).
  EXPECT_EQ(RepeatsToResolve(0.05, 0.05), 11);
  EXPECT_EQ(RepeatsToResolve(0.001, 0.05), 2);
  EXPECT_EQ(RepeatsToResolve(0.03, 0.05), 6);
  EXPECT_GT(RepeatsToResolve(0.10, 0.05), 30);
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
