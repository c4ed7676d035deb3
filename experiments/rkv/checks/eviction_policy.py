"""The stated properties of experiments/eviction_policy: (ok, text) pairs over the
result rows. Imported by experiments/eviction_policy/run (--check) and by
notebooks/eviction_policy.ipynb, so both judge the same rows the same way."""


def check_properties(rows):
    bad = []
    groups = {}
    for r in rows:
        c = r["config"]
        groups.setdefault((c["workload"], r["measure"]), []).append(r)
    for (w, m), rs in groups.items():
        fr = sorted({r["config"]["fraction"] for r in rs})
        top = [r for r in rs if r["config"]["fraction"] == fr[-1]]
        if m == "cache-sim":
            # Nothing is evicted at the full working set: every policy the same.
            if fr[-1] >= 1.0 and len({r["matched_tokens"] for r in top}) != 1:
                bad.append(f"{w}: policies differ at 100 % of the working set: "
                           + ", ".join(f"{r['config']['policy']} {r['hit_rate']:.4f}" for r in top))
            lru = sorted((r for r in rs if r["config"]["policy"] == "lru"),
                         key=lambda r: r["config"]["fraction"])
            for a, b in zip(lru, lru[1:]):
                if b["hit_rate"] < a["hit_rate"]:
                    bad.append(f"{w}: lru hit rate falls from {a['hit_rate']:.4f} at "
                               f"{a['config']['fraction']} to {b['hit_rate']:.4f} at "
                               f"{b['config']['fraction']}")
        else:
            for pol in {r["config"]["policy"] for r in rs}:
                ps = sorted((r for r in rs if r["config"]["policy"] == pol),
                            key=lambda r: r["config"]["fraction"])
                if ps[-1]["requests_per_s"] < ps[0]["requests_per_s"]:
                    bad.append(f"{w}: sim {pol}: throughput at the full working set "
                               f"({ps[-1]['requests_per_s']:.3f}/s) below the smallest "
                               f"capacity's ({ps[0]['requests_per_s']:.3f}/s)")
        for r in rs:
            if r.get("errors"):
                bad.append(f"{w} {m} {r['config']['policy']} {r['config']['fraction']}: "
                           f"{r['errors']} requests failed")
    return bad
