#!/usr/bin/env python3
"""Script test of `radixkv cache-sim`: options, errors, stdin, --out, dumps.

Usage: test_cli.py RADIXKV
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402

cli = CliCheck(sys.argv[1])
run, check = cli.run, cli.check


TRACE = ('{"id": 0, "step": 0, "tokens": [1, 2, 3, 4]}\n'
         '{"id": 1, "step": 1, "tokens": [1, 2, 3, 5, 6]}\n'
         '{"id": 2, "step": 2, "tokens": [7, 8, 9, 10, 11]}\n')
BASE = ["cache-sim", "--cache", "radix", "--capacity", "10", "--page-size", "1"]

rc, out, err = run(["--help"])
check(rc == 0 and "cache-sim" in out, "radixkv --help lists cache-sim")
rc, out, err = run(["cache-sim", "--help"])
check(rc == 0 and "--capacity" in out and "--dump-dir" in out, "cache-sim --help")
rc, out, err = run(["no-such-command"])
check(rc != 0 and "no-such-command" in err, "unknown command named")

# Bad options fail at once, naming the option.
for args, name in [
    (BASE + ["--bogus", "-"], "--bogus"),
    (["cache-sim", "--cache", "btree", "--capacity", "10", "--page-size", "1", "-"], "--cache"),
    (BASE + ["--evict-policy", "no-such-policy", "-"], "--evict-policy"),
    (BASE + ["--hash", "crc", "-"], "--hash"),
    (["cache-sim", "--cache", "radix", "--capacity", "ten", "--page-size", "1", "-"], "--capacity"),
    (["cache-sim", "--cache", "radix", "--capacity", "10", "--page-size", "0", "-"], "--page-size"),
    (["cache-sim", "--cache", "radix", "--page-size", "1", "-"], "--capacity"),
    (["cache-sim", "--cache", "radix", "--capacity", "10", "--page-size", "1"], "TRACE"),
    (BASE + ["--capacity", "12", "-"], "--capacity given twice"),
    (BASE + ["--check", "--check", "-"], "--check given twice"),
    (BASE + ["--check=yes", "-"], "--check takes no value"),
    (BASE + ["--hash", "md5", "-"], "--hash applies to the hash kinds"),
    (BASE + ["--policy", "lru", "-"], "--policy was renamed: use --evict-policy"),
    (["cache-sim", "--cache", "radix", "--capacity", "10", "-", "--page-size"],
     "--page-size needs a value"),
    (["run", "--trace", "-", "--policy", "lpm"], "--policy was renamed: use --sched-policy"),
    (["run", "--trace", "-", "--hash", "md5"], "--hash applies to the hash kinds"),
    (["run", "--trace", "-", "--seed", "1", "--seed=2"], "--seed given twice"),
    (["gen", "sweep", "--num", "2", "--num", "3"], "--num given twice"),
    (["cache-sim", "--cache", "none", "--evict-policy", "lru", "--capacity", "10", "--page-size",
      "1", "-"], "--evict-policy does not apply to --cache none"),
    (["run", "--backend", "sim", "--trace", "-", "--cache", "hash-nocache", "--evict-policy",
      "lru"], "--evict-policy does not apply to --cache hash-nocache"),
]:
    rc, out, err = run(args, TRACE)
    check(rc != 0 and name in err and out == "", f"{args}: fails naming {name} ({err.strip()})")

# A trace on stdin: one line per request, a step line for the eviction, a summary.
rc, out, err = run(BASE + ["--check", "-"], TRACE)
check(rc == 0, f"replay from stdin exits 0 ({err.strip()})")
lines = [json.loads(l) for l in out.splitlines()]
check(all(isinstance(l, dict) for l in lines), "every output line is a JSON object")
check([l["type"] for l in lines] == ["request", "request", "request", "step", "summary"],
      f"line types {[l['type'] for l in lines]}")
check([(l["matched"], l["new"]) for l in lines[:3]] == [(0, 4), (3, 2), (0, 5)], "matched/new")
check(lines[3] == {"type": "step", "step": 2, "evicted": [[4]]}, f"step line {lines[3]}")
s = lines[4]
check(s["requests"] == 3 and s["prompt_tokens"] == 14 and s["matched_tokens"] == 3
      and abs(s["hit_rate"] - 3 / 14) < 1e-6 and s["evicted_tokens"] == 1, f"summary {s}")

rc, out, err = run(BASE + ["--summary-only", "-"], TRACE)
only = [json.loads(l) for l in out.splitlines()]
check(rc == 0 and len(only) == 1 and only[0]["type"] == "summary"
      and only[0]["matched_tokens"] == 3, f"--summary-only: {out}")

with tempfile.TemporaryDirectory() as d:
    # --out and a trace file; the same lines as stdout gave (but the timing).
    tpath = os.path.join(d, "t.jsonl")
    with open(tpath, "w") as f:
        f.write(TRACE)
    opath = os.path.join(d, "out.jsonl")
    rc, out2, err = run(BASE + ["--out", opath, tpath])
    check(rc == 0 and out2 == "", "--out writes nothing to stdout")
    with open(opath) as f:
        got = [json.loads(l) for l in f]
    check(got[:4] == lines[:4], "--out has the same lines")

    # Malformed input fails with file:line.
    with open(tpath, "a") as f:
        f.write('{"id": 3, "tokens": [1, 2.5]}\n')
    rc, out3, err = run(BASE + [tpath])
    check(rc != 0 and f"{tpath}:4:" in err and "token 1 is not an integer" in err,
          f"malformed line named ({err.strip()})")

    # Dumps: JSON and DOT per step; colours by state.
    ddir = os.path.join(d, "dump")
    rc, out4, err = run(BASE + ["--dump-dir", ddir, "-"], TRACE)
    check(rc == 0, f"--dump-dir run ({err.strip()})")
    # Dumps are numbered by position: the first step is step_0001.
    for name in ("initial", "step_0001", "step_0002", "step_0003"):
        check(os.path.exists(os.path.join(ddir, name + ".json")), f"{name}.json")
        check(os.path.exists(os.path.join(ddir, name + ".dot")), f"{name}.dot")
    check(not os.path.exists(os.path.join(ddir, "step_0000.json")), "no step_0000 dump")
    with open(os.path.join(ddir, "step_0003.json")) as f:
        pic = json.load(f)
    states = {tuple(n["tokens"]): n["state"] for n in pic["nodes"]}
    check(states.get((7, 8, 9, 10, 11)) == "created", f"new node green: {states}")
    check(states.get((1, 2, 3)) == "cached", f"untouched node white: {states}")
    check([e["tokens"] for e in pic["evicted"]] == [[4]], f"evicted node kept: {pic['evicted']}")
    with open(os.path.join(ddir, "step_0002.json")) as f:
        pic = json.load(f)
    states = {tuple(n["tokens"]): n["state"] for n in pic["nodes"]}
    check(states.get((1, 2, 3)) == "matched" and states.get((5, 6)) == "created", f"step 1: {states}")

# A request larger than the cache: an error line, exit status 0.
rc, out, err = run(["cache-sim", "--cache", "radix", "--capacity", "3", "--page-size", "1", "-"],
                   '{"id": 9, "tokens": [1, 2, 3, 4]}\n')
first = json.loads(out.splitlines()[0])
check(rc == 0 and "error" in first and first["id"] == 9, f"oversized request: {out}")

# The renamed options work under their new names, in --opt=value form too.
rc, out, err = run(["cache-sim", "--cache", "radix", "--evict-policy=lfu", "--capacity", "10",
                    "--page-size", "1", "-"], TRACE)
check(rc == 0 and '"policy":"lfu"' in out.splitlines()[-1], f"--evict-policy=lfu ({err.strip()})")
rc, out, err = run(["cache-sim", "--cache", "hash", "--hash", "md5", "--capacity", "10",
                    "--page-size", "1", "-"], TRACE)
check(rc == 0 and '"hash":"md5"' in out.splitlines()[-1], f"--hash md5 with hash ({err.strip()})")

# Namespaces (issue 28): equal tokens under different namespaces share no page,
# in every kind that reuses, in cache-sim and in run (one engine and
# replicas); --namespace names the namespace of lines without the field.
P4 = list(range(1, 18))  # 17 tokens: 4 whole pages of 4 before the last token
NS_TRACE = "".join(json.dumps(dict({"id": i, "step": i, "tokens": P4, "max_tokens": 2}, **extra)) + "\n"
                   for i, extra in enumerate([{"namespace": "a"}, {"namespace": "b"}, {},
                                              {"namespace": "a"}, {"namespace": ""}]))
# matched per request: a (cold), b (cold), default (cold), a (hit), "" = default (hit)
for kind in ("radix", "hash", "trie"):
    rc, out, err = run(["cache-sim", "--cache", kind, "--capacity", "1000", "--page-size", "4", "-"],
                       NS_TRACE)
    got = [json.loads(l)["matched"] for l in out.splitlines() if '"request"' in l]
    check(rc == 0 and got == [0, 0, 0, 16, 16], f"{kind}: namespaces kept apart: {got} {err.strip()}")
    rc, out, err = run(["cache-sim", "--cache", kind, "--capacity", "1000", "--page-size", "4",
                        "--namespace", "b", "-"], NS_TRACE)
    got = [json.loads(l)["matched"] for l in out.splitlines() if '"request"' in l]
    check(rc == 0 and got == [0, 0, 16, 16, 0], f"{kind} --namespace b: {got} {err.strip()}")
for extra in ([], ["--replicas", "2", "--router", "cache-aware"]):
    rc, out, err = run(["run", "--trace", "-", "--backend", "sim", "--max-running", "1",
                        "--page-size", "4", "--no-progress"] + extra, NS_TRACE)
    got = [json.loads(l)["cached_tokens"] for l in out.splitlines() if '"request"' in l]
    check(rc == 0 and got == [0, 0, 0, 16, 16], f"run {extra}: namespaces kept apart: {got} {err.strip()}")
rc, out, err = run(["cache-sim", "--cache", "radix", "--capacity", "100", "--page-size", "1", "-"],
                   '{"id": 0, "tokens": [1, 2], "cache_salt": "x"}\n')
check(rc != 0 and '<stdin>:1: unknown field "cache_salt"' in err, f"unknown trace field refused: {err.strip()}")
rc, out, err = run(["serve", "--namespace", "a"])
check(rc == 2 and "--namespace" in err, f"serve refuses --namespace: {err.strip()}")

# --hash-duplicates (issue 28): a block-aligned prompt seen twice recomputes
# its last block (a match leaves the last token out). keep (vLLM, the default
# under lru) caches that copy beside the first, so the next eviction takes
# both; dedup frees the copy at once.
DUP = ('{"id": 0, "tokens": [1, 2, 3, 4, 5, 6, 7, 8]}\n{"id": 1, "tokens": [1, 2, 3, 4, 5, 6, 7, 8]}\n'
       '{"id": 2, "tokens": [9, 10, 11, 12, 13]}\n')
for dup, want in [(None, [[5, 6, 7, 8], [5, 6, 7, 8]]), ("keep", [[5, 6, 7, 8], [5, 6, 7, 8]]),
                  ("dedup", [[5, 6, 7, 8]])]:
    rc, out, err = run(["cache-sim", "--cache", "hash", "--capacity", "12", "--page-size", "4"]
                       + (["--hash-duplicates", dup] if dup else []) + ["-"], DUP)
    lines = [json.loads(l) for l in out.splitlines()]
    ev = [l["evicted"] for l in lines if l["type"] == "step"]
    check(rc == 0 and ev == [want], f"--hash-duplicates {dup}: evicted {ev} {err.strip()}")
    check((lines[-1].get("hash_duplicates") == dup), f"summary names --hash-duplicates {dup}")
for args, name in [(["--cache", "radix", "--hash-duplicates", "keep"], "--hash-duplicates applies to --cache hash"),
                   (["--cache", "hash", "--hash-duplicates", "twice"], "--hash-duplicates"),
                   (["--cache", "hash", "--evict-policy", "lfu", "--hash-duplicates", "keep"], "needs the lru policy")]:
    rc, out, err = run(["cache-sim", "--capacity", "12", "--page-size", "4"] + args + ["-"], DUP)
    check(rc == 2 and name in err, f"refused: {args}: {err.strip()}")

# --step-semantics (issue 28): sglang (default) matches every request of a
# step before any insert; vllm inserts each request's full blocks before the
# next is matched, so a step's later requests hit its earlier ones, and each
# request holds its blocks (and its partial page) until the step ends.
SAME = ('{"id": 0, "step": 0, "tokens": [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n'
        '{"id": 1, "step": 0, "tokens": [1, 2, 3, 4, 5, 6, 7, 8, 10]}\n'
        '{"id": 2, "step": 1, "tokens": [1, 2, 3, 4, 5, 6, 7, 8, 11]}\n')
HOLD = ('{"id": 0, "step": 0, "tokens": [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n'
        '{"id": 1, "step": 1, "tokens": [11, 12, 13, 14, 15, 16, 17, 18, 19]}\n'
        '{"id": 2, "step": 1, "tokens": [21, 22, 23, 24, 25, 26, 27, 28, 29]}\n')
for kind in ("radix", "hash", "trie"):
    for sem, want in [(None, [0, 0, 8]), ("sglang", [0, 0, 8]), ("vllm", [0, 8, 8])]:
        rc, out, err = run(["cache-sim", "--cache", kind, "--capacity", "100", "--page-size", "4",
                            "--check"] + (["--step-semantics", sem] if sem else []) + ["-"], SAME)
        lines = [json.loads(l) for l in out.splitlines()]
        got = [l["matched"] for l in lines if l["type"] == "request"]
        check(rc == 0 and got == want, f"{kind} --step-semantics {sem}: matched {got} {err.strip()}")
        check(lines[-1].get("step_semantics") == sem, f"summary names --step-semantics {sem}")
    # 5 pages: request 1 takes the 3 free ones and holds them; request 2 may
    # evict only request 0's 2 pages, so it does not fit.
    rc, out, err = run(["cache-sim", "--cache", kind, "--capacity", "20", "--page-size", "4", "--check",
                        "--step-semantics", "vllm", "-"], HOLD)
    got = [("error" in json.loads(l)) for l in out.splitlines() if '"request"' in l]
    check(rc == 0 and got == [False, False, True], f"{kind} vllm: a request holds its pages: {got} {err.strip()}")
rc, out, err = run(BASE + ["--step-semantics", "trtllm", "-"], TRACE)
check(rc == 2 and "--step-semantics" in err, f"bad --step-semantics refused: {err.strip()}")

# Regression (issue 42): under vllm semantics a request that does not fit leaves
# the cache as it found it, as vLLM's allocate_slots checks free + evictable
# blocks before evicting or touching any. P=1, 4 pages: in step 1 r1 takes 2
# (evicting [3]) and holds them; r2 needs 3 of the 2 left and is refused
# without evicting [2] and [1] or re-queueing them, so r3 still hits [1, 2]
# (vLLM 0.33.0 gives exactly this: evictions [[3]], r3 matches 2).
REFUSE = ('{"id": 0, "step": 0, "tokens": [1, 2, 3]}\n'
          '{"id": 1, "step": 1, "tokens": [5, 6]}\n'
          '{"id": 2, "step": 1, "tokens": [7, 8, 9]}\n'
          '{"id": 3, "step": 2, "tokens": [1, 2, 4]}\n')
# radix evicts whole leaf nodes, so there r1's eviction takes all of [1, 2, 3].
PAGED = ([0, 0, "error", 2], [(1, [[3]]), (2, [[6]])])
for kind, extra, want in [("hash", ["--hash-duplicates", "keep"], PAGED),
                          ("hash", ["--hash-duplicates", "dedup"], PAGED), ("trie", [], PAGED),
                          ("radix", [], ([0, 0, "error", 0], [(1, [[1, 2, 3]]), (2, [[5, 6]])]))]:
    rc, out, err = run(["cache-sim", "--cache", kind, "--capacity", "4", "--page-size", "1", "--check",
                        "--step-semantics", "vllm"] + extra + ["-"], REFUSE)
    lines = [json.loads(l) for l in out.splitlines()]
    reqs = [l for l in lines if l["type"] == "request"]
    steps = [l for l in lines if l["type"] == "step"]
    got = ([r.get("matched", "error") for r in reqs], [(s["step"], s.get("evicted")) for s in steps])
    check(rc == 0 and got == want,
          f"{kind} {extra} vllm: a refused request leaves the cache alone: {got} {err.strip()}")

sys.exit(cli.finish("cli: ok"))
