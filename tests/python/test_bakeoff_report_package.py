"""The reporting library as a package (experiments/python/pyproject.toml): pip installs
it offline with nothing to download, its wheel holds the whole library and nothing else,
and its version is the project's."""

import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LIB = os.path.join(ROOT, "experiments", "python")
sys.path.insert(0, LIB)
sys.path.insert(0, os.path.join(LIB, "backend"))

import bakeoff_build  # noqa: E402

import bakeoff_report  # noqa: E402


class PackageTest(unittest.TestCase):
    def test_the_library_version_is_the_projects(self):
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            project = re.search(r"project\(bakeoff VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(bakeoff_report.__version__, project)

    def test_the_wheel_holds_every_module_of_the_library_and_a_record_that_matches(self):
        with tempfile.TemporaryDirectory() as tmp:
            name = bakeoff_build.build_wheel(tmp)
            self.assertEqual(name, f"bakeoff_report-{bakeoff_report.__version__}-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(tmp, name)) as wheel:
                files = {n: wheel.read(n) for n in wheel.namelist()}
        info = f"bakeoff_report-{bakeoff_report.__version__}.dist-info"
        modules = sorted(n for n in files if not n.startswith(info))
        self.assertEqual(modules, ["bakeoff_report/__init__.py", "bakeoff_report/_turns.py", "bakeoff_report/hf.py"])
        metadata = files[f"{info}/METADATA"].decode()
        self.assertIn("Name: bakeoff-report\n", metadata)
        self.assertNotIn("Requires-Dist", metadata)  # standard library only
        for path, digest, size in csv.reader(io.StringIO(files[f"{info}/RECORD"].decode())):
            if path.endswith("RECORD"):
                continue
            expect = base64.urlsafe_b64encode(hashlib.sha256(files[path]).digest()).rstrip(b"=").decode()
            self.assertEqual((digest, int(size)), (f"sha256={expect}", len(files[path])), path)

    def test_pip_installs_it_offline_without_writing_into_the_source_tree(self):
        before = sorted(os.listdir(LIB))
        with tempfile.TemporaryDirectory() as target:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                            "--disable-pip-version-check", "--target", target, LIB],
                           check=True, capture_output=True, timeout=120, cwd=target)
            probe = subprocess.run([sys.executable, "-c", "import bakeoff_report, bakeoff_report._turns; "
                                    "print(bakeoff_report.__file__)"],
                                   env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": target},
                                   capture_output=True, text=True, timeout=60, cwd=target, check=True)
            self.assertTrue(probe.stdout.startswith(target), probe.stdout)
        self.assertEqual(sorted(os.listdir(LIB)), before)


if __name__ == "__main__":
    unittest.main()
