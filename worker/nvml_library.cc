#include "worker/nvml_library.h"

#include <dlfcn.h>

namespace bakeoff::worker {
namespace {

// NVML's C ABI (nvml.h, stable since CUDA 5): opaque device handles, int return codes
// (0 = NVML_SUCCESS) and these two structs.
using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu;     // percent of time a kernel ran
  unsigned int memory;  // percent of time memory was read or written
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kNameBytes = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

}  // namespace

struct NvmlLibrary::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*device_count)(unsigned int*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
};

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Status::NotFound("NVML: cannot load '" + path + "': " + (why ? why : "unknown error"));
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  auto bind = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
    if (!fn && missing.empty()) missing = symbol;
  };
  bind(api->init, "nvmlInit_v2");
  bind(api->shutdown, "nvmlShutdown");
  bind(api->device_count, "nvmlDeviceGetCount_v2");
  bind(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(api->utilization, "nvmlDeviceGetUtilizationRates");
  bind(api->memory, "nvmlDeviceGetMemoryInfo");
  bind(api->name, "nvmlDeviceGetName");
  if (!missing.empty()) {
    dlclose(handle);
    return Status::NotFound("NVML: '" + path + "' has no symbol " + missing);
  }
  if (NvmlReturn rc = api->init(); rc != kNvmlSuccess) {
    dlclose(handle);
    return Status::Unavailable("NVML: nvmlInit failed with code " + std::to_string(rc) +
                               " (is the NVIDIA driver loaded?)");
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, std::move(api)));
}

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

NvmlLibrary::~NvmlLibrary() {
  api_->shutdown();
  dlclose(handle_);
}

unsigned NvmlLibrary::DeviceCount() const {
  unsigned int count = 0;
  return api_->device_count(&count) == kNvmlSuccess ? count : 0;
}

Result<GpuSample> NvmlLibrary::Sample(unsigned index) const {
  NvmlDevice device = nullptr;
  if (NvmlReturn rc = api_->handle_by_index(index, &device); rc != kNvmlSuccess) {
    return Status::Unavailable("NVML: nvmlDeviceGetHandleByIndex(" + std::to_string(index) +
                               ") failed with code " + std::to_string(rc));
  }
  GpuSample sample;
  char name[kNameBytes] = {0};
  if (api_->name(device, name, kNameBytes) == kNvmlSuccess) sample.name = name;
  NvmlUtilization utilization{};
  if (NvmlReturn rc = api_->utilization(device, &utilization); rc != kNvmlSuccess) {
    return Status::Unavailable("NVML: nvmlDeviceGetUtilizationRates(" + std::to_string(index) +
                               ") failed with code " + std::to_string(rc));
  }
  sample.utilization_ratio = utilization.gpu / 100.0;
  NvmlMemory memory{};
  if (NvmlReturn rc = api_->memory(device, &memory); rc != kNvmlSuccess) {
    return Status::Unavailable("NVML: nvmlDeviceGetMemoryInfo(" + std::to_string(index) +
                               ") failed with code " + std::to_string(rc));
  }
  sample.memory_used_bytes = memory.used;
  sample.memory_total_bytes = memory.total;
  return sample;
}

}  // namespace bakeoff::worker
