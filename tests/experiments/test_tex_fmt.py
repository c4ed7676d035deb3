#!/usr/bin/env python3
"""rkv.tex.fmt prints numbers as the paper shows them: integers and large
values with thin-space thousands, fractions to three significant digits, and
never a fixed-point fallback such as "9168.700" for a large float."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments"))
from rkv.tex import fmt  # noqa: E402

CASES = [(9168.7, "9\\,169"), (2043.2, "2\\,043"), (999.6, "1\\,000"), (-5432.1, "$-$5\\,432"),
         (12345, "12\\,345"), (150.0, "150"), (123.4, "123"), (12.345, "12.3"), (0.01234, "0.012"),
         (3.0, "3"), (None, "--"), (True, "yes")]


def main():
    bad = 0
    for v, want in CASES:
        got = fmt(v)
        ok = got == want
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} fmt({v!r}) = {got!r} (want {want!r})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
