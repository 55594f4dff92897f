#!/usr/bin/env python3
"""Runs the issue-15 GPU benchmark (bench/gpu/README.md): bakeoff-trainer (eager, jit,
cudagraph, jit+cudagraph) and the Python workloads torch-reference and hf-peft (eager and
torch.compile's default, reduce-overhead, max-autotune-no-cudagraphs) on a Llama-7B-shaped
LoRA, one process per run, each with its own timeout, all within --limit-s. Writes
runs/<name>/{config.json,events.jsonl,stderr.log}, results.json and results.md into --out,
and prints the table. Uses only the standard library: it runs under any Python that has
the PyTorch being measured (the workloads import torch themselves).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

# Dense bf16 tensor-core peaks (FLOP/s) by GPU name, from the vendors' data sheets; MFU
# is left out for a GPU not listed unless --peak-tflops is given.
PEAKS = [
    ("H200", 989.4e12), ("H100 NVL", 835e12), ("H100 PCIe", 756e12), ("H100", 989.4e12),
    ("GH200", 989.4e12), ("A100", 312e12), ("L40S", 362e12), ("A10G", 70e12), ("A10", 125e12),
    ("L4", 121e12),
]

LLAMA_7B = {"dim": 4096, "layers": 32, "heads": 32, "kv_heads": 32, "ffn_dim": 11008, "vocab": 32000}
TINY = {"dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn_dim": 172, "vocab": 256}
LORA_TARGETS = ["q", "k", "v", "o"]


def flops_per_token(dims, rank, targets, seq_len):
    """docs/flops.md: 4 N_mm + 6 N_lora + 12 L T d."""
    d, f, layers = dims["dim"], dims["ffn_dim"], dims["layers"]
    kv = d * dims["kv_heads"] // dims["heads"]
    shapes = {"q": (d, d), "k": (d, kv), "v": (d, kv), "o": (d, d), "gate": (d, f), "up": (d, f), "down": (f, d)}
    n_mm = layers * sum(i * o for i, o in shapes.values()) + dims["vocab"] * d
    n_lora = layers * sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)
    return 4 * n_mm + 6 * n_lora + 12 * layers * seq_len * d


def gpu_peak(device, override_tflops):
    if override_tflops:
        return override_tflops * 1e12, "given (--peak-tflops)"
    if device != "cuda":
        return None, "cpu: no peak"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None, "nvidia-smi unavailable"
    name = out[0] if out else ""
    for key, peak in PEAKS:
        if key in name:
            return peak, f"{name}: {peak / 1e12:.1f} TFLOP/s dense bf16"
    return None, f"{name or 'unknown GPU'}: not in the peak table; pass --peak-tflops"


def read_events(path):
    summary, error, ready = None, None, None
    try:
        with open(path) as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                kind = event.get("event")
                if kind == "summary" and summary is None:
                    summary = event
                elif kind == "error" and error is None:
                    error = event
                elif kind == "ready" and ready is None:
                    ready = event
    except OSError:
        pass
    return summary, error, ready


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(name, command, config, args, deadline, env=None):
    """One run in its own process group, killed with its children at its timeout."""
    run_dir = os.path.join(args.out, "runs", name)
    os.makedirs(run_dir, exist_ok=True)
    config_path = os.path.join(run_dir, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=1)
    result = {"name": name, "config": config}
    remaining = deadline - time.monotonic()
    if remaining < 15:
        result.update(status="skipped", reason=f"overall limit: {remaining:.0f} s left")
        return result
    timeout = min(args.step_timeout_s, remaining - 5)
    result["command"] = command + ["--config", config_path]
    if args.dry_run:
        result.update(status="dry-run", timeout_s=round(timeout))
        return result
    start = time.monotonic()
    with open(os.path.join(run_dir, "events.jsonl"), "w") as out, \
            open(os.path.join(run_dir, "stderr.log"), "w") as err:
        try:
            proc = subprocess.Popen(result["command"], stdout=out, stderr=err, cwd=run_dir,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
        except OSError as error:
            result.update(status="failed", reason=f"could not start: {error}")
            return result
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    result["wall_s"] = round(time.monotonic() - start, 1)
    summary, error, ready = read_events(os.path.join(run_dir, "events.jsonl"))
    if rc is None:
        result.update(status="timeout", reason=f"killed after {timeout:.0f} s")
    elif summary is not None and rc == 0:
        result["status"] = "ok"
    elif error is not None:
        result.update(status=error.get("kind", "failed"), reason=error.get("message", ""))
    else:
        with open(os.path.join(run_dir, "stderr.log")) as f:
            tail = f.read()[-400:]
        result.update(status="failed", reason=f"exit {rc}: {tail}")
    result["exit_code"] = rc
    if summary is not None:
        result["summary"] = {k: summary.get(k) for k in (
            "step_s_median", "step_s_p10", "step_s_p90", "first_step_s", "warmup_s", "tokens_per_s",
            "tokens_per_step", "peak_mem_bytes", "peak_reserved_bytes", "flops_per_s", "mfu")}
        compile_info = summary.get("compile") or {}
        result["reported_compile_s"] = compile_info.get("compile_s") if isinstance(compile_info, dict) else None
        result["applied"] = summary.get("applied")
    if ready is not None:
        env_info = ready.get("environment") or {}
        result["torch_version"] = env_info.get("torch_version") or ready.get("torch_version")
    return result


def derive(results, config, peak):
    """tokens/s, MFU, and compile overhead with its break-even against the eager run of
    the same workload and micro-batch."""
    for r in results:
        s = r.get("summary")
        if not s or not s.get("step_s_median"):
            continue
        fpt = flops_per_token(config["dims"], config["lora_rank"], LORA_TARGETS, config["seq_len"])
        r["flops_per_token"] = fpt
        tps = s.get("tokens_per_s") or 0
        r["mfu"] = tps * fpt / peak if peak and tps else None
        warmup_steps = r["config"]["warmup_steps"]
        # Time the warm-up steps took beyond steady-state steps: compilation, autotuning,
        # CUDA graph capture, allocator growth.
        r["overhead_s"] = max(0.0, (s.get("warmup_s") or 0) - warmup_steps * s["step_s_median"])
    for r in results:
        if "overhead_s" not in r or r["mode"] == "eager":
            continue
        eager = next((e for e in results if e["workload"] == r["workload"] and e["mode"] == "eager"
                      and e["micro_batch"] == r["micro_batch"] and "overhead_s" in e), None)
        if eager is None:
            continue
        compile_s = r.get("reported_compile_s")
        if compile_s is None:
            compile_s = max(0.0, r["overhead_s"] - eager["overhead_s"])
        r["compile_s"] = compile_s
        saved = eager["summary"]["step_s_median"] - r["summary"]["step_s_median"]
        r["break_even_steps"] = (compile_s / saved) if saved > 0 else None
        r["break_even_note"] = "" if saved > 0 else "never: not faster than eager"


def table(results):
    gib = 1024 ** 3
    lines = ["| workload | mode | micro-batch | status | tokens/s | MFU | peak alloc GiB | peak reserved GiB "
             "| compile s | break-even steps |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        s = r.get("summary") or {}

        def num(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        status = r["status"] + (f" ({r['reason'][:80]})" if r.get("reason") and r["status"] != "ok" else "")
        be = num(r.get("break_even_steps"), ".0f") if r.get("break_even_steps") is not None \
            else (r.get("break_even_note") or "-")
        lines.append(
            f"| {r['workload']} | {r['mode']} | {r['micro_batch']} | {status} | {num(s.get('tokens_per_s'), '.0f')} "
            f"| {num(r['mfu'] * 100, '.1f') + '%' if r.get('mfu') else '-'} "
            f"| {num((s.get('peak_mem_bytes') or 0) / gib, '.2f') if s else '-'} "
            f"| {num((s.get('peak_reserved_bytes') or 0) / gib, '.2f') if s else '-'} "
            f"| {num(r.get('compile_s'), '.1f')} | {be} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    p.add_argument("--out", required=True)
    p.add_argument("--trainer", default="", help="bakeoff-trainer binary; empty: native runs are skipped")
    p.add_argument("--python", default=sys.executable, help="Python for the workloads (default: this one)")
    p.add_argument("--limit-s", type=float, default=350, help="all runs end within this")
    p.add_argument("--step-timeout-s", type=float, default=75, help="one run's limit")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="the `tiny` model at seq 128 (a CPU smoke test)")
    p.add_argument("--layers", type=int, default=4,
                   help="Llama-7B layers to keep (default 4: ~20 runs must fit 6 minutes; MFU is per layer)")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--micro-batches", default="1,2,4,8", help="native eager sweeps these; the rest run the largest that fit")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup-steps", type=int, default=4,
                   help="4: the cudagraph modes capture on the 4th micro-batch, inside the warm-up")
    p.add_argument("--native-modes", default="eager,jit,cudagraph,jit+cudagraph")
    p.add_argument("--python-modes", default="eager,default,reduce-overhead,max-autotune-no-cudagraphs")
    p.add_argument("--workloads", default="native,torch-reference,hf-peft")
    p.add_argument("--peak-tflops", type=float, default=0)
    p.add_argument("--dry-run", action="store_true", help="write the configs and the plan; run nothing")
    args = p.parse_args()
    if args.trainer:
        args.trainer = os.path.abspath(args.trainer)
    deadline = time.monotonic() + args.limit_s
    os.makedirs(args.out, exist_ok=True)

    dims = dict(TINY) if args.tiny else dict(LLAMA_7B, layers=args.layers)
    seq_len = 128 if args.tiny else args.seq_len
    base = {"model": dims, "seq_len": seq_len, "lora_rank": args.lora_rank, "lora_alpha": 2 * args.lora_rank,
            "lora_targets": LORA_TARGETS, "precision": "bf16", "device": args.device, "steps": args.steps,
            "warmup_steps": args.warmup_steps, "dataset": "synthetic", "seed": 0}
    peak, peak_note = gpu_peak(args.device, args.peak_tflops)
    workloads = args.workloads.split(",")
    micro_batches = [int(m) for m in args.micro_batches.split(",")]
    results = []

    def record(workload, mode, mb, result):
        result.update(workload=workload, mode=mode, micro_batch=mb)
        results.append(result)
        s = result.get("summary") or {}
        print(f"[bench] {workload} {mode} mb={mb}: {result['status']} "
              f"{s.get('tokens_per_s') or ''} tokens/s {result.get('reason', '')[:200]}", flush=True)
        return result

    try:
        run_all(args, base, workloads, micro_batches, record, deadline)
    except Exception as error:  # noqa: BLE001 -- whatever happens, the results so far are written
        results.append({"workload": "bench.py", "mode": "-", "micro_batch": "-", "status": "failed",
                        "reason": f"{type(error).__name__}: {error}"})
    write_results(args, dims, seq_len, peak, peak_note, results, deadline)
    return 0


def run_all(args, base, workloads, micro_batches, record, deadline):
    # 1. Native eager over micro-batches, up to the first that fails (out of memory).
    best_mb = micro_batches[0]
    if "native" in workloads:
        if not args.trainer or not (args.dry_run or os.access(args.trainer, os.X_OK)):
            for mode in args.native_modes.split(","):
                record("native", mode, "-", {"status": "skipped", "reason": "no trainer binary (build failed?)"})
        else:
            for mb in micro_batches:
                r = record("native", "eager", mb, run_one(f"native-eager-mb{mb}", [args.trainer],
                                                          dict(base, micro_batch=mb, compile_mode="eager"),
                                                          args, deadline))
                if r["status"] not in ("ok", "dry-run"):
                    break
                best_mb = mb
            for mode in [m for m in args.native_modes.split(",") if m != "eager"]:
                record("native", mode, best_mb, run_one(f"native-{mode.replace('+', '-')}-mb{best_mb}", [args.trainer],
                                                        dict(base, micro_batch=best_mb, compile_mode=mode),
                                                        args, deadline))
    # 2. The Python workloads at that micro-batch.
    scripts = {"torch-reference": "torch_reference.py", "hf-peft": "hf_peft.py"}
    for workload in [w for w in workloads if w in scripts]:
        script = os.path.join(args.repo, "experiments", "python", scripts[workload])
        for mode in args.python_modes.split(","):
            if not os.path.exists(script):
                record(workload, mode, best_mb, {"status": "skipped", "reason": f"{script} not present"})
                continue
            record(workload, mode, best_mb,
                   run_one(f"{workload}-{mode}-mb{best_mb}", [args.python, script],
                           dict(base, micro_batch=best_mb, compile_mode=mode), args, deadline,
                           env={"PYTHONUNBUFFERED": "1", "MASTER_ADDR": "127.0.0.1",
                                "MASTER_PORT": str(free_port()), "RANK": "0", "LOCAL_RANK": "0",
                                "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}))


def write_results(args, dims, seq_len, peak, peak_note, results, deadline):
    derive(results, {"dims": dims, "lora_rank": args.lora_rank, "seq_len": seq_len}, peak)
    doc = {"model": dims, "seq_len": seq_len, "lora_rank": args.lora_rank, "lora_targets": LORA_TARGETS,
           "precision": "bf16", "device": args.device, "peak_flops": peak, "peak_note": peak_note,
           "flops_per_token": flops_per_token(dims, args.lora_rank, LORA_TARGETS, seq_len),
           "elapsed_s": round(args.limit_s - (deadline - time.monotonic()), 1), "runs": results}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    layers_note = "tiny" if args.tiny else f"Llama-7B shapes, {dims['layers']} of 32 layers"
    md = (f"{layers_note}, seq {seq_len}, LoRA r {args.lora_rank} on q k v o, bf16, {args.device}; "
          f"peak: {peak_note}\n\n" + table(results) + "\n")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    sys.exit(main())
