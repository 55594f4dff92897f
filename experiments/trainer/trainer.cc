#include "experiments/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <set>

#include <unistd.h>

#include "experiments/trainer/communicator_factory.h"
#include "experiments/trainer/data_source.h"
#include "experiments/trainer/graphed_micro_batch.h"
#include "experiments/trainer/hardware_defaults.h"
#include "experiments/trainer/lora_model.h"
#include "experiments/trainer/sandbox_path.h"
#include "experiments/trainer/process_stats.h"
#include "experiments/trainer/torch_compat.h"
#include "experiments/trainer/zero_optimizer.h"
#include "protocol/version.h"

namespace bakeoff::trainer {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Settings this device or build cannot run; the sweep records them as `unsupported`.
std::optional<std::string> UnsupportedReason(const TrainerConfig& c) {
  if (c.device == "cuda" && !compat::CudaAvailable()) {
    return "device cuda: " + compat::CudaUnavailableReason();
  }
  if (c.device == "cpu" && c.uses_cudagraph()) {
    return "compile_mode " + c.compile_mode + ": CUDA graphs need a CUDA device; this trial runs on cpu";
  }
  if (c.device == "cuda" && c.uses_cudagraph()) {
    // The graph holds one micro-batch's forward and backward over fixed buffers
    // (graphed_micro_batch.h); these settings need work between or inside them that a
    // graph cannot hold.
    const std::string mode = "compile_mode " + c.compile_mode + ": ";
    if (c.zero_stage >= 2) {
      return mode + "the captured backward writes fixed gradient buffers; ZeRO stage " +
             std::to_string(c.zero_stage) + " reduce-scatters and frees them after every micro-batch";
    }
    if (c.dynamic_shapes) return mode + "a CUDA graph replays one shape; dynamic_shapes changes it";
    if (c.grad_checkpointing && c.lora_dropout > 0) {
      return mode + "recomputing dropout restores the RNG state, which a captured graph cannot";
    }
  }
  if (c.device == "cpu" && c.offload != "none") {
    return "offload " + c.offload + ": offloading moves state from a device to the host; on a "
           "cpu device it is meaningless";
  }
  if (c.offload == "parameters" && c.zero_stage != 3) {
    return "offload parameters: only ZeRO stage 3 shards parameters; this trial has zero_stage " +
           std::to_string(c.zero_stage);
  }
  return std::nullopt;
}

// Times one forward pass of the model's projections (the products every step runs most)
// both ways at bf16, rows = micro_batch x seq_len; the backward runs the same shapes.
std::optional<Bf16Timing> CalibrateBf16Matmul(const TrainerConfig& c) {
  torch::NoGradGuard no_grad;
  const auto& d = c.dims;
  const int64_t rows = c.micro_batch * c.seq_len;
  auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
  auto x = torch::randn({rows, d.dim}, bf16);
  auto h = torch::randn({rows, d.ffn_dim}, bf16);
  // [out, in] as the model stores them: q/o, k/v, gate/up, down.
  std::vector<std::pair<torch::Tensor, const torch::Tensor*>> products = {
      {torch::randn({d.dim, d.dim}, bf16), &x},
      {torch::randn({d.kv_heads * d.head_dim(), d.dim}, bf16), &x},
      {torch::randn({d.ffn_dim, d.dim}, bf16), &x},
      {torch::randn({d.dim, d.ffn_dim}, bf16), &h}};
  auto pass = [&](bool widen) {
    for (const auto& [w, in] : products) {
      auto y = widen ? MatmulViaFp32(*in, w.t()) : torch::matmul(*in, w.t());
      (void)y;
    }
  };
  return CalibrateBf16([&] { pass(false); }, [&] { pass(true); }, [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  });
}

std::string HostName() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

nlohmann::json NullIfEmpty(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

// What the trial ran on (docs/trainer.md, "environment"): compared trials that differ
// here are flagged by the report.
nlohmann::json Environment(const CpuInfo& cpu, const BlasInfo& blas, const torch::Device& device) {
  const auto gpu = compat::DescribeGpu(device);
  return {{"host", NullIfEmpty(HostName())},
          {"cpu_model", NullIfEmpty(cpu.model)},
          {"cpu_flags", cpu.KernelFlags()},
          {"usable_cpus", cpu.usable_cpus},
          {"usable_cores", cpu.usable_cores},
          {"torch_version", compat::TorchVersion()},
          {"cuda_version", gpu ? nlohmann::json(gpu->cuda_runtime) : nlohmann::json()},
          {"gpu_model", gpu ? nlohmann::json(gpu->model) : nlohmann::json()},
          {"gpu_driver", gpu ? nlohmann::json("CUDA " + gpu->driver + " (driver API)") : nlohmann::json()},
          {"blas", NullIfEmpty(blas.name)},
          {"bakeoff_version", std::string(kBakeoffVersion) + "+" + kBakeoffGitCommit}};
}

// The rank's device: its local rank's GPU (modulo the GPUs there are), or the CPU.
torch::Device RankDevice(const TrainerConfig& c) {
  return c.device == "cuda"
             ? torch::Device(torch::kCUDA, static_cast<int>(c.local_rank % compat::CudaDeviceCount()))
             : torch::Device(torch::kCPU);
}

// The planted slowdown (a test instrument): the step lasts (1 + x) times its work.
// Padded with small matrix products until then, not a sleep (which overshoots by tens
// of microseconds on a step of a few milliseconds) nor an idle spin (which loads a
// sibling core less than the step's own arithmetic does, so a trial running beside
// it would speed up and the planted effect would arrive smaller than x).
void PadForSlowdown(std::chrono::steady_clock::time_point start, double slowdown, const torch::Device& device) {
  const double until_s = Since(start) * (1 + slowdown);
  const torch::Tensor pad = torch::ones({64, 64}, torch::TensorOptions().device(device));
  while (Since(start) < until_s) {
    torch::mm(pad, pad);
    compat::Synchronize(device);
  }
}

}  // namespace

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

double LearningRate(const TrainerConfig& c, int64_t step, int64_t total) {
  if (c.lr_warmup_steps > 0 && step < c.lr_warmup_steps) {
    return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.lr_warmup_steps);
  }
  if (c.lr_schedule == "cosine") {
    const double span = std::max<int64_t>(1, total - c.lr_warmup_steps);
    const double progress = static_cast<double>(step - c.lr_warmup_steps) / span;
    return c.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
  }
  return c.lr;
}

Trainer::Trainer(TrainerConfig config, EventWriter* events)
    : config_(std::move(config)), events_(events) {}

int Trainer::Run() {
  try {
    return RunOrThrow();
  } catch (const std::exception& e) {
    if (compat::IsOutOfMemory(e)) return events_->Error("oom", std::string("out of memory: ") + e.what());
    return events_->Error("failed", e.what());
  }
}

// What was decided and set up for the machine this rank runs on.
struct Trainer::Machine {
  CpuInfo cpu;
  nlohmann::json decisions = nlohmann::json::object();  // applied.decisions: value and reason each
  std::string fuser;
  std::string jit_executor;  // empty unless a JIT mode runs
  std::string host_allocator;
};

// What a run trains with, declared in build order so that it is torn down in reverse:
// the graph before the model it replays, the communicator last.
struct Trainer::Parts {
  std::unique_ptr<Communicator> comm;
  std::optional<DataSource> data;
  std::optional<LoraModel> model;
  std::optional<ZeroOptimizer> optimizer;
  ParameterCounts counts;
  double flops_per_token = 0;
  // One micro-batch's forward and backward: run as is, or captured and replayed.
  std::function<torch::Tensor(const torch::Tensor&)> forward_backward;
  std::unique_ptr<GraphedMicroBatch> graphed;
};

// What the summary needs from the steps.
struct Trainer::StepTotals {
  double first_step_s = 0;
  double warmup_s = 0;
  std::vector<double> measured_step_s;
  int64_t measured_tokens = 0;
  double comm_s_measured = 0;
  int64_t comm_bytes_measured = 0;
  std::set<int64_t> seq_lengths;  // distinct shapes run (one unless dynamic_shapes)
};

// One optimizer step, as its "step" event reports it.
struct Trainer::StepFigures {
  double step_s = 0;
  int64_t tokens = 0;  // global: every rank's micro-step has the same length
  double loss = 0;     // the global mean
  double lr = 0;
  double grad_norm = 0;
  CommStats comm;  // the step's own communication, not the loss's all-reduce
};

int Trainer::RunOrThrow() {
  if (auto reason = UnsupportedReason(config_)) return events_->Error("unsupported", *reason);
  Machine machine = DecideForThisMachine();
  // Seeded after the bf16 calibration, so that its random matrices do not shift the run's.
  torch::manual_seed(static_cast<uint64_t>(config_.seed) + static_cast<uint64_t>(config_.rank));
  const torch::Device device = RankDevice(config_);
  if (auto failed = ConfigureRuntime(device, machine)) return *failed;
  Parts parts;
  if (auto failed = Connect(device, parts)) return *failed;
  if (auto failed = BuildModel(device, parts)) return *failed;
  const nlohmann::json environment = AnnounceReady(machine, device, parts);
  const double startup_s = SecondsSinceProcessStart();
  StepTotals totals;
  // Warm-up steps are reported like the others but left out of the measured figures.
  const int64_t warmup_end = config_.warmup_steps, end = warmup_end + config_.steps;
  // Lockstep: the warm-up (and so any compilation) is one turn, run alone; each measured
  // step is a turn of its own (RunSteps). An error event ends the turns with the run.
  if (warmup_end > 0) turns_.Acquire(/*warmup=*/true);
  if (auto failed = RunSteps(0, warmup_end, device, parts, totals)) return EndTurns(*failed);
  if (auto failed = RunSteps(warmup_end, end, device, parts, totals)) return EndTurns(*failed);
  turns_.End();
  if (auto failed = WriteAdapters(*parts.model)) return *failed;
  return WriteSummary(machine, device, parts, totals, environment, startup_s);
}

Trainer::Machine Trainer::DecideForThisMachine() {
  Machine machine;
  machine.cpu = DetectCpuInfo();
  const CpuInfo& cpu = machine.cpu;
  const bool cuda = config_.device == "cuda";
  const char* pinned = std::getenv("BAKEOFF_RANK_CPUS");
  Decision threads = DecideThreads(config_.threads, cpu, config_.local_world_size, pinned ? pinned : "");
  if (std::getenv("BAKEOFF_CORES_SHARED")) threads.reason += "; cores shared with other trials (worker --share-cores)";
  config_.threads = std::stoll(threads.value);
  torch::set_num_threads(static_cast<int>(config_.threads));
  // OpenBLAS's pthread build keeps its own pool, which set_num_threads does not govern.
  SetBlasThreads(static_cast<int>(config_.threads));
  machine.decisions["threads"] = threads.ToJson();
  if (config_.precision == "bf16") {
    std::optional<Bf16Timing> timing;
    if (!cuda && config_.bf16_matmul == "auto") timing = CalibrateBf16Matmul(config_);
    const Decision bf16 = DecideBf16Matmul(config_.bf16_matmul, cuda, cpu, timing);
    config_.bf16_matmul = bf16.value;
    machine.decisions["bf16_matmul"] = bf16.ToJson();
  }
  return machine;
}

std::optional<int> Trainer::ConfigureRuntime(const torch::Device& device, Machine& machine) {
  const TrainerConfig& c = config_;
  machine.fuser = c.uses_jit() ? compat::ConfigureFuser(device) : "off (eager)";
  if (c.uses_jit()) {
    const Decision executor = DecideJitExecutor(c.jit_executor, device.is_cuda());
    machine.jit_executor = executor.value;
    compat::SetJitExecutor(machine.jit_executor == "profiling");
    machine.decisions["jit_executor"] = executor.ToJson();
  }
  auto host_allocator = ConfigureHostAllocator(c.host_allocator == "retain");
  if (!host_allocator.ok()) return events_->Error("failed", host_allocator.status().ToString());
  machine.host_allocator = *host_allocator;
  machine.decisions["host_allocator"] =
      Decision{c.host_allocator, c.host_allocator == "retain" ? "default: freed host memory stays mapped "
                                                                "(no page faults in the steady state)"
                                                              : "requested"}
          .ToJson();
  return std::nullopt;
}

std::optional<int> Trainer::Connect(const torch::Device& device, Parts& parts) {
  auto comm = CreateCommunicator(config_, device);
  if (!comm.ok()) {
    // A store port taken by another process is the machinery's failure, not the variant's.
    const bool port_taken = comm.status().code() == Status::Code::kResourceExhausted;
    return events_->Error(port_taken ? "infrastructure" : "failed", comm.status().ToString());
  }
  parts.comm = std::move(comm).value();
  return std::nullopt;
}

std::optional<int> Trainer::BuildModel(const torch::Device& device, Parts& parts) {
  const TrainerConfig& c = config_;
  auto data = DataSource::Open(c);
  if (!data.ok()) return events_->Error("failed", data.status().ToString());
  parts.data.emplace(std::move(data).value());
  parts.model.emplace(c, device, parts.comm.get());
  parts.optimizer.emplace(c, &parts.model->adapters(), parts.comm.get());
  parts.counts = CountParameters(c.dims, c.lora_rank, c.lora_targets);
  parts.flops_per_token = TrainingFlopsPerToken(c.dims, parts.counts, c.seq_len);
  parts.forward_backward = MicroBatchForwardBackward(&*parts.model, &*parts.optimizer, c.grad_accum);
  if (c.uses_cudagraph()) {
    parts.graphed = std::make_unique<GraphedMicroBatch>(MakeCudaStepGraph(device), parts.forward_backward);
  }
  return std::nullopt;
}

nlohmann::json Trainer::AnnounceReady(const Machine& machine, const torch::Device& device, const Parts& parts) {
  const TrainerConfig& c = config_;
  const BlasInfo blas = DetectBlas();
  nlohmann::json environment = Environment(machine.cpu, blas, device);
  events_->Write("ready", {{"config", c.ToJson()},
                           {"model", {{"dims", c.dims.ToJson()},
                                      {"frozen_params", parts.counts.frozen},
                                      {"trainable_params", parts.counts.trainable},
                                      {"flops_per_token", parts.flops_per_token}}},
                           {"rank", c.rank},
                           {"world_size", c.world_size},
                           {"device", device.str()},
                           {"threads", torch::get_num_threads()},
                           {"blas", blas.name},
                           {"blas_path", blas.path},
                           {"blas_threads", blas.threads},
                           {"torch_version", compat::TorchVersion()},
                           {"comm_backend", parts.comm->backend()},
                           {"environment", environment},
                           {"comm_address", parts.comm->local_address()},
                           {"startup_s", SecondsSinceProcessStart()}});
  return environment;
}

std::optional<int> Trainer::RunSteps(int64_t first, int64_t end, const torch::Device& device, Parts& parts,
                                     StepTotals& totals) {
  for (int64_t step = first; step < end; ++step) {
    const bool warmup = step < config_.warmup_steps;
    // A measured step waits for its turn before its timer starts and gives it back after
    // the device was synchronised (and the loss all-reduced): waiting is never timed.
    const std::optional<std::int64_t> turn = warmup ? std::nullopt : turns_.Acquire(/*warmup=*/false);
    const StepFigures f = RunStep(step, device, parts, totals.seq_lengths);
    if (!warmup) turns_.Release();
    const auto mem = compat::GetDeviceMemory(device);
    const int64_t peak = device.is_cuda() ? mem.peak_allocated_bytes : PeakRssBytes();
    nlohmann::json fields = {{"step", step},
                             {"phase", warmup ? "warmup" : "measure"},
                             {"step_s", f.step_s},
                             {"tokens", f.tokens},
                             {"loss", f.loss},
                             {"lr", f.lr},
                             {"grad_norm", f.grad_norm},
                             {"peak_mem_bytes", peak},
                             {"rss_bytes", CurrentRssBytes()},
                             {"device_allocated_bytes", mem.allocated_bytes},
                             {"device_reserved_peak_bytes", mem.peak_reserved_bytes},
                             {"comm_s", f.comm.seconds},
                             {"comm_bytes", f.comm.bytes},
                             {"comm_calls", f.comm.calls}};
    if (turn) fields["turn"] = *turn;  // the group's turn number: the report pairs adjacent steps
    events_->Write("step", std::move(fields));
    if (!std::isfinite(f.loss) || !std::isfinite(f.grad_norm)) {
      return events_->Error("diverged", "loss " + std::to_string(f.loss) + " at step " +
                                            std::to_string(step) + " is not finite");
    }
    if (step == 0) totals.first_step_s = f.step_s;
    if (warmup) {
      totals.warmup_s += f.step_s;
    } else {
      totals.measured_step_s.push_back(f.step_s);
      totals.measured_tokens += f.tokens;
      totals.comm_s_measured += f.comm.seconds;
      totals.comm_bytes_measured += f.comm.bytes;
    }
  }
  return std::nullopt;
}

Trainer::StepFigures Trainer::RunStep(int64_t step, const torch::Device& device, Parts& parts,
                                      std::set<int64_t>& seq_lengths) {
  const TrainerConfig& c = config_;
  StepFigures f;
  parts.comm->ResetStats();
  const auto start = std::chrono::steady_clock::now();
  parts.optimizer->BeginStep();
  double loss_sum = 0;
  for (int64_t micro = 0; micro < c.grad_accum; ++micro) {
    auto tokens = parts.data->Batch(step * c.grad_accum + micro).to(device);
    seq_lengths.insert(tokens.size(1) - 1);
    f.tokens += tokens.size(0) * (tokens.size(1) - 1) * c.world_size;
    const torch::Tensor loss = parts.graphed ? parts.graphed->Run(tokens) : parts.forward_backward(tokens);
    ThrowIfError(parts.optimizer->AfterBackward());
    loss_sum += loss.item<double>();
  }
  f.lr = LearningRate(c, step, c.warmup_steps + c.steps);
  auto grad_norm = parts.optimizer->Step(f.lr);
  ThrowIfError(grad_norm.status());
  f.grad_norm = *grad_norm;
  compat::Synchronize(device);
  if (c.test_slowdown > 0) PadForSlowdown(start, c.test_slowdown, device);
  f.step_s = Since(start);
  f.comm = parts.comm->stats();

  // The global mean loss, outside the timed step and its communication figures.
  auto loss_tensor = torch::tensor({loss_sum / static_cast<double>(c.grad_accum)}, torch::kFloat64).to(device);
  ThrowIfError(parts.comm->AllReduceSum(loss_tensor));
  f.loss = loss_tensor.item<double>() / static_cast<double>(c.world_size);
  return f;
}

std::optional<int> Trainer::WriteAdapters(LoraModel& model) {
  const TrainerConfig& c = config_;
  if (c.adapters_out.empty() || c.rank != 0) return std::nullopt;
  auto flat = model.adapters().flat().narrow(0, 0, model.adapters().numel()).to(torch::kCPU).contiguous();
  // Only inside the output directory the launcher gave (the trial's, under a worker).
  auto fd = OpenForWriting(c.output_dir, c.adapters_out);
  if (!fd.ok()) return events_->Error("failed", "adapters_out: " + fd.status().message());
  const char* data = static_cast<const char*>(flat.data_ptr());
  std::size_t left = flat.nbytes();
  while (left > 0) {
    const ssize_t n = write(*fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(*fd);
      return events_->Error("failed", "adapters_out: cannot write \"" + c.adapters_out + "\": " +
                                          std::strerror(errno));
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  close(*fd);
  return std::nullopt;
}

nlohmann::json Trainer::Applied(const Machine& machine, const torch::Device& device, Parts& parts,
                                std::size_t seq_lengths) {
  const TrainerConfig& c = config_;
  LoraModel& model = *parts.model;
  // A graph that was never captured (fewer micro-batches than its warm-up) did not run.
  const bool graph_ran = parts.graphed && parts.graphed->captured();
  std::string applied_mode = c.uses_jit() ? "jit" : "eager";
  if (graph_ran) applied_mode = c.uses_jit() ? "jit+cudagraph" : "cudagraph";
  nlohmann::json applied = {{"compile_mode", applied_mode},
                            {"cuda_graph", parts.graphed ? parts.graphed->Evidence() : nlohmann::json()},
                            {"compile_scope", c.uses_jit() ? nlohmann::json(c.compile_scope) : nlohmann::json()},
                            {"fuser", machine.fuser},
                            {"jit_executor", c.uses_jit() ? nlohmann::json(machine.jit_executor) : nlohmann::json()},
                            {"precision", model.compute_dtype() == torch::kBFloat16 ? "bf16" : "fp32"},
                            {"host_allocator", machine.host_allocator},
                            {"bf16_matmul", model.compute_dtype() != torch::kBFloat16 ? nlohmann::json()
                                            : model.math().options().bf16_matmul_via_fp32 ? nlohmann::json("fp32")
                                                                                          : nlohmann::json("native")},
                            {"threads", c.threads},
                            {"grad_checkpointing", c.grad_checkpointing},
                            {"dynamic_shapes", c.dynamic_shapes},
                            {"seq_lengths", seq_lengths},
                            {"recompute_blocks", model.recompute()},
                            {"zero_stage", c.zero_stage},
                            {"offload", c.offload},
                            {"comm_backend", parts.comm->backend()},
                            {"reduce_scatter", parts.comm->reduce_scatter_note()},
                            {"world_size", parts.comm->world_size()},
                            {"decisions", machine.decisions}};
  applied.update(model.runner().Evidence(device.is_cpu()));
  return applied;
}

int Trainer::WriteSummary(const Machine& machine, const torch::Device& device, Parts& parts,
                          const StepTotals& totals, const nlohmann::json& environment, double startup_s) {
  const TrainerConfig& c = config_;
  LoraModel& model = *parts.model;
  const ZeroOptimizer& optimizer = *parts.optimizer;
  const std::vector<double>& measured_step_s = totals.measured_step_s;
  const double median = Percentile(measured_step_s, 0.5);
  // Tokens of a step: fixed, or with dynamic_shapes their mean over the measured steps.
  const double tokens_per_step = measured_step_s.empty() ? static_cast<double>(c.tokens_per_step())
                                                         : static_cast<double>(totals.measured_tokens) /
                                                               static_cast<double>(measured_step_s.size());
  const double tokens_per_s = tokens_per_step / median;
  const double flops_per_s = parts.flops_per_token * tokens_per_s;
  const auto mem = compat::GetDeviceMemory(device);
  const double measured = static_cast<double>(measured_step_s.size());
  const nlohmann::json applied = Applied(machine, device, parts, totals.seq_lengths.size());
  events_->Write("summary",
                 {{"startup_s", startup_s},
                  {"first_step_s", totals.first_step_s},
                  {"warmup_s", totals.warmup_s},
                  {"step_s_median", median},
                  {"step_s_p10", Percentile(measured_step_s, 0.1)},
                  {"step_s_p90", Percentile(measured_step_s, 0.9)},
                  {"tokens_per_s", tokens_per_s},
                  {"flops_per_s", flops_per_s},
                  {"mfu", c.peak_flops > 0 ? nlohmann::json(flops_per_s / (c.peak_flops * c.world_size))
                                           : nlohmann::json()},
                  {"peak_mem_bytes", device.is_cuda() ? mem.peak_allocated_bytes : PeakRssBytes()},
                  {"peak_reserved_bytes", mem.peak_reserved_bytes},
                  {"peak_rss_bytes", PeakRssBytes()},
                  {"frozen_bytes", model.frozen().held_bytes() + model.frozen().peak_gathered_bytes()},
                  {"frozen_shard_bytes", model.frozen().held_bytes()},
                  {"frozen_gathered_peak_bytes", model.frozen().peak_gathered_bytes()},
                  {"trainable_bytes", optimizer.trainable_bytes()},
                  {"grad_bytes", optimizer.grad_bytes()},
                  {"optimizer_bytes", optimizer.optimizer_bytes()},
                  {"comm_s_per_step", measured > 0 ? totals.comm_s_measured / measured : 0},
                  {"comm_bytes_per_step", measured > 0 ? totals.comm_bytes_measured / measured : 0},
                  {"offload_copy_s", optimizer.offload_copy_s() + model.frozen().offload_copy_s()},
                  {"tokens_per_step", tokens_per_step},
                  {"rank", c.rank},
                  {"environment", environment},
                  {"applied", applied}});
  return kExitSucceeded;
}

}  // namespace bakeoff::trainer
