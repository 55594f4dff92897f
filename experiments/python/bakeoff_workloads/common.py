"""What the shipped Python workloads (torch-reference, hf-peft) share: the trial's fields
with the native trainer's names and defaults, the native trainer's data, the thread
decision, torch.distributed set-up and DeepSpeed's configuration. Field names and
defaults follow docs/trainer.md; `bakeoff validate` checks them against
experiments/executors.yaml before any trial starts, so the checks here are the last line.
"""

import json
import math
import os

import bakeoff_report

# The native trainer's defaults (docs/trainer.md) for the fields both workloads accept.
DEFAULTS = {
    "model": "tiny", "seq_len": 128, "micro_batch": 1, "grad_accum": 1, "steps": 20,
    "warmup_steps": 3, "precision": "fp32", "lora_rank": 8, "lora_alpha": 16.0,
    "lora_dropout": 0.0, "lora_targets": ["q", "k", "v", "o"], "lr": 1e-3, "zero_stage": 0,
    "offload": "none", "world_size": 1, "threads": 0, "seed": 0, "dataset": "synthetic",
    "dataset_dtype": "uint16", "grad_clip": 1.0, "device": "cpu", "compile_mode": "eager",
    "compile_scope": "full", "dynamic_shapes": False, "compile_cache": "warm",
}

PRESETS = {
    "tiny": dict(dim=64, layers=2, heads=4, kv_heads=2, ffn_dim=172, vocab=256),
    "small": dict(dim=768, layers=12, heads=12, kv_heads=4, ffn_dim=2048, vocab=16000),
    "llama-7b": dict(dim=4096, layers=32, heads=32, kv_heads=32, ffn_dim=11008, vocab=32000),
    "llama-13b": dict(dim=5120, layers=40, heads=40, kv_heads=40, ffn_dim=13824, vocab=32000),
}

COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


class ConfigError(ValueError):
    """An invalid field value (exit code 2)."""


def load_config(raw):
    """The trial's fields over the defaults, with the model's dimensions resolved."""
    config = dict(DEFAULTS)
    config.update({k: v for k, v in raw.items() if v is not None})
    model = config["model"]
    if isinstance(model, str):
        if model not in PRESETS:
            raise ConfigError(f"model: unknown preset {model!r}; allowed: {', '.join(PRESETS)}")
        config["dims"] = dict(PRESETS[model])
    elif isinstance(model, dict):
        config["dims"] = {k: int(model[k]) for k in ("dim", "layers", "heads", "kv_heads", "ffn_dim", "vocab")}
    else:
        raise ConfigError("model: expected a preset name or an object of dimensions")
    if config["compile_mode"] not in COMPILE_MODES:
        raise ConfigError(f"compile_mode: {config['compile_mode']!r} is not a torch.compile mode; "
                          f"allowed: {', '.join(COMPILE_MODES)}")
    if isinstance(config["lora_targets"], str):
        config["lora_targets"] = config["lora_targets"].split(",")
    return config


def start(run):
    """The trial's config for a workload, checked the same way by both: an invalid field
    exits 2; CUDA without a GPU, and offload on a CPU, end `unsupported` with the reason.
    Returns the config; imports torch."""
    try:
        config = load_config(run.config)
    except ConfigError as error:
        run.fail("failed", str(error), exit_code=2)
    import torch  # noqa: PLC0415
    if config["device"] == "cuda" and not torch.cuda.is_available():
        run.fail("unsupported", "device: cuda, but this PyTorch sees no CUDA device")
    if config["offload"] != "none" and config["device"] != "cuda":
        run.fail("unsupported", f"offload: {config['offload']} moves ZeRO partitions from GPU to host memory; "
                                "on a CPU they are in host memory already (DeepSpeed offload is checked on GPUs only)")
    if config["offload"] != "none" and config["zero_stage"] == 0:
        run.fail("failed", "offload needs zero_stage >= 1 (DeepSpeed offloads ZeRO's partitions)", exit_code=2)
    if config["offload"] == "parameters" and config["zero_stage"] != 3:
        run.fail("failed", "offload: parameters needs zero_stage 3 (DeepSpeed offloads ZeRO-3's partitions)", exit_code=2)
    return config


def decide_threads(config):
    """threads: 0 = the physical cores this process may use divided by the trial's ranks
    on this host (LOCAL_WORLD_SIZE), at least 1: the native trainer's rule. Returns
    (threads, reason)."""
    if config["threads"] > 0:
        return config["threads"], "requested"
    allowed = os.sched_getaffinity(0)
    cores = set()
    current = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("processor", "physical id", "core id"):
                    current[key] = value.strip()
                if not line.strip() and current:
                    if int(current.get("processor", -1)) in allowed:
                        cores.add((current.get("physical id"), current.get("core id")))
                    current = {}
    except (OSError, ValueError):
        pass
    usable = len(cores) or len(allowed)
    pinned = os.environ.get("BAKEOFF_RANK_CPUS", "")
    if pinned:  # the worker pinned this rank to its own cores (docs/sweep.md, "Isolation")
        return usable, f"{usable} physical cores pinned to this rank alone (CPUs {pinned}, by the worker)"
    local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    threads = max(1, usable // local)
    reason = f"{usable} usable physical cores / {local} local ranks"
    if os.environ.get("BAKEOFF_CORES_SHARED"):
        reason += "; cores shared with other trials (worker --share-cores)"
    return threads, reason


def sequence(config, index):
    """Sequence `index` of the global order (seq_len + 1 tokens), as the native trainer's
    DataSource draws it (experiments/trainer/data_source.h)."""
    import torch  # noqa: PLC0415
    n = config["seq_len"] + 1
    vocab = config["dims"]["vocab"]
    seed = int(config["seed"])
    if config["dataset"] == "synthetic":
        g = torch.Generator().manual_seed((seed * 1000003 + index + 11) % (1 << 64))
        return torch.randint(vocab, (n,), generator=g)
    if config["dataset"] == "repeat":
        g = torch.Generator().manual_seed((seed * 2654435761 + 3) % (1 << 64))
        pattern = torch.randint(vocab, (16,), generator=g)
        return pattern[(torch.arange(n) + index) % 16]
    tokens = config["_file_tokens"]
    size = tokens.numel()
    start = (index % size) * config["seq_len"] % size
    return tokens[(torch.arange(n) + start) % size]


def open_dataset(config):
    """Reads a token file named by `dataset` from the worker's data root
    (BAKEOFF_DATA_ROOT): a name inside it, never a path out of it."""
    if config["dataset"] in ("synthetic", "repeat"):
        return
    import torch  # noqa: PLC0415
    root = os.environ.get("BAKEOFF_DATA_ROOT", "")
    name = config["dataset"]
    if not root:
        raise ConfigError(f"dataset {name!r} names a token file, but this worker has no --data-root")
    if os.path.isabs(name) or ".." in name.split("/"):
        raise ConfigError("dataset: a name inside the data root (relative, no '..'), not a path")
    real_root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(real_root, name))
    if not path.startswith(real_root + os.sep):
        raise ConfigError("dataset: the name leads out of the data root (a symbolic link?)")
    width = 4 if config["dataset_dtype"] == "uint32" else 2
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) % width or len(raw) // width < 2:
        raise ConfigError(f"dataset: {name!r} has {len(raw)} bytes; expected whole {config['dataset_dtype']} tokens")
    dtype = torch.int32 if width == 4 else torch.int16
    tokens = torch.frombuffer(bytearray(raw), dtype=dtype).to(torch.int64)
    if width == 2:
        tokens = tokens & 0xFFFF
    if int(tokens.max()) >= config["dims"]["vocab"]:
        raise ConfigError(f"dataset: {name!r} holds tokens outside the model's vocabulary; is it a "
                          f"{config['dataset_dtype']} token file for this model?")
    config["_file_tokens"] = tokens


def micro_batch(config, micro_step, rank, world):
    """This rank's micro-batch at global micro-step `micro_step`: [micro_batch, len+1]."""
    import torch  # noqa: PLC0415
    mb = config["micro_batch"]
    first = micro_step * mb * world + rank * mb
    batch = torch.stack([sequence(config, first + i) for i in range(mb)])
    if config["dynamic_shapes"]:
        length = dynamic_length(config, micro_step)
        batch = batch[:, : length + 1].contiguous()
    return batch


def dynamic_length(config, micro_step):
    """The native trainer's seeded length in [max(1, seq_len/2), seq_len] (splitmix64)."""
    mask = (1 << 64) - 1
    seq = config["seq_len"]
    z = (int(config["seed"]) * 0x9E3779B97F4A7C15 + micro_step + 0x632BE59BD9B4E019) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    z ^= z >> 31
    lo = max(1, seq // 2)
    return lo + z % (seq - lo + 1)


def rendezvous_store(timeout):
    """The c10d store of the trial at MASTER_ADDR:MASTER_PORT. Rank 0 hosts it on that
    address only, not on every interface (security review 2026-12-02, hole 13; the
    native trainer does the same): it binds the socket itself and hands it over, which
    only the classic store backend takes. A port in use is Bakeoff's machinery, not the
    variant: bakeoff_report.InfrastructureError (the worker retries the attempt)."""
    import errno  # noqa: PLC0415
    import socket  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
    if rank != 0:
        return dist.TCPStore(addr, port, world, False, timeout)
    family, kind, proto, _, sockaddr = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        try:
            listener.bind(sockaddr)
        except OSError as error:
            if error.errno != errno.EADDRNOTAVAIL:
                raise
            print(f"{addr} is not an address of this host; the store listens on every interface", file=sys.stderr)
            listener.bind(("::" if family == socket.AF_INET6 else "", port))
        listener.listen(1024)
    except OSError as error:
        listener.close()
        if error.errno == errno.EADDRINUSE:
            raise bakeoff_report.InfrastructureError(
                f"rank 0 hosting the store at {addr}:{port}: another process holds the port") from error
        raise
    return dist.TCPStore(addr, port, world, True, timeout, master_listen_fd=listener.detach(), use_libuv=False)


def init_distributed(config, single_rank_group=False):
    """torch.distributed from torchrun's environment: Gloo on a CPU, NCCL on CUDA, over
    rendezvous_store(). The rank binds the interface the worker chose
    (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME are in its environment already). One rank
    gets no group unless `single_rank_group` (DeepSpeed wants one, and would otherwise
    host its own store on every interface)."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if (world <= 1 and not single_rank_group) or dist.is_initialized():
        return
    backend = "nccl" if config["device"] == "cuda" else "gloo"
    import datetime  # noqa: PLC0415
    timeout = datetime.timedelta(seconds=120)
    dist.init_process_group(backend=backend, timeout=timeout, store=rendezvous_store(timeout),
                            rank=int(os.environ.get("RANK", "0")), world_size=world)
    if config["device"] == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))


def global_mean(value, world):
    """`value` (a tensor) averaged over the ranks: the step's global mean loss."""
    if world > 1:
        import torch.distributed as dist  # noqa: PLC0415
        dist.all_reduce(value)
        value /= world
    return value


def deepspeed_config(config):
    """DeepSpeed's configuration for the trial's ZeRO stage, offload and precision."""
    zero = {"stage": int(config["zero_stage"])}
    if config["offload"] in ("optimizer", "parameters"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": config["device"] == "cuda"}
    if config["offload"] == "parameters":
        zero["offload_param"] = {"device": "cpu", "pin_memory": config["device"] == "cuda"}
    return {
        "train_micro_batch_size_per_gpu": config["micro_batch"],
        "gradient_accumulation_steps": config["grad_accum"],
        "gradient_clipping": float(config["grad_clip"]),
        "optimizer": {"type": "AdamW", "params": {"lr": float(config["lr"]), "betas": [0.9, 0.999],
                                                  "eps": 1e-8, "weight_decay": 0.0, "torch_adam": True}},
        "zero_optimization": zero,
        "bf16": {"enabled": config["precision"] == "bf16"},
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


def flops_per_token(dims, seq_len, lora_rank, targets):
    """docs/flops.md: 4 N_mm + 6 N_lora + 12 L T d."""
    hd = dims["dim"] // dims["heads"]
    kv = dims["kv_heads"] * hd
    shapes = {"q": (dims["dim"], dims["dim"]), "k": (dims["dim"], kv), "v": (dims["dim"], kv),
              "o": (dims["dim"], dims["dim"]), "gate": (dims["dim"], dims["ffn_dim"]),
              "up": (dims["dim"], dims["ffn_dim"]), "down": (dims["ffn_dim"], dims["dim"])}
    n_mm = dims["layers"] * sum(i * o for i, o in shapes.values()) + dims["dim"] * dims["vocab"]
    n_lora = dims["layers"] * sum(lora_rank * (shapes[t][0] + shapes[t][1]) for t in targets)
    attention = 12 * dims["layers"] * seq_len * dims["dim"]
    return 4 * n_mm + 6 * n_lora + attention


def dump(obj):
    return json.dumps(obj, sort_keys=True)


def isfinite(x):
    return x is not None and math.isfinite(x)
