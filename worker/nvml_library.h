// NvmlLibrary: the few NVML calls Bakeoff's node metrics need (device count, name,
// utilisation, memory), bound at run time with dlopen so that the worker neither links
// nor requires the NVIDIA driver: on a node without libnvidia-ml Load fails with
// kNotFound and the caller exports no GPU series. Declares NVML's C ABI itself (a
// handful of stable symbols) instead of including nvml.h, which is not installed on
// CPU-only build machines.
// Thread-safety: NVML is thread-safe; an NvmlLibrary is immutable after Load, so Sample
// may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "protocol/status.h"

namespace bakeoff::worker {

struct GpuSample {
  std::string name;                    // e.g. "NVIDIA H100 80GB HBM3"
  double utilization_ratio = 0;        // busy fraction of the last sample period, 0..1
  std::uint64_t memory_used_bytes = 0;
  std::uint64_t memory_total_bytes = 0;
};

class NvmlLibrary {
 public:
  // The driver's soname; a worker flag (--nvml-library) may name another file.
  static constexpr const char* kDefaultPath = "libnvidia-ml.so.1";

  // dlopens `path` and calls nvmlInit. kNotFound when the library or a symbol is
  // missing; kUnavailable when nvmlInit fails (driver not loaded).
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);
  ~NvmlLibrary();  // nvmlShutdown, dlclose

  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // Devices NVML sees (its own index order, PCI bus order), 0 on error.
  unsigned DeviceCount() const;
  // One device's figures; an error names the call that failed.
  Result<GpuSample> Sample(unsigned index) const;

 private:
  struct Api;
  NvmlLibrary(void* handle, std::unique_ptr<Api> api);

  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

}  // namespace bakeoff::worker
