#!/usr/bin/env python3
"""Every metric vLLM's example Grafana dashboard queries returns data from
radixkv's /metrics (standard library only).

vLLM's dashboard (examples/observability/prometheus_grafana/grafana.json in
vLLM's repository; its wheel carries no copy) is read through the list of the
series names its PromQL uses, tests/serve/vllm_grafana_metrics.txt. After some
traffic, each of them must have a series labelled with the served model's
model_name (every query filters by it) and with the labels the query groups
by; a histogram's _count and the counters the panels rate must have moved.
With RKV_RAY_PYTHON (scripts/ray_venv.sh) the names Ray's LLM dashboards chart
(ray/dashboard/modules/metrics/dashboards/*llm*_panels.py, vLLM's metrics
re-exported as ray_vllm_NAME) are checked too, but for the families radixkv
has nothing behind, each listed below with the reason.
Usage: test_serve_dashboard.py PATH/TO/radixkv"""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, check  # noqa: E402

MODEL = "dash-model"

# Families Ray's dashboards chart that radixkv does not have, and why.
ABSENT = {
    "vllm:num_requests_swapped": "vLLM's v0 swap queue; 0.33 has no swapping either",
    "vllm:nixl_": "the NIXL KV-transfer connector's metrics; there is no KV transfer",
    "vllm:kv_offload_": "the CPU offloading connector's metrics; the tiers are radixkv's own "
                        "(radixkv:tier_*)",
}


def grafana_queries():
    """[(series name, [labels it groups by])] from the stored list."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm_grafana_metrics.txt")
    out = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, *labels = line.split()
                out.append((name, labels))
    check(len(out) >= 15, f"{path}: only {len(out)} names")
    return out


def ray_files():
    """Ray's LLM panel files, or [] (with the reason printed) without the Ray venv."""
    py = os.environ.get("RKV_RAY_PYTHON")
    if not py:
        print("serve dashboard: Ray's panels not checked: RKV_RAY_PYTHON is not set")
        return []
    out = subprocess.run([py, "-c", "import importlib.util, os; "
                          "print(os.path.dirname(importlib.util.find_spec('ray').origin))"],
                         capture_output=True, text=True, timeout=120)
    files = sorted(glob.glob(os.path.join(out.stdout.strip(), "dashboard", "modules", "metrics",
                                          "dashboards", "*llm*_panels.py")))
    files = [f for f in files if "sglang" not in os.path.basename(f)]
    if out.returncode or not files:
        print(f"serve dashboard: no Ray LLM dashboard panels under {out.stdout.strip()!r} "
              f"{out.stderr[-200:]}")
    return files


def ray_names(files):
    names = set()
    for f in files:
        with open(f) as fh:
            for m in re.finditer(r"ray_vllm_([a-z][a-z0-9_]*)", fh.read()):
                names.add("vllm:" + m.group(1))
    return names


def scrape(s):
    """[(name, {label: value}, value)] of every sample line."""
    st, text, _ = s.request("GET", "/metrics")
    check(st == 200, f"/metrics: {st}")
    out = []
    for ln in text.splitlines():
        if not ln.strip() or ln.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', ln)
        check(m is not None, f"/metrics: unparsable line {ln!r}")
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def check_grafana(samples):
    for name, group_by in grafana_queries():
        rows = [(lab, v) for n, lab, v in samples
                if n == name and lab.get("model_name") == MODEL]
        check(rows, f"vLLM's dashboard queries {name}{{model_name=\"{MODEL}\"}}: no such series")
        for g in group_by:
            check(all(g in lab for lab, _ in rows), f"{name}: a series without label {g}")
        # What the traffic must have moved (gauges and sums of times may be 0).
        if name.endswith(("_count", "_bucket", "prompt_tokens_total",
                          "generation_tokens_total", "request_success_total",
                          "max_num_generation_tokens_sum")):
            check(max(v for _, v in rows) > 0, f"{name}: all series 0 after 3 requests: {rows}")


def check_ray(samples, files):
    have = {n for n, _, _ in samples}
    missing = []
    for n in sorted(ray_names(files)):
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


def main():
    files = ray_files()
    s = Server(sys.argv[1], "--served-model-name", MODEL)
    try:
        for i in range(3):
            st, r, _ = s.post({"model": MODEL, "prompt": [5, 6, 7, 8 + i], "max_tokens": 3})
            check(st == 200, f"traffic: {st} {r}")
        s.wait_idle()
        samples = scrape(s)
    finally:
        s.kill()
    check_grafana(samples)
    if files:
        check(len(ray_names(files)) >= 10, f"only {sorted(ray_names(files))} in {files}: "
              "the pattern no longer matches")
        check_ray(samples, files)
    print(f"serve dashboard: ok ({len(grafana_queries())} series of vLLM's dashboard"
          + (f", {len(ray_names(files))} names from {len(files)} Ray panel files)" if files else ")"))


if __name__ == "__main__":
    main()
