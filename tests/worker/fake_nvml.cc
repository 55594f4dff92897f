// A stand-in for libnvidia-ml.so.1 with the NVML symbols worker/nvml_library.cc binds:
// two GPUs with fixed figures, so that the dlopen path, the GPU series and the Cluster
// dashboard's GPU panels are tested on machines without an NVIDIA driver.
// BAKEOFF_FAKE_NVML_INIT_FAILS=1 makes nvmlInit fail (driver not loaded).
#include <cstdlib>
#include <cstring>

namespace {
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kUninitialized = 1;
constexpr unsigned kDevices = 2;
int devices[kDevices];  // handles point here
}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* fails = std::getenv("BAKEOFF_FAKE_NVML_INIT_FAILS");
  return fails && std::strcmp(fails, "1") == 0 ? kUninitialized : kSuccess;
}
int nvmlShutdown() { return kSuccess; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = kDevices;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= kDevices) return kInvalidArgument;
  *device = &devices[index];
  return kSuccess;
}
int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  std::strncpy(name, "Bakeoff Fake GPU", length);
  if (length > 0) name[length - 1] = '\0';
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void* device, Utilization* utilization) {
  const unsigned index = static_cast<unsigned>(static_cast<int*>(device) - devices);
  utilization->gpu = 40 + 10 * index;  // 40 %, 50 %
  utilization->memory = 20;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  const unsigned index = static_cast<unsigned>(static_cast<int*>(device) - devices);
  memory->total = 80ull << 30;
  memory->used = (1ull + index) << 30;  // 1 GiB, 2 GiB
  memory->free = memory->total - memory->used;
  return kSuccess;
}

}  // extern "C"
