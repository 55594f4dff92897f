// Hardware-dependent defaults: the trainer settings whose best value depends on the
// machine a trial runs on (how bf16 matrix products run on a CPU, TorchScript's graph
// executor, the thread counts), decided on that machine when the trial starts and
// recorded with the reason (`applied.decisions`, docs/trainer.md). The rules are pure
// functions of injected facts (CPU features, calibration timings, a clock), so they are
// tested without depending on the machine the tests run on. No LibTorch here.
// Thread-safety: pure functions, except the Detect* readers of /proc and /sys.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace bakeoff::trainer {

// What the trainer knows of the CPU it runs on.
struct CpuInfo {
  std::string model;            // "model name" of /proc/cpuinfo ("" when unknown)
  std::set<std::string> flags;  // the CPU's feature flags, as /proc/cpuinfo names them
  int usable_cpus = 1;          // logical CPUs this process may run on (its affinity)
  int usable_cores = 1;         // distinct physical cores among them

  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
  // Hardware bf16 dot products (AVX-512 BF16 or AMX-BF16): LibTorch's oneDNN kernels
  // use them for bf16 matrix products.
  bool HasHardwareBf16() const { return Has("avx512_bf16") || Has("amx_bf16"); }
  // The flags that decide kernel choice, in a fixed order (for the trial's environment).
  std::vector<std::string> KernelFlags() const;
};

// Parses /proc/cpuinfo text; `usable` lists the logical CPU numbers this process may
// use (empty: all processors listed). Cores are distinct (physical id, core id) pairs.
CpuInfo ParseCpuInfo(std::string_view proc_cpuinfo, const std::vector<int>& usable);
// Reads /proc/cpuinfo and the process's affinity mask.
CpuInfo DetectCpuInfo();

// One decided setting: the value that runs and why.
struct Decision {
  std::string value;
  std::string reason;
  nlohmann::json ToJson() const { return {{"value", value}, {"reason", reason}}; }
};

// Median seconds of one bf16 matrix-product pass on the model's shapes, each way.
struct Bf16Timing {
  double native_s = 0;  // LibTorch's bf16 kernels
  double fp32_s = 0;    // widened to fp32, fp32 BLAS, rounded to bf16
  int rounds = 0;       // timed runs of each
};

// bf16_matmul: `requested` is auto | native | fp32. CUDA always runs native. On a CPU,
// auto takes the faster path of `timing` (measured on this machine, the model's own
// shapes); without a timing (calibration over its time budget) it falls back to the
// CPU's features: native with hardware bf16, fp32 without.
Decision DecideBf16Matmul(const std::string& requested, bool cuda, const CpuInfo& cpu,
                          const std::optional<Bf16Timing>& timing);

// Times `native` and `fp32` alternately (ABAB..., so drift on a shared machine falls on
// both), at least `min_rounds` runs each and then while `budget_s` lasts, at most
// `max_rounds` each; one untimed run of each first (first-call allocations). Returns
// nullopt when even the minimum rounds overrun `3 * budget_s`: a calibration that slow
// says nothing reliable and costs too much start-up time. `now_s` is the clock.
struct CalibrationOptions {
  int min_rounds = 3;
  int max_rounds = 15;
  double budget_s = 0.5;
};
std::optional<Bf16Timing> CalibrateBf16(const std::function<void()>& native,
                                        const std::function<void()>& fp32,
                                        const std::function<double()>& now_s,
                                        const CalibrationOptions& options = {});

// jit_executor: auto -> profiling where a fuser can compile (CUDA), legacy on a CPU,
// where this LibTorch has no fuser and profiling only adds guards and re-profiling.
Decision DecideJitExecutor(const std::string& requested, bool cuda);

// threads: 0 (default) -> the usable physical cores shared among this host's ranks of
// the trial (at least 1): hyper-threads share one core's vector units, and ranks that
// each take every core oversubscribe it. The BLAS's own pool gets the same number.
// `pinned_cpus` (the worker's BAKEOFF_RANK_CPUS, "" when unset): the rank was pinned to
// its own cores, which its affinity already shows, so they are not shared by ranks.
Decision DecideThreads(int64_t requested, const CpuInfo& cpu, int64_t local_world_size,
                       const std::string& pinned_cpus = "");

}  // namespace bakeoff::trainer
