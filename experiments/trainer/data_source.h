// DataSource: the token sequences of training, read in a fixed global order so that the
// ranks' micro-batches together are exactly the batch one process reads with
// micro_batch x world_size. Sequence i of the global order is:
//   synthetic: seq_len + 1 tokens drawn uniformly from the vocabulary, seeded by (seed, i);
//   repeat:    a periodic pattern (period 16, drawn from the seed) starting at phase i, a
//              task the model can learn;
//   a file:    tokens [i * seq_len, i * seq_len + seq_len + 1) of a flat binary file of
//              little-endian uint16 or uint32 tokens, wrapping around at its end.
// Thread-safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "experiments/trainer/trainer_config.h"
#include "protocol/status.h"

namespace bakeoff::trainer {

class DataSource {
 public:
  static Result<DataSource> Open(const TrainerConfig& config);

  // The micro-batch of this rank at global micro-step `micro_step`: [micro_batch,
  // SequenceLength(micro_step) + 1] int64 on the host.
  torch::Tensor Batch(int64_t micro_step) const;

  // seq_len, or with dynamic_shapes a length drawn uniformly from [max(1, seq_len/2),
  // seq_len] by a hash of (seed, micro_step): every rank draws the same one.
  int64_t SequenceLength(int64_t micro_step) const;

  int64_t file_tokens() const { return static_cast<int64_t>(file_.size()); }

 private:
  torch::Tensor Sequence(int64_t index) const;

  std::string kind_;
  int64_t seq_len_ = 0;
  bool dynamic_shapes_ = false;
  int64_t vocab_ = 0;
  int64_t micro_batch_ = 0;
  int64_t world_size_ = 1;
  int64_t rank_ = 0;
  uint64_t seed_ = 0;
  std::vector<int64_t> pattern_;
  std::vector<int64_t> file_;
};

}  // namespace bakeoff::trainer
