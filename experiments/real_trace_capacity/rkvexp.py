"""The Mooncake experiments' helpers under their old name (rkvexp): the same
functions now live in experiments/rkv (rkv.core, rkv.mooncake); this module
keeps the old names and signatures for drivers not yet moved over."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rkv.core import (ROOT, Progress, Rows, add_mooncake_dir, check_binary,  # noqa: E402,F401
                      default_mooncake_dir, driver_command, fail, git_commit, parser,
                      report_properties, run_json, summary_of, verdict)
from rkv.core import find_radixkv as default_radixkv  # noqa: E402,F401
from rkv.core import run_notebook as _run_notebook  # noqa: E402
from rkv.mooncake import *  # noqa: E402,F401,F403
from rkv.mooncake import BLOCK, MOONCAKE_HELP, MOONCAKE_TRACES  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))


def run_notebook(name, results):
    """notebooks/NAME.ipynb on `results`; returns its exit status (77: skip)."""
    return _run_notebook(name, results, exit_on_skip=False)


def gen_trace(radixkv, args, path, name):
    """`radixkv gen ARGS --out path`."""
    cmd = [radixkv, "gen"] + [str(x) for x in args] + ["--out", path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(name, f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return path

