#!/usr/bin/env python3
"""The spill tier and pins on real Mooncake data: the first 600 requests of the
conversation trace through `radixkv cache-sim --check` with a small GPU cache,
with and without a host tier. Skips (77) without the traces.

Usage: test_tiers_mooncake.py RADIXKV
Data: $RKV_MOONCAKE_DIR, else ../shared/data/mooncake relative to the repository.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402

EXE = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
data = os.environ.get("RKV_MOONCAKE_DIR", os.path.join(ROOT, "..", "shared", "data", "mooncake"))
src = os.path.join(data, "conversation_trace.jsonl")
if not os.path.exists(src):
    print(f"skip: {src} not found (set RKV_MOONCAKE_DIR)")
    sys.exit(77)

cli = CliCheck(EXE)
check = cli.check


with tempfile.TemporaryDirectory() as tmp:
    trace = os.path.join(tmp, "head.jsonl")
    with open(src) as f, open(trace, "w") as g:
        for i, line in enumerate(f):
            if i == 600:
                break
            g.write(line)
    base = [EXE, "cache-sim", "--cache", "radix", "--capacity", "131072", "--page-size", "16",
            "--summary-only", "--no-progress", "--check", trace]
    got = {}
    for name, extra in [("none", []), ("host", ["--tier-host", "1048576"]),
                        ("disk", ["--tier-host", "131072", "--tier-disk", "1048576", "--model", "llama-3-8b"])]:
        p = subprocess.run(base + extra, capture_output=True, text=True)
        check(p.returncode == 0, f"{name}: exit {p.returncode} ({p.stderr.strip()[-300:]})")
        if p.returncode == 0:
            got[name] = json.loads(p.stdout.strip().splitlines()[-1])
    if len(got) == 3:
        check(got["host"]["hit_rate"] > got["none"]["hit_rate"],
              f"host tier raises the hit rate ({got['host']['hit_rate']} vs {got['none']['hit_rate']})")
        for name in ("host", "disk"):
            s = got[name]
            check(abs(s["gpu_hit_rate"] + s["host_hit_rate"] + s["disk_hit_rate"] - s["hit_rate"]) < 1e-5,
                  f"{name}: per-tier rates add up")
            check(s["prompt_tokens"] == got["none"]["prompt_tokens"], f"{name}: same prompts")
        check(got["disk"]["disk_hit_tokens"] > 0, "disk tier serves hits")
sys.exit(cli.finish("ok"))
