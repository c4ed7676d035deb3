"""The paper's numbers, generated: a notebook writes them next to its figures
(notebooks/figures/, copied to paper/generated/ by scripts/build_paper.sh) and
the paper reads them, so no number in paper/ is typed by hand.

    numbers(path, "routing", {"mt-hit-rr-max": 0.374, ...})
        -> \\rkvdef{routing/mt-hit-rr-max}{0.374} per key; prose writes
           \\rkv{routing/mt-hit-rr-max} (main.tex shows ?? until it is built)
    tabular(path, "llrr", header, rows) -> a booktabs tabular
"""
import math
import os


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


def span(values, form=fmt, sep=" to "):
    """The range of `values` as the paper prints it: "LO to HI", or one value
    where both ends print the same (never "31 to 31"). `form` prints one end."""
    lo, hi = form(min(values)), form(max(values))
    return lo if lo == hi else f"{lo}{sep}{hi}"


def numbers(path, prefix, values):
    with open(path, "w") as f:
        f.write(f"% generated from experiments/{prefix}/results by notebooks/{prefix}.ipynb\n")
        for k, v in values.items():
            f.write(f"\\rkvdef{{{prefix}/{k}}}{{{v if isinstance(v, str) else fmt(v)}}}\n")


def decimals(v, digits=3):
    """The decimals fmt shows `v` with: `digits` significant digits, trailing
    zeros dropped (8.0 -> 0, 0.11 -> 2, 0.108 -> 3)."""
    if not isinstance(v, float) or math.isnan(v) or math.isinf(v):
        return 0
    s = fmt(v, digits)
    return len(s) - s.index(".") - 1 if "." in s else 0


def fixed(v, d):
    """`v` with exactly `d` decimals, thin-space thousands, $-$ for minus."""
    s = f"{v:,.{d}f}".replace(",", "\\,")
    if s.lstrip("-").strip("0.,\\") == "":
        s = s.lstrip("-")  # -0.0004 at 3 decimals: "0.000", not "$-$0.000"
    return s.replace("-", "$-$")


def column_forms(rows, digits=3):
    """One printer per column: the float cells of a column share one number of
    decimals (the most fmt shows for any of them), so a column never shows
    0.11 beside 0.108, and one of whole numbers stays whole (8, not 8.00);
    other cells print as fmt does."""
    width = max((len(r) for r in rows), default=0)
    forms = []
    for j in range(width):
        cells = [r[j] for r in rows if j < len(r)]
        floats = [c for c in cells if isinstance(c, float) and not math.isnan(c)]
        if not floats:
            forms.append(fmt)
            continue
        d = max(decimals(c, digits) for c in floats)
        forms.append(lambda c, d=d: fixed(c, d) if isinstance(c, float) and not math.isnan(c) else fmt(c))
    return forms


def tabular(path, cols, header, rows, groups=()):
    """rows: lists of cells (str or numbers); groups: row indices before which
    a \\midrule goes. Number cells print one precision per column
    (column_forms); string cells as given, so a notebook that formats its own
    cells gives each column one format."""
    forms = column_forms(rows)
    out = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule", " & ".join(header) + " \\\\", "\\midrule"]
    for i, r in enumerate(rows):
        if i in groups:
            out.append("\\midrule")
        out.append(" & ".join(c if isinstance(c, str) else forms[j](c) for j, c in enumerate(r)) + " \\\\")
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


def _simulated(row):
    """A row whose numbers come from the sim backend's cost model (or cache-sim's
    time model): it names a profile, or says it ran on the sim backend."""
    return bool(row.get("sim_profile_hash") or row.get("sim_profile")
                or row.get("backend") == "sim" or row.get("measure") == "sim")


def profiles(path, folders):
    """The engine every simulated number assumes, per experiment, from its rows:
    \\rkvdef{NAME/sim-profile}{\\texttt{id}, hash \\texttt{12 hex digits}} and
    \\rkvdef{NAME/sim-profile-gpu}{the GPU of the profile}, which main.tex's
    \\simprofile{NAME} prints as "simulated H100 (profile ...)". A comment line
    "% simulated: NAME" lists each experiment with simulated rows, and
    "% unprofiled: NAME" each whose simulated rows name no profile hash (the
    paper check fails on it); "% traces: generated" when a Mooncake experiment
    ran on the generated stand-in. Also \\rkv{bundle/traces} and its variants:
    the Mooncake traces' name in the prose, "generated" where they were."""
    from .bundle import rows_of
    import json
    seen, unprofiled, generated = {}, set(), False
    models, longest = set(), 0
    for d in folders:
        # A bundle's manifest says whether the real traces were there (run_all
        # ran the --synthetic fallbacks when not).
        man = os.path.join(os.path.dirname(os.path.abspath(d)), "manifest.json")
        if os.path.exists(man):
            with open(man) as f:
                m = json.load(f)
            generated = generated or any(o.get("trace") == "synthetic"
                                         for o in m.get("experiments", {}).values())
    for p, r in rows_of(folders):
        name = os.path.basename(p)[:-len(".jsonl")]
        # Without a manifest: the --synthetic runs name their trace "generated"
        # (Mooncake's own second trace is called "synthetic", so that word says nothing).
        if name in MOONCAKE_EXPERIMENTS and '"generated"' in json.dumps(r):
            generated = True
        if not _simulated(r):
            continue
        conf = r.get("config") if isinstance(r.get("config"), dict) else {}
        model = r.get("model") or conf.get("model")
        if model and name != "sim_calibration":
            models.add(os.path.basename(str(model)).removesuffix(".json"))
        for k in ("prompt_len", "input_len"):
            v = r.get(k, conf.get(k))
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                longest = max(longest, int(v))
        prof = seen.setdefault(name, {})
        if r.get("sim_profile_hash"):
            # "h100,overhead_ms=0": the h100 profile with one term overridden by the
            # experiment (the row says which); the profile is the part before the comma.
            pid = str(r.get("sim_profile") or r.get("gpu")).split(",")[0]
            prof[pid] = str(r["sim_profile_hash"])
        else:
            unprofiled.add(name)
    with open(path, "w") as f:
        f.write("% generated from the experiments' rows by experiments/rkv/tex.py --profiles\n")
        for name in sorted(seen):
            f.write(f"% simulated: {name}\n")
            if name in unprofiled or not seen[name]:
                f.write(f"% unprofiled: {name}\n")
                f.write(f"\\rkvdef{{{name}/sim-profile}}{{unknown: rows without a profile hash}}\n")
                f.write(f"\\rkvdef{{{name}/sim-profile-gpu}}{{GPU}}\n")
                continue
            ids = sorted(seen[name])
            text = " and ".join(f"\\texttt{{{i.replace('_', '-')}}}, hash \\texttt{{{seen[name][i][:12]}}}"
                                for i in ids)
            gpus = sorted({i.split("@")[0].upper() for i in ids})
            f.write(f"\\rkvdef{{{name}/sim-profile}}{{{text}}}\n")
            f.write(f"\\rkvdef{{{name}/sim-profile-gpu}}{{{' and '.join(gpus)}}}\n")
        gen = generated
        f.write(f"% traces: {'generated' if gen else 'mooncake'}\n")
        # The Mooncake traces as the prose names them: a stand-in is never called Mooncake.
        words = {
            "traces": ("a generated stand-in for the Mooncake traces" if gen
                       else "the Mooncake production traces"),
            "traces-short": "the generated trace" if gen else "the Mooncake traces",
            "traces-title": "a generated trace" if gen else "real traces",
            "traces-both": "the generated trace (standing in for both)" if gen else "both Mooncake traces",
        }
        for k, v in words.items():
            f.write(f"\\rkvdef{{bundle/{k}}}{{{v}}}\n")
        for k, v in fit_facts(models, longest).items():
            f.write(f"\\rkvdef{{fit/{k}}}{{{v}}}\n")


def fit_facts(models, longest):
    """What the sim profile was fitted on (experiments/sim_calibration/config.json:
    the measured run's model, date, build, the largest step shape and the batch
    bound) beside what the experiments use it for (models and the longest
    prompt of the simulated rows): the limitations section's range of validity."""
    import json
    from .core import EXPERIMENTS
    with open(os.path.join(EXPERIMENTS, "sim_calibration", "config.json")) as f:
        cfg = json.load(f)
    steps = cfg["steps"]["configs"]
    build = cfg["source"].get("build", "")
    btype = build.split("buildtype=")[1].split(",")[0].strip() if "buildtype=" in build else "unknown"

    def tt(xs):
        return ", ".join(f"\\texttt{{{x}}}" for x in sorted(xs)) or "none"
    return {
        "model": f"\\texttt{{{cfg['model']}}}",
        "date": cfg["source"].get("date", "unknown"),
        "build": btype,
        "ndebug": "off" if btype in ("debug", "debugoptimized") else "unknown",
        # The measured engine's commit was not recorded with the 2026-11-23 run.
        "commit": cfg["source"].get("commit", "unknown"),
        "context": fmt(max(s["prefix"] + s["rows"] for s in steps)),
        "batch": fmt(cfg["bounds"]["step_max_batch"]),
        "step-shapes": fmt(len(steps)),
        "used-models": tt(models),
        "used-context": fmt(longest) if longest else "--",
    }


# Experiments that read the Mooncake traces (a generated stand-in with --synthetic).
MOONCAKE_EXPERIMENTS = ("real_trace_capacity", "eviction_policy", "page_size", "tiered_capacity",
                        "routing")


if __name__ == "__main__":
    import sys
    if len(sys.argv) >= 3 and sys.argv[1] == "--profiles":
        profiles(sys.argv[2], sys.argv[3:])
        sys.exit(0)
    if len(sys.argv) != 3 or sys.argv[1] != "--config-numbers":
        sys.exit("usage: python3 -m rkv.tex --config-numbers OUT.tex | --profiles OUT.tex RESULTS_DIR...")
    config_numbers(sys.argv[2])
