"""Reference results: the numbers a bundle must reproduce, each with its tolerance.

experiments/reference/SCALE.json holds, per experiment, the rows' numbers that do
not depend on the machine, keyed by the row's configuration:

    {"scale": "tiny", "commit": ..., "rows": [
       {"experiment": "routing", "variant": "generated" | "mooncake" | null,
        "key": {"config": {...the row's config...}, "backend": "sim", ...},
        "numbers": {"hit_rate": {"value": 0.6564, "tolerance": {"abs": 1e-09}}, ...}},
       ...]}                                        (one row per line)

Which fields, and how tight (TOLERANCE below), follows from what decides them:

- counts and hit rates of a deterministic replay (cache-sim, Belady, the sim backend
  with --fixed-clock): equal up to float printing (abs 1e-9);
- the same on the sim backend with its clock fed by measured scheduler CPU time
  (no --fixed-clock): request order may shift, so abs 0.02 on rates, rel 5 % on
  modelled times;
- the cpu backend: hit rates abs 0.02 (batches form by wall-clock timing); its
  times are wall-clock and never compared (they are reported, with their spread);
- wall-clock and CPU-time fields of any row: not compared.

`variant` separates the Mooncake experiments' two routes: rows made from the real
traces ("mooncake") and from the generated stand-in ("generated"); a run compares
the variant it took and lists the other as not run here.
"""
import json
import math
import os

from . import core

# disaggregation's rows: the summary of one --prefill/--decode (or colocated)
# run on the fixed clock.
DISAGG_EXACT = ["hit_rate", "errors", "requests", "cached_tokens"]
DISAGG_MODEL = ["requests_per_s", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "goodput"]

# Per experiment: fields that are counts or rates ("exact" class) and fields that
# are modelled times or throughputs ("model" class). Everything else is not compared.
FIELDS = {
    "tree_evolution": {"exact": ["as_in_figure", "hit_rate", "matched_tokens", "prompt_tokens"]},
    "hit_rate_sweep": {"exact": ["hit_rate", "cached_tokens", "cached_per_request_max"],
                       "model": ["requests_per_s"]},
    "long_prefill": {"exact": ["hit_rate", "errors"], "model": ["requests_per_s", "ttft_mean", "tpot_mean"]},
    "overhead": {"exact": ["hit_rate", "cached_tokens", "hash_computations"]},
    "sim_calibration": {"exact": [], "model": ["sim_ms", "sim_requests_per_s"]},
    "tiered_capacity": {"exact": ["hit_rate", "host_hit_tokens", "disk_hit_tokens"],
                        "model": ["prefill_seconds", "tier_load_seconds"]},
    "routing": {"exact": ["hit_rate"], "model": ["output_tokens_per_s", "ttft_p99"]},
    "real_trace_capacity": {"exact": ["hit_rate", "matched_tokens"]},
    "eviction_policy": {"exact": ["hit_rate", "matched_tokens"], "model": ["requests_per_s"]},
    "page_size": {"exact": ["hit_rate", "matched_tokens", "nodes"]},
    "sglang_ablations": {"exact": ["hit_rate", "optimal_hit_rate"], "model": ["requests_per_s"]},
    "remote_tier": {"exact": ["hit_rate"], "model": ["model_seconds"]},
    "serve_router": {"exact": []},
    # Rows on the sim's fixed clock only for modelled numbers ("deterministic"):
    # mechanisms' trie_measured rows run on measured CPU time, which a sanitizer
    # build or a loaded machine moves by more than any fixed tolerance.
    "sim_profiles": {"exact": ["hit_rate", "steps", "errors", "steps_h0", "steps_h1"],
                     "model": ["requests_per_s", "model_seconds", "speedup", "ttft_mean",
                               "tpot_mean"], "deterministic": True},
    "mechanisms": {"exact": ["hit_rate", "steps", "errors", "hit_rate_h1", "steps_h0", "steps_h1"],
                   "model": ["requests_per_s", "model_seconds", "gain"], "deterministic": True},
    "disaggregation": {"exact": DISAGG_EXACT, "model": DISAGG_MODEL, "deterministic": True},
    # The replay's counts (a seeded trace); its times are wall and thread CPU.
    "sglang_dropin": {"exact": ["hit_tokens", "evict_calls", "matched_first_50"]},
}


def deterministic(row):
    """Whether the row's numbers are a pure function of its inputs."""
    cmd = row.get("command") or ""
    return (row.get("backend") in ("cache-sim", "python", "none")
            or " cache-sim " in f" {cmd} " or "--fixed-clock" in cmd
            or "sim_step_bench" in cmd or "overhead_bench" in cmd)


def tolerance(row, cls):
    """{"abs": x} or {"rel": x}; None: not compared."""
    wall = row.get("backend") in ("cpu", "cuda")
    if cls == "exact":
        return {"abs": 1e-9} if deterministic(row) else {"abs": 0.02}
    if wall:
        return None
    return {"rel": 1e-6} if deterministic(row) else {"rel": 0.05}


# The fields that tell apart the rows of one configuration, for experiments
# whose rows share their config (added to the key only for these, so the keys
# of the references recorded before stay as they were).
KEY_FIELDS = {
    "sim_profiles": ("kind", "profile", "cache", "schedule", "hit_rate_target", "pass",
                     "variant", "host_factor"),
    "mechanisms": ("kind", "cache", "schedule", "hit_rate_target", "overhead_label", "token_ns",
                   "step_us", "sweep", "factor"),
    "disaggregation": ("workload", "rate", "arm", "mode"),
    "sglang_dropin": ("cache", "phase"),
}


def key(row):
    """A row's identity: its configuration, backend and (for experiments with
    several kinds of row) its record kind and measure, and KEY_FIELDS."""
    cfg = dict(row.get("config") or {})
    cfg.pop("scale", None)
    k = {"config": cfg, "backend": row.get("backend"), "record": row.get("record"),
         "measure": row.get("measure")}
    for f in KEY_FIELDS.get(row.get("experiment"), ()):
        k[f] = row.get(f)
    return k


def key_text(k):
    return json.dumps(k, sort_keys=True)


def variant(manifest, name):
    o = (manifest.get("experiments") or {}).get(name) or {}
    if name not in ("real_trace_capacity", "eviction_policy", "page_size"):
        return None
    return "generated" if o.get("trace") == "synthetic" else "mooncake"


def bundle_rows(bundle, name):
    path = os.path.join(bundle, name, name + ".jsonl")
    return core.read_jsonl(path) if os.path.exists(path) else []


def rows_of(bundle):
    """The reference rows a bundle holds (for --record)."""
    with open(os.path.join(bundle, "manifest.json")) as f:
        m = json.load(f)
    out = []
    for name, spec in FIELDS.items():
        if (m["experiments"].get(name) or {}).get("state") != "ok":
            continue
        for r in bundle_rows(bundle, name):
            nums = {}
            for cls in ("exact", "model"):
                for field in spec.get(cls, []):
                    v = r.get(field)
                    if isinstance(v, bool) and cls != "exact":
                        continue
                    if not isinstance(v, (bool, int, float)) or v != v:
                        continue
                    if cls == "model" and spec.get("deterministic") and not deterministic(r):
                        continue
                    tol = tolerance(r, cls)
                    if tol is not None:
                        nums[field] = {"value": v, "tolerance": tol}
            if nums:
                out.append({"experiment": name, "variant": variant(m, name), "key": key(r),
                            "numbers": nums})
    return m, out


def record(bundle, path):
    """Writes (or merges into) the reference file: rows of another variant
    already there are kept, those of the variants this bundle ran are replaced."""
    m, rows = rows_of(bundle)
    old = {"rows": []}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    ran = {(r["experiment"], r["variant"]) for r in rows}
    kept = [r for r in old["rows"] if (r["experiment"], r["variant"]) not in ran]
    order = list(FIELDS)
    rows = sorted(kept + rows, key=lambda r: (order.index(r["experiment"]), str(r["variant"]),
                                              key_text(r["key"])))
    head = {"scale": m["scale"], "commit": m["commit"], "build_type": m.get("build_type"),
            "host": m.get("host"), "date": m.get("date"),
            "made_with": f"experiments/reproduce --scale {m['scale']} --record"}
    text = json.dumps(head, sort_keys=True)[:-1] + ', "rows": [\n'
    text += ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]}\n"
    with open(path, "w") as f:
        f.write(text)
    return dict(head, rows=rows)


def within(ref, got, tol):
    if isinstance(ref, bool) or isinstance(got, bool):
        return ref == got
    if got is None or (isinstance(got, float) and math.isnan(got)):
        return False
    if "abs" in tol:
        return abs(got - ref) <= tol["abs"]
    return abs(got - ref) <= tol["rel"] * max(abs(ref), 1e-12)


def compare(bundle, ref):
    """Per experiment: (state, reproduced, total, first misses). state: reproduced,
    NOT reproduced, skipped (with why), not run here (the other variant)."""
    with open(os.path.join(bundle, "manifest.json")) as f:
        m = json.load(f)
    out = {}
    names = sorted({r["experiment"] for r in ref["rows"]},
                   key=lambda x: list(FIELDS).index(x) if x in FIELDS else 99)
    for name in names:
        o = m["experiments"].get(name) or {}
        refs = [r for r in ref["rows"] if r["experiment"] == name]
        total = sum(len(r["numbers"]) for r in refs)
        if o.get("state") in (None, "skipped"):
            out[name] = ("skipped", 0, total, [o.get("why") or "not run"])
            continue
        v = variant(m, name)
        mine = [r for r in refs if r["variant"] == v]
        if not mine:
            out[name] = ("not run here", 0, total,
                         [f"the reference has the {refs[0]['variant']} variant, this run the {v}"])
            continue
        rows = {}
        for r in bundle_rows(bundle, name):
            rows.setdefault(key_text(key(r)), r)
        ok, n, misses = 0, 0, []
        for ref_row in mine:
            r = rows.get(key_text(ref_row["key"]))
            for field, want in sorted(ref_row["numbers"].items()):
                n += 1
                got = r.get(field) if r else None
                if r is not None and within(want["value"], got, want["tolerance"]):
                    ok += 1
                    continue
                cfg = ref_row["key"]["config"]
                short = ", ".join(f"{k}={cfg[k]}" for k in list(cfg)[:4])
                misses.append(f"{field} at {short}: reference {want['value']}, got "
                              f"{'no such row' if r is None else got} (tolerance {want['tolerance']})")
        out[name] = ("reproduced" if ok == n else "NOT reproduced", ok, n, misses)
    return out
