#!/usr/bin/env python3
"""The UX review's trap, rerun: two workers started by hand on one host, each
`bakeoff worker --slots 1` without --cpus (the README's worker line, twice), and the same
4-trial eager-vs-jit sweep (docs/sweep.md's example: no `threads`) submitted twice, back
to back. Before host-wide claims both workers pinned their ranks to every core and the
two runs said `slower 0.16x [0.09-0.29]` and `7.42x`.

  bench/validity/hand_started.py                 # default: workers without --cpus
  bench/validity/hand_started.py --cpus          # each worker given a CPU of its own

Prints, per run, how many workers registered, what the second worker said, and each
sweep's verdict and interval (JSON lines on stdout). Standard library only.
"""
import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SWEEP = """\
name: hand-started-{index}
question: Is jit faster than eager on this host?
workload:
  executor: lora
  model: {{dim: 128, layers: 2, heads: 4, kv_heads: 2, ffn_dim: 344, vocab: 1024}}
  seq_len: 64
  micro_batch: 2
  warmup_steps: 2
  steps: 20
  dataset: synthetic
  lora: {{rank: 8, alpha: 16, dropout: 0.0, targets: [q, v]}}
method: grid
parameters:
  compile_mode: {{values: [eager, jit]}}
baseline: {{compile_mode: eager}}
repeats: {repeats}
resources: {{device: cpu}}
limits: {{trial_timeout: 5m, max_attempts: 2}}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpus", action="store_true", help="give the workers --cpus 0 and --cpus 1")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="the review's sweep had 2")
    ap.add_argument("--bakeoff", default=os.path.join(ROOT, "build", "bakeoff"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bakeoff-hand-") as tmp:
        tokens = {}
        for name in ("submit", "read", "worker"):
            tokens[name] = secrets.token_hex(32)
            with open(os.path.join(tmp, name + "-token"), "w") as f:
                f.write(tokens[name])
        ports = os.path.join(tmp, "ports.json")
        coordinator = subprocess.Popen(
            [args.bakeoff, "coordinator", "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0",
             "--token-file", os.path.join(tmp, "submit-token"), "--read-token-file", os.path.join(tmp, "read-token"),
             "--worker-token-file", os.path.join(tmp, "worker-token"), "--db", os.path.join(tmp, "results.db"),
             "--ports-file", ports], stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "coord.log"), "w"))
        workers = []
        try:
            for _ in range(100):
                if os.path.exists(ports) and os.path.getsize(ports) > 0:
                    break
                time.sleep(0.1)
            with open(ports) as f:
                p = json.load(f)
            url = f"http://127.0.0.1:{p['http_port']}"
            for i in range(2):
                argv = [args.bakeoff, "worker", "--coordinator", f"127.0.0.1:{p['worker_port']}", "--slots", "1",
                        "--name", f"hand-{i + 1}", "--token-file", os.path.join(tmp, "worker-token")]
                if args.cpus:
                    argv += ["--cpus", str(i)]
                log = os.path.join(tmp, f"worker-{i + 1}.log")
                workers.append((subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w")), log))
                time.sleep(1.0)
            time.sleep(1.0)
            alive = [w for w, _ in workers if w.poll() is None]
            refused = [open(log).read().strip().splitlines()[-1] for w, log in workers if w.poll() is not None]
            env = dict(os.environ, BAKEOFF_TOKEN=tokens["submit"])
            for index in range(args.runs):
                spec = os.path.join(tmp, f"sweep-{index}.yaml")
                with open(spec, "w") as f:
                    f.write(SWEEP.format(index=index, repeats=args.repeats))
                started = time.monotonic()
                done = subprocess.run([args.bakeoff, "submit", "--wait", spec, "--coordinator", url, "--format", "json"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
                row = {"run": index + 1, "cpus_given": args.cpus, "workers_running": len(alive),
                       "refused": refused, "exit": done.returncode, "wall_s": round(time.monotonic() - started, 1)}
                try:
                    report = json.loads(done.stdout)
                    c = [v for v in report["variants"] if not v["is_baseline"]][0]["comparison"]
                    row.update(verdict=c.get("verdict"), speedup=c.get("speedup", {}).get("value"),
                               ci_low=c.get("speedup", {}).get("ci_low"), ci_high=c.get("speedup", {}).get("ci_high"),
                               workers=sorted({t["worker"] for t in report["trials"] if t.get("worker")}),
                               threads=[t["applied"].get("threads") for t in report["trials"]
                                        if isinstance(t.get("applied"), dict)][:1])
                except (ValueError, KeyError, IndexError):
                    row["error"] = done.stderr[-500:]
                print(json.dumps(row), flush=True)
        finally:
            for w, _ in workers:
                w.kill()
                w.wait()
            coordinator.kill()
            coordinator.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
