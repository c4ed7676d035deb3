#!/usr/bin/env python3
"""Script test of issue 12's command-line parts: the input-token bill in the
`cache-sim` and `run` summaries and `--pin` on both commands.

Usage: test_tiers_cli.py RADIXKV
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402

cli = CliCheck(sys.argv[1])
run, check = cli.run, cli.check


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

# 4. --pin: pinned prefixes survive pressure and every request starting with one
# matches it whole; bad pin files fail naming file and line.
tmp = tempfile.mkdtemp()
PIN_A = list(range(100, 140))            # 40 tokens: 10 pages of 4
PIN_B = list(range(100, 120)) + [7] * 6  # 26 tokens: shares 5 pages with A, cut to 24
pin_path = os.path.join(tmp, "pins.jsonl")
with open(pin_path, "w") as f:
    f.write(json.dumps({"tokens": PIN_A, "name": "system"}) + "\n\n" + json.dumps(PIN_B) + "\n")
import random
rng = random.Random(12)
lines, starts = [], []
for i in range(150):
    p = rng.choice([PIN_A, PIN_B, []])
    toks = p + [rng.randrange(1000, 4000) for _ in range(rng.randrange(4, 60))]
    starts.append(len(p) - len(p) % 4)
    lines.append(json.dumps({"id": i, "tokens": toks, "max_tokens": 2}))
ptrace = "\n".join(lines) + "\n"
for kind in ["radix", "hash", "trie"]:
    rc, out, err = run(["cache-sim", "--cache", kind, "--capacity", "120", "--page-size", "4",
                        "--pin", pin_path, "--check", "-"], ptrace)
    check(rc == 0, f"cache-sim {kind} --pin exits 0 ({err.strip()})")
    check("2 tokens of partial last pages" in err, f"cache-sim {kind}: says what was cut ({err.strip()})")
    reqs = [json.loads(l) for l in out.splitlines() if '"request"' in l]
    s = summary(out)
    if s:
        check(s["pinned_tokens"] == 40 + 24 - 20, f"cache-sim {kind}: pinned {s['pinned_tokens']}")
        check(s["evicted_tokens"] > 0, f"cache-sim {kind}: under pressure")
    bad = [r for r, w in zip(reqs, starts) if "error" in r or r["matched"] < w]
    check(len(reqs) == 150 and not bad, f"cache-sim {kind}: requests short of their pin: {bad[:3]}")
for backend, nreq in [("sim", 150), ("cpu", 50)]:
    args = ["run", "--backend", backend, "--trace", "-", "--page-size", "4", "--kv-tokens", "160",
            "--max-running", "2", "--no-progress", "--pin", pin_path]
    rc, out, err = run(args, "\n".join(lines[:nreq]) + "\n")
    check(rc == 0, f"run {backend} --pin exits 0 ({err.strip()[-300:]})")
    s = summary(out)
    reqs = {r["id"]: r for r in (json.loads(l) for l in out.splitlines()) if r.get("type") == "request"}
    if s:
        check(s["pinned_tokens"] == 44, f"run {backend}: pinned {s['pinned_tokens']}")
    short = [i for i, w in enumerate(starts[:nreq]) if i not in reqs or "error" in reqs[i]
             or reqs[i]["cached_tokens"] < w]
    check(not short, f"run {backend}: requests short of their pin: {short[:5]}")

# The pinned pages hold the prefix's real K/V: the cpu model's outputs with pins
# equal those without any cache.
outs = {}
for extra in [["--pin", pin_path], ["--cache", "none"]]:
    rc, out, err = run(["run", "--backend", "cpu", "--trace", "-", "--page-size", "4",
                        "--max-running", "1", "--no-progress", "--max-tokens", "3"] + extra,
                       "\n".join(lines[:12]) + "\n")
    outs[extra[0]] = {r["id"]: r.get("output_ids") for r in (json.loads(l) for l in out.splitlines())
                      if r.get("type") == "request"}
check(len(outs["--pin"]) == 12 and outs["--pin"] == outs["--cache"],
      "run cpu: outputs with pins equal outputs without a cache")

long_pin = os.path.join(tmp, "long.jsonl")
with open(long_pin, "w") as f:
    f.write(json.dumps({"tokens": list(range(10))}) + "\n" + json.dumps({"tokens": list(range(200))}) + "\n")
bad_pin = os.path.join(tmp, "bad.jsonl")
with open(bad_pin, "w") as f:
    f.write('{"tokens": [1, 2, 3, 4]}\n{"tokens": [1, "x"]}\n')
short_pin = os.path.join(tmp, "short.jsonl")
with open(short_pin, "w") as f:
    f.write('[1, 2, 3]\n')
vocab_pin = os.path.join(tmp, "vocab.jsonl")
with open(vocab_pin, "w") as f:
    f.write(json.dumps({"tokens": [1, 2, 3, 999999]}) + "\n")
for args, want in [
    (SIM + ["--pin", long_pin, "-"], "long.jsonl:2: pin: a prefix of 200 tokens needs 50 pages, the whole pool holds 16"),
    (SIM + ["--pin", bad_pin, "-"], "bad.jsonl:2: token 1"),
    (SIM + ["--pin", short_pin, "-"], "short.jsonl:1: pin: a prefix of 3 tokens is shorter than one page"),
    (SIM + ["--pin", os.path.join(tmp, "missing.jsonl"), "-"], "missing.jsonl: cannot read"),
    (RUN + ["--backend", "sim", "--kv-tokens", "64", "--pin", long_pin], "long.jsonl:2: pin:"),
    (RUN + ["--backend", "sim", "--pin", vocab_pin], "vocab.jsonl:1: token 3"),
]:
    rc, out, err = run(args, TRACE)
    check(rc != 0 and want in err and summary(out) is None, f"{args}: fails with '{want}' ({err.strip()})")

# 5. The spill tier: on cpu (real K/V bytes through read_page/write_page) and on
# sim (stand-in bytes, modelled time) the outputs equal those without a cache,
# after spills forced by a tiny GPU pool; hits per tier add up; faults are clear.
rng = random.Random(5)
docs = [[rng.randrange(10, 4000) for _ in range(40)] for _ in range(6)]
tlines = []
for i in range(40):
    d = docs[rng.randrange(6)]
    tlines.append(json.dumps({"id": i, "tokens": d + [rng.randrange(10, 4000) for _ in range(rng.randrange(2, 9))],
                              "max_tokens": 3}))
ttrace = "\n".join(tlines) + "\n"
tdir = os.path.join(tmp, "tier")
os.mkdir(tdir)


def outputs(out):
    return {r["id"]: r.get("output_ids") for r in (json.loads(l) for l in out.splitlines())
            if r.get("type") == "request"}


for backend in ["cpu", "sim"]:
    base = ["run", "--backend", backend, "--trace", "-", "--page-size", "4", "--kv-tokens", "120",
            "--max-running", "1", "--no-progress"]
    rc, out, err = run(base + ["--cache", "none"], ttrace)
    ref = outputs(out)
    check(rc == 0 and len(ref) == 40, f"run {backend} --cache none ({err.strip()[-200:]})")
    rc, out, err = run(base, ttrace)
    plain = summary(out)
    for extra, want in [(["--tier-host", "400"], "host"),
                        (["--tier-host", "400", "--tier-policy", "write-through"], "host"),
                        (["--tier-host", "40", "--tier-disk", "400", "--tier-dir", tdir], "disk"),
                        (["--tier-host", "8", "--tier-disk", "400", "--tier-dir", tdir,
                          "--tier-fail-disk-after", "10"], "fault")]:
        rc, out, err = run(base + extra, ttrace)
        s = summary(out)
        what = f"run {backend} {' '.join(extra)}"
        check(rc == 0 and s is not None, f"{what}: exits 0 ({err.strip()[-300:]})")
        if not s:
            continue
        check(outputs(out) == ref, f"{what}: outputs equal those without a cache")
        check(s["gpu_hit_tokens"] + s["host_hit_tokens"] + s["disk_hit_tokens"] >= s["cached_tokens"],
              f"{what}: hits per tier cover the cached tokens")
        if want == "host":
            check(s["host_hit_tokens"] > 0 and s["hit_rate"] > plain["hit_rate"],
                  f"{what}: host hits raise the hit rate ({s['hit_rate']} vs {plain['hit_rate']})")
        if want == "disk":
            check(s["disk_hit_tokens"] > 0, f"{what}: disk hits")
        if want == "fault":
            check(s["tier_spill_failures"] > 0 and "No space left" in err and tdir in err,
                  f"{what}: failed spills reported ({err.strip()[-300:]})")
        if backend == "sim":
            check(s["tier_load_seconds"] > 0, f"{what}: loads cost modelled time")
    check(not [f for f in os.listdir(tdir)], f"run {backend}: tier files removed at exit")
    rc, out, err = run(base + ["--tier-disk", "40", "--tier-dir", os.path.join(tmp, "nope", "x")], ttrace)
    check(rc != 0 and "nope/x cannot be written" in err and summary(out) is None,
          f"run {backend}: unwritable tier directory fails clearly ({err.strip()})")
rc, out, err = run(RUN + ["--tier-host", "-3"], TRACE)
check(rc == 2 and "--tier-host" in err, f"bad --tier-host named ({err.strip()})")
rc, out, err = run(RUN + ["--tier-host", "10", "--tier-policy", "lazy"], TRACE)
check(rc == 2 and "--tier-policy" in err, f"bad --tier-policy named ({err.strip()})")

# cache-sim: hit rates per tier add up to the total; the time model prices hits.
# Long shared documents (2048 tokens): recomputing them is compute-bound, so
# loading them from host memory (50 GB/s) is cheaper.
rng = random.Random(6)
ldocs = [[rng.randrange(10, 100000) for _ in range(2048)] for _ in range(6)]
llines = [json.dumps({"id": i, "tokens": ldocs[rng.randrange(6)] + [rng.randrange(10, 100000) for _ in range(32)]})
          for i in range(40)]
rc, out, err = run(["cache-sim", "--cache", "radix", "--capacity", "4096", "--page-size", "16",
                    "--tier-host", "8192", "--tier-disk", "16384", "--model", "llama-3-8b", "--check",
                    "--summary-only", "-"], "\n".join(llines) + "\n")
s = summary(out)
check(rc == 0 and s is not None, f"cache-sim with a tier exits 0 ({err.strip()})")
if s:
    check(abs(s["gpu_hit_rate"] + s["host_hit_rate"] + s["disk_hit_rate"] - s["hit_rate"]) < 1e-5,
          "cache-sim: per-tier hit rates add up")
    check(s["host_hit_tokens"] > 0 and s["disk_hit_tokens"] > 0, "cache-sim: hits in both tiers")
    check(s["recompute_seconds_tier_hits"] > s["tier_load_seconds"] > 0,
          f"cache-sim: loading long prefixes beats recomputing them ({s['recompute_seconds_tier_hits']} vs {s['tier_load_seconds']})")

# 6. Replicas and routers (sim): outputs are those of one engine whatever the
# router; round-robin spreads evenly; cache-aware keeps conversations together
# (a higher hit rate than round-robin) and reports its approximation error.
mt = os.path.join(tmp, "mt.jsonl")
rc, out, err = run(["gen", "multi-turn", "--num", "32", "--turns", "4", "--prompt-len", "200",
                    "--shared-len", "64", "--rate", "8", "--seed", "3", "--out", mt])
check(rc == 0, f"gen multi-turn ({err.strip()})")
base = ["run", "--backend", "sim", "--model", "llama-3-8b", "--trace", mt, "--kv-tokens", "4096",
        "--no-progress", "--fixed-clock"]
rc, out, err = run(base)
one = outputs(out)
check(rc == 0 and len(one) == 128, f"run one replica ({err.strip()[-200:]})")
res = {}
for r in ["round-robin", "least-load", "cache-aware"]:
    rc, out, err = run(base + ["--replicas", "4", "--router", r])
    s = summary(out)
    check(rc == 0 and s is not None, f"--router {r} exits 0 ({err.strip()[-300:]})")
    if not s:
        continue
    res[r] = s
    check(outputs(out) == one, f"--router {r}: outputs equal one engine's")
    check(sum(s["per_replica_requests"]) == 128 and s["replicas"] == 4, f"--router {r}: every request routed once")
    reqs = [json.loads(l) for l in out.splitlines() if '"request"' in l]
    check(all(0 <= q["replica"] < 4 for q in reqs), f"--router {r}: replica field")
if len(res) == 3:
    check(res["round-robin"]["per_replica_requests"] == [32, 32, 32, 32], "round-robin spreads evenly")
    check(res["cache-aware"]["hit_rate"] > res["round-robin"]["hit_rate"] + 0.1,
          f"cache-aware hit rate {res['cache-aware']['hit_rate']} beats round-robin {res['round-robin']['hit_rate']}")
    ca = res["cache-aware"]
    check(ca["predicted_requests"] == 128 and 0 <= ca["router_abs_error"] <= 1
          and 0 <= ca["router_overestimates"] <= 1, "cache-aware reports its approximation error")
    check(min(ca["per_replica_requests"]) > 0, "cache-aware still uses every replica")
# Pins in every replica: each request starting with one matches it whole.
rc, out, err = run(["run", "--backend", "sim", "--trace", "-", "--page-size", "4", "--kv-tokens", "160",
                    "--replicas", "3", "--router", "cache-aware", "--no-progress", "--pin", pin_path], ptrace)
s = summary(out)
reqs = {r["id"]: r for r in (json.loads(l) for l in out.splitlines()) if r.get("type") == "request"}
check(rc == 0 and s is not None and s["pinned_tokens"] == 44, f"replicas --pin ({err.strip()[-300:]})")
short = [i for i, w in enumerate(starts) if i not in reqs or "error" in reqs[i] or reqs[i]["cached_tokens"] < w]
check(not short, f"replicas --pin: requests short of their pin: {short[:5]}")
for args, name in [(base + ["--replicas", "2", "--router", "random"], "--router"),
                   (base + ["--replicas", "0"], "--replicas"),
                   (base + ["--replicas", "2", "--router-cache-threshold", "2"], "--router-cache-threshold")]:
    rc, out, err = run(args)
    check(rc == 2 and name in err, f"{args[-2:]}: fails naming {name} ({err.strip()})")

sys.exit(cli.finish("ok"))
