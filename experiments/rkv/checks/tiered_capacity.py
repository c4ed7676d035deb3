"""The stated properties of experiments/tiered_capacity: (ok, text) pairs over the
result rows. Imported by experiments/tiered_capacity/run (--check) and by
notebooks/tiered_capacity.ipynb, so both judge the same rows the same way."""


def check(rows):
    """The stated outcome on the host-only rows; (ok, text) pairs."""
    out = []
    host_rows = [s for s in rows if s["disk_multiple"] == 0]
    for x, y in zip(host_rows, host_rows[1:]):
        out.append((y["hit_rate"] >= x["hit_rate"] - 1e-3,
                    f"host x{x['host_multiple']} -> x{y['host_multiple']}: hit rate "
                    f"{x['hit_rate']:.4f} -> {y['hit_rate']:.4f} (never lower, 0.1 point band)"))
    out.append((host_rows[-1]["hit_rate"] > host_rows[0]["hit_rate"],
                f"the largest host tier (x{host_rows[-1]['host_multiple']}) raises the hit rate "
                f"({host_rows[0]['hit_rate']:.4f} -> {host_rows[-1]['hit_rate']:.4f})"))
    for s in host_rows:
        if s["host_hit_tokens"]:
            out.append((s["recompute_seconds_tier_hits"] > s["tier_load_seconds"],
                        f"host x{s['host_multiple']}: loading tier hits ({s['tier_load_seconds']:.3f} s) "
                        f"costs less than recomputing them ({s['recompute_seconds_tier_hits']:.3f} s)"))
    return out
