// NodeCollector: the worker node's own figures, read at scrape time: CPU time by mode
// and logical CPU count (/proc/stat), total and available memory (/proc/meminfo), and
// per GPU utilisation and memory through NVML when the library was loaded (no NVML: no
// GPU series, no error). docs/metrics.md lists the series.
// Thread-safety: Collect is const and keeps no state between calls; any thread may call
// it, also concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "worker/nvml_library.h"

namespace bakeoff::worker {

class NodeCollector : public prometheus::Collectable {
 public:
  // `proc_root` is where /proc is read from (tests pass a directory of their own);
  // `nvml` may be null (no GPU series).
  explicit NodeCollector(std::string proc_root = "/proc", std::unique_ptr<NvmlLibrary> nvml = nullptr);

  std::vector<prometheus::MetricFamily> Collect() const override;

  bool has_nvml() const { return nvml_ != nullptr; }

 private:
  void CollectCpu(std::vector<prometheus::MetricFamily>& out) const;
  void CollectMemory(std::vector<prometheus::MetricFamily>& out) const;
  void CollectGpus(std::vector<prometheus::MetricFamily>& out) const;

  std::string proc_root_;
  std::unique_ptr<NvmlLibrary> nvml_;
  double seconds_per_tick_;  // 1 / sysconf(_SC_CLK_TCK): /proc/stat counts in ticks
};

}  // namespace bakeoff::worker
