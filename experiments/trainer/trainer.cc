#include "experiments/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
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

int Trainer::RunOrThrow() {
  if (auto reason = UnsupportedReason(config_)) return events_->Error("unsupported", *reason);

  // Settings whose best value depends on this machine are decided here, on it, and each
  // decision is recorded with its reason (applied.decisions). config_ then holds what runs.
  const CpuInfo cpu = DetectCpuInfo();
  const bool cuda = config_.device == "cuda";
  nlohmann::json decisions = nlohmann::json::object();
  const char* pinned = std::getenv("BAKEOFF_RANK_CPUS");
  Decision threads = DecideThreads(config_.threads, cpu, config_.local_world_size, pinned ? pinned : "");
  if (std::getenv("BAKEOFF_CORES_SHARED")) threads.reason += "; cores shared with other trials (worker --share-cores)";
  config_.threads = std::stoll(threads.value);
  torch::set_num_threads(static_cast<int>(config_.threads));
  // OpenBLAS's pthread build keeps its own pool, which set_num_threads does not govern.
  SetBlasThreads(static_cast<int>(config_.threads));
  decisions["threads"] = threads.ToJson();
  if (config_.precision == "bf16") {
    std::optional<Bf16Timing> timing;
    if (!cuda && config_.bf16_matmul == "auto") timing = CalibrateBf16Matmul(config_);
    const Decision bf16 = DecideBf16Matmul(config_.bf16_matmul, cuda, cpu, timing);
    config_.bf16_matmul = bf16.value;
    decisions["bf16_matmul"] = bf16.ToJson();
  }
  const TrainerConfig& c = config_;
  torch::manual_seed(static_cast<uint64_t>(c.seed) + static_cast<uint64_t>(c.rank));
  const torch::Device device =
      c.device == "cuda"
          ? torch::Device(torch::kCUDA, static_cast<int>(c.local_rank % compat::CudaDeviceCount()))
          : torch::Device(torch::kCPU);
  const std::string fuser = c.uses_jit() ? compat::ConfigureFuser(device) : "off (eager)";
  std::string jit_executor;
  if (c.uses_jit()) {
    const Decision executor = DecideJitExecutor(c.jit_executor, device.is_cuda());
    jit_executor = executor.value;
    compat::SetJitExecutor(jit_executor == "profiling");
    decisions["jit_executor"] = executor.ToJson();
  }
  auto host_allocator = ConfigureHostAllocator(c.host_allocator == "retain");
  if (!host_allocator.ok()) return events_->Error("failed", host_allocator.status().ToString());
  decisions["host_allocator"] =
      Decision{c.host_allocator, c.host_allocator == "retain" ? "default: freed host memory stays mapped "
                                                                "(no page faults in the steady state)"
                                                              : "requested"}
          .ToJson();

  auto comm_or = CreateCommunicator(c, device);
  if (!comm_or.ok()) {
    // A store port taken by another process is the machinery's failure, not the variant's.
    const bool port_taken = comm_or.status().code() == Status::Code::kResourceExhausted;
    return events_->Error(port_taken ? "infrastructure" : "failed", comm_or.status().ToString());
  }
  std::unique_ptr<Communicator> comm = std::move(comm_or).value();

  auto data = DataSource::Open(c);
  if (!data.ok()) return events_->Error("failed", data.status().ToString());
  LoraModel model(c, device, comm.get());
  ZeroOptimizer optimizer(c, &model.adapters(), comm.get());
  const ParameterCounts counts = CountParameters(c.dims, c.lora_rank, c.lora_targets);
  const double flops_per_token = TrainingFlopsPerToken(c.dims, counts, c.seq_len);
  // One micro-batch's forward and backward: run as is, or captured and replayed.
  const auto forward_backward = MicroBatchForwardBackward(&model, &optimizer, c.grad_accum);
  std::unique_ptr<GraphedMicroBatch> graphed;
  if (c.uses_cudagraph()) graphed = std::make_unique<GraphedMicroBatch>(MakeCudaStepGraph(device), forward_backward);
  const BlasInfo blas = DetectBlas();
  const nlohmann::json environment = Environment(cpu, blas, device);

  events_->Write("ready", {{"config", c.ToJson()},
                           {"model", {{"dims", c.dims.ToJson()},
                                      {"frozen_params", counts.frozen},
                                      {"trainable_params", counts.trainable},
                                      {"flops_per_token", flops_per_token}}},
                           {"rank", c.rank},
                           {"world_size", c.world_size},
                           {"device", device.str()},
                           {"threads", torch::get_num_threads()},
                           {"blas", blas.name},
                           {"blas_path", blas.path},
                           {"blas_threads", blas.threads},
                           {"torch_version", compat::TorchVersion()},
                           {"comm_backend", comm->backend()},
                           {"environment", environment},
                           {"comm_address", comm->local_address()},
                           {"startup_s", SecondsSinceProcessStart()}});
  const double startup_s = SecondsSinceProcessStart();

  const int64_t total_steps = c.warmup_steps + c.steps;
  std::vector<double> measured_step_s;
  int64_t measured_tokens = 0;
  std::set<int64_t> seq_lengths;  // distinct shapes run (one unless dynamic_shapes)
  double first_step_s = 0, warmup_s = 0, comm_s_measured = 0;
  int64_t comm_bytes_measured = 0;
  for (int64_t step = 0; step < total_steps; ++step) {
    const bool warmup = step < c.warmup_steps;
    comm->ResetStats();
    const auto start = std::chrono::steady_clock::now();
    optimizer.BeginStep();
    double loss_sum = 0;
    int64_t step_tokens = 0;  // global: every rank's micro-step has the same length
    for (int64_t micro = 0; micro < c.grad_accum; ++micro) {
      auto tokens = data->Batch(step * c.grad_accum + micro).to(device);
      seq_lengths.insert(tokens.size(1) - 1);
      step_tokens += tokens.size(0) * (tokens.size(1) - 1) * c.world_size;
      const torch::Tensor loss = graphed ? graphed->Run(tokens) : forward_backward(tokens);
      ThrowIfError(optimizer.AfterBackward());
      loss_sum += loss.item<double>();
    }
    const double lr = LearningRate(c, step, total_steps);
    auto grad_norm = optimizer.Step(lr);
    ThrowIfError(grad_norm.status());
    compat::Synchronize(device);
    // The planted slowdown (a test instrument): the step lasts (1 + x) times its work.
    // Padded with small matrix products until then, not a sleep (which overshoots by tens
    // of microseconds on a step of a few milliseconds) nor an idle spin (which loads a
    // sibling core less than the step's own arithmetic does, so a trial running beside
    // it would speed up and the planted effect would arrive smaller than x).
    if (c.test_slowdown > 0) {
      const double until_s = Since(start) * (1 + c.test_slowdown);
      const torch::Tensor pad = torch::ones({64, 64}, torch::TensorOptions().device(device));
      while (Since(start) < until_s) {
        torch::mm(pad, pad);
        compat::Synchronize(device);
      }
    }
    const double step_s = Since(start);
    const CommStats step_comm = comm->stats();

    // The global mean loss, outside the timed step and its communication figures.
    auto loss_tensor = torch::tensor({loss_sum / static_cast<double>(c.grad_accum)}, torch::kFloat64).to(device);
    ThrowIfError(comm->AllReduceSum(loss_tensor));
    const double loss = loss_tensor.item<double>() / static_cast<double>(c.world_size);

    const auto mem = compat::GetDeviceMemory(device);
    const int64_t peak = device.is_cuda() ? mem.peak_allocated_bytes : PeakRssBytes();
    events_->Write("step", {{"step", step},
                            {"phase", warmup ? "warmup" : "measure"},
                            {"step_s", step_s},
                            {"tokens", step_tokens},
                            {"loss", loss},
                            {"lr", lr},
                            {"grad_norm", *grad_norm},
                            {"peak_mem_bytes", peak},
                            {"rss_bytes", CurrentRssBytes()},
                            {"device_allocated_bytes", mem.allocated_bytes},
                            {"device_reserved_peak_bytes", mem.peak_reserved_bytes},
                            {"comm_s", step_comm.seconds},
                            {"comm_bytes", step_comm.bytes},
                            {"comm_calls", step_comm.calls}});
    if (!std::isfinite(loss) || !std::isfinite(*grad_norm)) {
      return events_->Error("diverged", "loss " + std::to_string(loss) + " at step " +
                                            std::to_string(step) + " is not finite");
    }
    if (step == 0) first_step_s = step_s;
    if (warmup) {
      warmup_s += step_s;
    } else {
      measured_step_s.push_back(step_s);
      measured_tokens += step_tokens;
      comm_s_measured += step_comm.seconds;
      comm_bytes_measured += step_comm.bytes;
    }
  }

  if (!c.adapters_out.empty() && c.rank == 0) {
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
  }

  const double median = Percentile(measured_step_s, 0.5);
  // Tokens of a step: fixed, or with dynamic_shapes their mean over the measured steps.
  const double tokens_per_step = measured_step_s.empty() ? static_cast<double>(c.tokens_per_step())
                                                         : static_cast<double>(measured_tokens) /
                                                               static_cast<double>(measured_step_s.size());
  const double tokens_per_s = tokens_per_step / median;
  const double flops_per_s = flops_per_token * tokens_per_s;
  const auto mem = compat::GetDeviceMemory(device);
  const double measured = static_cast<double>(measured_step_s.size());
  // A graph that was never captured (fewer micro-batches than its warm-up) did not run.
  const bool graph_ran = graphed && graphed->captured();
  std::string applied_mode = c.uses_jit() ? "jit" : "eager";
  if (graph_ran) applied_mode = c.uses_jit() ? "jit+cudagraph" : "cudagraph";
  nlohmann::json applied = {{"compile_mode", applied_mode},
                            {"cuda_graph", graphed ? graphed->Evidence() : nlohmann::json()},
                            {"compile_scope", c.uses_jit() ? nlohmann::json(c.compile_scope) : nlohmann::json()},
                            {"fuser", fuser},
                            {"jit_executor", c.uses_jit() ? nlohmann::json(jit_executor) : nlohmann::json()},
                            {"precision", model.compute_dtype() == torch::kBFloat16 ? "bf16" : "fp32"},
                            {"host_allocator", *host_allocator},
                            {"bf16_matmul", model.compute_dtype() != torch::kBFloat16 ? nlohmann::json()
                                            : model.math().options().bf16_matmul_via_fp32 ? nlohmann::json("fp32")
                                                                                          : nlohmann::json("native")},
                            {"threads", c.threads},
                            {"grad_checkpointing", c.grad_checkpointing},
                            {"dynamic_shapes", c.dynamic_shapes},
                            {"seq_lengths", seq_lengths.size()},
                            {"recompute_blocks", model.recompute()},
                            {"zero_stage", c.zero_stage},
                            {"offload", c.offload},
                            {"comm_backend", comm->backend()},
                            {"reduce_scatter", comm->reduce_scatter_note()},
                            {"world_size", comm->world_size()},
                            {"decisions", decisions}};
  applied.update(model.runner().Evidence(device.is_cpu()));
  events_->Write("summary",
                 {{"startup_s", startup_s},
                  {"first_step_s", first_step_s},
                  {"warmup_s", warmup_s},
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
                  {"comm_s_per_step", measured > 0 ? comm_s_measured / measured : 0},
                  {"comm_bytes_per_step", measured > 0 ? comm_bytes_measured / measured : 0},
                  {"offload_copy_s", optimizer.offload_copy_s() + model.frozen().offload_copy_s()},
                  {"tokens_per_step", tokens_per_step},
                  {"rank", c.rank},
                  {"environment", environment},
                  {"applied", applied}});
  return kExitSucceeded;
}

}  // namespace bakeoff::trainer
