"""The stated properties of experiments/routing: (ok, text) pairs over the
result rows. Imported by experiments/routing/run (--check) and by
notebooks/routing.ipynb, so both judge the same rows the same way."""


def check(rows, cfg):
    """Cache-aware above round-robin on multi-turn chat; (ok, text) pairs."""
    by = {(s["workload"], s["replicas"], s["router"]): s for s in rows}
    out = []
    for n in sorted({s["replicas"] for s in rows if s["workload"] == "multi-turn"}):
        if n == 1:
            continue
        ca, rr = by[("multi-turn", n, "cache-aware")], by[("multi-turn", n, "round-robin")]
        out.append((ca["hit_rate"] > rr["hit_rate"],
                    f"multi-turn, {n} replicas: cache-aware hit rate {ca['hit_rate']:.4f} > "
                    f"round-robin {rr['hit_rate']:.4f}"))
    return out
