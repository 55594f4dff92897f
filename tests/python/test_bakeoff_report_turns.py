"""The reporting library's turn client (docs/lockstep.md, "The turn channel"): the exact
lines a rank sends and when, the `turn` of measured step events, waiting never timed,
and a worker that goes away (end of file, garbage) never stopping the training loop.
Then two real processes driven by an arbiter in the test: their steps never overlap."""

import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from contextlib import redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.normpath(os.path.join(HERE, "..", "..", "experiments", "python"))
sys.path.insert(0, LIB)

import bakeoff_report  # noqa: E402
from bakeoff_report import _turns  # noqa: E402

DEADLINE_S = 30  # every wait on a socket or a process in these tests is bounded by this


class FakeWorker:
    """The worker's end of one rank's channel, played by a thread: it records each line
    with the time it arrived, answers `warmup` and `step` with `go T` (T counting up
    from 0), and stops at `end` or end of file. `delay_s[i]`: how long it holds the
    answer to the i-th request (the other side's turn). `close_at`: the index of the
    message at which it closes its end without answering. `answer`: replaces `go T`."""

    def __init__(self, sock, delay_s=None, close_at=None, answer=None):
        self.sock = sock
        self.sock.settimeout(DEADLINE_S)
        self.delay_s = delay_s or {}
        self.close_at = close_at
        self.answer = answer
        self.messages = []        # the lines received, in order
        self.granted = []         # (turn, time go was sent, time done arrived or None)
        self.holding = False      # a turn is granted and not given back
        self.error = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        try:
            lines = self.sock.makefile("rb")
            requests = 0
            while True:
                raw = lines.readline()
                if not raw:
                    return
                message = raw.decode().rstrip("\n")
                now = time.monotonic()
                self.messages.append(message)
                if self.close_at is not None and len(self.messages) - 1 == self.close_at:
                    return
                if message in ("done", "end") and self.granted and self.granted[-1][2] is None:
                    self.holding = False
                    self.granted[-1] = (self.granted[-1][0], self.granted[-1][1], now)
                if message == "end":
                    return
                if message in ("warmup", "step"):
                    delay = self.delay_s.get(requests, 0)
                    requests += 1
                    if delay:
                        time.sleep(delay)  # the other side's turn, simulated
                    turn = len(self.granted)
                    self.holding = True
                    self.granted.append((turn, time.monotonic(), None))
                    self.sock.sendall((self.answer or f"go {turn}").encode() + b"\n")
        except Exception as error:  # noqa: BLE001 - reported by join()
            self.error = error
        finally:
            self.sock.close()

    def join(self):
        self._thread.join(DEADLINE_S)
        if self._thread.is_alive():
            raise AssertionError("the fake worker did not finish")
        if self.error is not None:
            raise self.error


def lockstep_run(config, **worker):
    """A Run whose turn channel is one end of a socketpair, the other a FakeWorker."""
    rank_end, worker_end = socket.socketpair()
    fake = FakeWorker(worker_end, **worker)
    out = io.StringIO()
    run = bakeoff_report.Run(config, 0, 1, 0, out, turns=_turns.TurnChannel(rank_end.detach()))
    return run, fake, out


def events_of(out):
    return [json.loads(line) for line in out.getvalue().splitlines()]


class TurnClientTest(unittest.TestCase):
    def test_warmup_is_one_turn_and_each_measured_step_its_own_turn_given_back_before_the_next(self):
        run, worker, out = lockstep_run({"warmup_steps": 2})
        held_during_block = []
        for _ in range(5):
            with run.step(tokens=8) as step:
                held_during_block.append(worker.holding)
                step.loss = 1.0
        run.summary()
        worker.join()
        self.assertEqual(worker.messages, ["warmup", "done", "step", "done", "step", "done", "step", "done", "end"])
        self.assertEqual(held_during_block, [True] * 5)
        steps = [e for e in events_of(out) if e["event"] == "step"]
        self.assertEqual([s["phase"] for s in steps], ["warmup", "warmup", "measure", "measure", "measure"])
        self.assertEqual([s.get("turn") for s in steps], [None, None, 1, 2, 3])
        self.assertIsInstance(steps[2]["turn"], int)
        self.assertNotIn("tokens_missing", events_of(out)[-1])

    def test_waiting_for_the_turn_is_not_in_step_s(self):
        # The first measured step's `go` comes 0.3 s after it asked (the other side's turn).
        run, worker, out = lockstep_run({"warmup_steps": 0}, delay_s={0: 0.3})
        asked = time.monotonic()
        with run.step(tokens=1):
            pass
        run.summary()
        worker.join()
        step = events_of(out)[0]
        turn, go_at, done_at = worker.granted[0]
        self.assertGreaterEqual(go_at - asked, 0.3)
        self.assertLessEqual(step["step_s"], done_at - go_at)  # timed inside the turn only
        self.assertLess(step["step_s"], 0.3)
        self.assertEqual((worker.messages, step["turn"]), (["step", "done", "end"], turn))

    def test_end_of_file_lets_the_run_go_on_without_turns_and_sends_nothing_more(self):
        # The worker answers the warm-up request, then closes at the first `step`.
        run, worker, out = lockstep_run({"warmup_steps": 1}, close_at=2)
        for i in range(4):
            with run.step(tokens=1) as step:
                step.loss = 1.0 / (i + 1)
        run.summary()
        worker.join()
        self.assertEqual(worker.messages, ["warmup", "done", "step"])
        events = events_of(out)
        self.assertEqual([e["event"] for e in events], ["step"] * 4 + ["summary"])
        self.assertFalse([e for e in events if "turn" in e])

    def test_a_worker_gone_before_the_first_step_is_no_error(self):
        rank_end, worker_end = socket.socketpair()
        worker_end.close()
        out = io.StringIO()
        run = bakeoff_report.Run({"warmup_steps": 1}, 0, 1, 0, out, turns=_turns.TurnChannel(rank_end.detach()))
        for _ in range(3):
            with run.step(tokens=1):
                pass
        run.summary()
        self.assertEqual([e["event"] for e in events_of(out)], ["step"] * 3 + ["summary"])

    def test_an_answer_that_is_not_go_closes_the_channel_with_a_line_on_stderr(self):
        run, worker, out = lockstep_run({"warmup_steps": 0}, answer="wait")
        log = io.StringIO()
        with redirect_stderr(log):
            for _ in range(2):
                with run.step(tokens=1):
                    pass
        worker.join()
        self.assertEqual(worker.messages, ["step"])
        self.assertIn("not 'go T'", log.getvalue())
        self.assertFalse([e for e in events_of(out) if "turn" in e])

    def test_an_exception_in_a_measured_step_gives_its_turn_back(self):
        run, worker, out = lockstep_run({"warmup_steps": 0})
        with self.assertRaises(ValueError):
            with run.step(tokens=1):
                raise ValueError("caught by the loop")
        with run.step(tokens=1):
            pass
        run.summary()
        worker.join()
        self.assertEqual(worker.messages, ["step", "done", "step", "done", "end"])
        self.assertEqual([e.get("turn") for e in events_of(out)[:-1]], [1])

    def test_fail_ends_the_turns_before_the_error_event(self):
        run, worker, out = lockstep_run({"warmup_steps": 0})
        with self.assertRaises(SystemExit):
            with run.step(tokens=1):
                run.fail("oom", "out of memory")
        worker.join()
        self.assertEqual(worker.messages, ["step", "end"])
        self.assertEqual(events_of(out)[-1]["kind"], "oom")

    def test_a_phase_given_by_the_script_decides_the_turn(self):
        # A measured step first: no warm-up turn. A warm-up step after measuring began
        # takes a measured turn (it must not run beside the other side's measured step)
        # but its event is no measured step: no `turn`.
        run, worker, out = lockstep_run({"warmup_steps": 5})
        for phase in ("measure", "warmup", "measure"):
            with run.step(tokens=1, phase=phase):
                pass
        run.summary()
        worker.join()
        self.assertEqual(worker.messages, ["step", "done", "step", "done", "step", "done", "end"])
        steps = events_of(out)[:3]
        self.assertEqual([(s["phase"], s.get("turn")) for s in steps],
                         [("measure", 0), ("warmup", None), ("measure", 2)])

    def test_the_channel_comes_from_bakeoff_turn_fd_only_when_it_names_a_socket(self):
        self.assertIsNone(_turns.from_environment({}))
        read, write = os.pipe()
        environ = {"BAKEOFF_TURN_FD": str(read)}
        with redirect_stderr(io.StringIO()) as log:
            self.assertIsNone(_turns.from_environment(environ))
        self.assertIn("not an open socket", log.getvalue())
        self.assertEqual(environ, {})  # taken out: a program the rank starts never sees it
        os.close(read)
        os.close(write)
        rank_end, worker_end = socket.socketpair()
        environ = {"BAKEOFF_TURN_FD": str(rank_end.fileno())}
        channel = _turns.from_environment(environ)
        self.assertTrue(channel.open)
        self.assertFalse(os.get_inheritable(rank_end.fileno()))
        channel.end()
        rank_end.detach()  # the channel closed the descriptor
        self.assertEqual(worker_end.recv(16), b"end\n")
        worker_end.close()


class HfCallbackTurnsTest(unittest.TestCase):
    """bakeoff_report.hf.BakeoffCallback on a real transformers.Trainer takes turns
    through run.step(): one warm-up turn, one turn per optimizer step."""

    def setUp(self):
        try:
            import transformers  # noqa: F401, PLC0415
        except ImportError:
            self.skipTest("transformers is not installed in this interpreter; run with scripts/python")

    def test_each_optimizer_step_is_one_turn(self):
        import torch  # noqa: PLC0415
        import transformers  # noqa: PLC0415

        from bakeoff_report.hf import BakeoffCallback  # noqa: PLC0415
        transformers.utils.logging.set_verbosity_error()
        config = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                          num_key_value_heads=1, intermediate_size=64, vocab_size=64)
        model = transformers.LlamaForCausalLM(config)
        data = [{"input_ids": torch.randint(64, (16,)), "labels": torch.randint(64, (16,))} for _ in range(8)]
        run, worker, out = lockstep_run({"warmup_steps": 1})
        with tempfile.TemporaryDirectory() as tmp:
            args = transformers.TrainingArguments(output_dir=tmp, max_steps=3, per_device_train_batch_size=2,
                                                  use_cpu=True, report_to=[], logging_strategy="no",
                                                  save_strategy="no", disable_tqdm=True)
            transformers.Trainer(model=model, args=args, train_dataset=data,
                                 callbacks=[BakeoffCallback(run=run)]).train()
        worker.join()
        self.assertEqual(worker.messages, ["warmup", "done", "step", "done", "step", "done", "end"])
        steps = [e for e in events_of(out) if e["event"] == "step"]
        self.assertEqual([(s.get("turn"), s["tokens"]) for s in steps], [(None, 32), (1, 32), (2, 32)])


# The script each side of the two-process test runs: warm-up and measured steps of a
# busy loop, each recording when its block ran (CLOCK_MONOTONIC: one clock for all
# processes on the host).
SIDE_SCRIPT = """
import time
import bakeoff_report
run = bakeoff_report.init()
for i in range(run.config["warmup_steps"] + run.config["steps"]):
    with run.step(tokens=64) as step:
        t0 = time.monotonic()
        while time.monotonic() - t0 < run.config["busy_s"]:
            pass
        step.extra["t0"], step.extra["t1"] = t0, time.monotonic()
run.summary()
"""


class Arbiter:
    """The worker's arbiter for two sides of one rank each (docs/lockstep.md, "The
    arbiter"), written out sequentially: side 0's warm-up turn, side 1's, then measured
    turns alternating 0, 1, 0, ... over the sides still taking turns. Records each
    grant as (side, request, turn, go time, done time)."""

    def __init__(self, socks):
        for s in socks:
            s.settimeout(DEADLINE_S)
        self.socks = socks
        self.lines = [s.makefile("rb") for s in socks]
        self.grants = []
        self.turn = 0

    def read(self, side):
        line = self.lines[side].readline()
        return line.decode().rstrip("\n") if line else "eof"

    def grant(self, side, request):
        go_at = time.monotonic()
        self.socks[side].sendall(f"go {self.turn}\n".encode())
        self.turn += 1
        answer = self.read(side)
        self.grants.append((side, request, self.turn - 1, go_at, time.monotonic()))
        return answer

    def run(self):
        pending = {}
        for side in (0, 1):
            request = self.read(side)
            if request == "warmup":
                ended = self.grant(side, "warmup")
                assert ended == "done", f"side {side} ended its warm-up turn with {ended!r}"
                request = self.read(side)
            pending[side] = request
        live = [0, 1]
        while live:
            for side in list(live):
                request = pending[side]
                if request != "step":
                    assert request in ("end", "eof"), f"side {side} asked {request!r}"
                    live.remove(side)
                    continue
                ended = self.grant(side, "step")
                assert ended in ("done", "end", "eof"), f"side {side} ended its turn with {ended!r}"
                pending[side] = self.read(side) if ended == "done" else ended


class LockstepProcessesTest(unittest.TestCase):
    def test_two_processes_taking_turns_never_step_at_the_same_time(self):
        config = {"warmup_steps": 2, "steps": 5, "busy_s": 0.01}
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "side.py")
            with open(script, "w") as f:
                f.write(SIDE_SCRIPT)
            cfg = os.path.join(tmp, "config.json")
            with open(cfg, "w") as f:
                json.dump(config, f)
            procs, event_reads, arbiter_ends = [], [], []
            try:
                for _ in range(2):
                    rank_end, arbiter_end = socket.socketpair()
                    read, write = os.pipe()
                    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": LIB, "BAKEOFF_EVENTS_FD": str(write),
                           "BAKEOFF_TURN_FD": str(rank_end.fileno()), "BAKEOFF_CONFIG": cfg}
                    procs.append(subprocess.Popen([sys.executable, script], env=env, stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.PIPE, pass_fds=(write, rank_end.fileno())))
                    rank_end.close()
                    os.close(write)
                    event_reads.append(read)
                    arbiter_ends.append(arbiter_end)
                arbiter = Arbiter(arbiter_ends)
                arbiter.run()
                sides = []
                for proc, read in zip(procs, event_reads):
                    with os.fdopen(read) as f:
                        sides.append([json.loads(line) for line in f.read().splitlines()])
                    _, stderr = proc.communicate(timeout=DEADLINE_S)
                    self.assertEqual(proc.returncode, 0, stderr.decode())
            finally:
                for proc in procs:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                for s in arbiter_ends:
                    s.close()

        grants = {turn: (side, go_at, done_at) for side, _, turn, go_at, done_at in arbiter.grants}
        blocks = []  # (t0, t1, side, phase)
        for side, events in enumerate(sides):
            steps = [e for e in events if e["event"] == "step"]
            self.assertEqual([e["phase"] for e in steps], ["warmup"] * 2 + ["measure"] * 5)
            self.assertEqual(events[-1]["event"], "summary")
            for e in steps:
                blocks.append((e["t0"], e["t1"], side, e["phase"]))
                if e["phase"] == "measure":
                    granted_side, go_at, done_at = grants[e["turn"]]
                    self.assertEqual(granted_side, side)
                    # Its block ran inside its turn, and its time counts no waiting.
                    self.assertTrue(go_at <= e["t0"] <= e["t1"] <= done_at, (e, go_at, done_at))
                    self.assertLessEqual(e["step_s"], done_at - go_at)
        blocks.sort()
        for before, after in zip(blocks, blocks[1:]):
            self.assertLessEqual(before[1], after[0], f"{before} overlaps {after}")
        # Side 0 warms up alone, then side 1, then measured steps alternate 0, 1, 0, ...
        self.assertEqual([(b[2], b[3]) for b in blocks],
                         [(0, "warmup")] * 2 + [(1, "warmup")] * 2 + [(0, "measure"), (1, "measure")] * 5)


if __name__ == "__main__":
    unittest.main()
