"""What every experiment driver shares.

Every driver has the same shape:

    config.json --(grid for --scale tiny|small|full)--> radixkv gen / run / bench
                --> results/<name>.jsonl: one row per measurement

One row format (Meta.row): the experiment, its scale, the row's configuration,
seed, backend, model, the git commit, the UTC date (ISO 8601, seconds, Z) and
the command that produced it, then the row's own numbers. Progress goes to
stderr: redrawn in place on a terminal, periodic plain lines otherwise (logs,
CI); the one-line verdict goes to stdout.
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
EXPERIMENTS = os.path.dirname(HERE)
ROOT = os.path.dirname(EXPERIMENTS)
SCALES = ("tiny", "small", "full")
BUILD_HINT = ("build first: meson setup build-release --buildtype=release -Db_ndebug=true "
              "-Dcuda=disabled && ninja -C build-release -j2")


def fail(name, msg, code=1):
    print(f"{name}: {msg}", file=sys.stderr)
    sys.exit(code)


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


def find_bench(name, radixkv):
    """bench/<name> next to the radixkv binary's build folder."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(radixkv)))
    return os.path.join(build, "bench", name)


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


def check_binary(name, path):
    """Fails unless `path` is an executable; records it (CHECKED) for the rows."""
    if not os.access(path, os.X_OK):
        fail(name, f"{path}: not found ({BUILD_HINT}; or pass --radixkv)")
    CHECKED.append(path)


def default_mooncake_dir():
    """$RKV_MOONCAKE_DIR, else ../shared/data/mooncake beside the checkout."""
    return os.environ.get("RKV_MOONCAKE_DIR",
                          os.path.join(ROOT, "..", "shared", "data", "mooncake"))


EPILOG = """\
common options:
  every driver writes results/<name>.jsonl (one JSON object per line: experiment,
  scale, config, seed, backend, model, commit, date, command, binary, binary_sha256,
  build_type, host, then its numbers) and prints one verdict line on stdout;
  progress and tables go to stderr. Each property is one stderr line: ok, FAIL
  (--check: exit 1) or no (without --check; the exit status stays 0); wall-clock
  figures are info lines, never checked. Exit 77: a required input is missing.
environment:
  RADIXKV            the radixkv binary (else build-release/, else build/)
  RKV_MOONCAKE_DIR   the Mooncake traces (FAST25-release/traces of kvcache-ai/Mooncake)
  RKV_FIGURES        where the notebook writes figures (default notebooks/figures)
  RKV_PYTHON         the Python that runs notebooks (default: the first of
                     /usr/bin/python3 and python3 with matplotlib and nbconvert)
  RKV_FAIL_PROPERTY  NAME (or all): add a failing property to that experiment's
                     report (tests run_all's failure reporting)
"""


def parser(name, doc, scale_default="small"):
    """The options every driver takes; `doc` is the driver's docstring (its
    first line is the description, the rest goes under --help)."""
    lines = (doc or "").strip().splitlines()
    ap = argparse.ArgumentParser(
        prog=f"experiments/{name}/run", description="\n".join(lines),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)
    ap.add_argument("--scale", choices=SCALES, default=scale_default,
                    help=f"tiny: the smoke test's (seconds); small (default {scale_default}): "
                         "minutes on 2 cores; full: the published scale")
    ap.add_argument("--radixkv", default=None,
                    help="the binary (default: $RADIXKV, else build-release/, else build/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", name, "results"),
                    help="results folder (default: experiments/%s/results)" % name)
    ap.add_argument("--notebook", action="store_true",
                    help=f"also execute notebooks/{name}.ipynb on the results")
    ap.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless the experiment's stated properties hold")
    return ap


def renamed(ap, old, new):
    """An option that was renamed: using the old spelling fails naming the new."""
    class Renamed(argparse.Action):
        def __call__(self, parser, ns, values, option_string=None):
            parser.error(f"{old} was renamed to {new}")
    ap.add_argument(old, nargs="?", action=Renamed, help=argparse.SUPPRESS)


def add_mooncake_dir(ap, dest="mooncake_dir"):
    """--mooncake-dir (the one spelling; --mooncake fails naming it)."""
    ap.add_argument("--mooncake-dir", dest=dest, default=default_mooncake_dir(),
                    help="folder of the Mooncake traces (default: $RKV_MOONCAKE_DIR, else "
                         "../shared/data/mooncake beside the checkout)")
    renamed(ap, "--mooncake", "--mooncake-dir")


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


def driver_command():
    """The command line this driver was started with (paths in the checkout relative):
    the command of a row computed in the driver itself rather than by one program."""
    return command_text([os.path.abspath(sys.argv[0])] + sys.argv[1:])


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def command_text(cmd):
    """A command as a string with paths inside the checkout made relative."""
    if isinstance(cmd, str):
        return cmd
    out = []
    for x in cmd:
        x = str(x)
        if os.path.isabs(x) and x.startswith(ROOT + os.sep):
            x = os.path.relpath(x, ROOT)
        out.append(x)
    return " ".join(out)


ROW_KEYS = ("experiment", "scale", "config", "seed", "backend", "model", "commit", "date", "command",
            "binary", "binary_sha256", "build_type", "host")
# Keys no row may leave empty: what was run, and with which configuration.
REQUIRED = ("config", "command")
# The programs this driver checked before running them (check_binary), first
# first: the binary rows record unless Meta is told another.
CHECKED = []


class Meta:
    """The row format. Every row carries ROW_KEYS (None where a key does not
    apply; never for REQUIRED), then its own numbers. Provenance (rkv.bundle):
    the binary, its sha256 and build type, and the host's CPU model, CPU count
    and load average at the time the row is made."""

    def __init__(self, name, scale, binary=None, config_keys=()):
        """config_keys: for drivers whose rows carry their configuration as
        top-level fields (which notebooks read), the names of those fields;
        a row's `config` is then gathered from them."""
        from . import bundle
        self.bundle = bundle
        self.config_keys = config_keys
        binary = binary or (CHECKED[0] if CHECKED else None)
        self.base = {"experiment": name, "scale": scale, "commit": git_commit(), "date": utc_now(),
                     **bundle.binary_fields(binary)}

    def row(self, **kw):
        r = dict(self.base)
        for k in ROW_KEYS:
            r.setdefault(k, None)
        r["host"] = self.bundle.host()
        r.update(kw)
        if r["config"] is None and self.config_keys:
            r["config"] = {k: r[k] for k in self.config_keys if k in r}
        if isinstance(r["command"], (list, tuple)):
            r["command"] = command_text(r["command"])
        missing = [k for k in REQUIRED if r.get(k) in (None, "", {})]
        if missing:
            raise ValueError(f"{r['experiment']}: a row without {' and '.join(missing)} "
                             f"(every row names the command and configuration that made it)")
        return r


class Rows:
    """JSON Lines writer of Meta rows, flushed row by row (a killed run keeps
    what it measured)."""

    def __init__(self, path, experiment, scale=None):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.f = open(path, "w")
        self.meta = Meta(experiment, scale)

    def write(self, config, metrics, seed=0, backend="cache-sim", model=None, command=None):
        if self.meta.base["scale"] is None and isinstance(config, dict):
            self.meta.base["scale"] = config.get("scale")
        row = self.meta.row(config=config, seed=seed, backend=backend, model=model,
                            command=command, **metrics)
        self.f.write(json.dumps(row) + "\n")
        self.f.flush()
        return row

    def close(self):
        self.f.close()


class Progress:
    """   hit_rate_sweep [#########...........]  45.0%  81/180 runs  52 s  label

    On a terminal the line is redrawn in place; otherwise (a log file, CI) a
    plain line every `every` seconds and one at the end, so a long run is
    never silent."""

    def __init__(self, label, total, enabled=True, every=5.0):
        self.label, self.total, self.done = label, max(total, 1), 0
        self.enabled = True if enabled is None else enabled
        self.every = every
        self.tty = sys.stderr.isatty()
        self.t0 = self.last = time.monotonic()

    def step(self, what=""):
        self.done += 1
        if not self.enabled:
            return
        t = time.monotonic()
        if not self.tty and t - self.last < self.every and self.done < self.total:
            return
        self.last = t
        f = min(1.0, self.done / self.total)
        bar = "#" * int(20 * f) + "." * (20 - int(20 * f))
        line = (f"{self.label} [{bar}] {100 * f:5.1f}%  {self.done}/{self.total} runs  "
                f"{t - self.t0:.0f} s  {what}")
        if self.tty:
            sys.stderr.write("\r" + line[:110].ljust(110))
            if self.done >= self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        else:
            print(line, file=sys.stderr, flush=True)

    def finish(self):
        if self.enabled and self.tty and self.done < self.total:
            sys.stderr.write("\n")
        return time.monotonic() - self.t0


def run_checked(name, cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        fail(name, f"command failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr.strip()[-2000:]}")
    return p


def run_json(cmd, name):
    """Runs a radixkv command and returns its JSON Lines output (a list)."""
    p = run_checked(name, [str(x) for x in cmd])
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def summary_of(lines):
    for rec in lines:
        if rec.get("type") == "summary":
            return rec
    raise ValueError("no summary line")


# The sim profile a modelled number came from (`radixkv run --backend sim` and
# cache-sim summaries name it): a row built from a summary spreads these.
def sim_profile_of(summary):
    """{"sim_profile": id, "sim_profile_hash": hash} of a summary line; both
    None for a backend without a profile (cpu, cuda). cache-sim names the
    profile "gpu"."""
    pid = summary.get("sim_profile", summary.get("gpu") if "sim_profile_hash" in summary else None)
    return {"sim_profile": pid, "sim_profile_hash": summary.get("sim_profile_hash")}


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


def notebook_python():
    """The Python that runs notebooks: $RKV_PYTHON, else the first of
    /usr/bin/python3 (Debian's, where scripts/deps.sh installs matplotlib and
    nbconvert) and python3 on PATH that imports both; None when none does."""
    cands = [os.environ.get("RKV_PYTHON"), "/usr/bin/python3", shutil.which("python3")]
    for c in cands:
        if c and os.access(c, os.X_OK) and subprocess.run(
                [c, "-c", "import matplotlib, nbconvert"], capture_output=True).returncode == 0:
            return c
    return None


def run_notebook(name, out=None, env_name="RKV_RESULTS", exit_on_skip=True):
    """notebooks/run.sh NAME on the results in `out` ($RKV_RESULTS, or the
    variable the notebook reads); figures go to $RKV_FIGURES (default
    notebooks/figures). Without a Python that has matplotlib and nbconvert:
    exit (or, with exit_on_skip=False, return) 77, a skip."""
    if notebook_python() is None:
        print(f"{name}: notebook skipped: no Python with matplotlib and nbconvert "
              "(scripts/deps.sh installs them; RKV_PYTHON picks one)", file=sys.stderr)
        if exit_on_skip:
            sys.exit(77)
        return 77
    env = dict(os.environ, RKV_ROOT=ROOT)
    if out:
        env[env_name] = os.path.abspath(out)
    rc = subprocess.run([os.path.join(ROOT, "notebooks", "run.sh"), name], env=env).returncode
    if rc != 0 and exit_on_skip:
        fail(name, f"notebooks/run.sh {name} failed ({rc})")
    return rc


def report_properties(name, checks, strict):
    """The one way a driver reports its properties. checks: (ok, text) pairs,
    printed to stderr, one line each: "ok", "FAIL" (with strict, i.e. --check)
    or "no" (without: nothing printed says FAIL while the exit status stays 0),
    and "info" where ok is None: a wall-clock figure, reported with its spread
    and never deciding anything. With strict a failed property exits 1 after
    the verdict line (`NAME: properties do not hold: ...` on stdout). Returns
    whether all decided ones hold."""
    checks = list(checks)
    if os.environ.get("RKV_FAIL_PROPERTY") in (name, "all"):
        # A property broken on purpose: run_all's test checks that one failing
        # experiment is named at the end and stops nothing before it.
        checks.append((False, f"injected failure (RKV_FAIL_PROPERTY={os.environ['RKV_FAIL_PROPERTY']})"))
    decided = [(ok, t) for ok, t in checks if ok is not None]
    bad = [t for ok, t in decided if not ok]
    for ok, t in checks:
        mark = "info" if ok is None else "ok  " if ok else ("FAIL" if strict else "no  ")
        print(f"  {mark} {t}", file=sys.stderr)
    if bad and strict:
        print(f"{name}: {len(bad)} of {len(decided)} properties do not hold: " + "; ".join(bad))
        sys.exit(1)
    return not bad


def verdict(ok):
    """The word the summary line uses for the properties."""
    return "hold" if ok else "do not hold (run with --check to fail on them)"


def which(prog):
    return shutil.which(prog)
