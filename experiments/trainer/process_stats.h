// Process-level facts the trainer reports: resident memory (current and peak), seconds
// since the process started (library loading included), which BLAS library is loaded
// and its thread count, and the self-imposed host memory cap. Linux /proc based.
// Thread-safety: free functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/status.h"

namespace bakeoff::trainer {

int64_t CurrentRssBytes();
int64_t PeakRssBytes();
// Seconds since this process was started by the kernel.
double SecondsSinceProcessStart();

struct BlasInfo {
  std::string name;  // "openblas-pthread", "reference", "mkl", ...
  std::string path;  // the shared object providing BLAS
  int threads = 0;   // 0 when the library does not say
};
BlasInfo DetectBlas();
// Sets OpenBLAS's thread count when OpenBLAS is the loaded BLAS.
void SetBlasThreads(int threads);

// Caps this process's address space at `bytes` (RLIMIT_AS), so that exhausting it is an
// allocation failure the trainer reports as `oom` instead of the host swapping or the
// kernel's OOM killer choosing a victim.
Status CapHostMemory(int64_t bytes);

// `retain` true: glibc malloc keeps freed memory mapped (no heap trimming; blocks up to 32 MiB,
// its largest threshold, come from the heap rather than fresh mmaps). A training step
// frees and reallocates the same activation sizes every step; with the defaults each step
// returns them to the kernel and page-faults them back in (measured: ~850 faults a step
// on `tiny`, none with `retain`). false: the C library's defaults. Call before any
// large allocation. Returns what was applied, for the summary's evidence.
Result<std::string> ConfigureHostAllocator(bool retain);

}  // namespace bakeoff::trainer
