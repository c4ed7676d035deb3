#!/usr/bin/env python3
"""Every figure the paper places is drawn at the size it prints at.

For each \\nbfigure{NAME.pdf}{W} in PAPER_DIR/**/*.tex (W: \\linewidth,
\\textwidth, \\columnwidth, or a fraction of one) whose figure was built
(PAPER_DIR/generated/NAME.pdf), PAPER_DIR/generated/NAME.fig.json (written by
experiments/rkv/figures.py's save()) must say:
  - drawn W wide (within 2 %), so that nothing is scaled when placed;
  - no visible text under 7 pt once placed;
  - no offset label on any axis ("+2.017e2", "1e6");
  - no percentage printed without the paper's thin space ("25%").
A built figure without its .fig.json was drawn without rkv.figures: a failure.

Usage: figure_check.py PAPER_DIR      exit 1 with one line per problem.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments"))
from rkv.figures import MIN_FONT_PT, TEXT_WIDTH_IN, TEXT_WIDTH_MM  # noqa: E402

PLACE = re.compile(r"\\nbfigure\{([^{}]+)\}\{\s*([0-9.]*)\s*\\(linewidth|textwidth|columnwidth)\s*\}")


def geometry_ok(paper):
    """The text width figures.py assumes is the paper's (a4, 2.2 cm margins)."""
    main = os.path.join(paper, "main.tex")
    if not os.path.exists(main):
        return True
    text = open(main).read()
    return "a4paper" in text and re.search(r"margin\s*=\s*2\.2cm", text) is not None


def placements(paper):
    for dirpath, dirs, files in os.walk(paper):
        dirs[:] = [d for d in dirs if d != "generated"]
        for fn in sorted(files):
            if fn.endswith(".tex"):
                path = os.path.join(dirpath, fn)
                for no, line in enumerate(open(path), 1):
                    for m in PLACE.finditer(re.sub(r"(?<!\\)%.*", "", line)):
                        yield path, no, m.group(1), float(m.group(2) or 1.0)


def check(paper):
    problems = []
    if not geometry_ok(paper):
        problems.append(f"{paper}/main.tex: the page geometry is not the {TEXT_WIDTH_MM:g} mm text width "
                        "experiments/rkv/figures.py draws for; change both together")
    gen = os.path.join(paper, "generated")
    seen = 0
    for path, no, fig, frac in placements(paper):
        if not os.path.exists(os.path.join(gen, fig)):
            continue  # not built: the strict build reports it as "not built yet"
        seen += 1
        where = f"{path}:{no}: {fig}"
        meta_path = os.path.join(gen, os.path.splitext(fig)[0] + ".fig.json")
        if not os.path.exists(meta_path):
            problems.append(f"{where}: no {os.path.basename(meta_path)} (draw it with rkv.figures.save)")
            continue
        meta = json.load(open(meta_path))
        want = frac * TEXT_WIDTH_IN
        drawn = meta["width_in"]
        if abs(drawn - want) > 0.02 * want:
            problems.append(f"{where}: drawn {drawn:.2f} in wide, placed at {want:.2f} in "
                            f"({frac:g} of the text width): scaled by {want / drawn:.2f}")
        scale = want / drawn if drawn else 1.0
        if meta.get("min_font_pt") is not None and meta["min_font_pt"] * scale < MIN_FONT_PT - 0.05:
            small = ", ".join(f"{t['text']!r} {t['pt'] * scale:.1f} pt" for t in meta.get("small_texts", [])[:4])
            problems.append(f"{where}: text prints at {meta['min_font_pt'] * scale:.1f} pt "
                            f"(under {MIN_FONT_PT:g} pt){': ' + small if small else ''}")
        if meta.get("offset_texts"):
            problems.append(f"{where}: offset label(s) {meta['offset_texts']} on an axis")
        if meta.get("percent_texts"):
            problems.append(f"{where}: percentage(s) without the thin space the text uses "
                            f"(\"25\\u2009%\", as 25\\,\\% prints): {meta['percent_texts'][:4]}")
    return problems, seen


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    problems, seen = check(sys.argv[1])
    for p in problems:
        print(p)
    print(f"figure_check: {seen} placed figure(s) checked, {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
