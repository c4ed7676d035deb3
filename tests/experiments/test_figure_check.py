#!/usr/bin/env python3
"""figure_check.py passes a figure drawn with rkv.figures at its placed width
and rejects each fault it exists to catch: drawn wider than placed (fonts
shrink), a 5 pt legend, an offset label on an axis, a figure without its
.fig.json. Exit 77 without matplotlib."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "experiments"))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("SKIP: no matplotlib")
    sys.exit(77)
from rkv import figures as rfig  # noqa: E402

MAIN = "\\documentclass[10pt,a4paper]{article}\n\\usepackage[margin=2.2cm]{geometry}\n"


def case(tmp, name, draw, placed="\\linewidth", meta=True):
    paper = os.path.join(tmp, name)
    gen = os.path.join(paper, "generated")
    os.makedirs(gen)
    open(os.path.join(paper, "main.tex"), "w").write(MAIN)
    open(os.path.join(paper, "sec.tex"), "w").write(f"\\nbfigure{{{name}.pdf}}{{{placed}}}\n")
    rfig.setup()
    fig = draw()
    rfig.save(fig, gen, name)
    plt.close(fig)
    if not meta:
        os.remove(os.path.join(gen, f"{name}.fig.json"))
    r = subprocess.run([sys.executable, os.path.join(HERE, "figure_check.py"), paper],
                       capture_output=True, text=True)
    return r.returncode, r.stdout


def good():
    fig, ax = rfig.subplots(1, 2, height=2.0)
    ax[0][0].plot([0, 1, 2], [3, 1, 2], label="a")
    ax[0][0].legend()
    ax[0][1].plot([100000.1, 100000.2, 100000.3], [1, 2, 3])  # an offset label without setup()
    return fig


def wide():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(16, 3.6))
    ax.plot([0, 1], [0, 1])
    return fig


def tiny_legend():
    fig, ax = rfig.subplots(height=2.0)
    ax[0][0].plot([0, 1], [0, 1], label="x")
    ax[0][0].legend(fontsize=5)
    return fig


def offset():
    import matplotlib
    fig, ax = rfig.subplots(height=2.0)
    matplotlib.rcParams["axes.formatter.useoffset"] = True
    ax[0][0].ticklabel_format(useOffset=True)
    ax[0][0].plot([0, 1, 2], [100000.1, 100000.2, 100000.3])
    return fig


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, draw, placed, meta, want_ok, why in [
                ("good", good, "\\linewidth", True, True, "drawn at the text width with rkv.figures"),
                ("half", lambda: rfig.subplots(height=1.5, width=0.5)[0], "0.5\\linewidth", True, True,
                 "drawn at half the text width, placed at half"),
                ("wide", wide, "\\linewidth", True, False, "16 in wide placed at the text width"),
                ("legend", tiny_legend, "\\linewidth", True, False, "a 5 pt legend"),
                ("offset", offset, "\\linewidth", True, False, "an offset label"),
                ("nometa", good, "\\linewidth", False, False, "no .fig.json"),
                ("misplaced", good, "0.5\\linewidth", True, False, "drawn full width, placed at half")]:
            rc, out = case(tmp, name, draw, placed, meta)
            ok = rc == 0
            status = "ok  " if ok == want_ok else "FAIL"
            failures += ok != want_ok
            print(f"{status} {name}: {why}: figure_check exit {rc} {out.strip()[:200]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
