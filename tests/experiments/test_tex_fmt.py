#!/usr/bin/env python3
"""rkv.tex.fmt prints numbers as the paper shows them: integers and large
values with thin-space thousands, fractions to three significant digits, and
never a fixed-point fallback such as "9168.700" for a large float; rkv.tex.span
prints a range as one value where its two ends print the same ("31", not
"31 to 31"), rkv.tex.pct a percentage with its thin space, and rkv.tex.tabular
each column's numbers to one precision (never 0.11 beside 0.108)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments"))
from rkv.tex import fmt, pct, span, tabular  # noqa: E402

CASES = [(9168.7, "9\\,169"), (2043.2, "2\\,043"), (999.6, "1\\,000"), (-5432.1, "$-$5\\,432"),
         (12345, "12\\,345"), (150.0, "150"), (123.4, "123"), (12.345, "12.3"), (0.01234, "0.012"),
         (3.0, "3"), (None, "--"), (True, "yes")]
SPANS = [(([31.02, 30.98], lambda v: f"{v:.0f}"), "31"), (([1.5, 3.25], fmt), "1.5 to 3.25"),
         (([1024, 1024.4], fmt), "1\\,024"), (([0.5, 0.5004, 0.4999], lambda v: f"{v:.3f}"), "0.500"),
         (([-2, 3], fmt), "$-$2 to 3")]
# Rows of a table and the cells each column prints: one number of decimals per
# column (the most any of its floats needs for three significant digits), ints,
# None and strings as given; -0.0001 at three decimals is no "$-$0.000"; a column
# of whole numbers stays whole (8, not 8.00).
TABLE = [["a", 0.11, 3, 12.5, 8.0], ["b", 0.108, None, 1234.0, 2.0], ["c", -0.0001, 40, "n/a", 16.0]]
TABLE_OUT = ["a & 0.110 & 3 & 12.5 & 8 \\\\", "b & 0.108 & -- & 1\\,234.0 & 2 \\\\",
             "c & 0.000 & 40 & n/a & 16 \\\\"]
PCTS = [((0.0,), "0.0\\,\\%"), ((0.58, 0), "58\\,\\%"), ((-0.031,), "$-$3.1\\,\\%")]


def main():
    bad = 0
    for v, want in CASES:
        got = fmt(v)
        ok = got == want
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} fmt({v!r}) = {got!r} (want {want!r})")
    for (vals, form), want in SPANS:
        got = span(vals, form)
        bad += got != want
        print(f"{'ok  ' if got == want else 'FAIL'} span({vals!r}) = {got!r} (want {want!r})")
    for args, want in PCTS:
        got = pct(*args)
        bad += got != want
        print(f"{'ok  ' if got == want else 'FAIL'} pct{args!r} = {got!r} (want {want!r})")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.tex")
        tabular(path, "lrrrr", ["k", "x", "n", "y", "z"], TABLE)
        with open(path) as f:
            got = [x for x in f.read().splitlines() if " & " in x][1:]
    for g, want in zip(got, TABLE_OUT):
        bad += g != want
        print(f"{'ok  ' if g == want else 'FAIL'} tabular row {g!r} (want {want!r})")
    if len(got) != len(TABLE_OUT):
        bad += 1
        print(f"FAIL tabular wrote {len(got)} rows, want {len(TABLE_OUT)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
