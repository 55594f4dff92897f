#include "experiments/trainer/adapters.h"

#include <cmath>

#include "experiments/trainer/torch_compat.h"

namespace bakeoff::trainer {

torch::Tensor AliasOf(const torch::Tensor& base, int64_t offset, at::IntArrayRef shape) {
  torch::NoGradGuard no_grad;
  auto t = torch::empty({0}, base.options());
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  t.set_(base.storage(), base.storage_offset() + offset, shape, strides);
  return t;
}

Adapters::Adapters(const ModelDims& dims, const std::vector<std::string>& targets, int64_t rank,
                   uint64_t seed, const torch::Device& device, int world_size) {
  const auto& names = LoraTargetNames();
  int64_t numel = 0;
  for (int64_t l = 0; l < dims.layers; ++l) {
    for (const auto& t : targets) {
      ProjectionShape s = ProjectionShapeOf(dims, t);
      numel += rank * (s.in + s.out);
    }
  }
  partition_ = Partition::Of(numel, world_size);
  // Initialise on the host from the seed so every device and rank gets the same values.
  auto host = torch::zeros({partition_.padded}, torch::kFloat32);
  auto gen = compat::MakeGenerator(torch::kCPU, seed * 7919ULL + 17);
  int64_t offset = 0;
  std::vector<std::tuple<int64_t, int, std::vector<int64_t>, std::vector<int64_t>, int64_t>> layout;
  for (int64_t l = 0; l < dims.layers; ++l) {
    for (int p = 0; p < kNumProjections; ++p) {
      if (std::find(targets.begin(), targets.end(), names[p]) == targets.end()) continue;
      ProjectionShape s = ProjectionShapeOf(dims, names[p]);
      const double bound = 1.0 / std::sqrt(static_cast<double>(s.in));
      host.narrow(0, offset, rank * s.in).uniform_(-bound, bound, gen);
      layout.emplace_back(l, p, std::vector<int64_t>{rank, s.in}, std::vector<int64_t>{s.out, rank},
                          offset);
      offset += rank * (s.in + s.out);  // B stays zero
    }
  }
  flat_ = host.to(device);
  blocks_.resize(dims.layers);
  for (const auto& [layer, p, a_shape, b_shape, off] : layout) {
    const int64_t a_numel = a_shape[0] * a_shape[1];
    LoraPair pair;
    pair.a = AliasOf(flat_, off, a_shape).requires_grad_(true);
    pair.b = AliasOf(flat_, off + a_numel, b_shape).requires_grad_(true);
    slots_.push_back({pair.a, off});
    slots_.push_back({pair.b, off + a_numel});
    blocks_[layer][p] = pair;
  }
}

std::vector<torch::Tensor> Adapters::BlockLeaves(int layer) const {
  std::vector<torch::Tensor> leaves;
  for (const auto& pair : blocks_[layer]) {
    if (pair.defined()) {
      leaves.push_back(pair.a);
      leaves.push_back(pair.b);
    }
  }
  return leaves;
}

void Adapters::AttachGrads(const torch::Tensor& flat_grad) {
  for (auto& slot : slots_) {
    slot.leaf.mutable_grad() = AliasOf(flat_grad, slot.offset, slot.leaf.sizes());
  }
}

void Adapters::DetachGrads() {
  for (auto& slot : slots_) slot.leaf.mutable_grad() = torch::Tensor();
}

}  // namespace bakeoff::trainer
