#!/usr/bin/python3
"""Per-function callgrind counts per evicted leaf, several builds side by side.

    bench/callgrind_per_leaf.py NAME=ANNOTATE.txt:RUN.jsonl [NAME=..]

ANNOTATE.txt is `callgrind_annotate --inclusive=no --auto=no` of a run recorded
with --cache-sim=yes --branch-sim=yes --toggle-collect=radix_tree_evict;
RUN.jsonl is what radix_bench printed in that run (its evict_scaling line gives
the leaves evicted: repeats x (leaves_small + leaves_large)). Lines of one
function from several files (code inlined from a header) are summed; jemalloc's
unnamed helpers are summed with its free. Rows under one instruction per leaf
in every build are left out; the total is callgrind's program total.
"""
import json
import re
import sys

EVENTS = ("Ir", "D1mr", "D1mw", "Bcm")
TOTAL = "total (all functions)"


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError as e:
        sys.exit(f"callgrind_per_leaf: {path}: {e.strerror}")


def leaves_of(path):
    for n, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as e:
            sys.exit(f"callgrind_per_leaf: {path}:{n}: {e}")
        if d.get("scenario") == "evict_scaling":
            return d["repeats"] * (d["leaves_small"] + d["leaves_large"])
    sys.exit(f"callgrind_per_leaf: {path}: no evict_scaling line")


def per_function(txt, leaves):
    lines = read_lines(txt)
    shown = [l for l in lines if l.startswith("Events shown:")]
    if not shown:
        sys.exit(f"callgrind_per_leaf: {txt}: no 'Events shown:' line")
    ev = shown[0].split(":", 1)[1].split()
    missing = [e for e in EVENTS if e not in ev]
    if missing:
        sys.exit(f"callgrind_per_leaf: {txt}: events {missing} not recorded "
                 "(--cache-sim=yes --branch-sim=yes)")
    out, started = {}, False
    for l in lines:
        if "PROGRAM TOTALS" in l:
            toks = re.sub(r"\(\s*[\d.]+%\)", "", l).split()
            vals = [0 if t == "." else int(t.replace(",", "")) for t in toks[:len(ev)]]
            out[TOTAL] = {e: v / leaves for e, v in zip(ev, vals) if e in EVENTS}
            continue
        if "file:function" in l:
            started = True
            continue
        if not started or l.startswith("-") or not l.strip():
            continue
        toks = re.sub(r"\(\s*[\d.]+%\)", "", l).split()
        vals = [0 if t == "." else int(t.replace(",", "")) for t in toks[:len(ev)]]
        fn = toks[len(ev)].split(":")[-1]
        fn = re.sub(r"\.(constprop|isra|part)\.\d+", "", fn)
        if fn.startswith("0x") or fn == "free":
            fn = "jemalloc free (and its helpers)"
        row = out.setdefault(fn, dict.fromkeys(EVENTS, 0.0))
        for e, v in zip(ev, vals):
            if e in row:
                row[e] += v / leaves
    return out


def cell(v):
    return "-" if v is None else "{:.0f} / {:.2f} / {:.2f} / {:.2f}".format(*(v[e] for e in EVENTS))


def main():
    builds = []
    for arg in sys.argv[1:]:
        m = re.match(r"^([^=]+)=([^:]+):(.+)$", arg)
        if not m:
            sys.exit(f"callgrind_per_leaf: '{arg}': expected NAME=ANNOTATE.txt:RUN.jsonl")
        name, txt, run = m.groups()
        builds.append((name, per_function(txt, leaves_of(run))))
    if not builds:
        sys.exit(__doc__)
    print("Per evicted leaf: instructions / D1 read misses / D1 write misses / "
          "mispredicted branches (valgrind's models).\n")
    print("| function | " + " | ".join(n for n, _ in builds) + " |")
    print("|---|" + "---|" * len(builds))
    names = []
    for _, rows in builds:
        names += [f for f in rows if f not in names]
    for f in names:
        if f == TOTAL:
            continue
        if max(rows.get(f, {}).get("Ir", 0) for _, rows in builds) < 1:
            continue
        print(f"| {f} | " + " | ".join(cell(rows.get(f)) for _, rows in builds) + " |")
    print(f"| {TOTAL} | " + " | ".join(cell(rows.get(TOTAL)) for _, rows in builds) + " |")


if __name__ == "__main__":
    main()
