#!/usr/bin/env python3
"""The command executor's cost against launching the same script by hand: torch-reference
(tiny, eager, two ranks, 10 steps) three times with torchrun, and three times through
`bakeoff local` and the shipped allowlist. By hand: torchrun's wall time. Through
Bakeoff: each attempt's time from its assignment to its end as the coordinator stored it
(includes dispatch, the worker's spawn and the event path). Prints one JSON object with
the medians. Run from the repository root: scripts/python bench/python/executor_overhead.py"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CONFIG = {"model": "tiny", "seq_len": 64, "warmup_steps": 1, "steps": 10, "world_size": 2}


def by_hand(tmp, runs):
    cfg = os.path.join(tmp, "config.json")
    with open(cfg, "w") as f:
        json.dump(CONFIG, f)
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "experiments", "python")}
    times = []
    for i in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--master-port", str(29720 + i), os.path.join(ROOT, "experiments/python/torch_reference.py"),
                        "--config", cfg], check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def through_bakeoff(bakeoff, tmp, runs):
    sweep = os.path.join(tmp, "sweep.yaml")
    with open(sweep, "w") as f:
        f.write("name: executor-overhead\nworkload:\n  executor: command\n  command: {template: torch-reference}\n")
        for k, v in CONFIG.items():
            f.write(f"  {k}: {json.dumps(v)}\n")
        f.write(f"repeats: {runs}\n")
    db = os.path.join(tmp, "results.db")
    subprocess.run([bakeoff, "local", sweep, "--workers", "2", "--db", db, "--output", os.path.join(tmp, "r.txt")],
                   check=False, capture_output=True)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT ended_at - assigned_at FROM attempts WHERE ended_at IS NOT NULL").fetchall()
    return [r[0] for r in rows]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--bakeoff", default=os.path.join(ROOT, "build", "bakeoff"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(dir=a.out) as tmp:
        hand = by_hand(tmp, a.runs)
        ours = through_bakeoff(a.bakeoff, tmp, a.runs)
    print(json.dumps({"torchrun_by_hand_s": statistics.median(hand), "through_bakeoff_s": statistics.median(ours),
                      "overhead_s": statistics.median(ours) - statistics.median(hand),
                      "by_hand": hand, "through_bakeoff": ours}))
