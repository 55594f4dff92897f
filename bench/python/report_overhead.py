#!/usr/bin/env python3
"""What bakeoff_report costs a training step: the time of `with run.step(): ...` around
an empty body (timing, device sync check, memory figures, one JSON line written to the
event channel), against the median step of torch-reference's tiny model on this
machine (eager, fp32, one rank). Run: scripts/python bench/python/report_overhead.py
Prints one JSON object."""

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.normpath(os.path.join(HERE, "..", "..", "experiments", "python"))
sys.path.insert(0, LIB)


def empty_steps(n):
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.environ["BAKEOFF_EVENTS_FD"] = str(devnull)
    import bakeoff_report  # noqa: PLC0415
    import torch  # noqa: F401, PLC0415 - as in a real script: the library checks CUDA
    run = bakeoff_report.init(config={"warmup_steps": 0, "steps": n})
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            with run.step(tokens=128) as s:
                s.loss = 1.0
        best = min(best, (time.perf_counter() - start) / n)
    return best


def tiny_step_s():
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "config.json")
        with open(cfg, "w") as f:
            json.dump({"model": "tiny", "steps": 30, "warmup_steps": 3, "threads": 1}, f)
        out = subprocess.run([sys.executable, os.path.join(LIB, "torch_reference.py"), "--config", cfg],
                             capture_output=True, check=True, env={**{k: v for k, v in os.environ.items() if k != "BAKEOFF_EVENTS_FD"}, "PYTHONPATH": LIB}).stdout
    summary = [json.loads(l) for l in out.decode().splitlines() if l.startswith("{")][-1]
    return summary["step_s_median"]


if __name__ == "__main__":
    per_step = empty_steps(2000)
    step = tiny_step_s()
    print(json.dumps({"report_step_overhead_s": per_step, "tiny_step_s": step,
                      "overhead_fraction": per_step / step}))
