// TrainerConfig: the validated configuration of one bakeoff-trainer process, parsed once
// from a JSON object (field names are the sweep's parameter names, docs/trainer.md) and
// from --flag overrides. No LibTorch here, so the sweep tooling's tests can use it too.
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/trainer/model_dims.h"
#include "protocol/status.h"

namespace bakeoff::trainer {

struct TrainerConfig {
  nlohmann::json model = "tiny";
  ModelDims dims;  // resolved from `model`
  int64_t seq_len = 128;
  int64_t micro_batch = 1;
  int64_t grad_accum = 1;
  int64_t steps = 20;         // measured optimizer steps
  int64_t warmup_steps = 3;   // optimizer steps before measuring
  std::string precision = "fp32";     // fp32 | bf16
  // How bf16 matrix products run on a CPU: native (LibTorch's bf16 kernels), fp32 (widened
  // to fp32, the fp32 BLAS, rounded back: bf16 in and out, fp32 accumulation), or auto
  // (decided on the machine at start-up, hardware_defaults.h). CUDA always runs native.
  std::string bf16_matmul = "auto";
  std::string compile_mode = "eager";  // eager | jit | cudagraph | jit+cudagraph
  std::string compile_scope = "full";  // full | attention | mlp | adapters
  // TorchScript's executor for jit: auto (profiling where a fuser can run, i.e. CUDA;
  // legacy on a CPU without one) | profiling | legacy.
  std::string jit_executor = "auto";
  int64_t lora_rank = 8;
  double lora_alpha = 16.0;
  double lora_dropout = 0.0;
  std::vector<std::string> lora_targets = {"q", "k", "v", "o"};
  bool grad_checkpointing = false;
  // true: each micro-step's sequences are cut to a length drawn from [seq_len/2, seq_len]
  // (the same on every rank), so shapes change from step to step (H10).
  bool dynamic_shapes = false;
  double lr = 1e-3;
  std::string lr_schedule = "constant";  // constant | cosine
  int64_t lr_warmup_steps = 0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // max global L2 norm; 0 disables
  int64_t seed = 0;
  // synthetic | repeat | a token file's name inside data_root (IsSandboxedName).
  std::string dataset = "synthetic";
  std::string dataset_dtype = "uint16";
  std::string device = "cpu";  // cpu | cuda
  int64_t threads = 0;         // 0: decided at start-up (hardware_defaults.h DecideThreads)
  int64_t zero_stage = 0;
  std::string offload = "none";  // none | optimizer | parameters
  int64_t world_size = 1;
  int64_t bucket_bytes = 25 << 20;
  int64_t max_host_memory = 0;  // bytes; 0 = no cap
  // retain: freed host memory stays mapped for the next step (no page faults or heap
  // trimming in the steady state); system: the C library's defaults.
  std::string host_allocator = "retain";
  double peak_flops = 0;        // device peak FLOP/s for MFU; 0 = unknown
  // A test instrument (docs/trainer.md): each step takes (1 + test_slowdown) times its
  // own time, so a variant's true slowdown is known exactly (bench/validity/).
  double test_slowdown = 0;
  double rendezvous_timeout_s = 60;
  double collective_timeout_s = 120;
  // Rank 0 writes the final adapters (raw little-endian fp32) to this name inside
  // output_dir (IsSandboxedName).
  std::string adapters_out;
  // Set by the launcher, not by sweeps.
  int64_t rank = 0;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;  // ranks of this trial on this host (LOCAL_WORLD_SIZE)
  std::string store;  // host:port of the c10d TCPStore (rank 0 hosts it)
  // torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE): rank 0 connects to it
  // instead, under a key prefix of the attempt (TORCHELASTIC_RESTART_COUNT).
  bool agent_store = false;
  int64_t restart_count = 0;
  // This rank's own address, or else interface, for its collectives' sockets (the worker
  // sets BAKEOFF_RANK_ADDR / BAKEOFF_RANK_IFACE); both empty: the local address routed
  // toward the store's host (docs/distributed.md, "Addresses").
  std::string rank_address;
  std::string rank_interface;
  // The roots that sweep-named files resolve under (the worker passes its --data-root and
  // the trial's output directory); "" = the current directory.
  std::string data_root;
  std::string output_dir;

  double lora_scale() const { return lora_alpha / static_cast<double>(lora_rank); }
  bool uses_jit() const { return compile_mode == "jit" || compile_mode == "jit+cudagraph"; }
  bool uses_cudagraph() const {
    return compile_mode == "cudagraph" || compile_mode == "jit+cudagraph";
  }
  int64_t tokens_per_step() const { return micro_batch * seq_len * grad_accum * world_size; }

  // The resolved configuration, as the `ready` event carries it.
  nlohmann::json ToJson() const;
};

// The names of every accepted field, for error messages and the sweep validator.
const std::vector<std::string>& TrainerConfigFieldNames();

// Applies the fields of `object` over `config`. Unknown fields and invalid values are an
// InvalidArgument naming the field and what is allowed.
Status ApplyConfigJson(const nlohmann::json& object, TrainerConfig* config);

// Applies one "--micro-batch 4" style override; `value` is parsed as JSON when it can be
// (numbers, booleans, lists, objects) and as a string otherwise.
Status ApplyConfigFlag(const std::string& field, const std::string& value, TrainerConfig* config);

// Checks cross-field rules and resolves `dims`. Call once after every Apply*.
Status FinalizeConfig(TrainerConfig* config);

}  // namespace bakeoff::trainer
