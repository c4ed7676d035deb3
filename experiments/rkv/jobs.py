"""Experiment points as independent jobs: here (--jobs N) or on a Ray cluster (--ray ADDRESS).

A driver that sweeps a grid builds every point's command first, then hands the list to
run_commands, which returns the finished processes in the order of the list — whatever
order they ran in — so the rows, made from them in that order, are the same with one job,
N jobs or a cluster.

    cmds = [[radixkv, "run", ...], ...]
    for p in jobs.run_commands(NAME, cmds, a.jobs, a.ray, prog):
        rows.append(... p.stdout ...)

On Ray each command is one task (one CPU) that runs the program where the task lands:
the nodes must see the binary, the traces and the output paths at the same paths as the
driver (one machine, or a shared filesystem). Ray comes from PyPI in a venv outside the
clone (scripts/ray_venv.sh); the driver then runs under that venv's python. Only the
driver imports Ray, and only with --ray.
"""
import concurrent.futures
import os
import subprocess
import sys

from . import core


class Done:
    """What a finished command left: like subprocess.CompletedProcess."""

    def __init__(self, args, returncode, stdout, stderr):
        self.args, self.returncode, self.stdout, self.stderr = args, returncode, stdout, stderr


def add_options(ap):
    ap.add_argument("--jobs", type=int, default=1,
                    help="points run at once on this machine (default 1); rows are the same "
                         "for any N")
    ap.add_argument("--ray", default=None, metavar="ADDRESS",
                    help="run the points as tasks on the Ray cluster at ADDRESS (host:port, "
                         "or 'auto'); needs Ray (scripts/ray_venv.sh) and the checkout at the "
                         "same path on every node")


def _run(cmd):
    p = subprocess.run([str(x) for x in cmd], capture_output=True, text=True)
    return Done(cmd, p.returncode, p.stdout, p.stderr)


def _check(name, d):
    if d.returncode != 0:
        core.fail(name, f"command failed ({d.returncode}): {core.command_text(d.args)}\n"
                        f"{d.stderr.strip()[-2000:]}")
    return d


def run_commands(name, cmds, jobs=1, ray_address=None, progress=None, labels=None):
    """Runs every command; returns their Done records in the order of `cmds`.
    A command that fails ends the driver with its stderr (as core.run_checked)."""
    labels = labels or [""] * len(cmds)
    if ray_address:
        return _on_ray(name, cmds, ray_address, progress, labels)
    out = [None] * len(cmds)
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as ex:
        futs = {ex.submit(_run, c): i for i, c in enumerate(cmds)}
        for f in concurrent.futures.as_completed(futs):
            i = futs[f]
            out[i] = _check(name, f.result())
            if progress:
                progress.step(labels[i])
    return out


def _on_ray(name, cmds, address, progress, labels):
    try:
        import ray
    except ImportError:
        core.fail(name, f"--ray needs the ray package, which {sys.executable} lacks: run the "
                        "driver with the python of scripts/ray_venv.sh", 2)
    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    def one(cmd, cwd):
        # Defined here so that Ray ships it by value: workers need not import rkv.
        import os
        import subprocess
        if not os.path.isdir(cwd):
            return 2, "", f"{cwd}: not on this node (the driver's folder must be at the same path)"
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        return p.returncode, p.stdout, p.stderr

    try:
        task = ray.remote(num_cpus=1)(one)
        # In the driver's folder, so that relative paths (meson passes some) mean the same.
        refs = [task.remote([str(x) for x in c], os.getcwd()) for c in cmds]
        index = {r: i for i, r in enumerate(refs)}
        out = [None] * len(cmds)
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                i = index[r]
                rc, so, se = ray.get(r)
                out[i] = _check(name, Done(cmds[i], rc, so, se))
                if progress:
                    progress.step(labels[i])
        return out
    finally:
        ray.shutdown()

