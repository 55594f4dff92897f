#!/usr/bin/env python3
"""How long a sweep at the limits takes to submit, and what the event loop sees meanwhile
(bench/README.md, "Sweep submission").

Starts a real `bakeoff coordinator` and one simulated worker (1 slot, 1 s steps: it
offers a command template, `probe`, known to the coordinator by name only, so a sweep
can carry a long field into every configuration) and submits,
one after another, sweeps shaped to reach one of the limits of docs/reliability.md.
For each it reports the submit's round trip, the store's create_sweep write (from
/metrics, `bakeoff_store_write_seconds`, on the event loop), the slowest `/healthz`
answered while the submit was in flight (parse and expansion run on a worker thread) and
the coordinator's peak resident memory so far (VmHWM).
The coordinator's process group is killed on exit.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request


def values(n):
    return ", ".join(str(i) for i in range(1, n + 1))


def shapes(rules):
    head = "name: NAME\nrepeats: 1\nlimits: {trial_timeout: 10m, max_attempts: 1}\n"
    grid2 = "parameters:\n  micro_batch: {values: [%s]}\n  steps: {values: [%s]}\n" % (values(100), values(100))
    grid3 = grid2 + "  grad_accum: {values: [%s]}\n" % values(100)
    lora = "workload: {executor: lora, model: tiny}\n"
    out = [
        ("10,000 variants (100 x 100 grid)", head + lora + grid2 + "baseline: {micro_batch: 1, steps: 1}\n"),
        ("10,000 variants, 64 MiB of configurations (a 6.6 KB field)",
         head + "workload: {executor: command, command: {template: probe}, blob: \"%s\"}\n" % ("x" * 6600) + grid2
         + "baseline: {micro_batch: 1, steps: 1}\n"),
    ]
    exclude = "exclude:\n" + "".join("  - {grad_accum: %d}\n" % g for g in range(2, 101))
    out.append(("1,000,000 grid points, 99 exclude rules -> 10,000", head + lora + grid3 + exclude
                + "baseline: {micro_batch: 1, steps: 1, grad_accum: 1}\n"))
    if rules:
        extra = "".join("  - {micro_batch: %d, steps: %d, grad_accum: 2}\n" % (1 + i % 100, 1 + (i // 100) % 100)
                        for i in range(rules))
        out.append(("1,000,000 grid points, %d + 99 exclude rules -> 10,000" % rules,
                    head + lora + grid3 + "exclude:\n" + extra + exclude[len("exclude:\n"):]
                    + "baseline: {micro_batch: 1, steps: 1, grad_accum: 1}\n"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bakeoff", default="build/bakeoff")
    parser.add_argument("--exclude-rules", type=int, default=1000,
                        help="extra exclude rules of the last shape (0: leave it out; 14000 is about the most "
                             "the 100,000-node limit allows)")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bakeoff-submit-bench-")
    token = "bench-token"
    ports = os.path.join(workdir, "ports.json")
    worker_token = os.path.join(workdir, "worker-token")
    with open(worker_token, "w") as f:
        f.write("bench-worker-token\n")
    log = open(os.path.join(workdir, "coordinator.log"), "w")
    coordinator = subprocess.Popen(
        [args.bakeoff, "coordinator", "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0",
         "--db", os.path.join(workdir, "results.db"), "--ports-file", ports, "--executors", "none",
         "--worker-token-file", worker_token],
        env=dict(os.environ, BAKEOFF_TOKEN=token), stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.time() + 60
        while not os.path.exists(ports):
            if time.time() > deadline:
                raise RuntimeError("coordinator did not start; see %s/coordinator.log" % workdir)
            time.sleep(0.05)
        ports_json = json.load(open(ports))
        url = "http://127.0.0.1:%d" % ports_json["http_port"]
        executors = os.path.join(workdir, "executors.yaml")
        with open(executors, "w") as f:
            f.write("templates:\n  probe:\n    argv: [\"/bin/true\"]\n")
        wlog = open(os.path.join(workdir, "worker.log"), "w")
        worker = subprocess.Popen(
            [args.bakeoff, "worker", "--coordinator", "127.0.0.1:%d" % ports_json["worker_port"], "--slots", "1",
             "--name", "sim", "--simulate", "--simulate-step-ms", "1000", "--executors", executors,
             "--work-dir", os.path.join(workdir, "w")],
            env=dict(os.environ, BAKEOFF_TOKEN="bench-worker-token"), stdout=wlog, stderr=wlog,
            start_new_session=True)

        def call(method, path, body=None, timeout=900):
            request = urllib.request.Request(url + path, data=body, method=method,
                                             headers={"Authorization": "Bearer " + token})
            try:
                with urllib.request.urlopen(request, timeout=timeout) as reply:
                    return reply.status, reply.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()

        def create_sweep_seconds():
            text = call("GET", "/metrics")[1]
            m = re.search(r'bakeoff_store_write_seconds_sum\{operation="create_sweep"\} (\S+)', text)
            return float(m.group(1)) if m else 0.0

        deadline = time.time() + 60
        while not json.loads(call("GET", "/api/v1/workers")[1]):
            if time.time() > deadline:
                raise RuntimeError("the worker did not register; see %s/worker.log" % workdir)
            time.sleep(0.1)
        def peak_rss_mb():
            # The coordinator's high-water mark so far (Linux): a sweep's own peak when it
            # is the largest yet.
            try:
                for line in open("/proc/%d/status" % coordinator.pid):
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024.0
            except OSError:
                pass
            return float("nan")

        print("| sweep | YAML | submit round trip | of it, storing (event loop) | slowest /healthz meanwhile "
              "| coordinator peak RSS so far | answer |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for i, (what, yaml) in enumerate(shapes(args.exclude_rules)):
            body = yaml.replace("NAME", "s%d" % i, 1).encode()
            stored_before = create_sweep_seconds()
            done = threading.Event()
            slowest = [0.0]

            def poll():
                while not done.is_set():
                    t = time.monotonic()
                    call("GET", "/healthz", timeout=900)
                    slowest[0] = max(slowest[0], time.monotonic() - t)
                    time.sleep(0.05)

            poller = threading.Thread(target=poll)
            poller.start()
            t = time.monotonic()
            status, reply = call("POST", "/api/v1/sweeps", body)
            elapsed = time.monotonic() - t
            done.set()
            poller.join()
            stored = create_sweep_seconds() - stored_before
            answer = "%d %s" % (status, json.loads(reply).get("trial_count", "") if status == 201 else reply[:80])
            print("| %s | %d B | %.2f s | %.2f s | %.3f s | %.0f MB | %s |" % (
                what, len(body), elapsed, stored, slowest[0], peak_rss_mb(), answer.strip()))
    finally:
        for process in [coordinator] + ([worker] if "worker" in locals() else []):
            os.killpg(process.pid, 9)
            process.wait()


if __name__ == "__main__":
    main()
