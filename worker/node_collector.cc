#include "worker/node_collector.h"

#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>

#include "metrics/prometheus/prometheus_families.h"

namespace bakeoff::worker {
using metrics::AddSample;
using metrics::LabelPairs;
using metrics::MakeFamily;
using prometheus::MetricType;

NodeCollector::NodeCollector(std::string proc_root, std::unique_ptr<NvmlLibrary> nvml)
    : proc_root_(std::move(proc_root)), nvml_(std::move(nvml)) {
  const long ticks = sysconf(_SC_CLK_TCK);
  seconds_per_tick_ = ticks > 0 ? 1.0 / static_cast<double>(ticks) : 0.01;
}

std::vector<prometheus::MetricFamily> NodeCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  CollectCpu(out);
  CollectMemory(out);
  CollectGpus(out);
  return out;
}

void NodeCollector::CollectCpu(std::vector<prometheus::MetricFamily>& out) const {
  std::ifstream in(proc_root_ + "/stat");
  if (!in) return;  // not Linux, or /proc not mounted: no CPU series
  // The aggregate line: "cpu  user nice system idle iowait irq softirq steal ...".
  static constexpr std::array<const char*, 8> kModes = {"user", "nice", "system", "idle",
                                                        "iowait", "irq", "softirq", "steal"};
  auto seconds = MakeFamily("bakeoff_node_cpu_seconds_total",
                            "CPU time of the node since boot, summed over its CPUs, by mode.",
                            MetricType::Counter);
  int cpus = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0) continue;
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name == "cpu") {
      for (const char* mode : kModes) {
        double ticks = 0;
        if (!(fields >> ticks)) break;
        AddSample(seconds, {{"mode", mode}}, ticks * seconds_per_tick_);
      }
    } else {
      ++cpus;  // "cpuN": one logical CPU
    }
  }
  if (!seconds.metric.empty()) out.push_back(std::move(seconds));
  if (cpus > 0) {
    auto count = MakeFamily("bakeoff_node_cpus", "Logical CPUs of the node.", MetricType::Gauge);
    AddSample(count, {}, cpus);
    out.push_back(std::move(count));
  }
}

void NodeCollector::CollectMemory(std::vector<prometheus::MetricFamily>& out) const {
  std::ifstream in(proc_root_ + "/meminfo");
  if (!in) return;
  double total_kib = -1, available_kib = -1;
  std::string key;
  double value = 0;
  std::string unit;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!(fields >> key >> value)) continue;
    if (key == "MemTotal:") total_kib = value;
    if (key == "MemAvailable:") available_kib = value;
  }
  if (total_kib >= 0) {
    auto total = MakeFamily("bakeoff_node_memory_total_bytes", "Physical memory of the node.", MetricType::Gauge);
    AddSample(total, {}, total_kib * 1024);
    out.push_back(std::move(total));
  }
  if (available_kib >= 0) {
    auto available = MakeFamily("bakeoff_node_memory_available_bytes",
                                "Memory available for new processes without swapping (MemAvailable).",
                                MetricType::Gauge);
    AddSample(available, {}, available_kib * 1024);
    out.push_back(std::move(available));
  }
}

void NodeCollector::CollectGpus(std::vector<prometheus::MetricFamily>& out) const {
  if (!nvml_) return;
  auto utilization = MakeFamily("bakeoff_gpu_utilization_ratio",
                                "Fraction of the last sample period in which a kernel ran on the GPU (NVML).",
                                MetricType::Gauge);
  auto used = MakeFamily("bakeoff_gpu_memory_used_bytes", "GPU memory in use, all processes (NVML).",
                         MetricType::Gauge);
  auto total = MakeFamily("bakeoff_gpu_memory_total_bytes", "GPU memory installed (NVML).", MetricType::Gauge);
  const unsigned count = nvml_->DeviceCount();
  for (unsigned i = 0; i < count; ++i) {
    auto sample = nvml_->Sample(i);
    if (!sample.ok()) continue;  // a device in a bad state: skip it, keep the others
    const LabelPairs labels = {{"gpu", std::to_string(i)}, {"model", sample->name}};
    AddSample(utilization, labels, sample->utilization_ratio);
    AddSample(used, labels, static_cast<double>(sample->memory_used_bytes));
    AddSample(total, labels, static_cast<double>(sample->memory_total_bytes));
  }
  if (utilization.metric.empty()) return;
  out.push_back(std::move(utilization));
  out.push_back(std::move(used));
  out.push_back(std::move(total));
}

}  // namespace bakeoff::worker
