#!/usr/bin/env python3
"""Dispatch latency and coordinator throughput of Bakeoff (bench/README.md, Orchestration).

Starts a real `bakeoff coordinator` and W simulated workers on loopback, in `bakeoff
worker --simulate --simulated-workers N` processes (each simulated worker a registered
worker with its own name and connection; by default one process per 250 workers, so
that one process's event loop does not serialize a thousand workers' bursts, which on a
real cluster run on a thousand machines; --processes P sets it), submits sweeps over
HTTP, and reads the timings back from the results database:

  latency    submission (sweeps.created_at) to the first rank process started (the
             worker's `started` event) of the sweep's first trial, over K one-trial
             sweeps submitted one after another on an idle cluster.
  throughput trials finished per second for one sweep of T trials over W workers, from
             the sweep's submission to its last trial's finish as stored.
  dispatch   under load (that sweep): on each worker, from the stored end of one attempt
             (its slot free again) to the `started` event of the next attempt there:
             what the coordinator adds between one trial and the next (p50, p99).
  step rows  step_metrics rows stored per second, from a sweep of --step-trials trials
             (default 1,000) of --step-steps simulated steps each (default 1,000; 0 ms a
             step), run after the throughput sweep: its rows over the time from
             submission to its last trial's finish.
  memory     the coordinator's peak resident set (VmHWM) at the end, and its resident
             set before the throughput sweep.

--json prints one object (throughput_trials_per_s, dispatch_latency_p50_ms,
dispatch_latency_p99_ms, coordinator_peak_rss_bytes, step_rows_per_s, ...).

Simulated workers run no trainer (docs/protocol.md); every trial they run is stored as
simulated. Every process started here is killed (its process group) on exit.
"""
import argparse
import json
import math
import os
import shutil
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
    def __init__(self, bakeoff, workdir, workers, simulate_step_ms, processes, extra_args):
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
             "--worker-token-file", worker_token] + extra_args,
            env=env, stdout=log, stderr=log, start_new_session=True))
        deadline = time.time() + 60
        while not os.path.exists(ports):
            if time.time() > deadline:
                raise RuntimeError("coordinator did not start; see coordinator.log")
            time.sleep(0.05)
        p = json.load(open(ports))
        self.url = "http://127.0.0.1:%d" % p["http_port"]
        wlog = open(os.path.join(workdir, "workers.log"), "w")
        # W simulated workers over P processes, each process one io_context holding
        # several workers (--simulated-workers), each with its own name and connection.
        processes = max(1, min(processes, workers))
        for i in range(processes):
            n = workers // processes + (1 if i < workers % processes else 0)
            self.procs.append(subprocess.Popen(
                [bakeoff, "worker", "--coordinator", "127.0.0.1:%d" % p["worker_port"], "--slots", "1",
                 "--name", "sim-%d" % i, "--simulate", "--simulate-step-ms", str(simulate_step_ms),
                 "--simulated-workers", str(n), "--metrics-listen", "off",
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

    def store_writes(self):
        """{operation: (count, seconds)} of bakeoff_store_write_seconds, from /metrics."""
        req = urllib.request.Request(self.url + "/metrics", headers={"Authorization": "Bearer " + self.token})
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            for suffix, index in (("_count", 0), ("_sum", 1)):
                prefix = "bakeoff_store_write_seconds" + suffix + "{operation=\""
                if line.startswith(prefix):
                    op = line[len(prefix):line.index('"', len(prefix))]
                    out.setdefault(op, [0, 0.0])[index] = float(line.rsplit(" ", 1)[1])
        return out

    def rss(self):
        """The coordinator's (resident now, peak resident) bytes, from /proc."""
        fields = {}
        with open("/proc/%d/status" % self.procs[0].pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    fields[key] = int(value.split()[0]) * 1024
        return fields.get("VmRSS", 0), fields.get("VmHWM", 0)

    def close(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def run_many_trials(cluster, name, trials, steps):
    """Runs about `trials` trials of SWEEP, as 10 variants or more where a sweep's repeats
    (at most 1000) need it; returns the sweep's id once it finished."""
    variants = max(10, -(-trials // 1000))
    repeats = max(1, trials // variants)
    return cluster.run_sweep(SWEEP.format(name=name, steps=steps,
                                          values=", ".join(str(v) for v in range(1, variants + 1)),
                                          repeats=repeats))


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


def percentile(sorted_values, q):
    """Nearest-rank percentile of a sorted list (q in 0..100)."""
    if not sorted_values:
        return None
    rank = max(1, int(math.ceil(q / 100.0 * len(sorted_values))))
    return sorted_values[rank - 1]


def dispatch_under_load(db, sweep_id):
    """Per worker, stored end of one attempt to the `started` event of the next (ms)."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT a.worker_id, a.assigned_at, a.ended_at, "
        "  (SELECT MIN(e.at) FROM events e WHERE e.trial_id = a.trial_id AND e.attempt = a.attempt "
        "     AND e.kind = 'started') "
        "FROM attempts a JOIN trials t ON t.id = a.trial_id WHERE t.sweep_id = ? "
        "ORDER BY a.worker_id, a.assigned_at", (sweep_id,)).fetchall()
    con.close()
    gaps = []
    previous = {}
    for worker, assigned, ended, started in rows:
        before = previous.get(worker)
        if before is not None and before[1] is not None and started is not None:
            gaps.append((started - before[1]) * 1000)
        previous[worker] = (assigned, ended)
    gaps.sort()
    return gaps


def step_rows(db, sweep_id):
    con = sqlite3.connect(db)
    n = con.execute("SELECT COUNT(*) FROM step_metrics s JOIN trials t ON t.id = s.trial_id "
                    "WHERE t.sweep_id = ?", (sweep_id,)).fetchone()[0]
    con.close()
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bakeoff", default=os.path.join(os.path.dirname(__file__), "../../build/bakeoff"))
    ap.add_argument("--workers", type=int, default=8, help="simulated workers (1 slot each)")
    ap.add_argument("--processes", type=int, default=0,
                    help="worker processes the simulated workers are spread over (0: one per 250 workers)")
    ap.add_argument("--latency-sweeps", type=int, default=20, help="one-trial sweeps for the idle latency figure")
    ap.add_argument("--trials", type=int, default=1000, help="trials of the throughput sweep")
    ap.add_argument("--steps", type=int, default=1, help="simulated steps per trial")
    ap.add_argument("--simulate-step-ms", type=int, default=1)
    ap.add_argument("--step-trials", type=int, default=1000,
                    help="trials of the step-rows sweep, run after the throughput sweep "
                         "(0: skip it; step_rows_per_s is then null)")
    ap.add_argument("--step-steps", type=int, default=1000, help="simulated steps per trial of the step-rows sweep")
    ap.add_argument("--coordinator-arg", action="append", default=[],
                    help="extra flag for `bakeoff coordinator` (repeatable)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on one line")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (results.db, logs)")
    ap.add_argument("--pid-file", help="write the coordinator's pid here once it runs (for perf record -p)")
    args = ap.parse_args()
    if args.processes <= 0:
        args.processes = max(1, -(-args.workers // 250))

    workdir = tempfile.mkdtemp(prefix="bakeoff-dispatch-")
    started_at = time.time()
    cluster = Cluster(os.path.abspath(args.bakeoff), workdir, args.workers, args.simulate_step_ms,
                      args.processes, args.coordinator_arg)
    try:
        if args.pid_file:
            with open(args.pid_file, "w") as f:
                f.write("%d\n" % cluster.procs[0].pid)
        registered_s = time.time() - started_at
        lat = []
        for i in range(args.latency_sweeps):
            sid = cluster.run_sweep(SWEEP.format(name="latency-%d" % i, steps=args.steps, values="1", repeats=1))
            lat.append(first_start_latency(cluster.db, sid) * 1000)
        lat.sort()
        rss_before, _ = cluster.rss()
        writes_before = cluster.store_writes()
        sid = run_many_trials(cluster, "throughput", args.trials, args.steps)
        n, seconds, simulated = throughput(cluster.db, sid)
        rss_after, _ = cluster.rss()
        writes_after = cluster.store_writes()
        groups = writes_after.get("commit_group", [0, 0.0])
        groups_before = writes_before.get("commit_group", [0, 0.0])
        group_count = groups[0] - groups_before[0]
        group_seconds = groups[1] - groups_before[1]
        gaps = dispatch_under_load(cluster.db, sid)
        step_rate = None
        step_figures = None
        if args.step_trials > 0:
            # Step-heavy trials, 0 ms a step: the store's step-row rate end to end.
            ssid = run_many_trials(cluster, "step-rows", args.step_trials, args.step_steps)
            sn, sseconds, _ = throughput(cluster.db, ssid)
            rows = step_rows(cluster.db, ssid)
            step_rate = rows / sseconds
            step_figures = {"trials": sn, "steps_per_trial": args.step_steps, "rows": rows, "seconds": sseconds}
        rss_end, peak = cluster.rss()
        result = {
            "workers": args.workers,
            "worker_processes": max(1, min(args.processes, args.workers)),
            "trials": n,
            "throughput_trials_per_s": n / seconds,
            "throughput_seconds": seconds,
            "dispatch_latency_p50_ms": percentile(gaps, 50),
            "dispatch_latency_p99_ms": percentile(gaps, 99),
            "dispatch_latency_max_ms": gaps[-1] if gaps else None,
            "dispatch_latency_n": len(gaps),
            "idle_dispatch_latency_ms": {"n": len(lat), "p50": percentile(lat, 50), "p90": percentile(lat, 90),
                                         "max": lat[-1] if lat else None},
            "group_commits": group_count,
            "group_commits_per_s": group_count / seconds,
            "group_commit_mean_ms": 1000 * group_seconds / group_count if group_count else None,
            "trials_per_group_commit": n / group_count if group_count else None,
            "coordinator_peak_rss_bytes": peak,
            "coordinator_rss_bytes_before_throughput": rss_before,
            "coordinator_rss_bytes_after_throughput": rss_after,
            "coordinator_rss_bytes_end": rss_end,
            "step_rows_per_s": step_rate,
            "step_rows": step_figures,
            "simulated_attempts": simulated,
            "steps_per_trial": args.steps,
            "simulate_step_ms": args.simulate_step_ms,
            "registration_s": registered_s,
            "coordinator_args": args.coordinator_arg,
            "workdir": workdir,
        }
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    finally:
        cluster.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
