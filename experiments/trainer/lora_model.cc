#include "experiments/trainer/lora_model.h"

#include <stdexcept>

namespace bakeoff::trainer {

void ThrowIfError(const Status& status) {
  if (!status.ok()) throw std::runtime_error(status.ToString());
}

namespace {
template <typename T>
T ValueOrThrow(Result<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

MathOptions MakeMathOptions(const TrainerConfig& c) {
  MathOptions o;
  o.dims = c.dims;
  o.lora_scale = c.lora_scale();
  o.lora_dropout = c.lora_dropout;
  o.training = true;
  // The trainer resolved `auto` before building the model (hardware_defaults.h).
  o.bf16_matmul_via_fp32 = c.bf16_matmul == "fp32" && c.device == "cpu";
  return o;
}
}  // namespace

LoraModel::LoraModel(const TrainerConfig& config, const torch::Device& device, Communicator* comm)
    : config_(config),
      device_(device),
      dtype_(config.precision == "bf16" ? torch::kBFloat16 : torch::kFloat32),
      recompute_(config.grad_checkpointing || config.zero_stage == 3),
      runner_(config.uses_jit(), config.compile_scope),
      math_(MakeMathOptions(config), &runner_) {
  FrozenWeights::Options fo;
  fo.dims = config.dims;
  fo.dtype = dtype_;
  fo.device = device;
  fo.seed = static_cast<uint64_t>(config.seed);
  fo.sharded = config.zero_stage == 3;
  fo.shard_device = config.offload == "parameters" ? torch::Device(torch::kCPU) : device;
  frozen_ = std::make_unique<FrozenWeights>(fo, comm);
  adapters_ = std::make_unique<Adapters>(config.dims, config.lora_targets, config.lora_rank,
                                         static_cast<uint64_t>(config.seed), device,
                                         comm->world_size());
}

const AttentionTables& LoraModel::TablesFor(int64_t seq_len) {
  auto it = tables_.find(seq_len);
  if (it == tables_.end()) {
    it = tables_.emplace(seq_len, MakeAttentionTables(config_.dims, seq_len, dtype_, device_)).first;
  }
  return it->second;
}

torch::Tensor LoraModel::Loss(const torch::Tensor& tokens) {
  segments_.clear();  // the previous micro-batch's backward has run
  const int64_t batch = tokens.size(0);
  const int64_t seq = tokens.size(1) - 1;
  auto inputs = tokens.narrow(1, 0, seq);
  auto targets = tokens.narrow(1, 1, seq);
  const AttentionTables& tables = TablesFor(seq);

  torch::Tensor x;
  {
    torch::Tensor embedding = ValueOrThrow(frozen_->AcquireEmbedding());
    x = embedding.index_select(0, inputs.reshape({-1})).view({batch, seq, config_.dims.dim});
    frozen_->ReleaseEmbedding();
  }
  // A recomputed segment is reached by backward only through its input.
  if (recompute_) x = x.detach().requires_grad_(true);
  const bool dropout = config_.lora_dropout > 0;
  for (int layer = 0; layer < config_.dims.layers; ++layer) {
    auto run_block = [this, layer, &tables](const torch::Tensor& in) {
      BlockWeights w = ValueOrThrow(frozen_->AcquireBlock(layer));
      auto out = math_.Block(in, w, adapters_->block(layer), tables);
      frozen_->ReleaseBlock(layer);
      return out;
    };
    if (recompute_) {
      auto segment = std::make_unique<RecomputeSegment>();
      segment->run = run_block;
      segment->device = device_;
      segment->restore_rng = dropout;
      x = RunRecomputed(segment.get(), x);
      segments_.push_back(std::move(segment));
    } else {
      x = run_block(x);
    }
  }
  auto run_head = [this, targets](const torch::Tensor& h) {
    HeadWeights w = ValueOrThrow(frozen_->AcquireHead());
    auto loss = math_.HeadLoss(h, w, targets);
    frozen_->ReleaseHead();
    return loss;
  };
  // Only sharded weights need the head recomputed: checkpointing keeps its activations.
  if (frozen_->sharded()) {
    auto segment = std::make_unique<RecomputeSegment>();
    segment->run = run_head;
    segment->device = device_;
    auto loss = RunRecomputed(segment.get(), x);
    segments_.push_back(std::move(segment));
    return loss;
  }
  return run_head(x);
}

}  // namespace bakeoff::trainer
