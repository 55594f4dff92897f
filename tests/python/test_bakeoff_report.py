"""The reporting library (experiments/python/bakeoff_report): its events are the ones the
worker's parser accepts (docs/trainer.md), on the channel the worker gives, with the exit
codes the worker classifies; CUDA graphs that did not run are never reported as run."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.normpath(os.path.join(HERE, "..", "..", "experiments", "python"))
sys.path.insert(0, LIB)

import bakeoff_report  # noqa: E402


def run_script(body, config=None, extra_env=None):
    """Runs `body` as a script in a fresh interpreter with an event pipe on fd 3 (as the
    worker does); returns (exit code, events, stdout)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "script.py")
        with open(path, "w") as f:
            f.write("import bakeoff_report\n" + body)
        cfg = os.path.join(tmp, "config.json")
        with open(cfg, "w") as f:
            json.dump(config or {"warmup_steps": 1, "steps": 3}, f)
        read, write = os.pipe()
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": LIB, "BAKEOFF_EVENTS_FD": "3",
               "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", **(extra_env or {})}
        proc = subprocess.Popen([sys.executable, path, "--config", cfg], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=(write, 3),
                                preexec_fn=lambda: os.dup2(write, 3))
        os.close(write)
        with os.fdopen(read) as events_in:
            lines = events_in.read().splitlines()
        stdout, _ = proc.communicate(timeout=60)
        return proc.returncode, [json.loads(l) for l in lines], stdout.decode()


def run_guarded(body):
    """run_script of `body` (lines indented once) inside `run.guard()` of an initialised run."""
    return run_script("run = bakeoff_report.init()\nwith run.guard():\n" + body)


class ReportingLibraryTest(unittest.TestCase):
    def test_a_training_loop_reports_ready_steps_and_summary_on_the_event_channel(self):
        code, events, stdout = run_script(
            "run = bakeoff_report.init()\n"
            "print('a log line')\n"
            "run.ready(model={'params': 1})\n"
            "for i in range(run.config['warmup_steps'] + run.config['steps']):\n"
            "    with run.step(tokens=64) as s:\n"
            "        s.loss = 2.0 - i * 0.1\n"
            "run.summary(applied={'compile_mode': 'eager'})\n")
        self.assertEqual(code, 0)
        self.assertEqual(stdout.strip(), "a log line")  # prints never reach the events
        kinds = [e["event"] for e in events]
        self.assertEqual(kinds, ["ready", "step", "step", "step", "step", "summary"])
        self.assertEqual(events[0]["rank"], 1)
        self.assertEqual(events[0]["world_size"], 2)
        steps = events[1:5]
        self.assertEqual([s["phase"] for s in steps], ["warmup", "measure", "measure", "measure"])
        self.assertEqual([s["step"] for s in steps], [0, 1, 2, 3])
        for s in steps:
            self.assertGreaterEqual(s["step_s"], 0)
            self.assertEqual(s["tokens"], 64)
            self.assertIsInstance(s["peak_mem_bytes"], int)
        summary = events[-1]
        self.assertEqual(summary["applied"], {"compile_mode": "eager"})
        self.assertAlmostEqual(summary["tokens_per_s"], 64 / summary["step_s_median"])
        self.assertEqual(summary["first_step_s"], steps[0]["step_s"])
        self.assertIn("cpu_model", summary["environment"])

    def test_fail_writes_the_error_event_and_the_trainers_exit_code(self):
        for kind, code in (("unsupported", 4), ("oom", 3), ("failed", 1)):
            got, events, _ = run_script(f"run = bakeoff_report.init()\nrun.fail({kind!r}, 'why\\nsecond line')\n")
            self.assertEqual(got, code)
            self.assertEqual(events, [{"event": "error", "kind": kind, "message": "why"}])

    def test_an_escaping_exception_is_classified_and_its_traceback_kept_out_of_the_event(self):
        code, events, _ = run_guarded("    raise MemoryError('cannot allocate 4 GiB')\n")
        self.assertEqual(code, 3)
        self.assertEqual(events[-1]["kind"], "oom")
        self.assertEqual(events[-1]["message"], "MemoryError: cannot allocate 4 GiB")
        code, events, _ = run_guarded("    raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')\n")
        self.assertEqual(code, 3)
        code, events, _ = run_guarded("    raise ValueError('bad shape')\n")
        self.assertEqual((code, events[-1]["kind"]), (1, "failed"))

    def test_a_non_finite_loss_ends_the_run_as_diverged(self):
        code, events, _ = run_script(
            "run = bakeoff_report.init()\n"
            "with run.step(tokens=1) as s:\n"
            "    s.loss = float('nan')\n")
        self.assertEqual(code, 5)
        self.assertEqual(events[-1]["kind"], "diverged")
        self.assertIsNone(events[-2]["loss"])  # JSON has no NaN: the step says null

    def test_a_step_of_another_phase_is_refused_where_it_is_written(self):
        code, events, _ = run_guarded(
            "    with run.step(tokens=1, phase='eval') as s:\n"
            "        s.loss = 1.0\n")
        self.assertEqual(code, 1)
        self.assertEqual(events[-1]["kind"], "failed")
        self.assertIn("phase", events[-1]["message"])
        self.assertFalse([e for e in events if e["event"] == "step"])

    def test_a_run_whose_steps_reported_no_tokens_says_so_in_its_summary_and_log(self):
        code, events, _ = run_script(
            "run = bakeoff_report.init()\n"
            "for i in range(3):\n"
            "    with run.step():\n"
            "        pass\n"
            "run.summary()\n")
        self.assertEqual(code, 0)
        self.assertIsNone(events[-1]["tokens_per_s"])
        self.assertIn("no measured step reported its tokens", events[-1]["tokens_missing"])

    def test_without_a_worker_events_go_to_stdout(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.py")
            with open(path, "w") as f:
                f.write("import bakeoff_report\nbakeoff_report.init(config={}).ready()\n")
            out = subprocess.run([sys.executable, path], env={"PYTHONPATH": LIB, "PATH": os.environ["PATH"]},
                                 capture_output=True, timeout=60, check=True).stdout.decode()
        self.assertEqual(json.loads(out)["event"], "ready")


class TorchEvidenceTest(unittest.TestCase):
    """Needs the project's PyTorch (scripts/python)."""

    def setUp(self):
        try:
            import torch  # noqa: F401, PLC0415
        except ImportError:
            self.skipTest("PyTorch is not installed in this interpreter; run with scripts/python")

    def test_cuda_graphs_on_a_cpu_are_reported_as_not_run(self):
        evidence, fallback = bakeoff_report.cuda_graph_evidence("reduce-overhead")
        self.assertTrue(evidence["cuda_graphs_requested"])
        self.assertFalse(evidence["cuda_graphs_ran"])
        self.assertIn("CUDA graphs did not run", fallback)
        evidence, fallback = bakeoff_report.cuda_graph_evidence("max-autotune-no-cudagraphs")
        self.assertFalse(evidence["cuda_graphs_requested"])
        self.assertEqual(fallback, "")

    def test_compile_evidence_counts_graph_breaks_and_their_reasons(self):
        import torch  # noqa: PLC0415
        torch._dynamo.reset()

        def f(x):
            y = x * 2
            print("break")  # a graph break: print is not traceable
            return y + 1

        compiled = torch.compile(f, backend="eager")
        compiled(torch.ones(3))
        evidence = bakeoff_report.compile_evidence(compile_s=1.5)
        self.assertGreaterEqual(evidence["graphs"], 2)
        self.assertGreaterEqual(evidence["graph_breaks"], 1)
        self.assertTrue(evidence["graph_break_reasons"])
        self.assertEqual(evidence["compile_s"], 1.5)


class CacheStateTest(unittest.TestCase):
    """Which compile a process paid, from Inductor's cache counters (docs/statistics.md,
    "Compile cost"): the report splits warm-up and break-even by it."""

    def test_misses_alone_are_a_cold_compile_and_hits_alone_a_warm_one(self):
        self.assertEqual(bakeoff_report.cache_state({"inductor_cache_hits": 0, "inductor_cache_misses": 3}), "cold")
        self.assertEqual(bakeoff_report.cache_state({"inductor_cache_hits": 3, "inductor_cache_misses": 0}), "warm")
        self.assertEqual(bakeoff_report.cache_state({"inductor_cache_hits": 1, "inductor_cache_misses": 2}), "mixed")

    def test_no_lookup_is_no_state(self):
        self.assertIsNone(bakeoff_report.cache_state({}))
        self.assertIsNone(bakeoff_report.cache_state({"inductor_cache_hits": 0, "inductor_cache_misses": 0}))


class HfCallbackTest(unittest.TestCase):
    """bakeoff_report.hf.BakeoffCallback on a real transformers.Trainer (a tiny Llama
    from a config, random weights, three steps on a CPU)."""

    def setUp(self):
        try:
            import transformers  # noqa: F401, PLC0415
        except ImportError:
            self.skipTest("transformers is not installed in this interpreter; run with scripts/python")

    def test_a_trainer_run_reports_ready_one_step_per_optimizer_step_and_a_summary(self):
        import io  # noqa: PLC0415

        import torch  # noqa: PLC0415
        import transformers  # noqa: PLC0415

        from bakeoff_report.hf import BakeoffCallback  # noqa: PLC0415
        transformers.utils.logging.set_verbosity_error()
        config = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                          num_key_value_heads=1, intermediate_size=64, vocab_size=64)
        model = transformers.LlamaForCausalLM(config)
        data = [{"input_ids": torch.randint(64, (16,)), "labels": torch.randint(64, (16,))} for _ in range(8)]
        out = io.StringIO()
        run = bakeoff_report.Run({"warmup_steps": 1}, 0, 1, 0, out)
        with tempfile.TemporaryDirectory() as tmp:
            args = transformers.TrainingArguments(output_dir=tmp, max_steps=3, per_device_train_batch_size=2,
                                                  use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
                                                  disable_tqdm=True)
            trainer = transformers.Trainer(model=model, args=args, train_dataset=data,
                                           callbacks=[BakeoffCallback(run=run, tokens_per_step=32)])
            trainer.train()
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual([e["event"] for e in events], ["ready", "step", "step", "step", "summary"])
        self.assertEqual([e["phase"] for e in events[1:4]], ["warmup", "measure", "measure"])
        self.assertTrue(all(e["tokens"] == 32 for e in events[1:4]))
        self.assertEqual(events[-1]["applied"]["precision"], "fp32")
        self.assertAlmostEqual(events[-1]["tokens_per_s"], 32 / events[-1]["step_s_median"])

    def test_tokens_are_counted_from_what_went_into_each_optimizer_step_and_each_loss_is_its_own_steps(self):
        # Gradient accumulation 2 of micro-batches of 2 sequences with 12 of 16 tokens
        # unmasked: 48 tokens a step, counted from the attention masks.
        import io  # noqa: PLC0415

        import torch  # noqa: PLC0415
        import transformers  # noqa: PLC0415

        from bakeoff_report.hf import BakeoffCallback  # noqa: PLC0415
        transformers.utils.logging.set_verbosity_error()
        config = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                          num_key_value_heads=1, intermediate_size=64, vocab_size=64)
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config)
        mask = torch.tensor([1] * 12 + [0] * 4)
        data = [{"input_ids": torch.randint(64, (16,)), "attention_mask": mask, "labels": torch.randint(64, (16,))}
                for _ in range(12)]
        out = io.StringIO()
        run = bakeoff_report.Run({"warmup_steps": 1}, 0, 1, 0, out)
        with tempfile.TemporaryDirectory() as tmp:
            args = transformers.TrainingArguments(output_dir=tmp, max_steps=3, per_device_train_batch_size=2,
                                                  gradient_accumulation_steps=2, learning_rate=1e-3,
                                                  use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
                                                  disable_tqdm=True)
            trainer = transformers.Trainer(model=model, args=args, train_dataset=data,
                                           callbacks=[BakeoffCallback(run=run)])
            trainer.train()
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        steps = [e for e in events if e["event"] == "step"]
        self.assertEqual([s["tokens"] for s in steps], [48, 48, 48])
        logged = [h for h in trainer.state.log_history if "loss" in h]
        self.assertEqual(len(logged), 3)
        for step, log in zip(steps, logged):  # the Trainer's own loss of that step (rounded to 4 places)
            self.assertAlmostEqual(step["loss"], log["loss"], places=3)
            self.assertAlmostEqual(step["lr"], log["learning_rate"], places=9)
        self.assertEqual(events[-1]["tokens_per_step"], 48)
        self.assertNotIn("tokens_missing", events[-1])

    def test_without_a_batch_mask_the_tokens_are_the_input_ids(self):
        from bakeoff_report.hf import count_input_tokens  # noqa: PLC0415
        import torch  # noqa: PLC0415
        self.assertEqual(count_input_tokens({"input_ids": torch.zeros(2, 16, dtype=torch.long)}), 32)
        self.assertEqual(int(count_input_tokens({"input_ids": torch.zeros(2, 16, dtype=torch.long),
                                                 "attention_mask": torch.ones(2, 16)})), 32)
        self.assertIsNone(count_input_tokens({"pixel_values": torch.zeros(2, 3)}))



class RendezvousStoreTest(unittest.TestCase):
    """Rank 0 of the Python workloads hosts the trial's store on MASTER_ADDR only
    (security review 2026-12-02, hole 13), and a port in use is infrastructure."""

    @staticmethod
    def listening_addresses(port):
        found = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state = fields[1], fields[3]
                    if state == "0A" and local.rsplit(":", 1)[1] == f"{port:04X}":
                        found.append(local.rsplit(":", 1)[0])
        return found

    def free_port(self):
        import socket  # noqa: PLC0415
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def test_rank_zero_listens_on_master_addr_only(self):
        import datetime  # noqa: PLC0415
        from unittest import mock  # noqa: PLC0415
        from bakeoff_workloads import common  # noqa: PLC0415
        port = self.free_port()
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1"}
        with mock.patch.dict(os.environ, env):
            store = common.rendezvous_store(datetime.timedelta(seconds=10))
            store.set("k", "v")
            self.assertEqual(store.get("k"), b"v")
            self.assertEqual(self.listening_addresses(port), ["0100007F"])
        del store

    def test_a_port_in_use_is_infrastructure(self):
        import datetime  # noqa: PLC0415
        import socket  # noqa: PLC0415
        from unittest import mock  # noqa: PLC0415
        from bakeoff_workloads import common  # noqa: PLC0415
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen(1)
            port = holder.getsockname()[1]
            env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "2"}
            with mock.patch.dict(os.environ, env):
                with self.assertRaises(bakeoff_report.InfrastructureError) as raised:
                    common.rendezvous_store(datetime.timedelta(seconds=10))
        self.assertEqual(bakeoff_report.classify_exception(raised.exception)[0], "infrastructure")


if __name__ == "__main__":
    unittest.main()
