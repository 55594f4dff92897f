#include "worker/slurm_allocation.h"

#include <charconv>
#include <cstdint>

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
  if (std::string resv = Get(getenv, "SLURM_STEP_RESV_PORTS"); !resv.empty()) {
    // "12000-12003" or "12000"; of a list ("12000-12001,12005") the first range.
    resv = resv.substr(0, resv.find(','));
    auto ports = ParseOrdinals("SLURM_STEP_RESV_PORTS", resv);
    if (ports.ok() && !ports->empty() && ports->front() > 0 && ports->back() <= 65535) {
      a.store_ports = {ports->front(), ports->back()};
      a.store_ports_source = "SLURM_STEP_RESV_PORTS";
      return a;
    }
  }
  std::uint64_t job = 0;
  for (char c : a.job_id) {
    if (c < '0' || c > '9') break;  // an array job's "123_4": its base id
    job = job * 10 + static_cast<std::uint64_t>(c - '0');
  }
  const int windows = (29999 - 29500 + 1) / kStorePortWindow;
  const int first = 29500 + static_cast<int>(job % windows) * kStorePortWindow;
  a.store_ports = {first, first + kStorePortWindow - 1};
  a.store_ports_source = "the job id";
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
  if (!given.store_ports) config.store_ports = allocation.store_ports;
  if (!given.cuda_devices && !allocation.gpus.empty()) {
    config.cuda_devices = allocation.gpus;
    if (!slots_given) config.cpu_slots = 0;
  }
}

}  // namespace bakeoff::worker
