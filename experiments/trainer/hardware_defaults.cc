#include "experiments/trainer/hardware_defaults.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "protocol/host_cpus.h"

namespace bakeoff::trainer {
namespace {

std::string Trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return std::string(s.substr(begin, end - begin + 1));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  return text;
}

}  // namespace

std::vector<std::string> CpuInfo::KernelFlags() const {
  static const char* kFlags[] = {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16",
                                 "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve"};
  std::vector<std::string> out;
  for (const char* f : kFlags) {
    if (Has(f)) out.push_back(f);
  }
  return out;
}

CpuInfo ParseCpuInfo(std::string_view text, const std::vector<int>& usable) {
  CpuInfo info;
  std::set<int> allowed(usable.begin(), usable.end());
  std::set<std::pair<int, int>> cores;
  int processors = 0;
  // One block per logical CPU: "processor", then its fields.
  int processor = -1, physical_id = 0, core_id = -1;
  auto close_block = [&] {
    if (processor < 0) return;
    if (!allowed.empty() && !allowed.count(processor)) return;
    ++processors;
    cores.insert({physical_id, core_id < 0 ? processor : core_id});
  };
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(std::string_view(line).substr(0, colon));
    const std::string value = Trim(std::string_view(line).substr(colon + 1));
    if (key == "processor") {
      close_block();
      processor = std::atoi(value.c_str());
      physical_id = 0;
      core_id = -1;
    } else if (key == "physical id") {
      physical_id = std::atoi(value.c_str());
    } else if (key == "core id") {
      core_id = std::atoi(value.c_str());
    } else if ((key == "model name" || key == "Model name") && info.model.empty()) {
      info.model = value;
    } else if ((key == "flags" || key == "Features") && info.flags.empty()) {
      std::istringstream words(value);
      std::string w;
      while (words >> w) info.flags.insert(w);
    }
  }
  close_block();
  info.usable_cpus = std::max(1, processors);
  info.usable_cores = std::max(1, static_cast<int>(cores.size()));
  return info;
}

CpuInfo DetectCpuInfo() {
  return ParseCpuInfo(protocol::ProcCpuinfo(), protocol::AllowedCpus());
}

Decision DecideBf16Matmul(const std::string& requested, bool cuda, const CpuInfo& cpu,
                          const std::optional<Bf16Timing>& timing) {
  if (cuda) {
    return {"native", requested == "fp32" ? "fp32 widening is a CPU path; CUDA runs bf16 products natively"
                                          : "CUDA runs bf16 products natively (tensor cores)"};
  }
  if (requested != "auto") return {requested, "requested"};
  if (timing) {
    const bool native = timing->native_s <= timing->fp32_s;
    return {native ? "native" : "fp32",
            "calibrated on this model's shapes: native " + Ms(timing->native_s) + ", fp32 widening " +
                Ms(timing->fp32_s) + " (median of " + std::to_string(timing->rounds) + ")"};
  }
  if (cpu.HasHardwareBf16()) {
    return {"native", "no calibration within its time budget; the CPU has hardware bf16 (" +
                          std::string(cpu.Has("amx_bf16") ? "amx_bf16" : "avx512_bf16") + ")"};
  }
  return {"fp32", "no calibration within its time budget; the CPU has no hardware bf16 "
                  "(neither avx512_bf16 nor amx_bf16)"};
}

std::optional<Bf16Timing> CalibrateBf16(const std::function<void()>& native,
                                        const std::function<void()>& fp32,
                                        const std::function<double()>& now_s,
                                        const CalibrationOptions& options) {
  const double start = now_s();
  native();  // untimed: first-call allocations and kernel selection
  fp32();
  std::vector<double> native_s, fp32_s;
  auto timed = [&](const std::function<void()>& fn, std::vector<double>* out) {
    const double t0 = now_s();
    fn();
    out->push_back(now_s() - t0);
  };
  for (int round = 0; round < options.max_rounds; ++round) {
    const double elapsed = now_s() - start;
    if (round >= options.min_rounds && elapsed >= options.budget_s) break;
    if (round < options.min_rounds && elapsed >= 3 * options.budget_s) return std::nullopt;
    // Alternate which goes first, so neither always runs on a cache the other warmed.
    if (round % 2 == 0) {
      timed(native, &native_s);
      timed(fp32, &fp32_s);
    } else {
      timed(fp32, &fp32_s);
      timed(native, &native_s);
    }
  }
  return Bf16Timing{Median(native_s), Median(fp32_s), static_cast<int>(native_s.size())};
}

Decision DecideJitExecutor(const std::string& requested, bool cuda) {
  if (requested != "auto") return {requested, "requested"};
  if (cuda) return {"profiling", "CUDA: the profiling executor feeds the fusers"};
  return {"legacy", "CPU: this LibTorch has no CPU fuser, so profiling would only add "
                    "type guards and re-profiled backward graphs"};
}

Decision DecideThreads(int64_t requested, const CpuInfo& cpu, int64_t local_world_size,
                       const std::string& pinned_cpus) {
  if (requested > 0) return {std::to_string(requested), "requested"};
  if (!pinned_cpus.empty()) {
    const int64_t threads = std::max<int64_t>(1, cpu.usable_cores);
    return {std::to_string(threads), std::to_string(cpu.usable_cores) + " physical core" +
                                         (cpu.usable_cores == 1 ? "" : "s") + " pinned to this rank alone (CPUs " +
                                         pinned_cpus + ", by the worker)"};
  }
  const int64_t ranks = std::max<int64_t>(1, local_world_size);
  const int64_t threads = std::max<int64_t>(1, cpu.usable_cores / ranks);
  return {std::to_string(threads), std::to_string(cpu.usable_cores) + " physical cores usable (" +
                                       std::to_string(cpu.usable_cpus) + " logical CPUs) shared by " +
                                       std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") +
                                       " on this host"};
}

}  // namespace bakeoff::trainer
