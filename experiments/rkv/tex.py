"""The paper's numbers, generated: a notebook writes them next to its figures
(notebooks/figures/, copied to paper/generated/ by scripts/build_paper.sh) and
the paper reads them, so no number in paper/ is typed by hand.

    numbers(path, "routing", {"mt-hit-rr-max": 0.374, ...})
        -> \\rkvdef{routing/mt-hit-rr-max}{0.374} per key; prose writes
           \\rkv{routing/mt-hit-rr-max} (main.tex shows ?? until it is built)
    tabular(path, "llrr", header, rows) -> a booktabs tabular
"""
import math


def fmt(v, digits=3):
    """A number as the paper prints it: integers with thin-space thousands,
    fractions with `digits` significant digits."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "--"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 100):
        s = f"{int(v):,}".replace(",", "\\,")
        return s.replace("-", "$-$")
    if isinstance(v, float):
        s = f"{v:.{digits}g}" if abs(v) >= 1 else f"{v:.{digits}f}".rstrip("0").rstrip(".") or "0"
        if "e" in s:
            s = f"{v:.{digits}f}"
        return s.replace("-", "$-$")
    return str(v)


def pct(v, digits=1):
    """A fraction as a percentage with a thin space: 0.275 -> 27.5\\,\\%."""
    return "--" if v is None else f"{100 * v:.{digits}f}\\,\\%".replace("-", "$-$")


def numbers(path, prefix, values):
    with open(path, "w") as f:
        f.write(f"% generated from experiments/{prefix}/results by notebooks/{prefix}.ipynb\n")
        for k, v in values.items():
            f.write(f"\\rkvdef{{{prefix}/{k}}}{{{v if isinstance(v, str) else fmt(v)}}}\n")


def tabular(path, cols, header, rows, groups=()):
    """rows: lists of cells (str or numbers); groups: row indices before which
    a \\midrule goes."""
    out = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule", " & ".join(header) + " \\\\", "\\midrule"]
    for i, r in enumerate(rows):
        if i in groups:
            out.append("\\midrule")
        out.append(" & ".join(c if isinstance(c, str) else fmt(c) for c in r) + " \\\\")
    out += ["\\bottomrule", "\\end{tabular}"]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
