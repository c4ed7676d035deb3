#!/usr/bin/python3
"""Per-round ratios of two builds' radix_bench runs (JSON Lines), as Markdown.

    bench/radix_rounds.py --before B1.jsonl B2.jsonl .. --after A1.jsonl A2.jsonl ..

The runs are paired by round: the number before ".jsonl" in each file name
(B3 with A3), so a shell glob's order does not matter. For every CPU-time
figure radix_bench reports as {"median", "min", "max"}, each round gives the
ratio after / before of the two runs' medians; the table shows the median of
these ratios and [their min - max]. Rounds alternate the builds, so a ratio is
taken under one load, which a ratio of pooled medians (bench/radix_compare.py)
does not promise on a shared machine.
"""
import argparse
import json
import re
import statistics
import sys


def round_of(path):
    m = re.search(r"(\d+)\.jsonl$", path)
    if not m:
        sys.exit(f"radix_rounds: {path}: no round number before .jsonl")
    return int(m.group(1))


def load(path):
    try:
        with open(path) as f:
            return {d["scenario"] + (f" ({d['pool']} pool)" if "pool" in d else ""): d
                    for d in map(json.loads, filter(str.strip, f))}
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"radix_rounds: {path}: {e}")


def by_round(paths, side):
    out = {}
    for p in paths:
        r = round_of(p)
        if r in out:
            sys.exit(f"radix_rounds: --{side}: round {r} given twice ({out[r][0]}, {p})")
        out[r] = (p, load(p))
    return out


def main():
    ap = argparse.ArgumentParser(description="per-round ratios of two builds' radix_bench runs")
    ap.add_argument("--before", nargs="+", required=True, help="runs of the baseline build")
    ap.add_argument("--after", nargs="+", required=True, help="runs of the other build")
    args = ap.parse_args()
    before, after = by_round(args.before, "before"), by_round(args.after, "after")
    rounds = sorted(set(before) & set(after))
    missing = sorted(set(before) ^ set(after))
    if missing:
        sys.exit(f"radix_rounds: rounds {missing} are in only one of --before and --after")
    print(f"Rounds: {len(rounds)}; per round after / before of the run medians; "
          "median [min - max] over the rounds.\n")
    print("| scenario | figure | after / before |")
    print("|---|---|---|")
    first = after[rounds[0]][1]
    for name, rec in first.items():
        for key, v in rec.items():
            if not isinstance(v, dict) or "wall" in key or "median" not in v:
                continue
            ratios = []
            for r in rounds:
                a = after[r][1].get(name, {}).get(key)
                b = before[r][1].get(name, {}).get(key)
                if a and b and b["median"]:
                    ratios.append(a["median"] / b["median"])
            if len(ratios) != len(rounds):
                continue
            print(f"| {name} | {key} | {statistics.median(ratios):.3f} "
                  f"[{min(ratios):.3f} - {max(ratios):.3f}] |")


if __name__ == "__main__":
    main()
