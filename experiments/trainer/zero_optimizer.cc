#include "experiments/trainer/zero_optimizer.h"

#include <chrono>
#include <cmath>

#include "experiments/trainer/torch_compat.h"

namespace bakeoff::trainer {

ZeroOptimizer::ZeroOptimizer(const TrainerConfig& config, Adapters* adapters, Communicator* comm)
    : config_(config),
      adapters_(adapters),
      comm_(comm),
      partition_(adapters->partition()),
      stage_(static_cast<int>(config.zero_stage)),
      offload_(config.offload == "optimizer") {
  const auto options = adapters_->flat().options();
  const int64_t state_numel = stage_ == 0 ? partition_.padded : partition_.shard;
  const auto state_options = offload_ ? options.device(torch::kCPU) : options;
  exp_avg_ = torch::zeros({state_numel}, state_options);
  exp_avg_sq_ = torch::zeros({state_numel}, state_options);
  if (offload_) {
    master_ = (stage_ == 0 ? adapters_->flat() : Shard(adapters_->flat())).to(torch::kCPU).clone();
  }
  if (stage_ <= 1) {
    flat_grad_ = torch::zeros({partition_.padded}, options);
    adapters_->AttachGrads(flat_grad_);
  } else {
    shard_grad_ = torch::zeros({partition_.shard}, options);
  }
}

torch::Tensor ZeroOptimizer::Shard(const torch::Tensor& flat) const {
  return flat.narrow(0, comm_->rank() * partition_.shard, partition_.shard);
}

void ZeroOptimizer::BeginStep() {
  if (stage_ <= 1) {
    flat_grad_.zero_();
  } else {
    shard_grad_.zero_();
  }
}

void ZeroOptimizer::BeforeBackward() {
  if (stage_ >= 2) {
    flat_grad_ = torch::zeros({partition_.padded}, adapters_->flat().options());
    adapters_->AttachGrads(flat_grad_);
  }
}

Status ZeroOptimizer::AfterBackward() {
  if (stage_ < 2) return Status::Ok();
  auto reduced = torch::empty({partition_.shard}, flat_grad_.options());
  BAKEOFF_RETURN_IF_ERROR(comm_->ReduceScatterSum(flat_grad_, reduced));
  shard_grad_.add_(reduced);
  // Only the shard is kept between micro-batches: the full buffer goes.
  adapters_->DetachGrads();
  flat_grad_ = torch::Tensor();
  return Status::Ok();
}

Status ZeroOptimizer::AllReduceBuckets(torch::Tensor& flat) {
  const int64_t bucket = std::max<int64_t>(1, config_.bucket_bytes / static_cast<int64_t>(flat.element_size()));
  for (int64_t offset = 0; offset < flat.numel(); offset += bucket) {
    auto piece = flat.narrow(0, offset, std::min(bucket, flat.numel() - offset));
    BAKEOFF_RETURN_IF_ERROR(comm_->AllReduceSum(piece));
  }
  return Status::Ok();
}

Result<double> ZeroOptimizer::Step(double lr) {
  torch::NoGradGuard no_grad;
  const double world = comm_->world_size();
  torch::Tensor grad;  // what this rank updates with: full (stage 0) or its shard
  double norm_sq = 0;
  if (stage_ <= 1) {
    // Stage 0 reduces bucket by bucket (as DDP overlaps them); stage 1 likewise.
    BAKEOFF_RETURN_IF_ERROR(AllReduceBuckets(flat_grad_));
    flat_grad_.div_(world);
    norm_sq = flat_grad_.pow(2).sum().item<double>();
    grad = stage_ == 0 ? flat_grad_ : Shard(flat_grad_);
  } else {
    shard_grad_.div_(world);
    auto local = shard_grad_.pow(2).sum().reshape({1}).to(torch::kFloat64);
    BAKEOFF_RETURN_IF_ERROR(comm_->AllReduceSum(local));
    norm_sq = local.item<double>();
    grad = shard_grad_;
  }
  const double norm = std::sqrt(norm_sq);
  if (!std::isfinite(norm)) return norm;  // the caller reports divergence
  double clip = 1.0;
  if (config_.grad_clip > 0 && norm > config_.grad_clip) clip = config_.grad_clip / (norm + 1e-6);

  ++step_;
  const double b1 = config_.adam_beta1, b2 = config_.adam_beta2;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(step_));
  torch::Tensor params = stage_ == 0 ? adapters_->flat() : Shard(adapters_->flat());
  torch::Tensor g = grad;
  torch::Tensor p = params;
  if (offload_) {
    auto start = std::chrono::steady_clock::now();
    g = grad.to(torch::kCPU);
    offload_copy_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    p = master_;
  }
  if (clip != 1.0) g = g * clip;
  // torch.optim.AdamW's update, on this rank's slice.
  p.mul_(1.0 - lr * config_.weight_decay);
  exp_avg_.mul_(b1).add_(g, 1.0 - b1);
  exp_avg_sq_.mul_(b2).addcmul_(g, g, 1.0 - b2);
  auto denom = (exp_avg_sq_.sqrt() / std::sqrt(bias2)).add_(config_.adam_eps);
  p.addcdiv_(exp_avg_, denom, -lr / bias1);
  if (offload_) {
    auto start = std::chrono::steady_clock::now();
    params.copy_(master_);
    compat::Synchronize(params.device());
    offload_copy_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (stage_ >= 1 && comm_->world_size() > 1) {
    auto shard = Shard(adapters_->flat()).clone();
    BAKEOFF_RETURN_IF_ERROR(comm_->AllGather(shard, adapters_->flat()));
  }
  return norm;
}

int64_t ZeroOptimizer::grad_bytes() const {
  if (stage_ <= 1) return flat_grad_.nbytes();
  return shard_grad_.nbytes();
}

int64_t ZeroOptimizer::optimizer_bytes() const {
  return exp_avg_.nbytes() + exp_avg_sq_.nbytes() + (master_.defined() ? master_.nbytes() : 0);
}

}  // namespace bakeoff::trainer
