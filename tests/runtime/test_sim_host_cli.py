#!/usr/bin/env python3
"""`radixkv run --backend sim` with an injected host cost: --sim-host-us-per-step
adds its time to every sync step and overlap hides it behind the step in flight
(up to the step's time); --sim-host-ns-per-token charges each token the cache
matches or inserts, so `none` pays nothing; both count with --fixed-clock and
show in the summary only when given; a negative value, a non-number and a
backend without a modelled clock fail with exit 2 naming the option. Offline,
so that the schedule does not depend on the clock.

usage: test_sim_host_cli.py RADIXKV TRACE"""
import json
import subprocess
import sys

RADIXKV, TRACE = sys.argv[1:3]
RUN = [RADIXKV, "run", "--backend", "sim", "--model", "qwen2.5-0.5b", "--no-progress",
       "--fixed-clock", "--offline", "--trace", TRACE, "--max-batched-tokens", "256", "--max-running", "8"]


def run(args, backend=None):
    return subprocess.run(RUN + args, capture_output=True, text=True)


def summary(args):
    p = run(args)
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.splitlines() if '"summary"' in l][-1]


base = summary(["--cache", "radix"])
assert "injected_host_seconds" not in base, base
# Sync: every step pays the injected time; the finish of the last request comes
# before the last step's commit, so at least (steps - 1) of them.
H = 2000.0
s = summary(["--cache", "radix", "--sim-host-us-per-step", str(H)])
assert s["steps"] == base["steps"] and s["model_seconds"] == base["model_seconds"], (s, base)
assert abs(s["injected_host_seconds"] - s["steps"] * H * 1e-6) < 1e-9, s
assert s["duration"] >= base["duration"] + (s["steps"] - 1) * H * 1e-6 - 1e-6, (s, base)
assert s["duration"] <= base["duration"] + s["steps"] * H * 1e-6 + 1e-6, (s, base)
# Overlap hides host time below the step time: a cost far below every step
# is paid once (the first step has nothing in flight to hide behind) where
# sync pays it every step, and a large one in place of, not on top of, the steps.
o0 = summary(["--cache", "radix", "--schedule", "overlap"])
o = summary(["--cache", "radix", "--schedule", "overlap", "--sim-host-us-per-step", "100"])
assert o["steps"] == o0["steps"] > 2, (o, o0)
assert abs(o["duration"] - o0["duration"] - 100e-6) < 2e-6, (o, o0)
big = 50000.0
ob = summary(["--cache", "radix", "--schedule", "overlap", "--sim-host-us-per-step", str(big)])
assert ob["duration"] >= (ob["steps"] - 1) * big * 1e-6 - 1e-6, ob
assert ob["duration"] < ob["model_seconds"] + (ob["steps"] - 1) * big * 1e-6, ob

# Per token the cache touches.
n0 = summary(["--cache", "none", "--sim-host-ns-per-token", "5000"])
nb = summary(["--cache", "none"])
assert n0["cache_touched_tokens"] == 0 and n0["injected_host_seconds"] == 0, n0
assert n0["duration"] == nb["duration"], (n0, nb)
r0 = summary(["--cache", "radix", "--sim-host-ns-per-token", "0"])
assert r0["duration"] == base["duration"] and r0["cache_touched_tokens"] > 0, r0
r = summary(["--cache", "radix", "--sim-host-ns-per-token", "5000"])
assert r["cache_touched_tokens"] == r0["cache_touched_tokens"], (r, r0)
assert abs(r["injected_host_seconds"] - r["cache_touched_tokens"] * 5e-6) < 1e-6, r
assert r["duration"] > base["duration"], (r, base)

for bad in (["--sim-host-us-per-step", "-1"], ["--sim-host-ns-per-token", "x"]):
    p = run(["--cache", "radix"] + bad)
    assert p.returncode == 2 and bad[0] in p.stderr, (bad, p.returncode, p.stderr)
p = subprocess.run([RADIXKV, "run", "--backend", "cpu", "--no-progress", "--trace", TRACE,
                    "--sim-host-us-per-step", "10"], capture_output=True, text=True)
assert p.returncode == 2 and "--sim-host-us-per-step" in p.stderr and "--backend sim" in p.stderr, p.stderr
print("ok")
