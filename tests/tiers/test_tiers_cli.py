#!/usr/bin/env python3
"""Script test of issue 12's command-line parts: the input-token bill in the
`cache-sim` and `run` summaries and `--pin` on both commands.

Usage: test_tiers_cli.py RADIXKV
"""
import json
import os
import subprocess
import sys
import tempfile

EXE = sys.argv[1]
failures = 0


def run(args, stdin=""):
    p = subprocess.run([EXE] + args, input=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def summary(out):
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    s = [l for l in lines if l.get("type") == "summary"]
    return s[-1] if s else None


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


TRACE = ('{"id": 0, "tokens": [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n'
         '{"id": 1, "tokens": [1, 2, 3, 4, 5, 6, 7, 8, 10, 11]}\n'
         '{"id": 2, "tokens": [1, 2, 3, 4, 12, 13, 14, 15, 16]}\n')
SIM = ["cache-sim", "--cache", "radix", "--capacity", "64", "--page-size", "4"]
RUN = ["run", "--trace", "-", "--page-size", "4", "--max-running", "1", "--max-tokens", "2",
       "--no-progress"]


def check_bill(s, cached, prompt, pc, pu, what):
    check(s is not None, f"{what}: a summary line")
    if s is None:
        return
    check(s["billed_cached_tokens"] == cached, f"{what}: billed cached {s['billed_cached_tokens']} == {cached}")
    check(s["billed_uncached_tokens"] == prompt - cached,
          f"{what}: billed uncached {s['billed_uncached_tokens']} == {prompt - cached}")
    check(s["price_cached"] == pc and s["price_uncached"] == pu, f"{what}: prices echoed")
    cost = (cached * pc + (prompt - cached) * pu) / 1e6
    check(close(s["cost"], cost), f"{what}: cost {s['cost']} == {cost}")
    check(close(s["cost_no_cache"], prompt * pu / 1e6), f"{what}: cost without cache")


# 1. cache-sim: defaults 0.1 / 1, then given prices; the bill follows the matches.
for kind in ["radix", "hash", "trie", "none"]:
    args = ["cache-sim", "--cache", kind, "--capacity", "64", "--page-size", "4", "-"]
    rc, out, err = run(args, TRACE)
    s = summary(out)
    check(rc == 0, f"cache-sim {kind} exits 0 ({err.strip()})")
    if s:
        check_bill(s, s["matched_tokens"], s["prompt_tokens"], 0.1, 1.0, f"cache-sim {kind} defaults")
        if kind != "none":
            check(s["billed_cached_tokens"] > 0 and s["cost"] < s["cost_no_cache"],
                  f"cache-sim {kind}: hits make the bill smaller")
rc, out, err = run(SIM + ["--price-cached", "0.25", "--price-uncached=2", "-"], TRACE)
s = summary(out)
check(rc == 0 and s is not None, f"cache-sim with prices exits 0 ({err.strip()})")
if s:
    check(s["matched_tokens"] == 8 + 4, f"matched {s['matched_tokens']}")
    check_bill(s, 12, 28, 0.25, 2.0, "cache-sim priced")

# 2. run (sim and cpu backends): cached tokens are billed at the cached price.
for backend in ["sim", "cpu"]:
    rc, out, err = run(RUN + ["--backend", backend, "--price-cached", "0", "--price-uncached", "3"], TRACE)
    s = summary(out)
    check(rc == 0, f"run {backend} exits 0 ({err.strip()})")
    if s:
        check(s["cached_tokens"] == 12, f"run {backend}: cached {s['cached_tokens']} == 12")
        check_bill(s, s["cached_tokens"], s["prompt_tokens"], 0.0, 3.0, f"run {backend}")
        check("input bill" in err, f"run {backend}: the table shows the bill")

# 3. Bad prices fail at once, naming the option.
for args in [SIM + ["--price-cached", "-1", "-"], SIM + ["--price-uncached", "abc", "-"],
             SIM + ["--price-cached", "nan", "-"],
             RUN + ["--price-cached", "-0.5"], RUN + ["--price-uncached", "1e999"]]:
    name = next(a.split("=")[0] for a in args if a.startswith("--price"))
    rc, out, err = run(args, TRACE)
    check(rc == 2 and name in err and summary(out) is None, f"{args}: fails naming {name} ({err.strip()})")

if failures:
    print(f"{failures} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("ok")
