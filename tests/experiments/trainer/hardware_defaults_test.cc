#include "experiments/trainer/hardware_defaults.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bakeoff::trainer {
namespace {

// /proc/cpuinfo as Linux lists it, for logical CPUs 0, 1, ... on the cores `core_ids`
// (socket 0) of one Sapphire Rapids model.
std::string CpuInfoText(const std::vector<int>& core_ids) {
  std::string text;
  for (std::size_t cpu = 0; cpu < core_ids.size(); ++cpu) {
    text += (cpu == 0 ? "processor\t: " : "\nprocessor\t: ") + std::to_string(cpu) +
            "\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nphysical id\t: 0\ncore id\t\t: " +
            std::to_string(core_ids[cpu]) +
            "\nflags\t\t: fpu sse avx2 fma avx512f avx512_bf16 amx_tile amx_bf16 amx_int8\n";
  }
  return text;
}

// Two logical CPUs per core (hyper-threads), two cores, as Linux lists them.
const std::string kSmtCpuInfo = CpuInfoText({0, 1, 0, 1});

CpuInfo Avx2Only() {
  CpuInfo cpu;
  cpu.model = "AMD EPYC";
  cpu.flags = {"avx2", "fma"};
  cpu.usable_cpus = 2;
  cpu.usable_cores = 2;
  return cpu;
}

CpuInfo WithAmx() {
  CpuInfo cpu = Avx2Only();
  cpu.flags.insert({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"});
  return cpu;
}

TEST(HardwareDefaultsTest, CpuInfoCountsPhysicalCoresNotHyperThreads) {
  const CpuInfo cpu = ParseCpuInfo(kSmtCpuInfo, {});
  EXPECT_EQ(cpu.model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(cpu.usable_cpus, 4);
  EXPECT_EQ(cpu.usable_cores, 2);
  EXPECT_TRUE(cpu.HasHardwareBf16());
  EXPECT_EQ(cpu.KernelFlags(),
            (std::vector<std::string>{"avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}));
}

TEST(HardwareDefaultsTest, CpuInfoCountsOnlyTheCpusInTheAffinityMask) {
  const CpuInfo one_core = ParseCpuInfo(kSmtCpuInfo, {0, 2});  // both threads of core 0
  EXPECT_EQ(one_core.usable_cpus, 2);
  EXPECT_EQ(one_core.usable_cores, 1);
  const CpuInfo two_cores = ParseCpuInfo(kSmtCpuInfo, {1, 2});
  EXPECT_EQ(two_cores.usable_cores, 2);
}

TEST(HardwareDefaultsTest, AnAvx2CpuHasNoHardwareBf16) {
  EXPECT_FALSE(Avx2Only().HasHardwareBf16());
  CpuInfo avx512_bf16_only = Avx2Only();
  avx512_bf16_only.flags.insert("avx512_bf16");
  EXPECT_TRUE(avx512_bf16_only.HasHardwareBf16());
}

TEST(HardwareDefaultsTest, AutoBf16TakesTheFasterCalibratedPathWhateverTheFeatures) {
  // The calibration is the measurement: it wins over what the flags suggest, both ways.
  auto widened = DecideBf16Matmul("auto", false, WithAmx(), Bf16Timing{0.010, 0.004, 5});
  EXPECT_EQ(widened.value, "fp32");
  EXPECT_NE(widened.reason.find("calibrated"), std::string::npos) << widened.reason;
  EXPECT_NE(widened.reason.find("10 ms"), std::string::npos) << widened.reason;
  EXPECT_NE(widened.reason.find("4 ms"), std::string::npos) << widened.reason;
  EXPECT_EQ(DecideBf16Matmul("auto", false, Avx2Only(), Bf16Timing{0.003, 0.004, 5}).value, "native");
}

TEST(HardwareDefaultsTest, AutoBf16WithoutACalibrationFollowsTheCpuFeatures) {
  auto amx = DecideBf16Matmul("auto", false, WithAmx(), std::nullopt);
  EXPECT_EQ(amx.value, "native");
  EXPECT_NE(amx.reason.find("amx_bf16"), std::string::npos) << amx.reason;
  auto avx2 = DecideBf16Matmul("auto", false, Avx2Only(), std::nullopt);
  EXPECT_EQ(avx2.value, "fp32");
  EXPECT_NE(avx2.reason.find("no hardware bf16"), std::string::npos) << avx2.reason;
}

TEST(HardwareDefaultsTest, ARequestedBf16PathIsKeptOnACpuAndCudaAlwaysRunsNative) {
  EXPECT_EQ(DecideBf16Matmul("native", false, Avx2Only(), Bf16Timing{1.0, 0.001, 3}).value, "native");
  EXPECT_EQ(DecideBf16Matmul("fp32", false, WithAmx(), std::nullopt).value, "fp32");
  EXPECT_EQ(DecideBf16Matmul("native", false, Avx2Only(), std::nullopt).reason, "requested");
  EXPECT_EQ(DecideBf16Matmul("auto", true, Avx2Only(), std::nullopt).value, "native");
  EXPECT_EQ(DecideBf16Matmul("fp32", true, Avx2Only(), std::nullopt).value, "native");
}

// A clock that the timed functions advance: each call costs what the test says.
struct FakeTimer {
  double now = 100.0;
  std::function<double()> clock() {
    return [this] { return now; };
  }
};

TEST(HardwareDefaultsTest, CalibrationAlternatesBothPathsAndReportsTheirMedians) {
  FakeTimer t;
  std::vector<char> order;
  int native_calls = 0;
  // native: 5 ms except one 50 ms outlier; fp32: 2 ms.
  auto native = [&] {
    order.push_back('n');
    t.now += ++native_calls == 3 ? 0.050 : 0.005;
  };
  auto fp32 = [&] {
    order.push_back('f');
    t.now += 0.002;
  };
  CalibrationOptions options;
  options.min_rounds = 3;
  options.max_rounds = 5;
  options.budget_s = 10;  // not the limit here: max_rounds is
  auto timing = CalibrateBf16(native, fp32, t.clock(), options);
  ASSERT_TRUE(timing.has_value());
  EXPECT_EQ(timing->rounds, 5);
  EXPECT_NEAR(timing->native_s, 0.005, 1e-9);  // the median ignores the outlier
  EXPECT_NEAR(timing->fp32_s, 0.002, 1e-9);
  // One untimed warm-up of each, then the order alternates round by round.
  EXPECT_EQ(std::string(order.begin(), order.end()), "nfnffnnffnnf");
}

TEST(HardwareDefaultsTest, CalibrationStopsAtItsBudgetAfterTheMinimumRounds) {
  FakeTimer t;
  auto native = [&] { t.now += 0.1; };
  auto fp32 = [&] { t.now += 0.1; };
  CalibrationOptions options;
  options.min_rounds = 2;
  options.max_rounds = 100;
  options.budget_s = 0.5;
  auto timing = CalibrateBf16(native, fp32, t.clock(), options);
  ASSERT_TRUE(timing.has_value());
  // warm-up 0.2 s, then rounds of 0.2 s: rounds start at 0.2 and 0.4 s, and stop at 0.6 s.
  EXPECT_EQ(timing->rounds, 2);
}

TEST(HardwareDefaultsTest, ACalibrationTooSlowForItsBudgetGivesNoTiming) {
  FakeTimer t;
  auto slow = [&] { t.now += 1.0; };
  CalibrationOptions options;
  options.min_rounds = 3;
  options.budget_s = 0.5;
  EXPECT_FALSE(CalibrateBf16(slow, slow, t.clock(), options).has_value());
}

TEST(HardwareDefaultsTest, DefaultThreadsShareThePhysicalCoresAmongTheHostsRanks) {
  CpuInfo cpu = ParseCpuInfo(kSmtCpuInfo, {});  // 2 cores, 4 logical CPUs
  EXPECT_EQ(DecideThreads(0, cpu, 1).value, "2");
  EXPECT_EQ(DecideThreads(0, cpu, 2).value, "1");
  EXPECT_EQ(DecideThreads(0, cpu, 8).value, "1") << "never below one thread";
  auto requested = DecideThreads(3, cpu, 2);
  EXPECT_EQ(requested.value, "3");
  EXPECT_EQ(requested.reason, "requested");
  EXPECT_NE(DecideThreads(0, cpu, 2).reason.find("2 physical cores"), std::string::npos);
}

TEST(HardwareDefaultsTest, APinnedRankTakesEveryCoreOfItsOwnAndSaysWhichCpus) {
  CpuInfo cpu;
  cpu.usable_cores = 2;  // what the pinned rank's affinity shows: its own cores only
  auto pinned = DecideThreads(0, cpu, 2, "2-3");
  EXPECT_EQ(pinned.value, "2") << "its cores are not shared with the host's other ranks";
  EXPECT_NE(pinned.reason.find("pinned to this rank alone (CPUs 2-3"), std::string::npos) << pinned.reason;
  EXPECT_EQ(DecideThreads(1, cpu, 2, "2-3").value, "1") << "a requested count wins";
}

TEST(HardwareDefaultsTest, JitExecutorAutoIsProfilingOnCudaAndLegacyOnACpu) {
  EXPECT_EQ(DecideJitExecutor("auto", true).value, "profiling");
  EXPECT_EQ(DecideJitExecutor("auto", false).value, "legacy");
  EXPECT_EQ(DecideJitExecutor("profiling", false).value, "profiling");
  EXPECT_EQ(DecideJitExecutor("legacy", true).reason, "requested");
}

}  // namespace
}  // namespace bakeoff::trainer
