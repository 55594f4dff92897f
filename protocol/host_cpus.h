// This host's CPUs as a process sees them: its affinity mask and /proc/cpuinfo's text.
// The worker deals cores out of them (worker/core_partition.h); the trainer sizes its
// threads and reads the CPU's flags from them (experiments/trainer/hardware_defaults.h).
// Header-only and free of Boost and LibTorch, like host_network.h, because the
// trainer-only build uses it too.
// Thread-safety: reentrant functions; each reads the kernel's current view.
#pragma once

#include <sched.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace bakeoff::protocol {

// This process's affinity mask, ascending ({} when the kernel does not answer).
inline std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  return cpus;
}

// /proc/cpuinfo's text ("" where there is none).
inline std::string ProcCpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace bakeoff::protocol
