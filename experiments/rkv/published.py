"""The seed write-up's tables as data (experiments/NAME/published.json).

hit_rate_sweep/published.json holds its Table 1 (requests/s per hit rate and
configuration), long_prefill/published.json its Table 2 (requests/s per pass and
output length), each with the source, what the document states and what it does
not, and the seed's own row and column labels mapped to our cache kinds and
schedules:

    from rkv import published
    pub = published.load("hit_rate_sweep")
    published.value(pub, 100, "prefix_caching-sync")       # 98.84
    published.column_map(pub)["yoco-async-2"]             # {"cache_label": "trie-p1", "schedule": "overlap", ...}
    published.check(pub, cfg)                              # problems (strings); [] when sound

Python readers take the published numbers from here, never from a copy.
"""
import json
import os

from .core import EXPERIMENTS

# The number of values each table holds (rows x columns), as the write-up prints them.
SHAPES = {"hit_rate_sweep": (11, 8), "long_prefill": (8, 7)}


def path(name):
    return os.path.join(EXPERIMENTS, name, "published.json")


def load(name):
    with open(path(name), encoding="utf-8") as f:
        return json.load(f)


def value(pub, row, col):
    """The published value at row label `row`, column label `col`."""
    return pub["values"][pub["rows"].index(row)][pub["columns"].index(col)]


def column_map(pub):
    return pub.get("column_map") or {}


def row_map(pub):
    return pub.get("row_map") or {}


def check(pub, cfg, name):
    """Problems with a published table (strings; [] when sound): its shape and
    count, and that every label maps to a cache kind (and schedule) the
    experiment's config.json defines."""
    bad = []
    nrows, ncols = SHAPES[name]
    vals = pub.get("values") or []
    if len(pub.get("rows") or []) != nrows or len(pub.get("columns") or []) != ncols:
        bad.append(f"{name}: {len(pub.get('rows') or [])} x {len(pub.get('columns') or [])} labels, "
                   f"expected {nrows} x {ncols}")
    if len(vals) != nrows or any(len(r) != ncols for r in vals):
        bad.append(f"{name}: values are not {nrows} rows of {ncols}")
    flat = [v for r in vals for v in r]
    if len(flat) != nrows * ncols:
        bad.append(f"{name}: {len(flat)} values, expected {nrows * ncols}")
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0 for v in flat):
        bad.append(f"{name}: a value is not a positive number")
    for k in ("url", "title", "cite"):
        if not (pub.get("source") or {}).get(k):
            bad.append(f"{name}: source.{k} missing")
    if not pub.get("not_stated"):
        bad.append(f"{name}: what the document does not state is missing")
    labels = {c["label"]: c for c in cfg["caches"]}
    scheds = set(cfg.get("schedules") or [cfg.get("engine", {}).get("schedule")])
    kinds = pub.get("kinds") or {}
    # Table 1's columns and Table 2's rows are the labelled axis.
    maps = column_map(pub) if name == "hit_rate_sweep" else row_map(pub)
    axis = pub["columns"] if name == "hit_rate_sweep" else pub["rows"]
    if set(maps) != set(axis):
        bad.append(f"{name}: labels without a mapping: {sorted(set(axis) ^ set(maps))}")
    for lab, m in maps.items():
        c = labels.get(m.get("cache_label"))
        if c is None:
            bad.append(f"{name}: {lab} maps to {m.get('cache_label')}, not a cache of config.json")
            continue
        kind = kinds.get(m.get("kind"))
        if kind is None or kind.get("cache_label") != m["cache_label"]:
            bad.append(f"{name}: {lab}'s kind {m.get('kind')} does not map to {m['cache_label']}")
        elif c["cache"] != kind.get("cache"):
            bad.append(f"{name}: {lab} maps to cache {c['cache']}, its kind says {kind.get('cache')}")
        elif "page_size" in kind and c.get("page_size", cfg["engine"]["page_size"]) != kind["page_size"]:
            bad.append(f"{name}: {lab} maps to page size {c.get('page_size', cfg['engine']['page_size'])}, "
                       f"its kind says {kind['page_size']}")
        if "schedule" in m and m["schedule"] not in scheds:
            bad.append(f"{name}: {lab} maps to schedule {m['schedule']}, not one of {sorted(scheds)}")
        if "pass" in m and not 1 <= m["pass"] <= cfg["workload"].get("passes", 1):
            bad.append(f"{name}: {lab} maps to pass {m['pass']}, outside the config's passes")
    return bad


def sweep_points():
    """The four points of Table 1 that experiments/mechanisms explains: no
    caching and the trie at 0 %, block hashing at 100 % with sync and async
    scheduling (requests/s)."""
    pub = load("hit_rate_sweep")
    return {"none_h0": value(pub, 0, "naïve-sync"), "trie_h0": value(pub, 0, "yoco-sync"),
            "hash_h1_sync": value(pub, 100, "prefix_caching-sync"),
            "hash_h1_overlap": value(pub, 100, "prefix_caching-async-2")}
