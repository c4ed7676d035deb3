#!/usr/bin/env python3
"""`radixkv cache-sim` on a real Mooncake trace against an independent model.

With a capacity larger than the trace nothing is evicted, and since Mooncake's
hash ids are prefix-chained, request i matches 512 * k tokens, where k is the
number of its leading blocks that an earlier request inserted as full blocks,
capped at floor((input_length - 1) / 512) (the last token is never matched).

Usage: test_mooncake.py RADIXKV
Data: $RKV_MOONCAKE_DIR, else ../shared/data/mooncake relative to the repository
root. Exits 77 (skip) when the trace is not there.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
data = os.environ.get("RKV_MOONCAKE_DIR", os.path.join(ROOT, "..", "shared", "data", "mooncake"))
trace = os.path.join(data, "synthetic_trace.jsonl")
if not os.path.exists(trace):
    print(f"skip: {trace} not found (set RKV_MOONCAKE_DIR)")
    sys.exit(77)

expected, full_blocks, prompt = [], set(), 0
with open(trace) as f:
    for line in f:
        r = json.loads(line)
        ids, n = r["hash_ids"], r["input_length"]
        k = 0
        while k < len(ids) and ids[k] in full_blocks:
            k += 1
        expected.append(512 * min(k, (n - 1) // 512))
        full_blocks.update(ids[: n // 512])
        prompt += n

p = subprocess.run([sys.argv[1], "cache-sim", "--cache", "radix", "--capacity", str(prompt + 512),
                    "--page-size", "512", "--no-progress", trace],
                   capture_output=True, text=True)
if p.returncode != 0:
    sys.exit(f"cache-sim failed: {p.stderr}")
lines = [json.loads(l) for l in p.stdout.splitlines()]
reqs = [l for l in lines if l["type"] == "request"]
summary = lines[-1]
bad = [(r["id"], r.get("matched"), e) for r, e in zip(reqs, expected) if r.get("matched") != e]
ok = (len(reqs) == len(expected) and not bad and summary["prompt_tokens"] == prompt
      and summary["matched_tokens"] == sum(expected) and summary["evicted_tokens"] == 0
      and all(r["step"] == r["id"] == i for i, r in enumerate(reqs)))
if not ok:
    sys.exit(f"mismatch: {len(reqs)} requests vs {len(expected)}; first differences {bad[:5]}; "
             f"summary {summary}")
print(f"{len(reqs)} requests, hit rate {summary['hit_rate']:.4f}, {summary['seconds']:.2f} s")
