"""Issue 47: an exception that escapes a script outside `run.guard()` still reaches the
trial's reason: the library writes the `error` event guard() would have written, after
Python printed the traceback (the rank's log)."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.normpath(os.path.join(HERE, "..", "..", "experiments", "python"))


def run_script(code):
    env = dict(os.environ, PYTHONPATH=LIB)
    env.pop("BAKEOFF_EVENTS_FD", None)  # events on stdout
    env.pop("BAKEOFF_TURN_FD", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def events(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


class UncaughtExceptionTest(unittest.TestCase):
    def test_an_exception_outside_guard_becomes_an_error_event_with_its_text(self):
        done = run_script("import bakeoff_report\nrun = bakeoff_report.init(config={})\n"
                          "raise RuntimeError('shape mismatch at step 3\\nsecond line')\n")
        self.assertEqual(done.returncode, 1)
        self.assertIn("Traceback", done.stderr)  # Python's own hook still ran
        errors = [e for e in events(done.stdout) if e["event"] == "error"]
        self.assertEqual(errors, [{"event": "error", "kind": "failed",
                                   "message": "RuntimeError: shape mismatch at step 3"}])

    def test_an_out_of_memory_error_is_oom_and_guard_writes_one_event_only(self):
        done = run_script("import bakeoff_report\nrun = bakeoff_report.init(config={})\n"
                          "raise MemoryError('host out of memory')\n")
        self.assertEqual([e["kind"] for e in events(done.stdout) if e["event"] == "error"], ["oom"])
        guarded = run_script("import bakeoff_report\nrun = bakeoff_report.init(config={})\n"
                             "with run.guard():\n    raise ValueError('inside')\n")
        self.assertEqual(guarded.returncode, 1)
        self.assertEqual(len([e for e in events(guarded.stdout) if e["event"] == "error"]), 1)

    def test_a_later_init_reports_through_the_latest_run_and_exit_is_untouched(self):
        done = run_script("import bakeoff_report, sys\nbakeoff_report.init(config={})\n"
                          "run = bakeoff_report.init(config={'steps': 1})\nsys.exit(0)\n")
        self.assertEqual(done.returncode, 0)
        self.assertEqual([e for e in events(done.stdout) if e["event"] == "error"], [])


if __name__ == "__main__":
    unittest.main()
