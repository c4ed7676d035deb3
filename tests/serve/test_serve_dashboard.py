#!/usr/bin/env python3
"""The vLLM metric names a Grafana dashboard reads are in radixkv's /metrics
(standard library only).

vLLM 0.33's wheel carries no copy of its example Grafana dashboard (it lives in
vLLM's source tree only), so the dashboards read here are Ray's LLM dashboards
(ray/dashboard/modules/metrics/dashboards/*llm*_panels.py in the Ray venv),
which chart vLLM's own metrics re-exported as ray_vllm_NAME (vllm:NAME). Every
name their PromQL uses must be in a scrape after some traffic (a histogram's
name counts when its _bucket/_sum/_count are), except the families radixkv has
nothing behind, each listed below with the reason. Skips (77) without
RKV_RAY_PYTHON or without those files.
Usage: test_serve_dashboard.py PATH/TO/radixkv"""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, check  # noqa: E402

# Families the dashboards chart that radixkv does not have, and why.
ABSENT = {
    "vllm:num_requests_swapped": "vLLM's v0 swap queue; 0.33 has no swapping either",
    "vllm:nixl_": "the NIXL KV-transfer connector's metrics; there is no KV transfer",
    "vllm:kv_offload_": "the CPU offloading connector's metrics; the tiers are radixkv's own "
                        "(radixkv:tier_*)",
}


def dashboard_files():
    py = os.environ.get("RKV_RAY_PYTHON")
    if not py:
        print("skip: RKV_RAY_PYTHON is not set (scripts/ray_venv.sh makes the Ray venv)")
        sys.exit(77)
    out = subprocess.run([py, "-c", "import importlib.util, os; "
                          "print(os.path.dirname(importlib.util.find_spec('ray').origin))"],
                         capture_output=True, text=True, timeout=120)
    files = sorted(glob.glob(os.path.join(out.stdout.strip(), "dashboard", "modules", "metrics",
                                          "dashboards", "*llm*_panels.py")))
    files = [f for f in files if "sglang" not in os.path.basename(f)]
    if out.returncode or not files:
        print(f"skip: no Ray LLM dashboard panels under {out.stdout.strip()!r} {out.stderr[-200:]}")
        sys.exit(77)
    return files


def dashboard_names(files):
    names = set()
    for f in files:
        with open(f) as fh:
            for m in re.finditer(r"ray_vllm_([a-z][a-z0-9_]*)", fh.read()):
                names.add("vllm:" + m.group(1))
    return names


def scrape_names(s):
    st, text, _ = s.request("GET", "/metrics")
    check(st == 200, f"/metrics: {st}")
    return {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", ln).group(0)
            for ln in text.splitlines() if ln.strip() and not ln.startswith("#")}


def main():
    files = dashboard_files()
    wanted = dashboard_names(files)
    check(len(wanted) >= 10, f"only {sorted(wanted)} in {files}: the pattern no longer matches")
    s = Server(sys.argv[1])
    try:
        for i in range(3):
            st, r, _ = s.post({"prompt": [5, 6, 7, 8 + i], "max_tokens": 3})
            check(st == 200, f"traffic: {st} {r}")
        s.wait_idle()
        have = scrape_names(s)
    finally:
        s.kill()
    missing = []
    for n in sorted(wanted):
        # Panels build histogram queries as NAME + "_bucket" and the like, so a
        # bare histogram name counts through its series.
        if any(h == n or (h.startswith(n) and h[len(n):] in ("_bucket", "_sum", "_count", "_total"))
               for h in have):
            continue
        if any(n.startswith(a) for a in ABSENT):
            continue
        missing.append(n)
    check(not missing, f"metrics Ray's vLLM dashboards chart that /metrics lacks: {missing} "
          f"(from {[os.path.basename(f) for f in files]})")
    print(f"serve dashboard: ok ({len(wanted)} names from {len(files)} panel files)")


if __name__ == "__main__":
    main()
