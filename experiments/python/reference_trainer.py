#!/usr/bin/env python3
"""Reference LoRA trainer in Python PyTorch: the same model, data and step as
bakeoff-trainer (experiments/trainer), written as a user would write it. It serves two
purposes: the benchmark baseline (bench/trainer) and the external executor's workload for
real torch.compile modes (--compile default | reduce-overhead | max-autotune, which need
PyTorch 2.x). It writes the documented event stream (docs/trainer.md) on stdout, or to
the file descriptor named by BAKEOFF_EVENTS_FD when the worker sets it.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

from bakeoff_workloads.llama_ops import rms_norm, rotary

PRESETS = {
    "tiny": dict(dim=64, layers=2, heads=4, kv_heads=2, ffn_dim=172, vocab=256),
    "small": dict(dim=768, layers=12, heads=12, kv_heads=4, ffn_dim=2048, vocab=16000),
    "llama-7b": dict(dim=4096, layers=32, heads=32, kv_heads=32, ffn_dim=11008, vocab=32000),
    "llama-13b": dict(dim=5120, layers=40, heads=40, kv_heads=40, ffn_dim=13824, vocab=32000),
}
TARGETS = ["q", "k", "v", "o", "gate", "up", "down"]


def shapes(d):
    hd = d["dim"] // d["heads"]
    kv = d["kv_heads"] * hd
    return {"q": (d["dim"], d["dim"]), "k": (d["dim"], kv), "v": (d["dim"], kv), "o": (d["dim"], d["dim"]),
            "gate": (d["dim"], d["ffn_dim"]), "up": (d["dim"], d["ffn_dim"]), "down": (d["ffn_dim"], d["dim"])}


class LoraModel(torch.nn.Module):
    def __init__(self, d, rank, alpha, targets, dtype, seed):
        super().__init__()
        self.d, self.scale, self.targets = d, alpha / rank, targets
        self.jit, self.traces = False, {}
        g = torch.Generator().manual_seed(seed)
        sh = shapes(d)
        self.embed = (torch.randn(d["vocab"], d["dim"], generator=g) / math.sqrt(d["dim"])).to(dtype)
        self.blocks = []
        self.adapters = torch.nn.ParameterList()
        for _ in range(d["layers"]):
            w = {t: (torch.randn(o, i, generator=g) / math.sqrt(i)).to(dtype) for t, (i, o) in sh.items()}
            w["attn_norm"] = torch.ones(d["dim"], dtype=dtype)
            w["mlp_norm"] = torch.ones(d["dim"], dtype=dtype)
            lora = {}
            for t in targets:
                i, o = sh[t]
                a = torch.nn.Parameter(torch.empty(rank, i).uniform_(-1 / math.sqrt(i), 1 / math.sqrt(i), generator=g))
                b = torch.nn.Parameter(torch.zeros(o, rank))
                self.adapters.extend([a, b])
                lora[t] = (a, b)
            self.blocks.append((w, lora))
        self.final_norm = torch.ones(d["dim"], dtype=dtype)
        self.head = (torch.randn(d["vocab"], d["dim"], generator=g) / math.sqrt(d["dim"])).to(dtype)
        hd = d["dim"] // d["heads"]
        self.inv_freq = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))

    def proj(self, x, w, lora, t):
        y = x @ w[t].t()
        if t in lora:
            a, b = lora[t]
            y = y + (x @ a.to(x.dtype).t()) @ b.to(x.dtype).t() * self.scale
        return y

    def block(self, x, cos, sin, mask, w, lora):
        d = self.d
        bsz, seq = x.shape[0], x.shape[1]
        hd, kvh = d["dim"] // d["heads"], d["kv_heads"]
        group = d["heads"] // kvh
        xn = rms_norm(x, w["attn_norm"])
        q = self.proj(xn, w, lora, "q").view(bsz, seq, d["heads"], hd).transpose(1, 2)
        k = self.proj(xn, w, lora, "k").view(bsz, seq, kvh, hd).transpose(1, 2)
        v = self.proj(xn, w, lora, "v").view(bsz, seq, kvh, hd).transpose(1, 2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        q = q.reshape(bsz, kvh, group, seq, hd)
        scores = (q @ k.unsqueeze(2).transpose(-1, -2)).float() / math.sqrt(hd) + mask
        ctx = (scores.softmax(-1).to(x.dtype) @ v.unsqueeze(2)).reshape(bsz, d["heads"], seq, hd)
        x = x + self.proj(ctx.transpose(1, 2).reshape(bsz, seq, d["dim"]), w, lora, "o")
        hn = rms_norm(x, w["mlp_norm"])
        gate, up = self.proj(hn, w, lora, "gate"), self.proj(hn, w, lora, "up")
        return x + self.proj(F.silu(gate) * up, w, lora, "down")

    def traced_block(self, i, x, cos, sin, mask):
        # TorchScript as a Python user would apply it: torch.jit.trace of each block, the
        # adapters passed as inputs (they need gradients), one trace per input shape.
        w, lora = self.blocks[i]
        flat = [p for t in self.targets for p in lora[t]]
        key = (i, tuple(x.shape))
        if key not in self.traces:
            def fn(x, cos, sin, mask, *adapters):
                pairs = {t: (adapters[2 * j], adapters[2 * j + 1]) for j, t in enumerate(self.targets)}
                return self.block(x, cos, sin, mask, w, pairs)
            self.traces[key] = torch.jit.trace(fn, (x, cos, sin, mask, *flat), check_trace=False)
        return self.traces[key](x, cos, sin, mask, *flat)

    def forward(self, tokens):
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        seq = inputs.shape[1]
        emb = torch.outer(torch.arange(seq, dtype=torch.float64), self.inv_freq)
        emb = torch.cat([emb, emb], -1)
        cos, sin = emb.cos().to(self.embed.dtype), emb.sin().to(self.embed.dtype)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        x = self.embed[inputs]
        for i, (w, lora) in enumerate(self.blocks):
            x = self.traced_block(i, x, cos, sin, mask) if self.jit else self.block(x, cos, sin, mask, w, lora)
        logits = (rms_norm(x, self.final_norm) @ self.head.t()).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def percentile(values, q):
    """Linear interpolation between closest ranks, as bakeoff-trainer computes it."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(len(v) - 1, lo + 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="tiny")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--lora-alpha", type=float, default=16)
    p.add_argument("--lora-targets", default="q,k,v,o")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-mode", choices=["eager", "jit"], default="eager",
                   help="jit: each block traced with torch.jit.trace and run by the TorchScript executor")
    p.add_argument("--compile", default="none", help="torch.compile mode (PyTorch 2.x): none | default | reduce-overhead | max-autotune")
    args = p.parse_args()

    fd = os.environ.get("BAKEOFF_EVENTS_FD")
    out = os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout

    def emit(event, **fields):
        out.write(json.dumps({"event": event, **fields}) + "\n")
        out.flush()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    d = PRESETS[args.model]
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    model = LoraModel(d, args.lora_rank, args.lora_alpha, args.lora_targets.split(","), dtype, args.seed)
    model.jit = args.compile_mode == "jit"
    step_fn = model
    if args.compile != "none":
        if not hasattr(torch, "compile"):
            emit("error", kind="unsupported", message="torch.compile needs PyTorch 2.x; this is " + torch.__version__)
            return 4
        step_fn = torch.compile(model, mode=None if args.compile == "default" else args.compile)
    opt = torch.optim.AdamW(model.adapters.parameters(), lr=args.lr, weight_decay=0.0)
    emit("ready", torch_version=torch.__version__, threads=torch.get_num_threads(), model=d,
         compile_mode=args.compile_mode)

    times = []
    for step in range(args.warmup_steps + args.steps):
        start = time.perf_counter()
        rows = []
        for i in range(args.micro_batch):
            g = torch.Generator().manual_seed(args.seed * 1000003 + step * args.micro_batch + i + 11)
            rows.append(torch.randint(d["vocab"], (args.seq_len + 1,), generator=g))
        tokens = torch.stack(rows)
        loss = step_fn(tokens)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.adapters.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_s = time.perf_counter() - start
        phase = "warmup" if step < args.warmup_steps else "measure"
        if phase == "measure":
            times.append(step_s)
        emit("step", step=step, phase=phase, step_s=step_s, loss=loss.item(),
             tokens=args.micro_batch * args.seq_len,
             peak_mem_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    median = percentile(times, 0.5)
    emit("summary", step_s_median=median, step_s_p10=percentile(times, 0.1), step_s_p90=percentile(times, 0.9),
         tokens_per_s=args.micro_batch * args.seq_len / median)
    return 0


if __name__ == "__main__":
    sys.exit(main())
