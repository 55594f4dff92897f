#include "worker/node_collector.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "tests/metrics/prometheus/promtool_check.h"

namespace bakeoff::worker {
namespace {

// family name -> (labels rendered "k=v,k=v" -> value)
using Samples = std::map<std::string, std::map<std::string, double>>;

Samples Flatten(const std::vector<prometheus::MetricFamily>& families) {
  Samples out;
  for (const auto& f : families) {
    for (const auto& m : f.metric) {
      std::string labels;
      for (const auto& l : m.label) labels += (labels.empty() ? "" : ",") + l.name + "=" + l.value;
      out[f.name][labels] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

std::string Serialize(const std::vector<prometheus::MetricFamily>& families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

class NodeCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proc_ = std::filesystem::temp_directory_path() / ("bakeoff-proc-" + std::to_string(getpid()));
    std::filesystem::create_directories(proc_);
    std::ofstream(proc_ / "stat") << "cpu  1000 20 300 5000 40 5 6 7 0 0\n"
                                     "cpu0 500 10 150 2500 20 2 3 3 0 0\n"
                                     "cpu1 500 10 150 2500 20 3 3 4 0 0\n"
                                     "intr 12345\n";
    std::ofstream(proc_ / "meminfo") << "MemTotal:       16384000 kB\n"
                                        "MemFree:         1000000 kB\n"
                                        "MemAvailable:    8192000 kB\n";
  }
  void TearDown() override { std::filesystem::remove_all(proc_); }
  std::filesystem::path proc_;
};

TEST_F(NodeCollectorTest, ReadsCpuSecondsCpuCountAndMemoryFromProc) {
  NodeCollector collector(proc_.string());
  Samples s = Flatten(collector.Collect());
  const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(s["bakeoff_node_cpu_seconds_total"]["mode=user"], 1000 * tick);
  EXPECT_DOUBLE_EQ(s["bakeoff_node_cpu_seconds_total"]["mode=idle"], 5000 * tick);
  EXPECT_DOUBLE_EQ(s["bakeoff_node_cpu_seconds_total"]["mode=steal"], 7 * tick);
  EXPECT_EQ(s["bakeoff_node_cpu_seconds_total"].size(), 8u);
  EXPECT_EQ(s["bakeoff_node_cpus"][""], 2);
  EXPECT_EQ(s["bakeoff_node_memory_total_bytes"][""], 16384000.0 * 1024);
  EXPECT_EQ(s["bakeoff_node_memory_available_bytes"][""], 8192000.0 * 1024);
  EXPECT_EQ(s.count("bakeoff_gpu_utilization_ratio"), 0u) << "no NVML, no GPU series";
}

TEST_F(NodeCollectorTest, RealProcGivesSeriesThatPassPromtool) {
  NodeCollector collector;
  auto families = collector.Collect();
  Samples s = Flatten(families);
  EXPECT_GT(s["bakeoff_node_cpus"][""], 0);
  EXPECT_GT(s["bakeoff_node_memory_total_bytes"][""], 0);
  EXPECT_GT(s["bakeoff_node_cpu_seconds_total"]["mode=idle"], 0);
  auto lint = testing::PromtoolCheckMetrics(Serialize(families));
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
}

TEST_F(NodeCollectorTest, MissingProcFilesGiveNoSeriesAndNoError) {
  NodeCollector collector((proc_ / "absent").string());
  EXPECT_TRUE(collector.Collect().empty());
}

TEST(NvmlLibraryTest, AbsentLibraryIsNotFound) {
  auto nvml = NvmlLibrary::Load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), Status::Code::kNotFound);
  EXPECT_NE(nvml.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
}

TEST(NvmlLibraryTest, LibraryWithoutNvmlSymbolsIsNotFound) {
  auto nvml = NvmlLibrary::Load("libm.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), Status::Code::kNotFound);
  EXPECT_NE(nvml.status().message().find("nvmlInit_v2"), std::string::npos) << nvml.status().message();
}

TEST(NvmlLibraryTest, FailingInitIsUnavailable) {
  setenv("BAKEOFF_FAKE_NVML_INIT_FAILS", "1", 1);
  auto nvml = NvmlLibrary::Load(BAKEOFF_FAKE_NVML);
  unsetenv("BAKEOFF_FAKE_NVML_INIT_FAILS");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), Status::Code::kUnavailable);
}

TEST_F(NodeCollectorTest, GpuSeriesComeFromNvmlPerDevice) {
  auto nvml = NvmlLibrary::Load(BAKEOFF_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  EXPECT_EQ((*nvml)->DeviceCount(), 2u);
  NodeCollector collector(proc_.string(), std::move(nvml).value());
  auto families = collector.Collect();
  Samples s = Flatten(families);
  EXPECT_DOUBLE_EQ(s["bakeoff_gpu_utilization_ratio"]["gpu=0,model=Bakeoff Fake GPU"], 0.4);
  EXPECT_DOUBLE_EQ(s["bakeoff_gpu_utilization_ratio"]["gpu=1,model=Bakeoff Fake GPU"], 0.5);
  EXPECT_EQ(s["bakeoff_gpu_memory_used_bytes"]["gpu=1,model=Bakeoff Fake GPU"], 2.0 * (1ull << 30));
  EXPECT_EQ(s["bakeoff_gpu_memory_total_bytes"]["gpu=0,model=Bakeoff Fake GPU"], 80.0 * (1ull << 30));
  auto lint = testing::PromtoolCheckMetrics(Serialize(families));
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
}

}  // namespace
}  // namespace bakeoff::worker
