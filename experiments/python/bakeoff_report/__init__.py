"""Report a Python training script to Bakeoff the way the native trainer does.

Standard library only; PyTorch is used when the script has imported it. A worker runs an
allowlisted command (docs/executors.md) with torchrun's environment and an event channel,
BAKEOFF_EVENTS_FD, so the script's own prints cannot corrupt its events. A few lines make
a script report like `bakeoff-trainer` (the events of docs/trainer.md):

    import bakeoff_report
    run = bakeoff_report.init()            # config, rank, the event and turn channels
    run.ready(model={"params": n})
    for i in range(run.config["warmup_steps"] + run.config["steps"]):
        with run.step(tokens=tokens_per_step) as step:
            loss = train_one_step()
            step.loss = loss               # a float or a 0-d tensor
    run.summary(applied={"compile_mode": "default"}, compile=bakeoff_report.compile_evidence())

Steps are timed with the device synchronised (CUDA when the script uses it) and the
first `warmup_steps` are marked `warmup`. In a lockstep trial (BAKEOFF_TURN_FD set by
the worker, docs/lockstep.md) `run.step()` takes turns with the other side of the pair:
it waits for its turn before the timer starts, so waiting is never timed.
`run.fail(kind, message)` writes an `error` event and exits with the trainer's exit code
for it (docs/trainer.md); an exception that escapes `run.guard()` is classified the same
way (an out-of-memory error is `oom`).
Outside a worker (no BAKEOFF_EVENTS_FD) events go to stdout.
"""

import contextlib
import json
import math
import os
import resource
import sys
import time
import traceback

from . import _turns

__version__ = "0.12.0"  # the project's version (CMakeLists.txt; a test checks that they agree)

__all__ = ["init", "Run", "compile_evidence", "cuda_graph_evidence", "compile_outcome", "classify_exception",
           "EXIT_CODES", "InfrastructureError"]

# docs/trainer.md, "Exit codes"; the same table as the native trainer's and the worker's
# (protocol/trainer_exit.h; TrainerExitTest checks that they agree).
EXIT_CODES = {"failed": 1, "config": 2, "oom": 3, "unsupported": 4, "diverged": 5}

_PROCESS_START = time.perf_counter()


def _torch():
    """The torch module when the script imported it (never imported here)."""
    return sys.modules.get("torch")


def _percentile(values, q):
    """Linear interpolation between closest ranks, as the native trainer computes it."""
    v = sorted(values)
    if not v:
        return None
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(len(v) - 1, lo + 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _cuda_in_use(torch):
    # is_initialized first: it is a flag read; is_available asks the driver.
    return torch is not None and torch.cuda.is_initialized()


def _synchronize():
    torch = _torch()
    if _cuda_in_use(torch):
        torch.cuda.synchronize()


_STATM = None
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss_bytes():
    # One descriptor kept open and read with pread: a step pays no open() (bench/python).
    global _STATM
    try:
        if _STATM is None:
            _STATM = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        return int(os.pread(_STATM, 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


class InfrastructureError(RuntimeError):
    """Bakeoff's own machinery failed before the variant ran (the rank store's port is
    taken): the error kind `infrastructure`, which the worker ends `lost` and the
    coordinator retries (docs/trainer.md)."""


def classify_exception(error):
    """(kind, message) for an exception: `infrastructure` for InfrastructureError, `oom`
    for CUDA or host out-of-memory errors, `unsupported` for NotImplementedError, else
    `failed`. The message is the cause's first line, as the native trainer reports it."""
    torch = _torch()
    text = str(error).strip() or type(error).__name__
    first = text.splitlines()[0]
    message = f"{type(error).__name__}: {first}"
    oom_types = (MemoryError,)
    if torch is not None and hasattr(torch.cuda, "OutOfMemoryError"):
        oom_types = oom_types + (torch.cuda.OutOfMemoryError,)
    if isinstance(error, oom_types) or "out of memory" in text.lower() or "DefaultCPUAllocator: can't allocate" in text:
        return "oom", message
    if isinstance(error, InfrastructureError):
        return "infrastructure", message
    if isinstance(error, NotImplementedError):
        return "unsupported", message
    return "failed", message


class _Step:
    """What one step reports; set fields inside the `with run.step()` block."""

    def __init__(self):
        self.tokens = None  # overrides step(tokens=...) when set in the block
        self.loss = None
        self.lr = None
        self.grad_norm = None
        self.comm_s = None
        self.comm_bytes = None
        self.extra = {}


class Run:
    """One rank of one trial. Not thread-safe: call it from the training loop."""

    def __init__(self, config, rank, world_size, local_rank, out, turns=None):
        """`turns`: the lockstep turn channel (_turns.TurnChannel), None outside a
        lockstep trial; init() takes it from BAKEOFF_TURN_FD."""
        self.config = config
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self._out = out
        self._warmup = int(config.get("warmup_steps", 0) or 0)
        self._steps = []          # (phase, step_s, tokens)
        self._index = 0
        self._first_step_at = None
        self._summary_written = False
        self._error_written = False
        self._turns = turns

    # ---- events ----
    def emit(self, event, **fields):
        """Writes one event (a JSON object on one line) and flushes it."""
        line = json.dumps({"event": event, **fields}, allow_nan=False, default=_json_default)
        self._out.write(line + "\n")
        self._out.flush()

    def ready(self, **fields):
        """The `ready` event: the resolved config, model facts, versions."""
        torch = _torch()
        base = {"config": self.config, "rank": self.rank, "world_size": self.world_size,
                "environment": environment()}
        if torch is not None:
            base["torch_version"] = torch.__version__
            base["threads"] = torch.get_num_threads()
        base.update(fields)
        self.emit("ready", **base)

    @contextlib.contextmanager
    def step(self, tokens=None, phase=None):
        """Times one optimizer step, device-synchronised, and writes its `step` event.
        `tokens`: the global tokens of the step. `phase`: "warmup" or "measure" (default:
        warmup for the first `warmup_steps` steps); the worker drops a step of any other
        phase, so it is refused here. A non-finite loss ends the run as `diverged` (exit
        5), as the native trainer does.

        In a lockstep trial the step takes its turn first (docs/lockstep.md): the first
        warm-up step asks for the warm-up turn, held until the first measured step; each
        measured step asks for a turn, and the timer starts after it is granted and the
        device synchronised. The turn is given back after the timer stopped and the step
        event was written; the event carries the turn number (`turn`)."""
        if phase is None:
            phase = "warmup" if self._index < self._warmup else "measure"
        elif phase not in ("warmup", "measure"):
            raise ValueError(f"step phase must be 'warmup' or 'measure', not {phase!r}")
        if self._first_step_at is None:
            _synchronize()
            self._first_step_at = time.perf_counter()
        turn = self._take_turn(phase) if self._turns is not None else None
        _synchronize()
        record = _Step()
        start = time.perf_counter()
        try:
            yield record
            self._finish_step(record, tokens, phase, start, turn)
        finally:
            # After the step event; also when the block raised and the loop steps on.
            self._give_back_step_turn()
        self._index += 1

    def _finish_step(self, record, tokens, phase, start, turn):
        """Stops the step's timer and writes its `step` event (the turn still held)."""
        _synchronize()
        # The planted slowdown (docs/trainer.md, test_slowdown): a test instrument.
        # Padded with small matrix products when torch is loaded (as the native trainer
        # does: an idle spin loads a sibling core less than real work, so a neighbouring
        # trial would speed up), never a sleep (which overshoots on a short step).
        slowdown = float(self.config.get("test_slowdown", 0) or 0)
        if slowdown > 0:
            until = start + (time.perf_counter() - start) * (1 + slowdown)
            torch = _torch()
            pad = torch.ones(64, 64) if torch is not None else None
            while time.perf_counter() < until:
                if pad is not None:
                    torch.mm(pad, pad)
        step_s = time.perf_counter() - start
        fields = {"step": self._index, "phase": phase, "step_s": step_s}
        if turn is not None:
            fields["turn"] = turn
        if record.tokens is not None:
            tokens = record.tokens
        if tokens is not None:
            fields["tokens"] = int(tokens)
        for name in ("loss", "lr", "grad_norm", "comm_s"):
            value = _scalar(getattr(record, name))
            if value is not None:
                fields[name] = value
        if record.comm_bytes is not None:
            fields["comm_bytes"] = int(record.comm_bytes)
        fields["peak_mem_bytes"] = self.peak_memory()["peak_mem_bytes"]
        rss = _rss_bytes()
        if rss is not None:
            fields["rss_bytes"] = rss
        fields.update(record.extra)
        loss = fields.get("loss")
        if loss is not None and not math.isfinite(loss):
            fields["loss"] = None
            self.emit("step", **fields)
            self.fail("diverged", f"non-finite loss at step {self._index}")
        self.emit("step", **fields)
        self._steps.append((phase, step_s, fields.get("tokens")))

    # ---- lockstep turns (docs/lockstep.md, "The turn channel") ----
    def _take_turn(self, phase):
        """Takes the turn a step of `phase` needs; returns the measured turn's number for
        the step event, else None. A closed channel is dropped: no turns from then on."""
        turns = self._turns
        if not turns.open:
            self._turns = None
            return None
        if phase == "warmup":
            if turns.holding == "warmup":
                return None
            if not turns.warmup_asked:
                turns.warmup_asked = True
                turns.take("warmup")
                return None
            # A warm-up step after the warm-up turn ended (phase given by the script)
            # takes a measured turn, so it never runs beside the other side's measured
            # step; its event carries no `turn` (it is not a measured step).
            turns.take("step")
            return None
        turns.warmup_asked = True  # no warm-up turn once measuring began
        turns.give_back()          # `done` for the warm-up turn, when one is held
        return turns.take("step")

    def _give_back_step_turn(self):
        if self._turns is not None and self._turns.holding == "step":
            self._turns.give_back()

    def _end_turns(self):
        """`end`: no more turns (best effort; closing the socket would say the same)."""
        if self._turns is not None:
            self._turns.end()
            self._turns = None

    def first_step_excess_s(self):
        """The first step's time over the median measured step: what compiling (and
        first-touch allocation) cost. None before any measured step."""
        measured = [s for p, s, _ in self._steps if p == "measure"]
        if not self._steps or not measured:
            return None
        return max(0.0, self._steps[0][1] - _percentile(measured, 0.5))

    def peak_memory(self):
        """Peak allocated and reserved CUDA memory when the script used CUDA, else the
        process's peak RSS (what a CPU step holds)."""
        torch = _torch()
        if _cuda_in_use(torch):
            return {"peak_mem_bytes": int(torch.cuda.max_memory_allocated()),
                    "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
                    "peak_rss_bytes": _peak_rss_bytes()}
        peak = _peak_rss_bytes()
        return {"peak_mem_bytes": peak, "peak_rss_bytes": peak}

    def summary(self, applied=None, **fields):
        """The `summary` event: step-time statistics over the measured steps, throughput,
        memory, and `applied` (what took effect, with `fell_back`/`fallback_reason` when
        a requested setting did not)."""
        self._end_turns()
        measured = [s for p, s, _ in self._steps if p == "measure"]
        warm = [s for p, s, _ in self._steps if p == "warmup"]
        tokens = [t for p, _, t in self._steps if p == "measure" and t is not None]
        median = _percentile(measured, 0.5)
        body = {
            "startup_s": (self._first_step_at - _PROCESS_START) if self._first_step_at else None,
            "first_step_s": self._steps[0][1] if self._steps else None,
            "warmup_s": sum(warm),
            "step_s_median": median,
            "step_s_p10": _percentile(measured, 0.1),
            "step_s_p90": _percentile(measured, 0.9),
            "tokens_per_step": (sum(tokens) / len(tokens)) if tokens else None,
            "tokens_per_s": (sum(tokens) / len(tokens) / median) if tokens and median else None,
        }
        body.update(self.peak_memory())
        body["environment"] = environment()
        body["applied"] = dict(applied or {})
        body.update(fields)
        if body.get("flops_per_token") and body.get("tokens_per_s"):
            body["flops_per_s"] = body["flops_per_token"] * body["tokens_per_s"]
        if measured and not tokens and "tokens_missing" not in body:
            # Without tokens the trial has no tokens/s, and the report cannot compare its
            # throughput (docs/executors.md): said here and in the rank's log.
            body["tokens_missing"] = ("no measured step reported its tokens (run.step(tokens=N) or "
                                      "step.tokens = N): no tokens/s for this trial")
            print("bakeoff_report: " + body["tokens_missing"], file=sys.stderr, flush=True)
        self.emit("summary", **body)
        self._summary_written = True

    def fail(self, kind, message, exit_code=None):
        """Writes an `error` event of `kind` (oom, unsupported, diverged, failed) and
        exits with the trainer's code for it. Its message should be the cause, one line.
        In a lockstep trial it first ends its turns, so the other side goes on."""
        self._end_turns()
        if not self._error_written:
            self._error_written = True
            self.emit("error", kind=kind, message=str(message).splitlines()[0] if message else kind)
        sys.stdout.flush()
        sys.stderr.flush()
        raise SystemExit(exit_code if exit_code is not None else EXIT_CODES.get(kind, 1))

    @contextlib.contextmanager
    def guard(self):
        """Turns an exception escaping the block into an `error` event and the matching
        exit code (the traceback goes to stderr, which the worker keeps as the rank log)."""
        try:
            yield self
        except SystemExit:
            raise
        except BaseException as error:  # noqa: BLE001 - every failure must be reported
            traceback.print_exc(file=sys.stderr)
            kind, message = classify_exception(error)
            self.fail(kind, message)


def _scalar(value):
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    return float(value)


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def environment():
    """Where the trial ran, with the native trainer's names where they overlap."""
    env = {"host": os.uname().nodename, "usable_cpus": len(os.sched_getaffinity(0)),
           "python_version": sys.version.split()[0]}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    env["cpu_model"] = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    env["cpu_flags"] = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16",
                                                    "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve") if f in have]
                    break
    except OSError:
        pass
    torch = _torch()
    if torch is not None:
        env["torch_version"] = torch.__version__
        env["cuda_version"] = torch.version.cuda or ""
        if torch.cuda.is_available():
            env["gpu_model"] = torch.cuda.get_device_name()
    for name in ("deepspeed", "transformers", "peft"):
        module = sys.modules.get(name)
        if module is not None:
            env[name + "_version"] = getattr(module, "__version__", "")
    return env


def compile_evidence(compile_s=None):
    """What torch.compile did in this process: graphs compiled, graph breaks with their
    reasons, recompilations, Inductor's cache hits and misses (a warm cache makes the
    compile cheaper: the report shows which ran), and `compile_s` when the script gives
    it. Empty when torch or Dynamo was never used."""
    torch = _torch()
    if torch is None or "torch._dynamo" not in sys.modules:
        return {}
    from torch._dynamo.utils import counters  # noqa: PLC0415 - only when Dynamo ran
    stats = counters.get("stats", {})
    breaks = dict(counters.get("graph_break", {}))
    evidence = {
        "graphs": int(stats.get("unique_graphs", 0)),
        "frames_captured": int(stats.get("calls_captured", 0)),
        "graph_breaks": int(sum(breaks.values())),
        "graph_break_reasons": sorted(str(r)[:200] for r in breaks)[:20],
        "recompiles": int(sum(counters.get("recompiles", {}).values())),
        "inductor_cache_hits": int(counters.get("inductor", {}).get("fxgraph_cache_hit", 0)),
        "inductor_cache_misses": int(counters.get("inductor", {}).get("fxgraph_cache_miss", 0)),
    }
    if compile_s is not None:
        evidence["compile_s"] = compile_s
    return evidence


def cuda_graph_evidence(mode):
    """Whether CUDA graphs really ran for a torch.compile `mode`: requested by
    `reduce-overhead` and `max-autotune`; they run only on CUDA and only when Inductor
    did not skip them (its `cudagraph_skips` counter). Returns (evidence, fallback
    reason or "")."""
    requested = mode in ("reduce-overhead", "max-autotune")
    if not requested:
        return {"cuda_graphs_requested": False, "cuda_graphs_ran": False}, ""
    torch = _torch()
    skips = 0
    if torch is not None and "torch._dynamo" in sys.modules:
        from torch._dynamo.utils import counters  # noqa: PLC0415
        skips = int(counters.get("inductor", {}).get("cudagraph_skips", 0))
    on_cuda = _cuda_in_use(torch)
    ran = on_cuda and skips == 0
    evidence = {"cuda_graphs_requested": True, "cuda_graphs_ran": ran, "cuda_graph_skips": skips}
    if ran:
        return evidence, ""
    why = "no CUDA device" if not on_cuda else f"Inductor skipped them {skips} time(s) (see the rank log)"
    return evidence, f"{mode}: CUDA graphs did not run ({why})"


def cache_state(evidence):
    """Which compile this process paid, from Inductor's FX-graph cache counters: "cold"
    (every graph compiled: misses, no hits), "warm" (every graph came from a cache an
    earlier process filled: hits, no misses), "mixed" (both), or None (no graph looked
    up). The report splits warm-up cost and break-even by it (docs/statistics.md)."""
    hits, misses = evidence.get("inductor_cache_hits", 0), evidence.get("inductor_cache_misses", 0)
    if hits and misses:
        return "mixed"
    if misses:
        return "cold"
    if hits:
        return "warm"
    return None


def compile_outcome(mode, run):
    """What a run compiled with torch.compile `mode` ("eager": none) reports: its compile
    evidence (compile_s: the first step's excess over a measured one) and the keys to add
    to `applied`: the CUDA-graph evidence, `compile_cache_state` (cache_state), and
    `fell_back` with the reason when the mode did not take effect (no graph captured,
    or CUDA graphs that did not run)."""
    graphs, fallback = cuda_graph_evidence(mode)
    applied = dict(graphs)
    if mode == "eager":
        return {}, applied
    evidence = compile_evidence(compile_s=run.first_step_excess_s())
    state = cache_state(evidence)
    if state:
        applied["compile_cache_state"] = state
    if evidence.get("graphs", 0) == 0:
        fallback = "torch.compile captured no graph: the step ran eagerly"
    if fallback:
        applied["fell_back"], applied["fallback_reason"] = True, fallback
    return evidence, applied


def _events_stream():
    fd = os.environ.get("BAKEOFF_EVENTS_FD")
    if fd:
        return os.fdopen(int(fd), "w", buffering=1, closefd=False)
    return sys.stdout


def init(config=None, config_path=None):
    """The run of this rank: its config (`config`, else the JSON file `config_path`,
    else the file named by --config on the command line or BAKEOFF_CONFIG), rank and
    world size from torchrun's environment, and the event channel."""
    if config is None:
        path = config_path or _config_path_from_argv() or os.environ.get("BAKEOFF_CONFIG")
        if path:
            with open(path) as f:
                config = json.load(f)
        else:
            config = {}
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", str(config.get("world_size", 1))))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    run = Run(config, rank, world, local, _events_stream(), turns=_process_turns())
    _report_uncaught_exceptions(run)
    return run


_UNCAUGHT_RUN = None  # the Run an exception that escapes the script is reported through


def _report_uncaught_exceptions(run):
    """An exception that escapes the script outside `run.guard()` still reaches the
    report: after Python's own hook printed the traceback (to stderr, the rank's log),
    the latest Run writes the `error` event guard() would have written (the cause's
    first line, classified: an out-of-memory error is `oom`), so the trial's reason is
    the exception, not only "exited with code 1". Installed once per process."""
    global _UNCAUGHT_RUN
    first = _UNCAUGHT_RUN is None
    _UNCAUGHT_RUN = run
    if not first:
        return
    previous = sys.excepthook

    def hook(kind, error, tb):
        previous(kind, error, tb)
        current = _UNCAUGHT_RUN
        if current is None or current._error_written or issubclass(kind, KeyboardInterrupt):
            return
        try:
            current._end_turns()
            what, message = classify_exception(error)
            current._error_written = True
            current.emit("error", kind=what, message=message)
        except Exception:  # noqa: BLE001 - the process is ending; its log has the traceback
            pass

    sys.excepthook = hook


_TURNS = None  # this process's turn channel: one, whichever Run takes it


def _process_turns():
    """The turn channel of BAKEOFF_TURN_FD (docs/lockstep.md), made once per process: a
    second init() (a script's own and the Hugging Face callback's) gets the same one."""
    global _TURNS
    if _TURNS is None:
        _TURNS = _turns.from_environment()
    return _TURNS


def _config_path_from_argv():
    argv = sys.argv
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None
