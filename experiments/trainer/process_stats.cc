#include "experiments/trainer/process_stats.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <ATen/Context.h>
#include <ATen/Parallel.h>

namespace bakeoff::trainer {
namespace {

int64_t StatusFieldKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream s(line.substr(field.size() + 1));
      int64_t kb = 0;
      s >> kb;
      return kb;
    }
  }
  return 0;
}

}  // namespace

int64_t CurrentRssBytes() { return StatusFieldKb("VmRSS") * 1024; }
int64_t PeakRssBytes() { return StatusFieldKb("VmHWM") * 1024; }

double SecondsSinceProcessStart() {
  std::ifstream stat("/proc/self/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Field 22 (starttime, clock ticks after boot) counts from after the command name,
  // which may contain spaces: parse from the last ')'.
  auto close = content.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(content.substr(close + 2));
  std::string f;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> f; ++i) {
    if (i == 22) start_ticks = std::stoull(f);
  }
  std::ifstream uptime_file("/proc/uptime");
  double uptime = 0;
  uptime_file >> uptime;
  return uptime - static_cast<double>(start_ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

BlasInfo DetectBlas() {
  BlasInfo info;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.find("libblas.so") != std::string::npos || path.find("libopenblas") != std::string::npos ||
        path.find("libmkl") != std::string::npos) {
      info.path = path;
      break;
    }
  }
  if (info.path.find("openblas-pthread") != std::string::npos) info.name = "openblas-pthread";
  else if (info.path.find("openblas-openmp") != std::string::npos) info.name = "openblas-openmp";
  else if (info.path.find("openblas") != std::string::npos) info.name = "openblas";
  else if (info.path.find("mkl") != std::string::npos) info.name = "mkl";
  else if (info.path.find("blas/libblas") != std::string::npos) info.name = "reference (slow: run scripts/setup)";
  else if (info.path.empty() && at::hasMKL()) {
    // The PyPI wheels link MKL into libtorch_cpu, threaded by its OpenMP, which
    // torch::set_num_threads governs.
    info.name = "mkl (in libtorch_cpu, OpenMP)";
    info.path = "libtorch_cpu";
    info.threads = at::get_num_threads();
  } else info.name = info.path.empty() ? "none found" : "unknown";
  using GetThreads = int (*)();
  if (auto fn = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) {
    info.threads = fn();
  }
  return info;
}

void SetBlasThreads(int threads) {
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads);
  }
}

Status CapHostMemory(int64_t bytes) {
  if (bytes <= 0) return Status::Ok();
  rlimit limit{static_cast<rlim_t>(bytes), static_cast<rlim_t>(bytes)};
  if (setrlimit(RLIMIT_AS, &limit) != 0) {
    return Status::InvalidArgument(std::string("max_host_memory: setrlimit failed: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Result<std::string> ConfigureHostAllocator(bool retain) {
  if (!retain) return std::string("system (glibc defaults)");
#ifdef __GLIBC__
  constexpr int kMmapThreshold = 32 << 20;  // glibc's maximum on 64-bit
  // -1: never trim the heap's top. Either call fails only for out-of-range values.
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, -1) != 1) {
    return Status::Internal("host_allocator: mallopt refused the retain settings");
  }
  return std::string("retain (glibc: no trimming, mmap only above 32 MiB)");
#else
  return std::string("system (not glibc: retain unavailable)");
#endif
}

}  // namespace bakeoff::trainer
