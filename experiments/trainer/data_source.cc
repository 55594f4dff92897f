#include "experiments/trainer/data_source.h"

#include <algorithm>
#include <fstream>

#include "experiments/trainer/sandbox_path.h"
#include "experiments/trainer/torch_compat.h"

namespace bakeoff::trainer {
namespace {
constexpr int64_t kRepeatPeriod = 16;
}

Result<DataSource> DataSource::Open(const TrainerConfig& c) {
  DataSource d;
  d.seq_len_ = c.seq_len;
  d.dynamic_shapes_ = c.dynamic_shapes;
  d.vocab_ = c.dims.vocab;
  d.micro_batch_ = c.micro_batch;
  d.world_size_ = c.world_size;
  d.rank_ = c.rank;
  d.seed_ = static_cast<uint64_t>(c.seed);
  if (c.dataset == "synthetic" || c.dataset == "repeat") {
    d.kind_ = c.dataset;
    auto gen = compat::MakeGenerator(torch::kCPU, d.seed_ * 2654435761ULL + 3);
    auto pattern = torch::randint(d.vocab_, {kRepeatPeriod}, gen, torch::kInt64);
    d.pattern_.assign(pattern.data_ptr<int64_t>(), pattern.data_ptr<int64_t>() + kRepeatPeriod);
    return d;
  }
  d.kind_ = "file";
  // Only a file inside the data root the launcher gave (the worker's --data-root); the
  // messages below name the file and its size, never its contents.
  auto path = ResolveForReading(c.data_root, c.dataset);
  if (!path.ok()) return path.status().WithContext("dataset");
  std::ifstream in(*path, std::ios::binary | std::ios::ate);
  if (!in) {
    return Status::NotFound("dataset: cannot open token file \"" + c.dataset +
                            "\" in the data root; give the name of a flat binary file of uint16/uint32 "
                            "tokens there, or synthetic / repeat");
  }
  const std::streamsize bytes = in.tellg();
  const int width = c.dataset_dtype == "uint32" ? 4 : 2;
  if (bytes % width != 0 || bytes / width < 2) {
    return Status::InvalidArgument("dataset: \"" + c.dataset + "\" has " + std::to_string(bytes) +
                                   " bytes; expected a whole number (at least 2) of " +
                                   c.dataset_dtype + " tokens");
  }
  std::vector<char> raw(static_cast<size_t>(bytes));
  in.seekg(0);
  in.read(raw.data(), bytes);
  d.file_.resize(static_cast<size_t>(bytes / width));
  for (size_t i = 0; i < d.file_.size(); ++i) {
    uint64_t v = 0;
    for (int b = width - 1; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(raw[i * width + b]);
    if (static_cast<int64_t>(v) >= d.vocab_) {
      // Not the token's value: a file that is not a token file would leak its bytes.
      return Status::InvalidArgument("dataset: the token at index " + std::to_string(i) + " of \"" + c.dataset +
                                     "\" is outside the model's vocabulary (" + std::to_string(d.vocab_) +
                                     "); is it a " + c.dataset_dtype + " token file for this model?");
    }
    d.file_[i] = static_cast<int64_t>(v);
  }
  return d;
}

torch::Tensor DataSource::Sequence(int64_t index) const {
  const int64_t n = seq_len_ + 1;
  if (kind_ == "synthetic") {
    auto gen = compat::MakeGenerator(torch::kCPU, seed_ * 1000003ULL + static_cast<uint64_t>(index) + 11);
    return torch::randint(vocab_, {n}, gen, torch::kInt64);
  }
  auto out = torch::empty({n}, torch::kInt64);
  auto* p = out.data_ptr<int64_t>();
  if (kind_ == "repeat") {
    for (int64_t t = 0; t < n; ++t) p[t] = pattern_[(t + index) % kRepeatPeriod];
    return out;
  }
  const int64_t size = static_cast<int64_t>(file_.size());
  const int64_t start = (index % size) * seq_len_ % size;
  for (int64_t t = 0; t < n; ++t) p[t] = file_[(start + t) % size];
  return out;
}

int64_t DataSource::SequenceLength(int64_t micro_step) const {
  if (!dynamic_shapes_) return seq_len_;
  // splitmix64 of (seed, micro_step): cheap, stable across platforms and LibTorch versions.
  uint64_t z = seed_ * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(micro_step) + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const int64_t lo = std::max<int64_t>(1, seq_len_ / 2);
  return lo + static_cast<int64_t>(z % static_cast<uint64_t>(seq_len_ - lo + 1));
}

torch::Tensor DataSource::Batch(int64_t micro_step) const {
  std::vector<torch::Tensor> rows;
  const int64_t first = micro_step * micro_batch_ * world_size_ + rank_ * micro_batch_;
  for (int64_t i = 0; i < micro_batch_; ++i) rows.push_back(Sequence(first + i));
  auto batch = torch::stack(rows);
  const int64_t length = SequenceLength(micro_step);
  return length == seq_len_ ? batch : batch.narrow(1, 0, length + 1).contiguous();
}

}  // namespace bakeoff::trainer
