#!/usr/bin/env python3
"""Every option at its extremes, on every route of `radixkv run` (one engine,
--replicas, --prefill/--decode, --slo-*) and on cache-sim and gen: a value
inside the bounds runs and every line printed is one valid JSON object with
finite numbers; a value outside is refused with exit 2 naming the option, and
a refusal leaves no file (nor a temporary one) where --out pointed, and an
existing file there untouched. Also: a profile whose id holds a control
character, a profile without provenance or with two GEMM rows of one shape,
and a trace or pin file line with a key given twice are refused naming the
place.

usage: test_extremes_cli.py RADIXKV PROFILE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

RADIXKV, PROFILES = sys.argv[1:3]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def strict_json(line):
    """json.loads that refuses NaN and Infinity (Python accepts them)."""
    def bad(c):
        raise ValueError(f"non-finite number {c}")
    return json.loads(line, parse_constant=bad)


def lines_ok(text, what):
    n = 0
    for line in text.splitlines():
        try:
            v = strict_json(line)
        except ValueError as e:
            failures.append(f"{what}: not JSON ({e}): {line[:200]!r}")
            return
        check(isinstance(v, dict), f"{what}: not an object: {line[:200]!r}")
        n += 1
    check(n > 0, f"{what}: printed no line")


tmp = tempfile.mkdtemp(prefix="rkv-extremes-")
trace = os.path.join(tmp, "trace.jsonl")
subprocess.run([RADIXKV, "gen", "sweep", "--num", "6", "--prompt-len", "48", "--output-len", "3",
                "--out", trace], check=True, capture_output=True)
outdir = os.path.join(tmp, "out")
os.mkdir(outdir)
out = os.path.join(outdir, "o.jsonl")

with open(os.path.join(PROFILES, "h100.json")) as f:
    H100 = json.load(f)


def profile(name, **change):
    p = json.loads(json.dumps(H100))
    for k, v in change.items():
        p[k] = v
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(p, f)
    return path


MODES = {
    "single": [],
    "replicas": ["--replicas", "2"],
    "disagg": ["--prefill", "1", "--decode", "1"],
    "slo": ["--slo-ttft", "10"],
}
BASE = [RADIXKV, "run", "--backend", "sim", "--no-progress", "--fixed-clock", "--trace", trace]


def run(args, want, what, mode="single", keep=None):
    """Runs with --out into an otherwise empty folder; want 0 (runs, lines
    valid) or 2 (refused naming what, no file left; keep: the bytes of a file
    already there, which must stay)."""
    for x in os.listdir(outdir):
        os.unlink(os.path.join(outdir, x))
    if keep is not None:
        with open(out, "w") as f:
            f.write(keep)
    p = subprocess.run(BASE + MODES[mode] + args + ["--out", out], capture_output=True, text=True)
    tag = f"{mode} {' '.join(args)}"
    if want == 0:
        check(p.returncode == 0, f"{tag}: exit {p.returncode}: {p.stderr[-300:]}")
        if p.returncode == 0:
            with open(out) as f:
                lines_ok(f.read(), tag)
        check(os.listdir(outdir) == ["o.jsonl"], f"{tag}: files left: {os.listdir(outdir)}")
    else:
        check(p.returncode == 2, f"{tag}: exit {p.returncode}, want 2: {p.stderr[-300:]}")
        check(what in p.stderr, f"{tag}: the refusal does not name {what!r}: {p.stderr[-300:]}")
        check(p.stderr.count("\n") == 1, f"{tag}: the refusal is not one line: {p.stderr!r}")
        left = sorted(os.listdir(outdir))
        if keep is None:
            check(left == [], f"{tag}: a refusal left {left}")
        else:
            with open(out) as f:
                check(f.read() == keep, f"{tag}: a refusal changed the existing --out file")
            check(left == ["o.jsonl"], f"{tag}: a refusal left {left}")


# The link: bounded so that every handoff time is finite.
for v in ("bandwidth=1e3", "bandwidth=1e15", "latency=0", "latency=60", "per_page=1", "per_page=0"):
    run(["--link", f"rdma,{v}"], 0, None, "disagg")
for v in ("latency=1e308", "per_page=1e308", "bandwidth=4.9e-324", "bandwidth=1e-300",
          "bandwidth=0", "bandwidth=1e400", "latency=nan", "latency=inf", "latency=-1",
          "per_page=", "jitter=1"):
    run(["--link", f"rdma,{v}"], 2, "--link", "disagg")
# SLOs and prices, on every route.
for mode in MODES:
    for opt, lo, hi in (("--slo-tpot", "1e-9", "1e9"), ("--price-cached", "0", "1e6")):
        if mode == "slo" or opt != "--slo-tpot" or mode != "single":
            run([opt, lo], 0, None, mode)
            run([opt, hi], 0, None, mode)
    for opt, bad in (("--slo-tpot", "0"), ("--slo-tpot", "1e10"), ("--slo-tpot", "nan"),
                     ("--slo-ttft", "inf"), ("--price-uncached", "-1"), ("--price-cached", "inf"),
                     ("--max-tokens", "0"), ("--kv-tokens", "-5")):
        run([opt, bad], 2, opt, mode)
    # A refusal leaves an existing --out file as it was.
    run(["--slo-tpot", "nan"], 2, "--slo-tpot", mode, keep="before\n")
# Tier bandwidths: bounded so that a load time stays finite.
for opt in ("--host-bw", "--disk-bw"):
    for v in ("1e-6", "1e6"):
        run(["--tier-host", "64", "--tier-disk", "64", "--tier-dir", tmp, opt, v], 0, None)
    for v in ("0", "4.9e-324", "1e7", "nan"):
        run(["--tier-host", "64", opt, v], 2, opt)
# Profile overrides: inside the bound runs, outside is refused naming the key.
for v in ("kernel_us=0", "kernel_us=1e6", "eff=1", "overhead_ms=0"):
    run(["--gpu", f"h100,{v}"], 0, None)
for v in ("kernel_us=-1", "kernel_us=1e7", "eff=0", "eff=nan", "overhead_ms=inf"):
    run(["--gpu", f"h100,{v}"], 2, v.split("=")[0])
# Profile files: the id is printed escaped; a control character is refused.
odd = profile("odd", id="my h100 \u00e9/x")
for mode in MODES:
    run(["--sim-profile", odd], 0, None, mode)
    run(["--sim-profile", profile("ctl", id="h100\nsplit")], 2, "field id", mode)
    run(["--sim-profile", profile("noprov", provenance={})], 2, "provenance", mode)
    run(["--sim-profile", profile("noengine", engine="")], 2, "field engine", mode)
row = {"name": "qkv", "N": 4096, "K": 2048, "M": [1, 64], "s": [1e-5, 2e-5]}
run(["--sim-profile", profile("dup", tables={"gemm": [row, dict(row, s=[3e-5, 4e-5])]})], 2,
    "tables.gemm[1]")
# Options that do not apply to the backend are refused by name.
for be, opt, v in (("cpu", "--gpu", "h100"), ("cpu", "--sim-profile", os.path.join(PROFILES, "h100.json")),
                   ("cpu", "--fixed-clock", None), ("sim", "--threads", "2")):
    p = subprocess.run([RADIXKV, "run", "--backend", be, "--trace", trace, opt] + ([v] if v else []),
                       capture_output=True, text=True)
    check(p.returncode == 2 and opt in p.stderr, f"--backend {be} {opt}: {p.returncode} {p.stderr}")

# --kv-tokens is per engine: checked against host memory times the engines.
# 10000 pages of 64 bytes of bookkeeping fit in 1 MB once, not twice.
env = dict(os.environ, RKV_MEM_AVAILABLE="1000000")
for mode, want in (("single", 0), ("replicas", 2), ("disagg", 2)):
    p = subprocess.run(BASE + MODES[mode] + ["--kv-tokens", "160000", "--page-size", "16"],
                       capture_output=True, text=True, env=env)
    check(p.returncode == want and (want == 0 or "times 2 engines" in p.stderr),
          f"{mode} --kv-tokens x engines: exit {p.returncode}, want {want}: {p.stderr[-300:]}")

# serve hands its engine options to run's parser: their errors carry serve's name.
p = subprocess.run([RADIXKV, "serve", "--kv-tokens", "-5"], capture_output=True, text=True, timeout=60)
check(p.returncode == 2 and p.stderr.startswith("radixkv serve: --kv-tokens"),
      f"serve --kv-tokens -5: {p.returncode} {p.stderr}")

# A trace line with a key given twice: refused naming file, line and key.
dup = os.path.join(tmp, "dup.jsonl")
with open(dup, "w") as f:
    f.write('{"id":0,"tokens":[1,2,3]}\n{"id":1,"tokens":[1,2],"namespace":"a","namespace":"b"}\n')
for cmd in (BASE[:2] + ["--backend", "sim", "--no-progress", "--trace", dup],
            [RADIXKV, "cache-sim", "--cache", "radix", "--capacity", "64", "--page-size", "16",
             "--no-progress", dup]):
    p = subprocess.run(cmd + ["--out", out], capture_output=True, text=True)
    check(p.returncode != 0 and f"{dup}:2:" in p.stderr and "namespace" in p.stderr,
          f"duplicate key ({cmd[1]}): {p.returncode} {p.stderr}")
    check(not os.path.exists(out), f"duplicate key ({cmd[1]}): left {out}")

# The same for a pin file line.
pin = os.path.join(tmp, "pin.jsonl")
with open(pin, "w") as f:
    f.write('{"tokens":[1,2,3,4],"tokens":[5,6,7,8]}\n')
p = subprocess.run([RADIXKV, "cache-sim", "--cache", "radix", "--capacity", "64", "--page-size", "2",
                    "--no-progress", "--pin", pin, trace], capture_output=True, text=True)
check(p.returncode == 2 and f"{pin}:1:" in p.stderr and "tokens" in p.stderr,
      f"pin duplicate key: {p.returncode} {p.stderr}")

# gen: a product far past the limit is refused before anything is drawn.
p = subprocess.run([RADIXKV, "gen", "sweep", "--num", "16777216", "--prompt-len", "16777216",
                    "--out", out], capture_output=True, text=True, timeout=60)
check(p.returncode == 2 and "at least" in p.stderr, f"gen 2^48: {p.returncode} {p.stderr}")
check(not os.path.exists(out), "gen 2^48 left a file")
# cache-sim: every line of a run at its extremes is JSON.
p = subprocess.run([RADIXKV, "cache-sim", "--cache", "radix", "--capacity", "16", "--page-size", "4",
                    "--no-progress",
                    "--model", "qwen2.5-0.5b", "--gpu", "h100", trace], capture_output=True, text=True)
check(p.returncode == 0, f"cache-sim: {p.returncode} {p.stderr}")
lines_ok(p.stdout, "cache-sim")

# A device is written, never replaced by the temporary file's rename.
import stat  # noqa: E402
p = subprocess.run(BASE + ["--out", os.devnull], capture_output=True, text=True)
check(p.returncode == 0 and stat.S_ISCHR(os.stat(os.devnull).st_mode),
      f"--out {os.devnull}: exit {p.returncode}, still a device: {stat.S_ISCHR(os.stat(os.devnull).st_mode)}")

for f in failures:
    print("FAIL", f)
print(f"extremes_cli: {len(failures)} failures")
sys.exit(1 if failures else 0)
