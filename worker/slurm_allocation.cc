#include "worker/slurm_allocation.h"

#include <charconv>

namespace bakeoff::worker {
namespace {

std::string Get(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* value = getenv(name);
  return value ? std::string(value) : std::string();
}

// "0,1,3" -> {0,1,3}; Slurm may also write ranges ("0-3") in SLURM_JOB_GPUS.
Result<std::vector<int>> ParseOrdinals(const std::string& variable, const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    int first = 0, last = 0;
    const std::size_t dash = item.find('-');
    const std::string a = item.substr(0, dash);
    const std::string b = dash == std::string::npos ? a : item.substr(dash + 1);
    auto ra = std::from_chars(a.data(), a.data() + a.size(), first);
    auto rb = std::from_chars(b.data(), b.data() + b.size(), last);
    if (ra.ec != std::errc() || ra.ptr != a.data() + a.size() || rb.ec != std::errc() ||
        rb.ptr != b.data() + b.size() || first < 0 || last < first || last - first > 1024) {
      return Status::InvalidArgument(variable + "=\"" + text + "\" is not a list of GPU ordinals (e.g. 0,1 or 0-3); " +
                                     "give the worker --cuda-devices");
    }
    for (int d = first; d <= last; ++d) out.push_back(d);
  }
  return out;
}

}  // namespace

Result<SlurmAllocation> ReadSlurmAllocation(const std::function<const char*(const char*)>& getenv) {
  SlurmAllocation a;
  a.job_id = Get(getenv, "SLURM_JOB_ID");
  if (a.job_id.empty()) return a;
  a.node_name = Get(getenv, "SLURMD_NODENAME");
  if (a.node_name.empty()) a.node_name = Get(getenv, "SLURM_TOPOLOGY_ADDR");
  for (const char* variable : {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    std::string value = Get(getenv, variable);
    if (value.empty()) continue;
    // Slurm writes "NoDevFiles" into CUDA_VISIBLE_DEVICES when the GRES has no devices.
    if (value == "NoDevFiles") continue;
    auto gpus = ParseOrdinals(variable, value);
    if (!gpus.ok()) return gpus.status();
    a.gpus = std::move(gpus).value();
    a.gpus_source = variable;
    break;
  }
  return a;
}

void ApplySlurmAllocation(const SlurmAllocation& allocation, const ExplicitWorkerFlags& given, bool slots_given,
                          WorkerConfig& config) {
  if (!allocation.present()) return;
  config.slurm_job_id = allocation.job_id;
  if (!given.name) {
    const std::string node = allocation.node_name.empty() ? std::string("slurm") : allocation.node_name;
    config.name = node + "-" + allocation.job_id;
    if (config.name.size() > protocol::kMaxWorkerNameBytes) config.name = "slurm-" + allocation.job_id;
  }
  if (!given.host && !allocation.node_name.empty()) config.advertise_host = allocation.node_name;
  if (!given.cuda_devices && !allocation.gpus.empty()) {
    config.cuda_devices = allocation.gpus;
    if (!slots_given) config.cpu_slots = 0;
  }
}

}  // namespace bakeoff::worker
