#!/usr/bin/env python3
"""The allocation-failure loop (issue 21): a short cache-sim run, a short `run`
with pins and tiers, and the attention entry points, with allocation k of
radixkv's own code failing, for every k (or a deterministic sample of them when
there are more than --max-points).

Each point must either
  - end in a clean error: non-zero exit, a "radixkv ...: ..." message naming
    the memory that failed, no summary line, only complete JSON lines on
    stdout, the tier's files gone; or
  - absorb the failure: exit 0 with the same output as the run without one
    (timings aside);
and never give a sanitizer report (leaks included: run with detect_leaks=1).
After an error the commands run the cache's own check on what remains; it
must pass.

Needs a build with -Dfault_injection=true (radix/fault_alloc.h); otherwise 77.
Usage: test_alloc_faults.py RADIXKV FAULT_ATTN [--max-points N]
"""
import json
import os
import subprocess
import sys
import tempfile

EXE, ATTN = sys.argv[1], sys.argv[2]
MAX_POINTS = int(sys.argv[sys.argv.index("--max-points") + 1]) if "--max-points" in sys.argv else 120
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(args, k, log, tier_dir=None):
    env = dict(os.environ, RKV_FAULT_ALLOC=str(k), RKV_FAULT_ALLOC_LOG=log)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    if os.path.exists(log):
        os.unlink(log)
    p = subprocess.run([EXE] + args, capture_output=True, text=True, env=env, timeout=120)
    calls, fired = 0, 0
    if os.path.exists(log):
        with open(log) as f:
            calls, fired = (int(x) for x in f.read().split())
    return p.returncode, p.stdout, p.stderr, calls, fired


def stable(out):
    """The output without its timings (floats vary from run to run)."""
    lines = []
    for l in out.splitlines():
        o = json.loads(l)
        lines.append({k: v for k, v in o.items() if not isinstance(v, float)})
    return lines


def sample(total, most=None):
    most = most or MAX_POINTS
    if total <= most:
        return list(range(1, total + 1))
    head, tail = most // 3, most // 6
    mid = most - head - tail
    pts = set(range(1, head + 1)) | set(range(total - tail + 1, total + 1))
    step = (total - head - tail) / (mid + 1)
    pts |= {head + int(step * (i + 1)) for i in range(mid)}
    return sorted(pts)


def scenario(name, args, tmp, tier_dir=None, most=None):
    log = os.path.join(tmp, "alloc.log")
    rc, out0, err0, total, _ = run(args, 0, log)
    if total == 0:
        print("radixkv was built without -Dfault_injection=true: skipping", file=sys.stderr)
        sys.exit(77)
    check(rc == 0, f"{name}: the run without a failure exits 0 ({err0.strip()[-300:]})")
    base = stable(out0)
    pts = sample(total, most)
    clean = absorbed = 0
    for k in pts:
        rc, out, err, calls, fired = run(args, k, log)
        what = f"{name}: allocation {k} of {total}"
        check("Sanitizer" not in err and "runtime error" not in err,
              f"{what}: sanitizer report\n{err[-3000:]}")
        check(out == "" or out.endswith("\n"), f"{what}: output cut inside a line")
        if tier_dir:
            left = os.listdir(tier_dir)
            check(not left, f"{what}: tier files left behind: {left[:3]}")
        if not fired:
            check(rc == 0, f"{what}: not reached, yet exit {rc}")
            continue
        if rc == 0:
            same = stable(out) == base
            check(same, f"{what}: exit 0 with different output\n{err[-500:]}")
            absorbed += same
            continue
        try:
            types = [json.loads(l)["type"] for l in out.splitlines()]
        except ValueError:
            types = ["<not JSON>"]
        msg = [l for l in err.splitlines() if l.startswith("radixkv")]
        check(not any("fails its check" in l for l in msg), f"{what}: the cache is inconsistent after the error: {msg[-1:]}")
        ok = ("summary" not in types and "<not JSON>" not in types and msg
              and any("memory" in l or "cannot allocate" in l for l in msg) and rc in (1, 2))
        check(ok, f"{what}: exit {rc}, not a clean out-of-memory error: {msg[-2:]} {types[-2:]}")
        clean += bool(ok)
    print(f"{name}: {total} allocation points, {len(pts)} tried, {clean} clean errors, "
          f"{absorbed} absorbed without a change", file=sys.stderr)


with tempfile.TemporaryDirectory() as tmp:
    trace = os.path.join(tmp, "trace.jsonl")
    with open(trace, "w") as f:
        for i in range(12):
            toks = [1, 2, 3, 4] + [10 + (i % 3), 20 + i, 30 + i]
            f.write(json.dumps({"id": i, "step": i // 2, "tokens": toks, "max_tokens": 2}) + "\n")
    pin = os.path.join(tmp, "pin.jsonl")
    with open(pin, "w") as f:
        f.write('{"tokens": [1, 2, 3, 4]}\n')
    scenario("cache-sim radix", ["cache-sim", "--cache", "radix", "--capacity", "16", "--page-size", "2",
                                 "--tier-host", "8", "--tier-disk", "8", "--pin", pin, "--check",
                                 "--no-progress", trace], tmp)
    scenario("cache-sim hash", ["cache-sim", "--cache", "hash", "--capacity", "16", "--page-size", "2",
                                "--check", "--no-progress", trace], tmp)
    tdir = os.path.join(tmp, "tier")
    os.mkdir(tdir)
    scenario("run", ["run", "--threads", "1", "--no-progress", "--trace", trace, "--pin", pin,
                     "--kv-tokens", "24", "--page-size", "2", "--tier-host", "8", "--tier-disk", "8",
                     "--tier-dir", tdir, "--max-running", "4"], tmp, tier_dir=tdir)
    # Batches that grow from step to step (the engine's batch arrays are
    # re-grown: a failure there once leaked them), every point tried.
    grow = os.path.join(tmp, "grow.jsonl")
    with open(grow, "w") as f:
        for i in range(8):
            toks = [1, 2, 3, 4] + [100 + i] * (3 + 8 * i)
            f.write(json.dumps({"id": i, "step": i, "arrival": 0.001 * i, "tokens": toks,
                                "max_tokens": 3}) + "\n")
    scenario("run sim, growing batches", ["run", "--backend", "sim", "--no-progress", "--trace", grow,
                                          "--page-size", "2", "--max-running", "8"], tmp, most=80)
    # The multi-replica driver under every router (its approximate trees
    # included: a failure there once changed the route silently).
    for router in ("round-robin", "least-load", "cache-aware"):
        scenario(f"run --replicas 2 --router {router}",
                 ["run", "--backend", "sim", "--no-progress", "--trace", grow, "--page-size", "2",
                  "--replicas", "2", "--router", router], tmp, most=80 if router == "cache-aware" else 30)
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    p = subprocess.run([ATTN], capture_output=True, text=True, env=env, timeout=120)
    sys.stderr.write(p.stdout)
    check(p.returncode == 0 and "Sanitizer" not in p.stderr,
          f"attention entry points: exit {p.returncode}\n{p.stderr[-2000:]}")

print(f"{failures} check(s) failed" if failures else "every allocation point ends cleanly", file=sys.stderr)
sys.exit(1 if failures else 0)
