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
