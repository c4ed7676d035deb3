#!/usr/bin/env python3
"""The seed write-up's two tables as data (experiments/*/published.json):
Table 1 holds 11 hit rates x 8 columns = 88 values, Table 2 8 rows x 7 output
lengths = 56, every seed label maps to a cache kind (and schedule, and pass) the
experiment's config.json defines, and a broken copy (a value dropped, a label
mapped to a kind that is not there) is reported."""
import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "experiments"))
from rkv import published  # noqa: E402

fails = []


def expect(ok, text):
    print(("ok   " if ok else "FAIL ") + text)
    if not ok:
        fails.append(text)


def cfg(name):
    with open(os.path.join(ROOT, "experiments", name, "config.json")) as f:
        return json.load(f)


h, l = published.load("hit_rate_sweep"), published.load("long_prefill")
hc, lc = cfg("hit_rate_sweep"), cfg("long_prefill")
for name, pub, c, count in (("hit_rate_sweep", h, hc, 88), ("long_prefill", l, lc, 56)):
    n = sum(len(r) for r in pub["values"])
    expect(n == count, f"{name}: {n} published values (expected {count})")
    problems = published.check(pub, c, name)
    expect(not problems, f"{name}: shape and label mapping sound {problems}")

# The labels the seed writes, mapped as the paper says.
cm = published.column_map(h)
expect(h["rows"] == list(range(0, 101, 10)), f"hit_rate_sweep rows are 0..100 % in steps of 10: {h['rows']}")
for col, lab, sched in (("naïve-sync", "none", "sync"), ("disable_prefix_caching-async-2", "hash-nocache", "overlap"),
                        ("prefix_caching-sync", "hash-xxh3", "sync"), ("yoco-async-2", "trie-p1", "overlap")):
    m = cm.get(col, {})
    expect((m.get("cache_label"), m.get("schedule")) == (lab, sched), f"{col} -> {lab}, {sched}: {m}")
rm = published.row_map(l)
expect(l["columns"] == [2, 4, 8, 16, 32, 64, 128], f"long_prefill columns are the output lengths: {l['columns']}")
for row, lab, k in (("test_naive", "none", 1), ("test_disable_prefix_caching", "hash-nocache", 1),
                    ("test_prefix_caching-3", "hash-xxh3", 3), ("test_yoco-2", "trie-p1", 2)):
    m = rm.get(row, {})
    expect((m.get("cache_label"), m.get("pass")) == (lab, k), f"{row} -> {lab} pass {k}: {m}")
expect(published.value(h, 100, "prefix_caching-async-2") > published.value(h, 0, "prefix_caching-async-2"),
       "value() reads by the seed's labels")
# The mapped kinds are the ones each config defines at the stated page size.
labels = {c["label"]: c for c in hc["caches"]}
expect(labels["trie-p1"].get("page_size") == 1 and labels["trie-p1"]["cache"] == "trie", "yoco is the trie at page size 1")

# A broken copy is reported.
bad = copy.deepcopy(h)
bad["values"][3].pop()
expect(any("values" in p for p in published.check(bad, hc, "hit_rate_sweep")), "a dropped value is reported")
bad = copy.deepcopy(l)
bad["row_map"]["test_yoco-1"]["cache_label"] = "no-such-kind"
expect(published.check(bad, lc, "long_prefill") != [], "a label mapped to an undefined kind is reported")
bad = copy.deepcopy(h)
bad["column_map"]["yoco-sync"]["schedule"] = "async"
expect(published.check(bad, hc, "hit_rate_sweep") != [], "a column mapped to an undefined schedule is reported")
bad = copy.deepcopy(l)
del bad["row_map"]["test_naive"]
expect(published.check(bad, lc, "long_prefill") != [], "a label without a mapping is reported")
sys.exit(1 if fails else 0)
