"""The stated properties of experiments/sglang_ablations: (ok, text) pairs over the
result rows. Imported by experiments/sglang_ablations/run (--check) and by
notebooks/sglang_ablations.ipynb, so both judge the same rows the same way."""


def check_properties(rows, full_name, assert_throughput):
    bad = []
    groups = {}
    for r in rows:
        groups.setdefault((r["backend"], r["config"]["workload"]), []).append(r)
    for (be, w), rs in groups.items():
        full = next((r for r in rs if r["config"]["name"] == full_name), None)
        opt = rs[0]["optimal_hit_rate"]
        for r in rs:
            if r["errors"]:
                bad.append(f"{be} {w} {r['config']['name']}: {r['errors']} requests failed")
            if r["hit_rate"] > opt + 1e-9:
                bad.append(f"{be} {w} {r['config']['name']}: hit rate {r['hit_rate']:.4f} above "
                           f"the optimum {opt:.4f}")
            if opt > 0 and full is not None and r["hit_rate"] > full["hit_rate"] + 1e-9:
                bad.append(f"{be} {w}: {r['config']['name']} hits more ({r['hit_rate']:.4f}) than "
                           f"the full system ({full['hit_rate']:.4f})")
        if be != "sim" or not assert_throughput:
            continue  # wall-clock throughput on a shared CPU is reported, not asserted
        # Throughput rises with the hit rate: positive rank correlation over the
        # configurations, and no configuration slower than the one hitting least.
        # (The highest hit rate is not always the fastest: a request preempted
        # under memory pressure recomputes its prefix, which its hit rate, taken
        # at first admission, does not show.)
        rho = spearman([r["hit_rate"] for r in rs], [r["requests_per_s"] for r in rs])
        if opt > 0 and not rho > 0:
            bad.append(f"sim {w}: throughput does not rise with the hit rate (rank "
                       f"correlation {rho:.2f})")
        slowest = min(rs, key=lambda r: r["requests_per_s"])
        if opt > 0 and slowest["hit_rate"] > min(r["hit_rate"] for r in rs):
            bad.append(f"sim {w}: {slowest['config']['name']} is the slowest, not the "
                       f"configuration with the lowest hit rate")
    return bad


def spearman(x, y):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(x), ranks(y)
    n = len(x)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else 0.0
