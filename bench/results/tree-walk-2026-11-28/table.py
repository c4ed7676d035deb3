#!/usr/bin/python3
"""RESULTS.md's tables for the tree-walk prefetch runs in this folder.

Each sNN-VARIANT.jsonl holds the summary lines of build/bench/replay_floor
runs of one build, in order; line i of every file of a set is one round of
the alternation (base, then each variant, in turn), so a ratio is taken
under one load. Per set and variant, for each tree part: the median over
the set's runs of each run's median (thread CPU ms per 300-request replay)
for base and variant, and the median [min-max] of the per-round ratio
base / variant (above 1: the variant is faster). sNN-keyread.jsonl (the warm-key set) adds the time
of reading each request's matched key alone, after the churn.

usage: table.py [FOLDER]   (default: this script's folder)
"""
import glob
import json
import os
import re
import statistics
import sys

PARTS = ("tree_match_ms", "tree_insert_ms", "tree_churn_match_ms", "tree_churn_insert_ms")


def spread(xs, fmt="{:.3f}"):
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


def load(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        sys.exit(f"table.py: {path}: no lines")
    return rows


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    sets = {}
    for path in sorted(glob.glob(os.path.join(folder, "s[0-9][0-9]-*.jsonl"))):
        m = re.match(r"(s\d\d)-(.+)\.jsonl$", os.path.basename(path))
        sets.setdefault(m.group(1), {})[m.group(2)] = path
    print("| set | variant | pairs | " + " | ".join(
        f"{p[:-3]} ms, base -> variant | base / variant" for p in PARTS) + " |")
    print("|---|---|---|" + "---|---|" * len(PARTS))
    for name, files in sets.items():
        if "base" not in files:
            sys.exit(f"table.py: set {name}: no {name}-base.jsonl")
        base = load(files["base"])
        for variant, path in files.items():
            if variant in ("base", "keyread"):
                continue
            rows = load(path)
            if len(rows) != len(base):
                sys.exit(f"table.py: {path}: {len(rows)} runs, the set's base has {len(base)}")
            cells = []
            for p in PARTS:
                b = [r[p]["median"] for r in base]
                v = [r[p]["median"] for r in rows]
                cells += [f"{statistics.median(b):.3f} -> {statistics.median(v):.3f}",
                          spread([x / y for x, y in zip(b, v)])]
            print(f"| {name} | {variant} | {len(rows)} | " + " | ".join(cells) + " |")
    for name, files in sets.items():
        if "keyread" in files:
            ms = [x for r in load(files["keyread"]) for x in r["keyread_ms_rounds"]]
            print(f"\n{name}: the matched key read alone after the churn, ms per replay "
                  f"(all rounds of all runs): {spread(ms)}")


if __name__ == "__main__":
    main()
