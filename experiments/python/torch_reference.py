#!/usr/bin/env python3
"""torch-reference: the native trainer's LoRA model, data and step in plain PyTorch 2.x,
with torch.compile's modes and scopes and ZeRO through DeepSpeed.

Run by a worker as the `torch-reference` template of experiments/executors.yaml, one
process per rank with torchrun's environment; by hand:

    scripts/python -m torch.distributed.run --nproc-per-node 2 \
        experiments/python/torch_reference.py --config trial.json

Fields (docs/executors.md): the native trainer's model, seq_len, micro_batch, grad_accum,
steps, warmup_steps, precision, lora_*, lr, grad_clip, zero_stage, offload, world_size,
threads, seed, dataset, dynamic_shapes, device; `compile_mode` is eager or a
torch.compile mode (default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs)
and `compile_scope` what it compiles (full, attention, mlp, adapters). ZeRO stage 0
all-reduces the adapters' gradients itself; stages 1-3 and offload run DeepSpeed.
"""

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bakeoff_report  # noqa: E402
from bakeoff_workloads import common  # noqa: E402
from bakeoff_workloads.llama_ops import rms_norm, rotary  # noqa: E402

run = bakeoff_report.init()
if run.config.get("compile_cache") == "cold":
    # Before torch is imported: Inductor and Triton read their cache directories once.
    cold = os.path.join(os.environ.get("BAKEOFF_OUTPUT_DIR", "."), f"compile-cache-rank{run.rank}")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cold, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cold, "triton")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Adapter(torch.nn.Module):
    """The low-rank path B(A(dropout(x))) * alpha/r; fp32 parameters, run in x's dtype."""

    def __init__(self, a, fan_out, alpha, dropout):
        super().__init__()
        rank = a.shape[0]
        self.a = torch.nn.Parameter(a)
        self.b = torch.nn.Parameter(torch.zeros(fan_out, rank))
        self.scale = alpha / rank
        self.dropout = dropout

    def forward(self, x):
        if self.dropout > 0 and self.training:
            x = F.dropout(x, self.dropout)
        return (x @ self.a.to(x.dtype).t()) @ self.b.to(x.dtype).t() * self.scale


class LoraLinear(torch.nn.Module):
    def __init__(self, weight, adapter):
        super().__init__()
        self.register_buffer("weight", weight)
        self.adapter = adapter

    def forward(self, x):
        y = x @ self.weight.t()
        return y if self.adapter is None else y + self.adapter(x)


class Attention(torch.nn.Module):
    def __init__(self, d, proj):
        super().__init__()
        self.d = d
        self.q, self.k, self.v, self.o = proj["q"], proj["k"], proj["v"], proj["o"]

    def forward(self, x, cos, sin, mask):
        d = self.d
        bsz, seq = x.shape[0], x.shape[1]
        hd, kvh = d["dim"] // d["heads"], d["kv_heads"]
        group = d["heads"] // kvh
        q = self.q(x).view(bsz, seq, d["heads"], hd).transpose(1, 2)
        k = self.k(x).view(bsz, seq, kvh, hd).transpose(1, 2)
        v = self.v(x).view(bsz, seq, kvh, hd).transpose(1, 2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        q = q.reshape(bsz, kvh, group, seq, hd)
        scores = (q @ k.unsqueeze(2).transpose(-1, -2)).float() / math.sqrt(hd) + mask
        ctx = (scores.softmax(-1).to(x.dtype) @ v.unsqueeze(2)).reshape(bsz, d["heads"], seq, hd)
        return self.o(ctx.transpose(1, 2).reshape(bsz, seq, d["dim"]))


class Mlp(torch.nn.Module):
    def __init__(self, proj):
        super().__init__()
        self.gate, self.up, self.down = proj["gate"], proj["up"], proj["down"]

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(torch.nn.Module):
    def __init__(self, d, dtype, proj):
        super().__init__()
        self.register_buffer("attn_norm", torch.ones(d["dim"], dtype=dtype))
        self.register_buffer("mlp_norm", torch.ones(d["dim"], dtype=dtype))
        self.attention = Attention(d, proj)
        self.mlp = Mlp(proj)

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(rms_norm(x, self.attn_norm), cos, sin, mask)
        return x + self.mlp(rms_norm(x, self.mlp_norm))


# The projections in the native trainer's order (experiments/trainer/model_dims.h).
PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")


def frozen_units(d, seed):
    """The native trainer's frozen weights (experiments/trainer/frozen_weights.cc), drawn
    the same way so both executors train the same model: unit i (embedding, each block's
    two norms and seven projections, final norm and head) is one randn of its size from
    generator seed * 1000003 + i + 1; norms are ones, weights scaled by 1/sqrt(fan_in)."""
    hd = d["dim"] // d["heads"]
    kv = d["kv_heads"] * hd
    shape = {"q": (d["dim"], d["dim"]), "k": (kv, d["dim"]), "v": (kv, d["dim"]), "o": (d["dim"], d["dim"]),
             "gate": (d["ffn_dim"], d["dim"]), "up": (d["ffn_dim"], d["dim"]), "down": (d["dim"], d["ffn_dim"])}
    units = [[("embed", (d["vocab"], d["dim"]))]]
    for _ in range(d["layers"]):
        units.append([("attn_norm", (d["dim"],)), ("mlp_norm", (d["dim"],))] + [(p, shape[p]) for p in PROJECTIONS])
    units.append([("final_norm", (d["dim"],)), ("head", (d["vocab"], d["dim"]))])
    out = []
    for i, unit in enumerate(units):
        g = torch.Generator().manual_seed((seed * 1000003 + i + 1) % (1 << 64))
        flat = torch.randn(sum(math.prod(s) for _, s in unit), generator=g)
        tensors, offset = {}, 0
        for name, s in unit:
            n = math.prod(s)
            t = flat[offset:offset + n].view(s)
            tensors[name] = torch.ones(s) if len(s) == 1 else t * (1.0 / math.sqrt(s[-1]))
            offset += n
        out.append(tensors)
    return out


def adapter_a(d, targets, rank, seed):
    """LoRA A of every targeted projection, layer by layer, as the native trainer draws
    them (experiments/trainer/adapters.cc): one generator (seed * 7919 + 17), uniform
    in +-1/sqrt(fan_in); B starts at zero."""
    g = torch.Generator().manual_seed((seed * 7919 + 17) % (1 << 64))
    fan_in = {"q": d["dim"], "k": d["dim"], "v": d["dim"], "o": d["dim"], "gate": d["dim"], "up": d["dim"],
              "down": d["ffn_dim"]}
    out = []
    for _ in range(d["layers"]):
        layer = {}
        for p in PROJECTIONS:
            if p in targets:
                bound = 1.0 / math.sqrt(fan_in[p])
                layer[p] = torch.empty(rank, fan_in[p]).uniform_(-bound, bound, generator=g)
        out.append(layer)
    return out


class LoraModel(torch.nn.Module):
    """The native trainer's model (experiments/trainer/lora_model.h) with its weights:
    Llama blocks with frozen random weights and LoRA adapters on the target projections."""

    def __init__(self, config, dtype):
        super().__init__()
        d = config["dims"]
        hd = d["dim"] // d["heads"]
        units = frozen_units(d, int(config["seed"]))
        adapters = adapter_a(d, config["lora_targets"], config["lora_rank"], int(config["seed"]))
        self.register_buffer("embed", units[0]["embed"].to(dtype))
        blocks = []
        for layer in range(d["layers"]):
            unit = units[layer + 1]
            proj = {}
            for name in PROJECTIONS:
                adapter = None
                if name in adapters[layer]:
                    adapter = Adapter(adapters[layer][name], unit[name].shape[0], config["lora_alpha"],
                                      config["lora_dropout"])
                proj[name] = LoraLinear(unit[name].to(dtype), adapter)
            blocks.append(Block(d, dtype, proj))
        self.blocks = torch.nn.ModuleList(blocks)
        self.register_buffer("final_norm", units[-1]["final_norm"].to(dtype))
        self.register_buffer("head", units[-1]["head"].to(dtype))
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)),
                             persistent=False)

    def forward(self, tokens):
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        seq = inputs.shape[1]
        emb = torch.outer(torch.arange(seq, dtype=torch.float64, device=inputs.device), self.inv_freq)
        emb = torch.cat([emb, emb], -1)
        cos, sin = emb.cos().to(self.embed.dtype), emb.sin().to(self.embed.dtype)
        mask = torch.full((seq, seq), float("-inf"), device=inputs.device).triu(1)
        x = self.embed[inputs]
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        logits = (rms_norm(x, self.final_norm) @ self.head.t()).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


def optimizer_state_bytes(optimizer):
    """The optimizer state this rank holds (Adam's two moments; under DeepSpeed ZeRO the
    wrapped optimizer's partitioned states), measured from its tensors."""
    base = getattr(optimizer, "optimizer", optimizer)  # DeepSpeed's ZeRO optimizers wrap torch's
    return tensor_bytes(t for state in base.state.values() for t in state.values())


def apply_compile(model, config):
    """torch.compile on the chosen scope; returns the callable that computes the loss."""
    mode = config["compile_mode"]
    if mode == "eager":
        return model
    kwargs = {"mode": None if mode == "default" else mode, "dynamic": bool(config["dynamic_shapes"])}
    scope = config["compile_scope"]
    if scope == "full":
        return torch.compile(model, **kwargs)
    for block in model.blocks:
        if scope == "attention":
            block.attention = torch.compile(block.attention, **kwargs)
        elif scope == "mlp":
            block.mlp = torch.compile(block.mlp, **kwargs)
        elif scope == "adapters":
            for module in list(block.modules()):
                if isinstance(module, LoraLinear) and module.adapter is not None:
                    module.adapter = torch.compile(module.adapter, **kwargs)
    return model


def main():
    config = common.start(run)
    threads, threads_reason = common.decide_threads(config)
    torch.set_num_threads(threads)
    # DeepSpeed wants a group even for one rank: ours, whose store is on MASTER_ADDR only.
    common.init_distributed(config, single_rank_group=config["zero_stage"] > 0 or config["offload"] != "none")
    common.open_dataset(config)
    rank, world = run.rank, run.world_size
    device = torch.device("cuda", run.local_rank) if config["device"] == "cuda" else torch.device("cpu")
    dtype = torch.bfloat16 if config["precision"] == "bf16" else torch.float32

    torch.manual_seed(int(config["seed"]))
    model = LoraModel(config, dtype).to(device)
    adapters = [p for p in model.parameters() if p.requires_grad]
    forward = apply_compile(model, config)
    use_deepspeed = config["zero_stage"] > 0 or config["offload"] != "none"
    engine = None
    if use_deepspeed:
        import deepspeed  # noqa: PLC0415
        ds_config = common.deepspeed_config(config)
        engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=adapters, config=ds_config)
        adapters = [p for p in engine.module.parameters() if p.requires_grad]
    else:
        optimizer = torch.optim.AdamW(adapters, lr=float(config["lr"]), weight_decay=0.0)
    n_frozen = sum(b.numel() for b in model.buffers())
    n_lora = sum(p.numel() for p in adapters)
    run.ready(executor="torch-reference", model={**config["dims"], "frozen_params": n_frozen, "lora_params": n_lora},
              comm_backend=("nccl" if device.type == "cuda" else "gloo") if world > 1 else "none")

    comm_total = 0.0
    grad_bytes = None  # measured on the plain path; DeepSpeed keeps gradients in its own buffers
    for step in range(config["warmup_steps"] + config["steps"]):
        tokens_this_step = 0
        with run.step() as record:
            loss_sum = torch.zeros((), dtype=torch.float32)
            comm_s = 0.0
            comm_bytes = 0
            for micro in range(config["grad_accum"]):
                batch = common.micro_batch(config, step * config["grad_accum"] + micro, rank, world).to(device)
                tokens_this_step += (batch.shape[1] - 1) * batch.shape[0] * world
                loss = forward(batch)
                if engine is not None:
                    engine.backward(loss)
                    engine.step()
                else:
                    (loss / config["grad_accum"]).backward()
                loss_sum += loss.detach().float().cpu()
            if engine is None:
                if world > 1:
                    import torch.distributed as dist  # noqa: PLC0415
                    flat = torch.cat([p.grad.reshape(-1) for p in adapters])
                    start = time.perf_counter()
                    dist.all_reduce(flat)
                    comm_s = time.perf_counter() - start
                    comm_bytes = flat.numel() * flat.element_size()
                    flat /= world
                    offset = 0
                    for p in adapters:
                        n = p.numel()
                        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                        offset += n
                grad_bytes = tensor_bytes(p.grad for p in adapters if p.grad is not None)
                if config["grad_clip"] > 0:
                    record.grad_norm = torch.nn.utils.clip_grad_norm_(adapters, float(config["grad_clip"]))
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            record.loss = common.global_mean(loss_sum / config["grad_accum"], world)
            record.tokens = tokens_this_step
            record.lr = float(config["lr"])
            if world > 1 and engine is None:
                record.comm_s, record.comm_bytes = comm_s, comm_bytes
                # Measured steps only: a warm-up step's all-reduce also waits for the
                # other rank's compilation, which is not communication.
                if step >= config["warmup_steps"]:
                    comm_total += comm_s

    applied = {"executor": "torch-reference", "compile_mode": config["compile_mode"],
               "compile_scope": config["compile_scope"] if config["compile_mode"] != "eager" else "none",
               "dynamic_shapes": bool(config["dynamic_shapes"]), "precision": config["precision"],
               "compile_cache": config.get("compile_cache", "warm"),
               "zero_stage": engine.zero_optimization_stage() if engine is not None else 0,
               "zero_impl": "deepspeed" if engine is not None else "all-reduce",
               "offload": config["offload"], "threads": threads, "world_size": world,
               "micro_batch": config["micro_batch"],
               "decisions": {"threads": {"value": threads, "reason": threads_reason}}}
    compile_info, outcome = bakeoff_report.compile_outcome(config["compile_mode"], run)
    applied.update(outcome)
    flops = common.flops_per_token(config["dims"], config["seq_len"], config["lora_rank"], config["lora_targets"])
    run.summary(applied=applied, compile=compile_info,
                frozen_bytes=n_frozen * (2 if dtype == torch.bfloat16 else 4),
                trainable_bytes=n_lora * 4,
                **({"grad_bytes": grad_bytes} if grad_bytes is not None else {}),
                optimizer_bytes=optimizer_state_bytes(optimizer),
                comm_s_per_step=comm_total / max(1, config["steps"]),
                flops_per_token=flops)
    if world > 1:
        import torch.distributed as dist  # noqa: PLC0415
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    with run.guard():
        code = main()
    sys.exit(code)
