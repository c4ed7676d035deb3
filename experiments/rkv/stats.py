"""Repeated measurements: median with the range (min, max)."""
import statistics


def median_range(xs):
    """(median, min, max) of a non-empty list of numbers; (None, None, None)
    for an empty one."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None, None
    return statistics.median(xs), min(xs), max(xs)


def summarize(rows, key):
    """{key: median, key_min: min, key_max: max, key_reps: [..]} over rows."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    med, lo, hi = median_range(vals)
    return {key: med, key + "_min": lo, key + "_max": hi, key + "_reps": vals}


def ranges_overlap(a, b):
    """Two (lo, hi) intervals share a point."""
    return a[0] <= b[1] and b[0] <= a[1]


def interleaved(points, repeats_of):
    """[(rep, i)] in the order runs should go: every point's repeat r before
    any point's repeat r+1, so a slow spell of the machine spreads over all
    points instead of landing on one point's repeats. repeats_of(point) -> int."""
    reps = [max(1, int(repeats_of(p))) for p in points]
    return [(r, i) for r in range(max(reps, default=0)) for i in range(len(points)) if r < reps[i]]


def aggregate(rows, keys):
    """One row from the repeats of one configuration: the first repeat's
    fields, each of `keys` replaced by its median with KEY_min, KEY_max and
    KEY_reps (all values in run order), and `repeats`."""
    out = dict(rows[0])
    for k in keys:
        vals = [r.get(k) for r in rows]
        if any(v is None for v in vals):
            continue
        med, lo, hi = median_range(vals)
        out.update({k: med, k + "_min": lo, k + "_max": hi, k + "_reps": vals})
    out["repeats"] = len(rows)
    return out
