#include "experiments/trainer/frozen_weights.h"

#include <chrono>
#include <cmath>

#include "experiments/trainer/torch_compat.h"

namespace bakeoff::trainer {

FrozenWeights::FrozenWeights(const Options& options, Communicator* comm)
    : options_(options), comm_(comm) {
  const auto& d = options.dims;
  auto add_unit = [this](std::vector<std::vector<int64_t>> shapes, std::vector<bool> is_norm) {
    Unit u;
    u.shapes = std::move(shapes);
    u.is_norm = std::move(is_norm);
    units_.push_back(std::move(u));
  };
  add_unit({{d.vocab, d.dim}}, {false});
  for (int64_t l = 0; l < d.layers; ++l) {
    std::vector<std::vector<int64_t>> shapes = {{d.dim}, {d.dim}};
    std::vector<bool> norms = {true, true};
    for (const auto& t : LoraTargetNames()) {
      ProjectionShape s = ProjectionShapeOf(d, t);
      shapes.push_back({s.out, s.in});
      norms.push_back(false);
    }
    add_unit(shapes, norms);
  }
  add_unit({{d.dim}, {d.vocab, d.dim}}, {true, false});

  const int world = comm_->world_size();
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = units_[i];
    int64_t numel = 0;
    for (const auto& s : u.shapes) numel += c10::multiply_integers(s);
    u.partition = Partition::Of(numel, options_.sharded ? world : 1);
    // Every rank generates the same whole unit from (seed, unit), so a shard is exactly
    // the slice of what a single process holds; one unit is alive at a time.
    auto gen = compat::MakeGenerator(options_.device, options_.seed * 1000003ULL + i + 1);
    // Drawn at the unit's exact size (the padded size would change the random stream's
    // tail, and so the model, with the world size), then padded with zeros.
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(options_.device);
    auto full = torch::cat({torch::randn({numel}, gen, f32),
                            torch::zeros({u.partition.padded - numel}, f32)});
    int64_t offset = 0;
    for (size_t k = 0; k < u.shapes.size(); ++k) {
      const int64_t n = c10::multiply_integers(u.shapes[k]);
      if (u.is_norm[k]) {
        full.narrow(0, offset, n).fill_(1.0);
      } else {
        // std 1/sqrt(fan_in): 0.016 for Llama-7B's 4096 (close to its 0.02), and large
        // enough in a tiny model for the frozen head to express confident predictions.
        full.narrow(0, offset, n).mul_(1.0 / std::sqrt(static_cast<double>(u.shapes[k].back())));
      }
      offset += n;
    }
    full = full.to(options_.dtype);
    if (options_.sharded) {
      u.stored = full.narrow(0, comm_->rank() * u.partition.shard, u.partition.shard)
                     .to(options_.shard_device)
                     .clone();
    } else {
      u.stored = full;
    }
  }
}

Result<std::vector<torch::Tensor>> FrozenWeights::Acquire(size_t index) {
  Unit& u = units_[index];
  torch::Tensor whole = u.stored;
  if (options_.sharded) {
    torch::Tensor shard = u.stored;
    if (shard.device() != options_.device) {
      auto start = std::chrono::steady_clock::now();
      shard = shard.to(options_.device);
      compat::Synchronize(options_.device);
      offload_copy_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    u.gathered = torch::empty({u.partition.padded}, shard.options());
    BAKEOFF_RETURN_IF_ERROR(comm_->AllGather(shard, u.gathered));
    gathered_bytes_ += u.gathered.nbytes();
    peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
    whole = u.gathered;
  }
  std::vector<torch::Tensor> views;
  int64_t offset = 0;
  for (const auto& shape : u.shapes) {
    const int64_t n = c10::multiply_integers(shape);
    views.push_back(whole.narrow(0, offset, n).view(shape));
    offset += n;
  }
  return views;
}

void FrozenWeights::Release(size_t index) {
  Unit& u = units_[index];
  if (!u.gathered.defined()) return;
  gathered_bytes_ -= u.gathered.nbytes();
  u.gathered = torch::Tensor();
}

Result<torch::Tensor> FrozenWeights::AcquireEmbedding() {
  auto views = Acquire(0);
  if (!views.ok()) return views.status();
  return (*views)[0];
}

Result<BlockWeights> FrozenWeights::AcquireBlock(int layer) {
  auto views = Acquire(1 + layer);
  if (!views.ok()) return views.status();
  BlockWeights w;
  w.attn_norm = (*views)[0];
  w.mlp_norm = (*views)[1];
  for (int p = 0; p < kNumProjections; ++p) w.proj[p] = (*views)[2 + p];
  return w;
}

Result<HeadWeights> FrozenWeights::AcquireHead() {
  auto views = Acquire(units_.size() - 1);
  if (!views.ok()) return views.status();
  return HeadWeights{(*views)[0], (*views)[1]};
}

int64_t FrozenWeights::held_bytes() const {
  int64_t bytes = 0;
  for (const auto& u : units_) bytes += u.stored.nbytes();
  return bytes;
}

}  // namespace bakeoff::trainer
