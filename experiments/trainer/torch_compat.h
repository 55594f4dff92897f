// The one place where LibTorch's version differences live (the project's PyTorch 2.7.1,
// a GPU machine's own 2.x; guarded by TORCH_VERSION_MAJOR/MINOR from torch/version.h):
// tracing into a graph, graph functions, generators and RNG state, device
// memory statistics, CUDA graph capture, out-of-memory detection and the c10d/Gloo
// constructors. Every
// other trainer file calls these instead of the version-specific APIs.
// Thread-safety: free functions; they touch LibTorch globals only where noted.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
struct GraphFunction;
}  // namespace torch::jit
namespace c10d {
struct TCPStoreOptions;
}  // namespace c10d

namespace bakeoff::trainer::compat {

// The PyTorch install's full version ("2.7.1+cu126", as torch.__version__ says), or
// TORCH_VERSION ("2.7.1") for a bare LibTorch.
std::string TorchVersion();

// True when this build has CUDA and a device is visible.
bool CudaAvailable();
// Why CudaAvailable() is false, for the `unsupported` event: a build without CUDA, or a
// CUDA build that sees no device (with the CUDA runtime's own reason: no driver, no
// device, CUDA_VISIBLE_DEVICES empty).
std::string CudaUnavailableReason();
// The CUDA runtime this build uses and the GPU and driver of `device` (nullopt on a CPU
// device or a build without CUDA), for the trial's recorded environment.
struct GpuInfo {
  std::string cuda_runtime;  // "12.4"
  std::string model;         // "NVIDIA H100 80GB HBM3"
  std::string driver;        // CUDA driver API version, "12.4"
};
std::optional<GpuInfo> DescribeGpu(const torch::Device& device);

// Makes a hosting TCPStore serve on `listen_fd`, a socket bound and listening already
// (rendezvous_store.cc binds it to the store's own address, not every interface); the
// store then owns it. LibTorch 2.4 and later take it on their classic backend (libuv's
// refuses one); false on an older LibTorch: the caller closes it and the store binds
// every interface, as before.
bool ServeStoreOnSocket(c10d::TCPStoreOptions& options, int listen_fd);

// Visible CUDA devices (0 without CUDA). The worker may narrow them per rank with
// CUDA_VISIBLE_DEVICES, so a rank picks local_rank modulo this count.
int CudaDeviceCount();

// Traces `fn` applied to `inputs` into a TorchScript graph whose inputs are `inputs`
// (so weights passed as inputs stay inputs, not constants).
std::shared_ptr<torch::jit::Graph> TraceToGraph(
    const std::vector<torch::Tensor>& inputs,
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& fn);

// A callable graph run by LibTorch's optimizing graph executor (see SetJitExecutor).
class CompiledGraph {
 public:
  CompiledGraph(const std::string& name, std::shared_ptr<torch::jit::Graph> graph);
  ~CompiledGraph();
  torch::Tensor Run(const std::vector<torch::Tensor>& inputs);
  // Counts, over the executor's current optimized plans, the nodes of the given kinds.
  struct Evidence {
    int64_t fusion_groups = 0;        // groups that run as fused kernels
    // prim::FusionGroup of the legacy fuser that cannot compile for the device (a CPU
    // LibTorch has the CPU backend off): each runs its subgraph unfused, op by op.
    int64_t unfused_groups = 0;
    int64_t differentiable_graphs = 0;  // prim::DifferentiableGraph (symbolic autodiff)
    int64_t nodes = 0;
    bool optimized = false;  // the executor has built an optimized plan (else profiling only)
  };
  Evidence Inspect(bool on_cpu);

 private:
  std::unique_ptr<torch::jit::GraphFunction> function_;
};

// True while TraceToGraph records the ops being run.
bool IsTracing();

// Enables the fusers the device supports; returns a description of what is on.
// LibTorch builds without LLVM (the PyPI wheels) cannot run the CPU TensorExpr fuser.
std::string ConfigureFuser(const torch::Device& device);

// Selects TorchScript's graph executor for every graph run after this call: `profiling`
// (LibTorch's default: profiles shapes, then specializes behind type guards; the fusers
// need it) or `legacy` (specializes on argument types without profiling or guards).
void SetJitExecutor(bool profiling);

// A generator for `device` seeded with `seed`.
at::Generator MakeGenerator(const torch::Device& device, uint64_t seed);

// RNG state of the default generator of `device` (for recomputation with dropout).
torch::Tensor GetRngState(const torch::Device& device);
void SetRngState(const torch::Device& device, const torch::Tensor& state);

// Device memory: peak allocated and reserved bytes (CUDA), 0 on CPU.
struct DeviceMemory {
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};
DeviceMemory GetDeviceMemory(const torch::Device& device);
void Synchronize(const torch::Device& device);

// One CUDA graph on `device` (at::cuda::CUDAGraph, with the side stream capture needs:
// the legacy default stream, which the rest of the trainer and NCCL use, cannot be
// captured). Every call orders itself after the work already queued on the caller's
// stream and before the work queued after it, so callers need no stream handling.
// Constructing one in a build without CUDA throws std::logic_error.
// Thread-safety: one thread; no other thread may launch CUDA work during Capture
// (global capture mode, PyTorch's default).
class CudaGraph {
 public:
  explicit CudaGraph(const torch::Device& device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  // Runs `body` eagerly on the capture stream (warm-up before capture: lazy cuBLAS and
  // allocator state is then made for that stream, as torch.cuda.graphs' docs require).
  void Warmup(const std::function<void()>& body);
  // Records the kernels `body` launches; they do not run. Once per graph.
  void Capture(const std::function<void()>& body);
  // Runs the recorded kernels once on the caller's stream.
  void Replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when `e` is an allocation failure (CPU or device).
bool IsOutOfMemory(const std::exception& e);

}  // namespace bakeoff::trainer::compat
