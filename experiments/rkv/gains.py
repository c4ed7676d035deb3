"""One measure per claim: the full-hit gain, defined once per baseline and set
beside the write-up's under the same definition.

A "full-hit gain" means three different quotients depending on the baseline:

    over-none-h1   hash at h = 1 over no cache at h = 1 (same workload, nothing reused by none)
    over-none-h0   hash at h = 1 over no cache at h = 0 (the uncached engine on unshared prompts)
    over-self-h0   hash at h = 1 over hash at h = 0 (what sharing adds to one engine)

all synchronous, in requests per second. The write-up's values come from its
first table (experiments/hit_rate_sweep/published.json: prefix_caching-sync and
naïve-sync); ours from every experiment whose simulated rows hold the four points
(hash and none at h = 0 and 1, sync, no injected cost), one row per experiment,
profile and prompt count, since the quotient depends on the prompt count (filling
and draining the batch weigh more in a short run).

    python3 -m rkv.gains OUT_DIR RESULTS_DIR...
        -> OUT_DIR/gains_numbers.tex (\\rkvdef{gains/...}) and OUT_DIR/gains_table.tex
"""
import json
import os
import sys

from . import published
from .bundle import rows_of
from .tex import fmt, tabular

DEFS = {
    "over-none-h1": ("cached", 1.0, "none", 1.0),
    "over-none-h0": ("cached", 1.0, "none", 0.0),
    "over-self-h0": ("cached", 1.0, "cached", 0.0),
}
# The cache that stands for the write-up's prefix_caching: hashed blocks (xxh3)
# where an experiment runs them, else the radix tree (sim_profiles runs only it).
CACHED = ("hash-xxh3", "hash", "radix")
# Each definition in words (the table's header and the prose macro \rkv{gains/def-NAME}).
WORDS = {
    "over-none-h1": "the cache at $h = 1$ over no cache at $h = 1$",
    "over-none-h0": "the cache at $h = 1$ over no cache at $h = 0$",
    "over-self-h0": "the cache at $h = 1$ over itself at $h = 0$",
}
# The write-up's labels of the same caches (published.json's columns).
SEED = {"cached": "prefix_caching-sync", "none": "naïve-sync"}


def ratio(v):
    """A gain as every gain in the table prints: two decimals (4.70, not 4.7 beside 3.746)."""
    return f"{v:.2f}"


def _hit(r):
    for k in ("target_hit_rate", "hit_rate_target"):
        if r.get(k) is not None:
            return round(float(r[k]), 6)
    return None


def _plain(r):
    """A sync row of the sim backend with no injected cost, override or variant."""
    if not (r.get("sim_profile_hash") or r.get("backend") == "sim"):
        return False
    if r.get("schedule") not in (None, "sync"):
        return False
    if r.get("pass") not in (None, 1):
        return False
    return not any(r.get(k) for k in ("override", "variant", "factor", "inject", "sweep"))


def ours(folders):
    """{(experiment, profile, prompts, cache): {name: value}} for every group
    of rows holding all four points."""
    pts = {}
    for p, r in rows_of(folders):
        if not _plain(r):
            continue
        cache = r.get("cache_label") or r.get("cache")
        if (cache not in CACHED and cache != "none") or r.get("requests_per_s") is None:
            continue
        conf = r.get("config") if isinstance(r.get("config"), dict) else {}
        n = r.get("num_prompts") or conf.get("num") or conf.get("num_prompts")
        key = (os.path.basename(p)[:-len(".jsonl")], str(r.get("sim_profile") or r.get("gpu")), n)
        pts.setdefault(key, {})[(cache, _hit(r))] = r["requests_per_s"]
    out = {}
    for key, got in sorted(pts.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        for cached in CACHED:
            vals = {}
            for name, (c1, h1, c0, h0) in DEFS.items():
                a = got.get((cached if c1 == "cached" else c1, h1))
                b = got.get((cached if c0 == "cached" else c0, h0))
                if a and b:
                    vals[name] = a / b
            if len(vals) == len(DEFS):
                out[key + (cached,)] = vals
                break
    return out


def theirs():
    pub = published.load("hit_rate_sweep")
    vals = {}
    for name, (c1, h1, c0, h0) in DEFS.items():
        a = published.value(pub, int(100 * h1), SEED[c1])
        b = published.value(pub, int(100 * h0), SEED[c0])
        vals[name] = a / b
    return vals, pub["states"]["num_prompts"]


def write(out_dir, folders):
    mine = ours(folders)
    wu, wu_n = theirs()
    nums = {f"def-{k}": v for k, v in WORDS.items()}
    nums.update({f"wu-{k}": ratio(v) for k, v in wu.items()})
    nums["wu-prompts"] = wu_n
    rows = [["write-up", "\\texttt{prefix\\_caching}", "not stated", fmt(wu_n)]
            + [ratio(wu[k]) for k in DEFS]]
    by_count = {}
    for (exp, prof, n, cached), vals in mine.items():
        rows.append([f"\\texttt{{{exp.replace('_', chr(92) + '_')}}}", f"\\texttt{{{cached}}}",
                     f"\\texttt{{{prof}}}", fmt(n)] + [ratio(vals[k]) for k in DEFS])
        # One macro per experiment, profile and prompt count: each names one number.
        tag = exp if prof.split("@")[0] == prof else f"{exp}-{prof.split('@')[1]}"
        for k, v in vals.items():
            nums[f"{tag}-n{n}-{k}"] = ratio(v)
        by_count.setdefault((exp, prof, cached), []).append((n, vals["over-none-h0"]))
    nums["prompt-sentence"] = prompt_sentence(by_count)
    from .tex import numbers
    numbers(os.path.join(out_dir, "gains_numbers.tex"), "gains", nums)
    tabular(os.path.join(out_dir, "gains_table.tex"), "llllrrr",
            ["source", "cache", "profile", "prompts", "none, $h{=}1$", "none, $h{=}0$",
             "itself, $h{=}0$"], rows, groups=(1,))
    return mine, wu


def prompt_sentence(by_count):
    """The gain over no cache at h = 0 against the prompt count, for the first
    experiment and profile with more than one count (sim_profiles' own profile)."""
    for (exp, prof, cached), pts in by_count.items():
        if len(pts) < 2:
            continue
        pts = sorted(pts, key=lambda p: p[0])
        listed = [f"{ratio(g)} at {fmt(n)}" for n, g in pts]
        seq = ", ".join(listed[:-1]) + " and " + listed[-1]
        gs = [g for _, g in pts]
        trend = ("rises with the prompt count" if all(b > a for a, b in zip(gs, gs[1:])) else
                 "changes with the prompt count, not monotonically" if len(set(gs)) > 1 else
                 "does not change with the prompt count")
        return (f"\\texttt{{{cached}}} over no cache at $h = 0$ under profile \\texttt{{{prof}}} "
                f"{trend}: {seq} prompts.")
    return "no experiment of these results ran more than one prompt count."


def main(argv):
    if len(argv) < 1:
        print("usage: python3 -m rkv.gains OUT_DIR RESULTS_DIR...", file=sys.stderr)
        return 2
    mine, wu = write(argv[0], argv[1:])
    print(json.dumps({"write-up": wu, "ours": {"/".join(map(str, k)): v for k, v in mine.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
