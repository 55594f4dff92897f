#include "experiments/trainer/torch_compat.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/passes/graph_fuser.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/version.h>

#include <ATen/CPUGeneratorImpl.h>

#ifdef BAKEOFF_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#endif

#include <cstdlib>
#include <cstring>
#include <new>

namespace bakeoff::trainer::compat {

std::string TorchVersion() { return TORCH_VERSION; }

bool CudaAvailable() {
#ifdef BAKEOFF_WITH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

std::string CudaUnavailableReason() {
#ifdef BAKEOFF_WITH_CUDA
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return std::string("this bakeoff-trainer is built with CUDA (LibTorch ") + TORCH_VERSION +
         ") but sees no GPU: cudaGetDeviceCount says " +
         (error == cudaSuccess ? std::to_string(count) + " devices" : std::string(cudaGetErrorString(error))) +
         (visible != nullptr ? std::string(", CUDA_VISIBLE_DEVICES=\"") + visible + "\"" : std::string()) +
         "; run it on a machine with an NVIDIA GPU and driver";
#else
  return "this bakeoff-trainer is built without CUDA (CPU LibTorch " TORCH_VERSION
         "); build the CUDA one with scripts/build-cuda (docs/trainer.md, \"CUDA build\")";
#endif
}

std::optional<GpuInfo> DescribeGpu(const torch::Device& device) {
#ifdef BAKEOFF_WITH_CUDA
  if (device.is_cuda()) {
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
    GpuInfo info;
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    info.cuda_runtime = version(runtime);
    info.driver = version(driver);
    info.model = at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->name;
    return info;
  }
#endif
  (void)device;
  return std::nullopt;
}

int CudaDeviceCount() {
#ifdef BAKEOFF_WITH_CUDA
  return static_cast<int>(torch::cuda::device_count());
#else
  return 0;
#endif
}

std::shared_ptr<torch::jit::Graph> TraceToGraph(
    const std::vector<torch::Tensor>& inputs,
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& fn) {
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  auto traced = torch::jit::tracer::trace(
      stack,
      [&fn](torch::jit::Stack in) {
        std::vector<torch::Tensor> tensors;
        tensors.reserve(in.size());
        for (auto& v : in) tensors.push_back(v.toTensor());
        return torch::jit::Stack{fn(tensors)};
      },
      [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/false,
      /*force_outplace=*/false);
  return traced.first->graph;
}

CompiledGraph::CompiledGraph(const std::string& name, std::shared_ptr<torch::jit::Graph> graph)
    : function_(std::make_unique<torch::jit::GraphFunction>(name, std::move(graph), nullptr)) {}

CompiledGraph::~CompiledGraph() = default;

torch::Tensor CompiledGraph::Run(const std::vector<torch::Tensor>& inputs) {
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  function_->run(stack);
  return stack.back().toTensor();
}

namespace {
void CountNodes(const torch::jit::Block* block, bool on_cpu, CompiledGraph::Evidence* e) {
  for (const torch::jit::Node* node : block->nodes()) {
    ++e->nodes;
    const std::string kind = node->kind().toQualString();
    if (kind == "prim::TensorExprGroup" || kind == "prim::CudaFusionGroup" || kind == "prim::StaticSubgraph") {
      ++e->fusion_groups;
    }
    if (kind == "prim::FusionGroup") {
      // The legacy fuser falls back to running the subgraph when it cannot compile.
      const bool fused = on_cpu ? torch::jit::canFuseOnCPULegacy() : true;
      ++(fused ? e->fusion_groups : e->unfused_groups);
    }
    if (kind == "prim::DifferentiableGraph") ++e->differentiable_graphs;
    for (const torch::jit::Block* sub : node->blocks()) CountNodes(sub, on_cpu, e);
    if (node->hasAttribute(torch::jit::attr::Subgraph)) {
      CountNodes(node->g(torch::jit::attr::Subgraph)->block(), on_cpu, e);
    }
  }
}
}  // namespace

CompiledGraph::Evidence CompiledGraph::Inspect(bool on_cpu) {
  Evidence e;
  // A graph run too few times to be optimized (a shape seen once, with dynamic shapes)
  // has no plan yet; LibTorch asserts on asking for it. Report it as not optimized.
  try {
    auto state = function_->get_executor().getDebugState();
    e.optimized = true;
    for (auto& [spec, plan] : state.execution_plans) {
      if (plan.graph) CountNodes(plan.graph->block(), on_cpu, &e);
    }
  } catch (const c10::Error&) {
    e.optimized = false;
  }
  return e;
}

bool IsTracing() { return torch::jit::tracer::isTracing(); }

std::string ConfigureFuser(const torch::Device& device) {
  if (device.is_cuda()) {
#ifdef BAKEOFF_WITH_CUDA
    torch::jit::setTensorExprFuserEnabled(true);
    return "tensorexpr (CUDA)";
#endif
  }
  // The CPU TensorExpr fuser needs LLVM; Debian's LibTorch 1.13 and the PyPI wheels of 2.x
  // are built without it (torch._C._llvm_enabled() is False) and fail with "LLVM Backend
  // not found" when forced on, so leave it off and say so.
  torch::jit::setTensorExprFuserEnabled(false);
  return "none (CPU: this LibTorch has no LLVM backend for the TensorExpr fuser)";
}

void SetJitExecutor(bool profiling) {
  torch::jit::getExecutorMode() = profiling;
  torch::jit::getProfilingMode() = profiling;
}

at::Generator MakeGenerator(const torch::Device& device, uint64_t seed) {
#ifdef BAKEOFF_WITH_CUDA
  if (device.is_cuda()) {
    auto gen = at::cuda::detail::createCUDAGenerator(device.index() < 0 ? 0 : device.index());
    gen.set_current_seed(seed);
    return gen;
  }
#endif
  return at::detail::createCPUGenerator(seed);
}

torch::Tensor GetRngState(const torch::Device& device) {
#ifdef BAKEOFF_WITH_CUDA
  if (device.is_cuda()) {
    return at::cuda::detail::getDefaultCUDAGenerator(device.index()).get_state();
  }
#endif
  return at::detail::getDefaultCPUGenerator().get_state();
}

void SetRngState(const torch::Device& device, const torch::Tensor& state) {
#ifdef BAKEOFF_WITH_CUDA
  if (device.is_cuda()) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index());
    gen.set_state(state);
    return;
  }
#endif
  auto gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(state);
}

DeviceMemory GetDeviceMemory(const torch::Device& device) {
  DeviceMemory m;
#ifdef BAKEOFF_WITH_CUDA
  if (device.is_cuda()) {
    const int index = device.index() < 0 ? c10::cuda::current_device() : device.index();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    // StatType::AGGREGATE: index 0 in every 2.x; 2.6 moved the enum from
    // c10::cuda::CUDACachingAllocator to c10::CachingAllocator.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 7)
    static_assert(static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE) == 0);
#endif
    constexpr size_t kAll = 0;
    m.allocated_bytes = stats.allocated_bytes[kAll].current;
    m.peak_allocated_bytes = stats.allocated_bytes[kAll].peak;
    m.peak_reserved_bytes = stats.reserved_bytes[kAll].peak;
  }
#endif
  return m;
}

void Synchronize(const torch::Device& device) {
#ifdef BAKEOFF_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
}

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  const char* what = e.what();
  return std::strstr(what, "out of memory") != nullptr ||
         std::strstr(what, "can't allocate memory") != nullptr ||
         std::strstr(what, "not enough memory") != nullptr;
}

}  // namespace bakeoff::trainer::compat
