"""Reference results: the numbers a bundle must reproduce, each with its tolerance.

experiments/reference/SCALE.json holds, per experiment, the rows' numbers that do
not depend on the machine, keyed by the row's configuration:

    {"scale": "tiny", "commit": ..., "numbers": [
       {"experiment": "routing", "variant": "generated" | "mooncake" | null,
        "config": {...the row's config...}, "backend": "sim", "field": "hit_rate",
        "value": 0.6564, "tolerance": {"abs": 1e-09}}, ...]}

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

# Per experiment: fields that are counts or rates ("exact" class) and fields that
# are modelled times or throughputs ("model" class). Everything else is not compared.
FIELDS = {
    "tree_evolution": {"exact": ["as_in_figure", "hit_rate", "matched_tokens", "prompt_tokens"]},
    "hit_rate_sweep": {"exact": ["hit_rate", "cached_tokens", "cached_per_request_max"],
                       "model": ["requests_per_s"]},
    "long_prefill": {"exact": ["hit_rate", "errors"], "model": ["ttft_mean", "tpot_mean"]},
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


def key(row):
    """A row's identity: its configuration, backend and (for records inside a row
    such as tree_evolution's) its record kind."""
    cfg = dict(row.get("config") or {})
    cfg.pop("scale", None)
    return json.dumps({"config": cfg, "backend": row.get("backend"), "record": row.get("record"),
                       "measure": row.get("measure")}, sort_keys=True)


def variant(manifest, name):
    o = (manifest.get("experiments") or {}).get(name) or {}
    if name not in ("real_trace_capacity", "eviction_policy", "page_size"):
        return None
    return "generated" if o.get("trace") == "synthetic" else "mooncake"


def bundle_rows(bundle, name):
    path = os.path.join(bundle, name, name + ".jsonl")
    return core.read_jsonl(path) if os.path.exists(path) else []


def numbers_of(bundle):
    """The reference numbers a bundle holds (for --record)."""
    with open(os.path.join(bundle, "manifest.json")) as f:
        m = json.load(f)
    out = []
    for name, spec in FIELDS.items():
        if (m["experiments"].get(name) or {}).get("state") != "ok":
            continue
        for r in bundle_rows(bundle, name):
            for cls in ("exact", "model"):
                for field in spec.get(cls, []):
                    v = r.get(field)
                    if isinstance(v, bool) and cls != "exact":
                        continue
                    if not isinstance(v, (bool, int, float)) or v != v:
                        continue
                    tol = tolerance(r, cls)
                    if tol is None:
                        continue
                    out.append({"experiment": name, "variant": variant(m, name),
                                "key": key(r), "field": field, "value": v, "tolerance": tol})
    return m, out


def record(bundle, path):
    """Writes (or merges into) the reference file: numbers of another variant
    already there are kept, those of the variants this bundle ran are replaced."""
    m, nums = numbers_of(bundle)
    old = {"numbers": []}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    ran = {(n["experiment"], n["variant"]) for n in nums}
    kept = [n for n in old["numbers"] if (n["experiment"], n["variant"]) not in ran]
    ref = {"scale": m["scale"], "commit": m["commit"], "build_type": m.get("build_type"),
           "host": m.get("host"), "date": m.get("date"),
           "made_with": f"experiments/reproduce --scale {m['scale']} --record",
           "numbers": sorted(kept + nums, key=lambda n: (n["experiment"], str(n["variant"]),
                                                         n["key"], n["field"]))}
    with open(path, "w") as f:
        json.dump(ref, f, indent=0, sort_keys=True)
        f.write("\n")
    return ref


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
    names = sorted({n["experiment"] for n in ref["numbers"]},
                   key=lambda x: list(FIELDS).index(x) if x in FIELDS else 99)
    for name in names:
        o = m["experiments"].get(name) or {}
        nums = [n for n in ref["numbers"] if n["experiment"] == name]
        if o.get("state") in (None, "skipped"):
            out[name] = ("skipped", 0, len(nums), [o.get("why") or "not run"])
            continue
        v = variant(m, name)
        mine = [n for n in nums if n["variant"] == v]
        if not mine:
            out[name] = ("not run here", 0, len(nums),
                         [f"the reference has the {nums[0]['variant']} variant, this run the {v}"])
            continue
        rows = {}
        for r in bundle_rows(bundle, name):
            rows.setdefault(key(r), r)
        ok, misses = 0, []
        for n in mine:
            r = rows.get(n["key"])
            got = r.get(n["field"]) if r else None
            if r is not None and within(n["value"], got, n["tolerance"]):
                ok += 1
            else:
                cfg = json.loads(n["key"])["config"]
                short = ", ".join(f"{k}={cfg[k]}" for k in list(cfg)[:4])
                misses.append(f"{n['field']} at {short}: reference {n['value']}, got "
                              f"{'no such row' if r is None else got} (tolerance {n['tolerance']})")
        out[name] = ("reproduced" if ok == len(mine) else "NOT reproduced", ok, len(mine), misses)
    return out
