#!/usr/bin/env python3
"""rkv.tex.fmt prints numbers as the paper shows them: integers and large
values with thin-space thousands, fractions to three significant digits, and
never a fixed-point fallback such as "9168.700" for a large float; rkv.tex.span
prints a range as one value where its two ends print the same ("31", not
"31 to 31"), and rkv.tex.pct a percentage with its thin space."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments"))
from rkv.tex import fmt, pct, span  # noqa: E402

CASES = [(9168.7, "9\\,169"), (2043.2, "2\\,043"), (999.6, "1\\,000"), (-5432.1, "$-$5\\,432"),
         (12345, "12\\,345"), (150.0, "150"), (123.4, "123"), (12.345, "12.3"), (0.01234, "0.012"),
         (3.0, "3"), (None, "--"), (True, "yes")]
SPANS = [(([31.02, 30.98], lambda v: f"{v:.0f}"), "31"), (([1.5, 3.25], fmt), "1.5 to 3.25"),
         (([1024, 1024.4], fmt), "1\\,024"), (([0.5, 0.5004, 0.4999], lambda v: f"{v:.3f}"), "0.500"),
         (([-2, 3], fmt), "$-$2 to 3")]
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
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
