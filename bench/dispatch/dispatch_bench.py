#!/usr/bin/env python3
"""Dispatch latency and coordinator throughput of Bakeoff (bench/README.md, Orchestration).

Starts a real `bakeoff coordinator` and W `bakeoff worker --simulate` processes on
loopback, submits sweeps over HTTP, and reads the timings back from the results
database:

  latency    submission (sweeps.created_at) to the first rank process started (the
             worker's `started` event) of the sweep's first trial, over K one-trial
             sweeps submitted one after another on an idle cluster.
  throughput trials finished per second for one sweep of T trials over W workers.

Simulated workers run no trainer (docs/protocol.md); every trial they run is stored as
simulated. Every process started here is killed (its process group) on exit.
"""
import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

SWEEP = """name: {name}
question: dispatch benchmark (simulated workers)
workload:
  executor: lora
  model: tiny
  warmup_steps: 0
  steps: {steps}
parameters:
  micro_batch: {{values: [{values}]}}
  world_size: {{value: 1}}
baseline: {{micro_batch: 1}}
repeats: {repeats}
limits: {{trial_timeout: 10m, max_attempts: 1}}
"""


class Cluster:
    def __init__(self, bakeoff, workdir, workers, simulate_step_ms):
        self.procs = []
        self.token = "bench-token"
        env = dict(os.environ, BAKEOFF_TOKEN=self.token)
        # Workers have a credential of their own (docs/security.md).
        worker_env = dict(os.environ, BAKEOFF_TOKEN="bench-worker-token")
        worker_token = os.path.join(workdir, "worker-token")
        with open(worker_token, "w") as f:
            f.write("bench-worker-token\n")
        self.db = os.path.join(workdir, "results.db")
        ports = os.path.join(workdir, "ports.json")
        log = open(os.path.join(workdir, "coordinator.log"), "w")
        self.procs.append(subprocess.Popen(
            [bakeoff, "coordinator", "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0",
             "--db", self.db, "--ports-file", ports, "--max-trials", "100000",
             "--worker-token-file", worker_token],
            env=env, stdout=log, stderr=log, start_new_session=True))
        deadline = time.time() + 60
        while not os.path.exists(ports):
            if time.time() > deadline:
                raise RuntimeError("coordinator did not start; see coordinator.log")
            time.sleep(0.05)
        p = json.load(open(ports))
        self.url = "http://127.0.0.1:%d" % p["http_port"]
        wlog = open(os.path.join(workdir, "workers.log"), "w")
        for i in range(workers):
            self.procs.append(subprocess.Popen(
                [bakeoff, "worker", "--coordinator", "127.0.0.1:%d" % p["worker_port"], "--slots", "1",
                 "--name", "sim-%d" % i, "--simulate", "--simulate-step-ms", str(simulate_step_ms),
                 "--work-dir", os.path.join(workdir, "w%d" % i)],
                env=worker_env, stdout=wlog, stderr=wlog, start_new_session=True))
        deadline = time.time() + 120
        while self.connected() < workers:
            if time.time() > deadline:
                raise RuntimeError("only %d of %d workers registered" % (self.connected(), workers))
            time.sleep(0.1)

    def request(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers={"Authorization": "Bearer " + self.token,
                                              "Content-Type": "application/yaml"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def connected(self):
        try:
            return sum(1 for w in self.request("GET", "/api/v1/workers") if w["connected"])
        except Exception:
            return 0

    def run_sweep(self, yaml_text, timeout_s=3600):
        sweep = self.request("POST", "/api/v1/sweeps", yaml_text.encode())
        deadline = time.time() + timeout_s
        while self.request("GET", "/api/v1/sweeps/%d" % sweep["id"])["state"] == "running":
            if time.time() > deadline:
                raise RuntimeError("sweep %d did not finish" % sweep["id"])
            time.sleep(0.05)
        return sweep["id"]

    def close(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def first_start_latency(db, sweep_id):
    con = sqlite3.connect(db)
    created = con.execute("SELECT created_at FROM sweeps WHERE id=?", (sweep_id,)).fetchone()[0]
    started = con.execute(
        "SELECT MIN(e.at) FROM events e JOIN trials t ON t.id = e.trial_id "
        "WHERE t.sweep_id=? AND e.kind='started'", (sweep_id,)).fetchone()[0]
    con.close()
    return started - created


def throughput(db, sweep_id):
    con = sqlite3.connect(db)
    created, finished, n = con.execute(
        "SELECT s.created_at, MAX(t.finished_at), COUNT(*) FROM sweeps s JOIN trials t ON t.sweep_id = s.id "
        "WHERE s.id=? GROUP BY s.id", (sweep_id,)).fetchone()
    simulated = con.execute(
        "SELECT COUNT(*) FROM attempts a JOIN trials t ON t.id = a.trial_id WHERE t.sweep_id=? AND a.simulated=1",
        (sweep_id,)).fetchone()[0]
    con.close()
    return n, finished - created, simulated


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bakeoff", default=os.path.join(os.path.dirname(__file__), "../../build/bakeoff"))
    ap.add_argument("--workers", type=int, default=8, help="simulated workers (1 slot each)")
    ap.add_argument("--latency-sweeps", type=int, default=20, help="one-trial sweeps for the latency figure")
    ap.add_argument("--trials", type=int, default=1000, help="trials of the throughput sweep")
    ap.add_argument("--steps", type=int, default=2, help="simulated steps per trial")
    ap.add_argument("--simulate-step-ms", type=int, default=1)
    args = ap.parse_args()

    workdir = tempfile.mkdtemp(prefix="bakeoff-dispatch-")
    cluster = Cluster(os.path.abspath(args.bakeoff), workdir, args.workers, args.simulate_step_ms)
    try:
        lat = []
        for i in range(args.latency_sweeps):
            sid = cluster.run_sweep(SWEEP.format(name="latency-%d" % i, steps=args.steps, values="1", repeats=1))
            lat.append(first_start_latency(cluster.db, sid) * 1000)
        variants = 10
        repeats = max(1, args.trials // variants)
        sid = cluster.run_sweep(SWEEP.format(name="throughput", steps=args.steps,
                                             values=", ".join(str(v) for v in range(1, variants + 1)),
                                             repeats=repeats))
        n, seconds, simulated = throughput(cluster.db, sid)
        lat.sort()
        result = {
            "workers": args.workers,
            "latency_ms": {"n": len(lat), "median": statistics.median(lat),
                           "p90": lat[int(0.9 * (len(lat) - 1))], "max": lat[-1]},
            "throughput": {"trials": n, "seconds": seconds, "trials_per_s": n / seconds,
                           "simulated_attempts": simulated, "steps_per_trial": args.steps,
                           "simulate_step_ms": args.simulate_step_ms},
            "workdir": workdir,
        }
        print(json.dumps(result, indent=2))
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
