#!/usr/bin/env python3
"""The Markdown tables of bench/RESULTS.md's sglang_cache_bench sections, made
from one run's JSON (bench/sglang_cache_bench.py's output), so that no number
in them is typed by hand: per call (insert, match, evict) and the whole
replay, with the time inside the caches' own calls where the JSON has it.

    /usr/bin/python3 bench/sglang_cache_table.py bench/results/.../bench.json

With several JSONs (runs of one build), one table of the adapter's ratios
per run instead, with each ratio's range over the runs:

    /usr/bin/python3 bench/sglang_cache_table.py run1.json run2.json run3.json
"""
import argparse
import json
import sys

# Row names, in the order the tables list the caches.
NAMES = {
    "sglang_python": "SGLang RadixCache (Python)",
    "sglang_unified": "SGLang UnifiedRadixCache, {core}",
    "radixkv_adapter": "radixkv.sglang.RadixCache",
    "radixkv_api": "radixkv.Cache (bare binding)",
    "sglang_python_events": "SGLang RadixCache, events on",
    "sglang_unified_events": "SGLang Unified, {core}, events on",
    "radixkv_adapter_events": "radixkv.sglang.RadixCache, events on",
}
PHASES = ("insert", "match", "evict")


def ratio(row, field):
    v = row.get(field)
    return "–" if v is None else f"{v:.2f}"


def table(out, head, rows, cells_of):
    """A Markdown table under head: a row per cache of rows, in NAMES' order,
    its cells from cells_of(name, row)."""
    out.append(head)
    out.append("|---" * (head.count("|") - 1) + "|")
    for name in NAMES:
        if name in rows:
            out.append("| " + " | ".join(cells_of(name, rows[name])) + " |")


def per_call(out, caches, name_of):
    unified = "sglang_unified" in caches
    head = "| cache | insert µs | match µs | evict µs | thread CPU s (ins / match / evict) | ×Python (i / m / e) |"
    head += " ×Rust core (i / m / e) |" if unified else ""

    def cells_of(name, c):
        cells = [name_of(name)]
        for p in PHASES:
            lo, hi = c[p]["range_us"]
            cells.append(f"{c[p]['median_us_per_call']:.1f} [{lo:.1f}, {hi:.1f}]")
        cells.append(" / ".join(f"{c[p]['thread_cpu_s']:.3f}" for p in PHASES))
        cells.append(" / ".join(ratio(c[p], "speedup_vs_sglang_python") for p in PHASES))
        if unified:
            cells.append(" / ".join(ratio(c[p], "speedup_vs_sglang_unified") for p in PHASES))
        return cells
    table(out, head, caches, cells_of)


def replay(out, rows, name_of):
    unified = "sglang_unified" in rows
    inside = all("in_cache_wall_s" in r for r in rows.values())
    head = "| whole replay | wall s | thread CPU s | ×Python | "
    head += "×Rust core | " if unified else ""
    if inside:
        head += "in the cache's calls: wall s | thread CPU s | ×Python (wall / CPU) | "
        head += "×Rust core (wall / CPU) | " if unified else ""
    build = all("build_s" in r for r in rows.values())
    head += "build s (not in the replay) | " if build else ""
    head += "hit tokens |"
    evicts = all("evict_calls" in r for r in rows.values())
    head += " evict calls |" if evicts else ""

    def cells_of(name, r):
        lo, hi = r["range_s"]
        cells = [name_of(name), f"{r['wall_s']:.3f} [{lo:.3f}, {hi:.3f}]",
                 f"{r['thread_cpu_s']:.4f}", ratio(r, "speedup_vs_sglang_python")]
        if unified:
            cells.append(ratio(r, "speedup_vs_sglang_unified"))
        if inside:
            lo, hi = r["in_cache_range_s"]
            cells += [f"{r['in_cache_wall_s']:.3f} [{lo:.3f}, {hi:.3f}]",
                      f"{r['in_cache_thread_cpu_s']:.4f}",
                      f"{ratio(r, 'in_cache_speedup_vs_sglang_python')} / "
                      f"{ratio(r, 'in_cache_speedup_cpu_vs_sglang_python')}"]
            if unified:
                cells.append(f"{ratio(r, 'in_cache_speedup_vs_sglang_unified')} / "
                             f"{ratio(r, 'in_cache_speedup_cpu_vs_sglang_unified')}")
        if build:
            cells.append(f"{r['build_s']:.4f}")
        cells.append(f"{r['hit_tokens']:,}")
        if evicts:
            cells.append(f"{r['evict_calls']:,}")
        return cells
    table(out, head, rows, cells_of)


def runs_table(paths):
    """The adapter's ratios to both SGLang caches per run: per call (insert,
    match, evict) and inside the replay's calls (wall / thread CPU, each
    replay the JSON has), then the range of each over the runs."""
    cols, rows = [], []
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        a, cells = d["caches"]["radixkv_adapter"], {}
        for other, short in (("sglang_python", "Python"), ("sglang_unified", "Rust core")):
            for p in PHASES:
                cells[f"{p} ×{short}"] = a[p].get(f"speedup_vs_{other}")
            for field in ("replay", "replay_prebuilt"):
                r = d.get(field, {}).get("rows", {}).get("radixkv_adapter")
                if r:
                    for suf, what in (("", "wall"), ("_cpu", "CPU")):
                        cells[f"{field} {what} ×{short}"] = r.get(f"in_cache_speedup{suf}_vs_{other}")
        cols += [c for c in cells if c not in cols]
        rows.append((path.rsplit("/", 1)[-1], cells))
    out = ["| ratio | " + " | ".join(n for n, _ in rows) + " | range |",
           "|---" * (len(rows) + 2) + "|"]
    for c in cols:
        xs = [cells.get(c) for _, cells in rows]
        have = [x for x in xs if x is not None]
        rng = f"{min(have):.2f}–{max(have):.2f}" if have else "–"
        out.append(f"| {c} | " + " | ".join("–" if x is None else f"{x:.2f}" for x in xs)
                   + f" | {rng} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="+", help="sglang_cache_bench.py's output (several: the "
                    "adapter's ratios per run)")
    args = ap.parse_args()
    if len(args.json) > 1:
        sys.stdout.write("\n".join(runs_table(args.json)) + "\n")
        return
    with open(args.json[0]) as f:
        d = json.load(f)
    core = d.get("unified", {}).get("tree_core")
    core_name = "Rust TreeCore" if core == "rust" else f"{core} core"

    def name_of(n):
        return NAMES[n].format(core=core_name)
    out = []
    per_call(out, d["caches"], name_of)
    for field, what in (("replay", "keys as SGLang's scheduler hands them over"),
                        ("replay_prebuilt", "keys made before the loop")):
        rows = d.get(field, {}).get("rows")
        if rows:
            out.append("")
            if "replay_prebuilt" in d:
                # Two replays: say which table is which (the bench's replay()).
                out.append(f"Whole replay, {what} (`{field}`):")
                out.append("")
            replay(out, rows, name_of)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
