#!/usr/bin/env python3
"""Real A/A sweeps: how often does Bakeoff's default design give a false verdict here?

Each sweep has two variants that differ only in their seed (the same shapes, the same
work), so any "faster" or "slower" verdict is a false one. Every sweep runs through
`bakeoff local` with two workers and Bakeoff's defaults (repeats, order, threads,
placement, pinning): what a user gets without tuning anything. The report's JSON gives
the verdict, the interval and whether the comparison was confounded with a worker.

  bench/validity/aa.py --kind native --sweeps 30            # the native LoRA trainer
  bench/validity/aa.py --kind torch-reference --sweeps 10   # PyTorch, via the command executor
  bench/validity/aa.py --kind native --slowdown 0.10        # a planted, known 1/1.10 effect
  bench/validity/aa.py --kind native --order lockstep --load bursts   # lockstep, under a bursty load

--order picks the sweep's order (interleaved, Bakeoff's default, or lockstep: the two
sides of each pair run at once on the same core and take turns step by step). --load
bursts runs a CPU burner beside the sweeps (burner(): on a random core, busy for 1-4 s,
then idle for 1-4 s, forever), the kind of few-second slowdown a shared VM's CPUs have.

With --slowdown X the second variant sets the trainer's test instrument `test_slowdown: X`
(docs/trainer.md: each step lasts 1 + X times its work), so the true tokens/s ratio is
1/(1 + X): the summary counts the intervals that cover it and the verdicts that find it.

Writes one JSON line per sweep to --out (appends, so a run can be resumed) and prints a
summary; bench/validity/README.md holds the measured table. Standard library only.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Tiny trials: a 2-layer model, so that a sweep takes about a minute on 2 cores. The two
# kinds share the model and the run; they differ in the executor and LoRA's targets.
_TINY_RUN = """\
  model: {dim: 128, layers: 2, heads: 4, kv_heads: 2, ffn_dim: 344, vocab: 1024}
  seq_len: 64
  micro_batch: 2
  warmup_steps: 2
  steps: 10
  dataset: synthetic
"""
WORKLOADS = {
    "native": "  executor: lora\n" + _TINY_RUN +
              "  lora: {rank: 8, alpha: 16, dropout: 0.0, targets: [q, v]}\n",
    "torch-reference": "  executor: command\n  command: {template: torch-reference}\n" + _TINY_RUN +
                       "  lora: {rank: 8, alpha: 16, dropout: 0.0, targets: [q, k, v, o]}\n",
}


def sweep_yaml(kind, index, slowdown, repeats=None, order="interleaved", steps=None):
    if slowdown > 0:
        axis = (f"  test_slowdown: {{values: [0, {slowdown}]}}\n", "baseline: {test_slowdown: 0}\n",
                f"  A planted slowdown: the second variant's steps last {1 + slowdown} times their work.\n")
    else:
        axis = ("  seed: {values: [1, 2]}\n", "baseline: {seed: 1}\n",
                "  A/A: two variants that differ only in their seed. Any verdict is a false one.\n")
    return (
        f"name: aa-{kind}-{index}\n"
        "question: >-\n" + axis[2] +
        "workload:\n" + (WORKLOADS[kind] if steps is None else WORKLOADS[kind].replace("steps: 10", f"steps: {steps}")) +
        "method: grid\n"
        "parameters:\n" + axis[0] + axis[1] +
        "resources: {device: cpu}\n"
        "limits: {trial_timeout: 5m, max_attempts: 2}\n" +
        f"order: {order}\n" +
        (f"repeats: {repeats}\n" if repeats else "")
    )


def run_one(bakeoff, kind, index, workers, slowdown, repeats=None, order="interleaved", steps=None):
    with tempfile.TemporaryDirectory(prefix="bakeoff-aa-") as tmp:
        spec = os.path.join(tmp, "sweep.yaml")
        with open(spec, "w") as f:
            f.write(sweep_yaml(kind, index, slowdown, repeats, order, steps))
        db = os.path.join(tmp, "results.db")
        started = time.monotonic()
        proc = subprocess.run(
            [bakeoff, "local", spec, "--workers", str(workers), "--db", db, "--format", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
        wall = time.monotonic() - started
        if proc.returncode != 0 or not proc.stdout.strip():
            return {"kind": kind, "index": index, "exit": proc.returncode, "wall_s": wall,
                    "error": proc.stderr[-2000:]}
        report = json.loads(proc.stdout)
    compared = [v for v in report["variants"] if not v["is_baseline"]]
    c = compared[0]["comparison"]
    trials = report["trials"]
    return {
        "kind": kind, "index": index, "exit": 0, "wall_s": round(wall, 1), "slowdown": slowdown,
        "order": order, "status": c["status"], "interval_method": c.get("interval_method"),
        "sd_log_ratio": (c.get("repeats") or {}).get("sd_log_ratio"),
        "within_pair_iqr": (c.get("lockstep") or {}).get("within_pair_iqr"),
        "verdict": c.get("verdict"),
        "speedup": c.get("speedup", {}).get("value"),
        "ci_low": c.get("speedup", {}).get("ci_low"),
        "ci_high": c.get("speedup", {}).get("ci_high"),
        "pairs": c.get("pairs"),
        "worker_confound": c.get("worker_confound"),
        "workers": sorted({t["worker"] for t in trials if t.get("worker")}),
        "trials": len(trials),
        "noisy_trials": sum(1 for t in trials if t.get("noisy")),
        "threads_decision": next((t["applied"].get("threads") for t in trials
                                  if isinstance(t.get("applied"), dict) and "threads" in t["applied"]), None),
    }


def summarise(rows, slowdown):
    done = [r for r in rows if r.get("exit") == 0 and r.get("status") == "compared"]
    if slowdown > 0:
        truth = 1 / (1 + slowdown)
        covered = [r for r in done if r.get("ci_low") and r["ci_low"] <= truth <= r["ci_high"]]
        found = [r for r in done if r["verdict"] == "slower"]
        wrong = [r for r in done if r["verdict"] == "faster"]
        sds = sorted(r["sd_log_ratio"] for r in done if r.get("sd_log_ratio") is not None)
        return {"sweeps": len(rows), "compared": len(done), "true_ratio": round(truth, 4),
                "median_sd_log_ratio": round(sds[len(sds) // 2], 4) if sds else None,
                "covered": len(covered), "coverage": len(covered) / len(done) if done else None,
                "found_slower": len(found), "power": len(found) / len(done) if done else None,
                "said_faster": len(wrong),
                "median_estimate": sorted(r["speedup"] for r in done)[len(done) // 2] if done else None}
    false = [r for r in done if r["verdict"] in ("faster", "slower")]
    confounded = [r for r in done if r.get("worker_confound")]
    unclear = [r for r in done if r["verdict"] == "unclear"]
    widths = sorted(r["ci_high"] / r["ci_low"] for r in done if r.get("ci_low") and r.get("ci_high"))
    sds = sorted(r["sd_log_ratio"] for r in done if r.get("sd_log_ratio") is not None)
    out = {
        "sweeps": len(rows), "compared": len(done), "failed_runs": len(rows) - len(done),
        "false_verdicts": len(false), "false_rate": (len(false) / len(done)) if done else None,
        "confounded": len(confounded), "unclear": len(unclear),
        "median_ci": None, "wall_s_median": None,
        "median_sd_log_ratio": round(sds[len(sds) // 2], 4) if sds else None,
    }
    if widths:
        mid = widths[len(widths) // 2]
        # An interval high/low = w around 1 is about +-(sqrt(w) - 1).
        out["median_ci"] = f"+-{(math.sqrt(mid) - 1) * 100:.1f}%"
    walls = sorted(r["wall_s"] for r in rows if "wall_s" in r)
    if walls:
        out["wall_s_median"] = walls[len(walls) // 2]
    if done:
        # Exact binomial 95% upper bound on the false-verdict rate (Clopper-Pearson).
        out["false_rate_upper95"] = clopper_pearson_upper(len(false), len(done))
    return out


def clopper_pearson_upper(k, n, alpha=0.05):
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):  # bisection on P(X <= k | p) = alpha / 2
        mid = (lo + hi) / 2
        cdf = sum(math.comb(n, i) * mid ** i * (1 - mid) ** (n - i) for i in range(k + 1))
        lo, hi = (mid, hi) if cdf > alpha / 2 else (lo, mid)
    return hi


def burner(stop_after_s):
    """A CPU load in bursts: on one random core, busy 1-4 s, then idle 1-4 s. Runs in a
    child process of its own until killed (or stop_after_s)."""
    import random
    rng = random.Random(7)
    cores = sorted(os.sched_getaffinity(0))
    end = time.monotonic() + stop_after_s
    while time.monotonic() < end:
        os.sched_setaffinity(0, {rng.choice(cores)})
        busy_until = time.monotonic() + rng.uniform(1, 4)
        x = 0
        while time.monotonic() < busy_until:
            x += 1
        time.sleep(rng.uniform(1, 4))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", choices=sorted(WORKLOADS), default="native")
    ap.add_argument("--sweeps", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--slowdown", type=float, default=0.0, help="plant test_slowdown X in the second variant")
    ap.add_argument("--repeats", type=int, help="repeats per variant (default: Bakeoff's default)")
    ap.add_argument("--order", choices=["interleaved", "lockstep"], default="interleaved")
    ap.add_argument("--steps", type=int, help="measured steps per trial (default 10)")
    ap.add_argument("--load", choices=["none", "bursts"], default="none",
                    help="bursts: a CPU burner beside the sweeps (see burner())")
    ap.add_argument("--print-sweep", action="store_true", help="print sweep 0's YAML (for bakeoff calibrate)")
    ap.add_argument("--bakeoff", default=os.path.join(ROOT, "build", "bakeoff"))
    ap.add_argument("--out", help="JSON lines file (default: bench/validity/aa-KIND.jsonl)")
    ap.add_argument("--summary-only", action="store_true", help="summarise --out without running")
    args = ap.parse_args()
    if args.print_sweep:
        print(sweep_yaml(args.kind, 0, args.slowdown, args.repeats, args.order, args.steps), end="")
        return
    name = f"aa-{args.kind}" if args.slowdown <= 0 else f"slowdown-{args.slowdown:g}-{args.kind}"
    if args.repeats:
        name += f"-r{args.repeats}"
    if args.steps:
        name += f"-s{args.steps}"
    if args.order != "interleaved":
        name += f"-{args.order}"
    if args.load != "none":
        name += f"-{args.load}"
    out = args.out or os.path.join(ROOT, "bench", "validity", f"{name}.jsonl")
    rows = []
    if os.path.exists(out):
        with open(out) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    load = None
    if args.load == "bursts" and not args.summary_only:
        import multiprocessing
        load = multiprocessing.Process(target=burner, args=(24 * 3600,), daemon=True)
        load.start()
    try:
        run_all(args, rows, out)
    finally:
        if load is not None:
            load.terminate()
            load.join()
    print(json.dumps(summarise(rows, args.slowdown), indent=2))


def run_all(args, rows, out):
    if not args.summary_only:
        for index in range(len(rows), args.sweeps):
            row = run_one(args.bakeoff, args.kind, index, args.workers, args.slowdown, args.repeats, args.order,
                          args.steps)
            row["load"] = args.load
            rows.append(row)
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"[{index + 1}/{args.sweeps}] {row.get('verdict', row.get('error', '?')[:200])} "
                  f"{row.get('speedup')} [{row.get('ci_low')}-{row.get('ci_high')}] "
                  f"{row.get('wall_s')} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
