#include "worker/core_partition.h"

#include <sched.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace bakeoff::worker {
namespace {

std::vector<int> AllCpus(const std::vector<LogicalCpu>& cpus) {
  std::vector<int> out;
  for (const auto& c : cpus) out.push_back(c.cpu);
  return out;
}

}  // namespace

std::vector<LogicalCpu> ReadCpuTopology(const std::string& proc_cpuinfo, const std::vector<int>& allowed) {
  std::vector<LogicalCpu> out;
  std::istringstream in(proc_cpuinfo + "\n\n");
  std::string line, processor, physical = "0", core;
  auto flush = [&] {
    if (processor.empty()) return;
    const int cpu = std::atoi(processor.c_str());
    if (std::find(allowed.begin(), allowed.end(), cpu) != allowed.end()) {
      out.push_back(LogicalCpu{cpu, core.empty() ? "cpu" + processor : physical + ":" + core});
    }
    processor.clear();
    physical = "0";
    core.clear();
  };
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
      continue;
    }
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "processor") processor = value;
    if (key == "physical id") physical = value;
    if (key == "core id") core = value;
  }
  // CPUs /proc/cpuinfo does not list (a container's view): each its own core.
  for (int cpu : allowed) {
    bool listed = false;
    for (const auto& c : out) listed = listed || c.cpu == cpu;
    if (!listed) out.push_back(LogicalCpu{cpu, "cpu" + std::to_string(cpu)});
  }
  std::sort(out.begin(), out.end(), [](const LogicalCpu& a, const LogicalCpu& b) { return a.cpu < b.cpu; });
  return out;
}

std::vector<LogicalCpu> ReadHostCpuTopology(const std::vector<int>& allowed) {
  return ReadCpuTopology(protocol::ProcCpuinfo(), allowed);
}

Result<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto dash = part.find('-');
    char* end = nullptr;
    const long first = std::strtol(part.c_str(), &end, 10);
    long last = first;
    bool ok = !part.empty() && end != part.c_str();
    if (ok && dash != std::string::npos) {
      const char* tail = part.c_str() + dash + 1;
      last = std::strtol(tail, &end, 10);
      ok = end != tail && *end == '\0';
    } else {
      ok = ok && *end == '\0';
    }
    if (!ok || first < 0 || last < first || last >= CPU_SETSIZE) {
      return Status::InvalidArgument("CPU list \"" + text + "\": \"" + part +
                                     "\" is not a CPU number or FIRST-LAST range (e.g. 0-3,6)");
    }
    for (long c = first; c <= last; ++c) cpus.push_back(static_cast<int>(c));
  }
  if (cpus.empty()) return Status::InvalidArgument("CPU list \"" + text + "\" names no CPU (e.g. 0-3,6)");
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

Result<CorePartition> CorePartition::Make(const std::vector<LogicalCpu>& cpus, int slots, bool share_cores) {
  CorePartition p;
  if (slots <= 0) return p;
  if (share_cores) {  // the operator's choice: nothing pinned
    p.note_ = "--share-cores: ranks are not pinned and may share cores";
    return p;
  }
  // Physical cores in the order of their lowest CPU, each with its logical CPUs.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> by_core;
  for (const auto& c : cpus) {
    if (!by_core.count(c.core)) order.push_back(c.core);
    by_core[c.core].push_back(c.cpu);
  }
  int cores = static_cast<int>(order.size());
  if (cores < slots && static_cast<int>(cpus.size()) >= slots) {
    // Fewer cores than slots but enough logical CPUs: hyper-threads of one core go to
    // different slots (they share its vector units, but are never time-sliced).
    order.clear();
    by_core.clear();
    for (const auto& c : cpus) {
      order.push_back("cpu" + std::to_string(c.cpu));
      by_core[order.back()] = {c.cpu};
    }
    cores = static_cast<int>(order.size());
    p.note_ = "fewer physical cores than slots: slots own hyper-threads that share cores";
  }
  if (cores < slots) {
    return Status::InvalidArgument("worker: --slots " + std::to_string(slots) + " but only " +
                                   std::to_string(cores) + " physical core(s) to give them (CPUs " +
                                   FormatCpuList(AllCpus(cpus)) + "): ranks would share cores and slow each "
                                   "other down; lower --slots, give more --cpus, or pass --share-cores");
  }
  p.cores_per_slot_ = cores / slots;
  for (int s = 0; s < slots; ++s) {
    std::vector<int> mine;
    for (int k = 0; k < p.cores_per_slot_; ++k) {
      const auto& logical = by_core[order[static_cast<std::size_t>(s * p.cores_per_slot_ + k)]];
      mine.insert(mine.end(), logical.begin(), logical.end());
    }
    std::sort(mine.begin(), mine.end());
    p.slots_.push_back(std::move(mine));
  }
  p.busy_.assign(p.slots_.size(), false);
  return p;
}

std::optional<std::vector<std::size_t>> CorePartition::Acquire(int n) {
  std::vector<std::size_t> taken;
  if (!pinned()) return std::vector<std::size_t>(static_cast<std::size_t>(std::max(0, n)), 0);
  for (std::size_t i = 0; i < busy_.size() && static_cast<int>(taken.size()) < n; ++i) {
    if (!busy_[i]) taken.push_back(i);
  }
  if (static_cast<int>(taken.size()) < n) return std::nullopt;
  for (std::size_t i : taken) busy_[i] = true;
  return taken;
}

void CorePartition::Release(const std::vector<std::size_t>& taken) {
  if (!pinned()) return;
  for (std::size_t i : taken) {
    if (i < busy_.size()) busy_[i] = false;
  }
}

}  // namespace bakeoff::worker
