// CorePartition: which logical CPUs each of a worker's CPU slots owns, so that ranks
// running at once never share a physical core (docs/sweep.md, "Isolation"). A slot gets
// whole physical cores (every hyper-thread of a core goes to the same slot), the cores
// are dealt out in order. With fewer cores than slots, slots get single hyper-threads
// when there are enough; with fewer logical CPUs than slots the worker is refused unless
// its operator allows sharing (--share-cores: then nothing is pinned). Pure: the CPU topology comes in.
// Acquire and Release keep which slots are busy.
// Thread-safety: not thread-safe; the worker uses it on its executor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/host_cpus.h"
#include "protocol/status.h"

namespace bakeoff::worker {

// A logical CPU and the physical core it belongs to ("physical id:core id").
struct LogicalCpu {
  int cpu = 0;
  std::string core;
};

// The logical CPUs of `proc_cpuinfo` text that are in `allowed`, with their cores; a
// text without core ids gives each CPU its own core.
std::vector<LogicalCpu> ReadCpuTopology(const std::string& proc_cpuinfo, const std::vector<int>& allowed);
// ReadCpuTopology of this host's /proc/cpuinfo (no file: each allowed CPU its own core).
std::vector<LogicalCpu> ReadHostCpuTopology(const std::vector<int>& allowed);
// This process's affinity mask, ascending (protocol/host_cpus.h).
using protocol::AllowedCpus;
// "0-3,6" -> {0,1,2,3,6}; an error names the bad part.
Result<std::vector<int>> ParseCpuList(const std::string& text);
// {0,1,2,3,6} -> "0-3,6".
std::string FormatCpuList(const std::vector<int>& cpus);

class CorePartition {
 public:
  // Deals `cpus`' physical cores out to `slots` slots (each gets floor(cores/slots) whole
  // cores; the remainder stays unused); with fewer cores than slots, logical CPUs. With
  // fewer logical CPUs than slots: an error. `share_cores` (the operator's choice) pins
  // nothing (pinned() is false).
  static Result<CorePartition> Make(const std::vector<LogicalCpu>& cpus, int slots, bool share_cores);
  CorePartition() = default;

  bool pinned() const { return !slots_.empty(); }
  // The logical CPUs of slot `i`. REQUIRES: pinned(), i < slot count.
  const std::vector<int>& SlotCpus(std::size_t i) const { return slots_[i]; }
  std::size_t slot_count() const { return slots_.size(); }
  int cores_per_slot() const { return cores_per_slot_; }
  // What the partition could not keep apart ("" when every slot owns whole cores).
  const std::string& note() const { return note_; }

  // Takes `n` free slots (lowest first) and returns their indices; nullopt when fewer
  // are free (nothing is taken then). Without pinning it returns n empty indices.
  std::optional<std::vector<std::size_t>> Acquire(int n);
  void Release(const std::vector<std::size_t>& taken);

 private:
  std::vector<std::vector<int>> slots_;
  std::vector<bool> busy_;
  int cores_per_slot_ = 0;
  std::string note_;
};

}  // namespace bakeoff::worker
