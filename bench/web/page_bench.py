#!/usr/bin/env python3
"""The web page's cost (issue 31): its weight, its first render in headless chromium, and
the CPU the coordinator spends serving 10 open sweep pages of a running 1,000-trial sweep.

Starts a real `bakeoff coordinator` (read token) and simulated workers (`bakeoff worker
--simulate`: real registrations, assignments and events, no trainer), submits a sweep of
1,000 trials, then measures the coordinator's own CPU time (/proc/PID/stat utime+stime)
over a window with no page open and over the same window with N pages open on the sweep
(Playwright, Debian's chromium, each page polling as a user's would).

    scripts/python bench/web/page_bench.py --bin build [--pages 10] [--window 30]

Needs the project's Python environment with Playwright (deploy/requirements-ci.txt) and
/usr/bin/chromium (scripts/setup). Prints one JSON object.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from playwright.sync_api import sync_playwright

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def get(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.read()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build")
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured with and without pages")
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    bakeoff = os.path.join(os.path.abspath(args.bin), "bakeoff")
    work = tempfile.mkdtemp(prefix="bakeoff-page-bench-")
    procs = []
    try:
        for name, value in (("token", "submit"), ("read", "reader"), ("worker", "w-secret")):
            with open(os.path.join(work, name), "w") as f:
                f.write(value + "\n")
            os.chmod(os.path.join(work, name), 0o600)
        ports = os.path.join(work, "ports.json")
        log = open(os.path.join(work, "coordinator.log"), "w")
        coordinator = subprocess.Popen(
            [bakeoff, "coordinator", "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0", "--db",
             os.path.join(work, "r.db"), "--ports-file", ports, "--token-file", os.path.join(work, "token"),
             "--read-token-file", os.path.join(work, "read"), "--worker-token-file", os.path.join(work, "worker")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(coordinator)
        for _ in range(300):
            if os.path.exists(ports) and os.path.getsize(ports) > 0:
                break
            time.sleep(0.1)
        bound = json.load(open(ports))
        base = f"http://127.0.0.1:{bound['http_port']}"
        env = dict(os.environ, BAKEOFF_HOST_LOCK_DIR="off")
        env.pop("BAKEOFF_TOKEN", None)
        workers = subprocess.Popen(
            [bakeoff, "worker", "--coordinator", f"127.0.0.1:{bound['worker_port']}", "--name", "sim", "--simulate",
             "--simulated-workers", "8", "--slots", "1", "--simulate-step-ms", "60", "--token-file",
             os.path.join(work, "worker")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        procs.append(workers)
        sweep = os.path.join(work, "sweep.yaml")
        with open(sweep, "w") as f:
            f.write("name: page-bench\nquestion: what 10 open pages cost the coordinator\n"
                    "workload: {executor: lora, model: tiny, steps: 20, warmup_steps: 2}\n"
                    "parameters:\n  lora_rank: {values: [4, 8]}\nbaseline: {lora_rank: 4}\n"
                    f"repeats: {args.trials // 2}\n")
        request = urllib.request.Request(base + "/api/v1/sweeps", data=open(sweep, "rb").read(), method="POST",
                                         headers={"Authorization": "Bearer submit",
                                                  "Content-Type": "application/yaml"})
        sweep_id = json.loads(urllib.request.urlopen(request, timeout=60).read())["id"]
        time.sleep(5)  # trials under way

        weight = {name: len(get(base + path)) for name, path in
                  (("index.html", "/"), ("app.js", "/ui/app.js"), ("app.css", "/ui/app.css"))}

        def measure(seconds):
            start, t0 = cpu_seconds(coordinator.pid), time.time()
            time.sleep(seconds)
            return (cpu_seconds(coordinator.pid) - start) / (time.time() - t0)

        idle = measure(args.window)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_init_script("sessionStorage.setItem('bakeoff-token', 'reader')")
            renders = []
            pages = []
            for _ in range(args.pages):
                page = context.new_page()
                t0 = time.time()
                page.goto(f"{base}/#/sweeps/{sweep_id}")
                page.wait_for_selector("svg.chart", timeout=60000)
                page.wait_for_selector("main table tbody tr", timeout=60000)
                renders.append(time.time() - t0)
                pages.append(page)
            served = measure(args.window)
            state = json.loads(get(f"{base}/api/v1/sweeps/{sweep_id}", "reader"))
            browser.close()
        total = sum(weight.values())
        print(json.dumps({
            "cpu": open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip(),
            "trials": args.trials, "pages": args.pages, "window_s": args.window,
            "page_bytes": weight, "page_bytes_total": total, "page_requests": 3,
            "first_render_s": {"first": round(renders[0], 3), "median": round(sorted(renders)[len(renders) // 2], 3),
                               "max": round(max(renders), 3)},
            "coordinator_cpu_cores": {"no_page": round(idle, 4), "with_pages": round(served, 4),
                                      "added": round(served - idle, 4)},
            "sweep_after": {"finished": state["counts"]["finished"], "running": state["counts"]["running"]},
        }, indent=1))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
