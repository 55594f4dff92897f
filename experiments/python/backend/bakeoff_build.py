"""The PEP 517 build backend of the reporting library (pyproject.toml beside backend/):
builds the `bakeoff-report` wheel and sdist with the standard library alone.

Why not setuptools: a venv made by Debian's `python3 -m venv` has setuptools 66 and no
`wheel` package, and setuptools before 70.1 cannot build a wheel without it; with pip's
build isolation it would be downloaded. This backend needs neither, so
`python -m pip install ./experiments/python` works in any venv, offline, and writes
nothing into the source tree (no build/, no *.egg-info).

What goes in: every .py file of bakeoff_report/ (the version is its `__version__`),
and the metadata below. The wheel is pure Python (py3-none-any); nothing is compiled.
"""

import ast
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "bakeoff-report"
PACKAGE = "bakeoff_report"
SUMMARY = "Report a Python training script to Bakeoff the way its native trainer does"
REQUIRES_PYTHON = ">=3.8"

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A fixed time for archive entries: the same sources give the same archive.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _version():
    path = os.path.join(_ROOT, PACKAGE, "__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError(f"{path}: no __version__ = \"...\" assignment; the wheel needs its version")


def _package_files():
    """(path in the archive, path on disk) of each .py file of the package, sorted."""
    out = []
    base = os.path.join(_ROOT, PACKAGE)
    for directory, subdirs, files in os.walk(base):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                disk = os.path.join(directory, name)
                out.append((os.path.relpath(disk, _ROOT).replace(os.sep, "/"), disk))
    return out


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {SUMMARY}\n"
            f"Requires-Python: {REQUIRES_PYTHON}\n")


def _dist_info():
    return f"{PACKAGE}-{_version()}.dist-info"


def _dist_info_files():
    return {"METADATA": _metadata(),
            "WHEEL": "Wheel-Version: 1.0\nGenerator: bakeoff_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            "top_level.txt": PACKAGE + "\n"}


# ---- PEP 517 hooks ----
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(info, exist_ok=True)
    for name, text in _dist_info_files().items():
        with open(os.path.join(info, name), "w", encoding="utf-8") as f:
            f.write(text)
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    filename = f"{PACKAGE}-{_version()}-py3-none-any.whl"
    entries = [(arcname, _read(disk)) for arcname, disk in _package_files()]
    info = _dist_info()
    entries += [(f"{info}/{name}", text.encode("utf-8")) for name, text in _dist_info_files().items()]
    record = []
    for arcname, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        record.append(f"{arcname},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode("utf-8")))
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        for arcname, data in entries:
            item = zipfile.ZipInfo(arcname, _EPOCH)
            item.external_attr = 0o644 << 16
            item.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(item, data)
    return filename


def build_sdist(sdist_directory, config_settings=None):
    stem = f"{PACKAGE}-{_version()}"
    files = [("pyproject.toml", os.path.join(_ROOT, "pyproject.toml")),
             ("backend/bakeoff_build.py", os.path.abspath(__file__))] + _package_files()
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, stem + ".tar.gz"), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for arcname, data in [("PKG-INFO", _metadata().encode("utf-8"))] + [(a, _read(d)) for a, d in files]:
            item = tarfile.TarInfo(f"{stem}/{arcname}")
            item.size, item.mode, item.mtime = len(data), 0o644, 315532800
            tar.addfile(item, io.BytesIO(data))
    return stem + ".tar.gz"
