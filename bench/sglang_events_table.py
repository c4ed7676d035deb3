#!/usr/bin/env python3
"""The KV-events table of bench/RESULTS.md, from sglang_cache_bench.py's JSON
runs, so that no number in it is typed by hand: per run, the thread CPU time
inside the caches' own calls over a whole replay (in_cache_thread_cpu_s,
median over the run's repeats) of SGLang's RadixCache, its UnifiedRadixCache
(Rust TreeCore) and radixkv.sglang.RadixCache, all with KV cache events on,
and the adapter's ratios to the two (their CPU over its CPU), for both
replays the JSON has; then each ratio's range over the runs of a label.

    /usr/bin/python3 bench/sglang_events_table.py before=a.json before=b.json after=c.json
"""
import argparse
import json
import sys

ROWS = ("sglang_python_events", "sglang_unified_events", "radixkv_adapter_events")
REPLAYS = ("replay", "replay_prebuilt")


def run_cells(path):
    """[(replay, ms of each ROWS, adapter ×Python, adapter ×Rust core)] of one JSON."""
    with open(path) as f:
        d = json.load(f)
    out = []
    for field in REPLAYS:
        rows = d.get(field, {}).get("rows", {})
        if not all(r in rows for r in ROWS):
            continue
        cpu = [rows[r]["in_cache_thread_cpu_s"] for r in ROWS]
        out.append((field, [c * 1e3 for c in cpu], cpu[0] / cpu[2], cpu[1] / cpu[2]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", metavar="LABEL=JSON",
                    help="a run's label (the build, e.g. before or after) and its JSON")
    args = ap.parse_args()
    lines = ["| build | run | replay | SGLang Python, ms | SGLang Rust core, ms | radixkv adapter, ms "
             "| adapter ×Python | adapter ×Rust core |", "|---" * 8 + "|"]
    spans = {}
    for arg in args.runs:
        label, sep, path = arg.partition("=")
        if not sep:
            sys.exit(f"sglang_events_table: '{arg}' is not LABEL=JSON")
        for field, ms, xpy, xrust in run_cells(path):
            lines.append(f"| {label} | {path.rsplit('/', 1)[-1]} | {field} | "
                         + " | ".join(f"{m:.1f}" for m in ms) + f" | {xpy:.2f} | {xrust:.2f} |")
            spans.setdefault((label, field), []).append((xpy, xrust))
    lines += ["", "| build | replay | adapter ×Python (range over runs) | adapter ×Rust core "
              "(range over runs) |", "|---" * 4 + "|"]
    for (label, field), xs in spans.items():
        py, rust = [x[0] for x in xs], [x[1] for x in xs]
        lines.append(f"| {label} | {field} | {min(py):.2f}–{max(py):.2f} | "
                     f"{min(rust):.2f}–{max(rust):.2f} |")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
