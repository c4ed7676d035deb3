"""The Mooncake experiments' helpers under their old name (rkvexp): the same
functions now live in experiments/rkv (rkv.core, rkv.mooncake); this module
keeps the old names and signatures for drivers not yet moved over."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rkv import core as _core, mooncake as _mooncake  # noqa: E402
from rkv.core import fail  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
default_radixkv = _core.find_radixkv


def __getattr__(name):
    """rkvexp.NAME for every public name of rkv.mooncake, then of rkv.core,
    looked up there when a driver asks (PEP 562) rather than copied in by a
    star import, which would hide undefined names in this file from pyflakes
    (tests/arch/pyflakes.py); names this file defines come first."""
    if not name.startswith("_"):
        for m in (_mooncake, _core):
            if hasattr(m, name):
                return getattr(m, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_notebook(name, results):
    """notebooks/NAME.ipynb on `results`; returns its exit status (77: skip)."""
    return _core.run_notebook(name, results, exit_on_skip=False)


def gen_trace(radixkv, args, path, name):
    """`radixkv gen ARGS --out path`."""
    cmd = [radixkv, "gen"] + [str(x) for x in args] + ["--out", path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(name, f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return path

