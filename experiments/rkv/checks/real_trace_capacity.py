"""The stated properties of experiments/real_trace_capacity: (ok, text) pairs over the
result rows. Imported by experiments/real_trace_capacity/run (--check) and by
notebooks/real_trace_capacity.ipynb, so both judge the same rows the same way."""


def check_properties(rows):
    """The issue's properties; returns a list of violations (strings)."""
    bad = []
    by = {}
    for r in rows:
        by.setdefault((r["config"]["trace"], r["config"]["label"]), []).append(r)
    traces = sorted({t for t, _ in by})
    for t in traces:
        lru = sorted(by.get((t, "radix-lru"), []), key=lambda r: r["config"]["capacity_blocks"])
        for a, b in zip(lru, lru[1:]):
            if b["hit_rate"] < a["hit_rate"]:
                bad.append(f"{t}: radix-lru falls from {a['hit_rate']:.6f} at "
                           f"{a['config']['capacity_blocks']} blocks to {b['hit_rate']:.6f} at "
                           f"{b['config']['capacity_blocks']}")
        opt = {r["config"]["capacity_blocks"]: r for r in by.get((t, "belady"), [])}
        for (tt, lab), rs in by.items():
            if tt != t or lab == "belady":
                continue
            for r in rs:
                o = opt.get(r["config"]["capacity_blocks"])
                if o is not None and r["matched_tokens"] > o["matched_tokens"]:
                    bad.append(f"{t}: {lab} beats Belady at {r['config']['capacity_blocks']} "
                               f"blocks ({r['hit_rate']:.6f} > {o['hit_rate']:.6f})")
        radix = {r["config"]["capacity_blocks"]: r for r in by.get((t, "radix-lru"), [])}
        for r in by.get((t, "hash"), []):
            x = radix.get(r["config"]["capacity_blocks"])
            if x is None:
                continue
            # Page size = block size: without eviction both cache exactly the
            # full blocks seen so far, so they must agree token for token.
            if x["evicted_tokens"] == 0 and r["evicted_tokens"] == 0 \
                    and x["matched_tokens"] != r["matched_tokens"]:
                bad.append(f"{t}: radix and hash differ without eviction at "
                           f"{r['config']['capacity_blocks']} blocks "
                           f"({x['matched_tokens']} vs {r['matched_tokens']} tokens)")
        top = max(radix) if radix else None
        if top is not None and radix[top]["evicted_tokens"] != 0:
            bad.append(f"{t}: the largest capacity ({top} blocks) still evicts")
    return bad
