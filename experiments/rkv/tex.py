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
        if "e" in s and abs(v) >= 1:
            # More integer digits than significant ones: the rounded integer
            # (9168.7 -> 9\,169), not "9168.700" from a fixed-point fallback.
            return fmt(int(round(v)), digits)
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


def _exact(v):
    """A configured number exactly as configured (thin-space thousands)."""
    if isinstance(v, int):
        return fmt(v)
    s = repr(v)
    return s if "e" in s else s.replace("-", "$-$")


def _flatten(prefix, v, out):
    if isinstance(v, dict):
        keys = list(v)
        out[prefix + ".keys"] = ", ".join(str(k) for k in keys)
        for i, k in enumerate(keys):
            out[f"{prefix}.keys.{i}"] = str(k)
            _flatten(f"{prefix}.{k}", v[k], out)
    elif isinstance(v, list):
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            out[prefix] = ", ".join(_exact(x) for x in v)
            if v:
                out[prefix + ".first"], out[prefix + ".last"] = _exact(v[0]), _exact(v[-1])
        for i, x in enumerate(v):
            _flatten(f"{prefix}.{i}", x, out)
        # A command line ["gen", "--prompt-len", "1000", ...]: each numeric
        # option value under its option's name.
        for opt, val in zip(v, v[1:]):
            if isinstance(opt, str) and opt.startswith("--") and isinstance(val, str):
                try:
                    num = float(val)
                except ValueError:
                    continue
                out[f"{prefix}.{opt[2:]}"] = _exact(int(num) if num.is_integer() and "." not in val else num)
                if 0 < num < 1:
                    out[f"{prefix}.{opt[2:]}.pct"] = pct(num, 0)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        out[prefix] = _exact(v)
        if isinstance(v, float) and 0 < abs(v) < 1:
            out[prefix + ".pct"] = pct(v, 0) if (100 * v).is_integer() else pct(v)


def config_numbers(path):
    """Every number of every experiments/*/config.json as a macro:
    \\rkv{cfg/NAME/a.b.c} for config["a"]["b"]["c"] (lists also as .first,
    .last and .i; fractions also as .pct; a dict's keys as .keys): the
    paper's descriptions of a workload quote its configuration, not a copy."""
    import json
    import os
    from .core import EXPERIMENTS
    with open(path, "w") as f:
        f.write("% generated from experiments/*/config.json by experiments/rkv/tex.py\n")
        for name in sorted(os.listdir(EXPERIMENTS)):
            cfg = os.path.join(EXPERIMENTS, name, "config.json")
            if not os.path.isfile(cfg):
                continue
            with open(cfg) as g:
                flat = {}
                _flatten("", json.load(g), flat)
            for k, v in flat.items():
                f.write(f"\\rkvdef{{cfg/{name}/{k.lstrip('.')}}}{{{v}}}\n")


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "--config-numbers":
        sys.exit("usage: python3 -m rkv.tex --config-numbers OUT.tex")
    config_numbers(sys.argv[2])
