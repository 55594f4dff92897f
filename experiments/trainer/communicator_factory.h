// Chooses and connects the communicator of a trainer process: local for one rank, Gloo
// for CPU ranks, NCCL for CUDA ranks (when built with NCCL). Every rank connects to the
// store at config.store (rank 0's host) and binds its own collectives to its own host:
// config.rank_address, else config.rank_interface, else the local address the kernel
// routes toward the store's host (docs/distributed.md, "Addresses").
// Thread-safety: call from the training thread.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/trainer_config.h"
#include "protocol/status.h"

namespace bakeoff::trainer {

Result<std::unique_ptr<Communicator>> CreateCommunicator(const TrainerConfig& config,
                                                         const torch::Device& device);

}  // namespace bakeoff::trainer
