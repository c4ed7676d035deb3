"""Shared helpers for the experiment drivers (experiments/<name>/run).

Every driver has the same shape:

    config.json --(grid for --scale small|full|tiny)--> radixkv gen / run / bench
                --> results/<name>.jsonl: one row per grid point, carrying its
                    configuration, seed, backend, model preset, git commit, date

The rows are what the notebook and the paper read; nothing else is kept.
A progress bar goes to stderr; the one-line verdict goes to stdout.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCALES = ("tiny", "small", "full")


def fail(name, msg):
    print(f"{name}: {msg}", file=sys.stderr)
    sys.exit(1)


def find_radixkv(explicit=None):
    """The binary: --radixkv, else $RADIXKV, else the release build (no
    per-step accounting checks, so wall and CPU times mean something), else
    the default build."""
    if explicit:
        return explicit
    if os.environ.get("RADIXKV"):
        return os.environ["RADIXKV"]
    for b in ("build-release", "build"):
        p = os.path.join(ROOT, b, "runtime", "radixkv")
        if os.access(p, os.X_OK):
            return p
    return os.path.join(ROOT, "build", "runtime", "radixkv")


def registry(name, radixkv):
    """`radixkv list --json`: the cache kinds (with the eviction policies and
    hash functions each takes), policies, backends and schedulers of this
    binary. Configs name lists as "registry" and drivers resolve them here, so
    a kind or policy added to the code needs no edit in experiments/."""
    out = subprocess.run([radixkv, "list", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        fail(name, f"{radixkv} list --json failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def kind_entry(name, reg, kind):
    """The registry's entry for one cache kind."""
    for k in reg["kinds"]:
        if k["name"] == kind:
            return k
    fail(name, f"cache kind '{kind}' is not in this binary (radixkv list)")


def write_registry(reg, out):
    """results/registry.json beside the rows, so the notebook orders and colours
    kinds and policies as the binary that made the rows listed them."""
    with open(os.path.join(out, "registry.json"), "w") as f:
        json.dump(reg, f, indent=1)
        f.write("\n")


def find_bench(name, radixkv):
    """bench/<name> next to the radixkv binary's build folder."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(radixkv)))
    return os.path.join(build, "bench", name)


def parser(name, doc):
    ap = argparse.ArgumentParser(prog=f"experiments/{name}/run", description=doc)
    ap.add_argument("--scale", choices=SCALES, default="small",
                    help="small (default): a few minutes on 2 cores; full: the published "
                         "scale; tiny: the smoke test's")
    ap.add_argument("--radixkv", default=None,
                    help="the binary (default: $RADIXKV, else build-release/, else build/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", name, "results"),
                    help="results folder (default: experiments/%s/results)" % name)
    ap.add_argument("--notebook", action="store_true",
                    help=f"also execute notebooks/{name}.ipynb")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless the experiment's stated properties hold")
    return ap


def load_config(name):
    with open(os.path.join(ROOT, "experiments", name, "config.json")) as f:
        return json.load(f)


def git_commit():
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return c + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Meta:
    """What every row carries besides its own numbers."""

    def __init__(self, name, scale):
        self.base = {
            "experiment": name,
            "scale": scale,
            "commit": git_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def row(self, **kw):
        r = dict(self.base)
        r.update(kw)
        return r


class Progress:
    """   hit_rate_sweep [#########...........]  45.0%  81/180 runs  52 s"""

    def __init__(self, label, total, enabled=True):
        self.label, self.total, self.done = label, max(total, 1), 0
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.t0 = self.last = time.monotonic()

    def step(self, what=""):
        self.done += 1
        if not self.enabled:
            return
        t = time.monotonic()
        if not self.tty and t - self.last < 5 and self.done < self.total:
            return
        self.last = t
        f = self.done / self.total
        bar = "#" * int(20 * f) + "." * (20 - int(20 * f))
        line = (f"{self.label} [{bar}] {100 * f:5.1f}%  {self.done}/{self.total} runs  "
                f"{t - self.t0:.0f} s  {what}")
        if self.tty:
            sys.stderr.write("\r" + line[:110].ljust(110))
            sys.stderr.flush()
        else:
            print(line, file=sys.stderr)

    def finish(self):
        if self.enabled and self.tty:
            sys.stderr.write("\n")
        return time.monotonic() - self.t0


def run_checked(name, cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        fail(name, f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.strip()}")
    return p


def gen_trace(name, radixkv, path, kind, args):
    """radixkv gen KIND --opt value ... --out path (kept when it exists with the
    same arguments: the trace is a pure function of them)."""
    cmd = [radixkv, "gen", kind]
    for k, v in args.items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    stamp = path + ".cmd"
    want = json.dumps(cmd[1:])
    if os.path.exists(path) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == want:
                return path
    run_checked(name, cmd + ["--out", path])
    with open(stamp, "w") as f:
        f.write(want)
    return path


def read_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def write_jsonl(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    os.replace(tmp, path)


def prepare_out(out):
    os.makedirs(out, exist_ok=True)
    traces = os.path.join(out, "traces")
    os.makedirs(traces, exist_ok=True)
    return traces


def run_notebook(name, out=None):
    """notebooks/run.sh NAME on the results in `out` (RKV_RESULTS); figures go
    to $RKV_FIGURES (default notebooks/figures). Exits 77 (skip) when
    /usr/bin/python3 lacks matplotlib or nbconvert."""
    probe = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib, nbconvert"],
                           capture_output=True)
    if probe.returncode != 0:
        print(f"{name}: /usr/bin/python3 lacks matplotlib or nbconvert; notebook skipped",
              file=sys.stderr)
        sys.exit(77)
    env = dict(os.environ)
    if out:
        env["RKV_RESULTS"] = os.path.abspath(out)
    subprocess.run([os.path.join(ROOT, "notebooks", "run.sh"), name], check=True, env=env)


def check_binary(name, path):
    if not os.access(path, os.X_OK):
        fail(name, f"{path}: not found (build first: meson setup build-release "
                   "--buildtype=release -Db_ndebug=true -Dcuda=disabled && ninja -C build-release)")


def report_properties(name, checks, strict):
    """checks: list of (ok, text). Prints each to stderr; with strict, exit 1 on
    any failure."""
    bad = [t for ok, t in checks if not ok]
    for ok, t in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {t}", file=sys.stderr)
    if bad and strict:
        fail(name, f"{len(bad)} of {len(checks)} properties do not hold")
    return not bad


def which(prog):
    return shutil.which(prog)
