#!/usr/bin/env python3
"""figure_check.py passes a figure drawn with rkv.figures at its placed width
and rejects each fault it exists to catch: drawn wider than placed (fonts
shrink), a 5 pt legend, an offset label on an axis, a percentage without the
paper's thin space, a figure without its .fig.json. Also rkv.figures' own rule
that a curve of fewer than three marked points is drawn without a line (in the
legend too), while a reference line without markers keeps its line. Exit 77
without matplotlib."""
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


def percent(thin):
    def draw():
        fig, ax = rfig.subplots(height=2.0)
        ax[0][0].plot([0, 1], [0, 1], label="bound 25\u2009%" if thin else "bound 25%")
        ax[0][0].set_xlabel("capacity (% of working set)")  # a unit, not a percentage
        ax[0][0].legend()
        return fig
    return draw


def lone_points_case():
    """(ok, text): rkv.figures.lone_points on two short curves, a long one and a
    reference line."""
    rfig.setup()
    fig, ax = rfig.subplots(height=2.0)
    a = ax[0][0]
    two = a.plot([0, 1], [1, 2], marker="o", label="ours (2 points)")[0]
    eleven = a.plot(range(11), range(11), marker="o", label="write-up (11 points)")[0]
    ref = a.axhline(1.5, ls=":", label="bound")
    bare = a.plot([0, 1], [2, 0], label="joined bounds")[0]  # no markers: a drawn segment
    a.legend()
    cut = rfig.lone_points(fig)
    lg = a.get_legend()
    handles = dict(zip([t.get_text() for t in lg.get_texts()],
                       getattr(lg, "legend_handles", None) or getattr(lg, "legendHandles")))
    plt.close(fig)
    ok = (cut == ["ours (2 points)"] and two.get_linestyle() == "None"
          and eleven.get_linestyle() == "-" and ref.get_linestyle() == ":" and bare.get_linestyle() == "-"
          and handles["ours (2 points)"].get_linestyle() == "None"
          and handles["write-up (11 points)"].get_linestyle() == "-")
    return ok, f"cut {cut}; lines: 2 points {two.get_linestyle()!r}, 11 points {eleven.get_linestyle()!r}, " \
               f"reference {ref.get_linestyle()!r}, unmarked {bare.get_linestyle()!r}"


def main():
    failures = 0
    ok, text = lone_points_case()
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} lone_points: a curve of two marked points loses its line: {text}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, draw, placed, meta, want_ok, why in [
                ("good", good, "\\linewidth", True, True, "drawn at the text width with rkv.figures"),
                ("half", lambda: rfig.subplots(height=1.5, width=0.5)[0], "0.5\\linewidth", True, True,
                 "drawn at half the text width, placed at half"),
                ("wide", wide, "\\linewidth", True, False, "16 in wide placed at the text width"),
                ("legend", tiny_legend, "\\linewidth", True, False, "a 5 pt legend"),
                ("offset", offset, "\\linewidth", True, False, "an offset label"),
                ("percent", percent(False), "\\linewidth", True, False, "25% in a legend"),
                ("thinpercent", percent(True), "\\linewidth", True, True,
                 "25\\u2009% in a legend, % as a unit"),
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
