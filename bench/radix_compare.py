#!/usr/bin/env python3
"""Compare radix_bench runs (JSON Lines) of two builds as a Markdown table.

    bench/radix_compare.py --before B1.jsonl [B2.jsonl ..] --after A1.jsonl [A2.jsonl ..]

Runs of the two builds are meant to alternate (B1, A1, B2, A2, ..), so both see
the same load. Every figure radix_bench reports as {"median", "min", "max"} over
its repeats is shown per build as "median [min - max]": the median of the runs'
medians, the smallest min and the largest max; then after/before of the medians.
CPU-time figures and ratios only (wall-clock figures stay in the JSON: on a loaded
machine they measure the other jobs). Scalar fields that describe memory
(host_bytes_per_token, allocator_bytes_per_token) and page-id layout
(runs_per_alloc, runs_per_match) are shown the same way. Steady-state scenarios
are shown per pool (churned, fresh).
"""
import argparse
import json
import statistics


def load(path):
    with open(path) as f:
        # steady-state scenarios print one line per pool ("churned", "fresh")
        return {d["scenario"] + (f" ({d['pool']} pool)" if "pool" in d else ""): d
                for d in map(json.loads, filter(str.strip, f))}


def combine(paths):
    """One dict per scenario; ranges over all runs, the median of their medians."""
    runs = [load(p) for p in paths]
    out = {}
    for name in runs[0]:
        rows = [r[name] for r in runs if name in r]
        merged = dict(rows[0])
        for key, v in rows[0].items():
            vals = [r[key] for r in rows if key in r]
            if isinstance(v, dict):
                merged[key] = {"median": statistics.median(x["median"] for x in vals),
                               "min": min(x["min"] for x in vals),
                               "max": max(x["max"] for x in vals)}
            elif isinstance(v, float):
                merged[key] = statistics.median(vals)
        out[name] = merged
    return out


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, dict):
        return f"{v['median']:.4g} [{v['min']:.4g} - {v['max']:.4g}]"
    return f"{v:.4g}"


def median(v):
    return v["median"] if isinstance(v, dict) else v


def main():
    ap = argparse.ArgumentParser(description="compare radix_bench runs of two builds")
    ap.add_argument("--before", nargs="+", required=True, help="runs of the old build")
    ap.add_argument("--after", nargs="+", required=True, help="runs of the new build")
    args = ap.parse_args()
    before, after = combine(args.before), combine(args.after)
    print(f"Runs: {len(args.before)} before, {len(args.after)} after; "
          "median [min - max] over all repeats of all runs.\n")
    print("| scenario | figure | before | after | after / before |")
    print("|---|---|---|---|---|")
    for name, a in after.items():
        b = before.get(name, {})
        for key, v in a.items():
            timed = isinstance(v, dict) and "wall" not in key
            memory = key in ("host_bytes_per_token", "allocator_bytes_per_token",
                             "runs_per_alloc", "runs_per_match")
            if not (timed or memory):
                continue
            old = b.get(key)
            # null: not measured in that run (no allocator counts, no allocation)
            ok = v is not None and old not in (None, 0) and median(old)
            rel = f"{median(v) / median(old):.3g}" if ok else "-"
            print(f"| {name} | {key} | {fmt(old)} | {fmt(v)} | {rel} |")


if __name__ == "__main__":
    main()
