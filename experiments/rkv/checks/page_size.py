"""The stated properties of experiments/page_size: (ok, text) pairs over the
result rows. Imported by experiments/page_size/run (--check) and by
notebooks/page_size.ipynb, so both judge the same rows the same way."""


def check_properties(rows):
    bad = []
    by = {}
    for r in rows:
        by.setdefault(r["config"]["workload"], {})[(r["config"]["cache"], r["config"]["page_size"])] = r
    for w, g in by.items():
        radix = sorted((P, r) for (k, P), r in g.items() if k == "radix")
        for (p1, a), (p2, b) in zip(radix, radix[1:]):
            # Each page size divides the next: coarser pages never match more.
            if b["matched_tokens"] > a["matched_tokens"]:
                bad.append(f"{w}: radix matches more at page size {p2} ({b['matched_tokens']}) "
                           f"than at {p1} ({a['matched_tokens']})")
        for (k, P), r in g.items():
            if r["lost_tokens"] < 0:
                bad.append(f"{w}: {k} at page size {P} matches more than radix at page size 1")
            if r["evicted_tokens"] or r["errors"]:
                bad.append(f"{w}: {k} at page size {P} evicted or failed at unlimited capacity")
            if k == "radix" and r["nodes"] > r["cached_tokens"] // P + 1:
                bad.append(f"{w}: radix at page size {P} has more nodes ({r['nodes']}) than pages")
            if k == "hash":
                x = g.get(("radix", P))
                # Unlimited capacity, same pages: the tree and the block table match alike.
                if x is not None and x["matched_tokens"] != r["matched_tokens"]:
                    bad.append(f"{w}: radix and hash differ at page size {P} "
                               f"({x['matched_tokens']} vs {r['matched_tokens']})")
            # The replay time is measured: a row carries every repeat the config asked for,
            # and its median lies within their range.
            reps = r.get("us_per_op_reps")
            if reps is not None and len(reps) != r["config"].get("repeats", len(reps)):
                bad.append(f"{w}: {k} at page size {P} has {len(reps)} timed repeats, "
                           f"the config asked for {r['config']['repeats']}")
            lo, hi = r.get("us_per_op_min"), r.get("us_per_op_max")
            if lo is not None and hi is not None and not lo <= r["us_per_op"] <= hi:
                bad.append(f"{w}: {k} at page size {P}: median {r['us_per_op']} us/op outside "
                           f"its repeats' range {lo}..{hi}")
        if ("radix", 1) in g and g[("radix", 1)]["lost_tokens"] != 0:
            bad.append(f"{w}: tokens lost at page size 1")
    return bad
