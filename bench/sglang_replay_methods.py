#!/usr/bin/python3
"""Where the whole replay of bench/sglang_cache_bench.py goes, per method:
thread CPU ms inside each call the replay makes on the cache (match_prefix,
insert, evict, lock, unlock, path_device_indices, take_events), summed over
one replay, for SGLang's UnifiedRadixCache (its Rust TreeCore where it
loads) and radixkv.sglang.RadixCache. JSON Lines on stdout: one line per
replay, then one summary line per cache (medians with [min, max] over the
replays). Same trace, capacity and schedule loop as sglang_cache_bench's
replay; each replay on a fresh cache. With --c-evict, the adapter's
kv_evict_c is the part of evict spent in the extension's kv_evict call.

Run in the sglang Rust-core venv with the package importable:
  PYTHONPATH=build/python "$(scripts/sglang_rust_venv.sh)" \\
      bench/sglang_replay_methods.py --repeats 3 > after_1.jsonl

Two builds compared (any python): runs paired by the round number before
".jsonl" (rounds alternate the builds, so each ratio is taken under one
load); per method and cache the median over rounds of each side's summary
median, and of the per-round ratio after / before, with [min - max]:
  bench/sglang_replay_methods.py --before before_*.jsonl --after after_*.jsonl
"""
import argparse
import collections
import json
import os
import re
import statistics
import sys
import time
from array import array


# The cache's methods the replay calls (sglang_cache_bench's replay()).
METHODS = ("match_prefix", "lock", "evict", "path_device_indices", "insert", "unlock",
           "take_events")


def summaries(path):
    """{cache: {method: median ms}} from a run's summary lines."""
    out = {}
    try:
        with open(path) as f:
            for d in map(json.loads, filter(str.strip, f)):
                if "replays" in d:
                    out[d["cache"]] = {k: v["median"] for k, v in d["thread_cpu_ms"].items()}
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"sglang_replay_methods: {path}: {e}")
    if not out:
        sys.exit(f"sglang_replay_methods: {path}: no summary line")
    return out


def by_round(paths):
    out = {}
    for p in paths:
        m = re.search(r"(\d+)\.jsonl$", p)
        if not m:
            sys.exit(f"sglang_replay_methods: {p}: no round number before .jsonl")
        out[int(m.group(1))] = summaries(p)
    return out


def compare(before, after):
    b, a = by_round(before), by_round(after)
    rounds = sorted(set(b) & set(a))
    if not rounds:
        sys.exit("sglang_replay_methods: no round number is on both sides")

    def fmt(xs, nd):
        return f"{statistics.median(xs):.{nd}f} [{min(xs):.{nd}f} - {max(xs):.{nd}f}]"

    print(f"Rounds: {len(rounds)}; thread CPU ms per replay (each round the median of its "
          "replays); median [min - max] over the rounds.\n")
    print("| cache | method | before | after | after / before |\n|---|---|---|---|---|")
    for cache in sorted(b[rounds[0]]):
        for meth in b[rounds[0]][cache]:
            bs = [b[r][cache][meth] for r in rounds]
            as_ = [a[r][cache][meth] for r in rounds]
            ratios = [y / x for x, y in zip(bs, as_) if x > 0]
            print(f"| {cache} | {meth} | {fmt(bs, 3)} | {fmt(as_, 3)} | "
                  f"{fmt(ratios, 3) if ratios else '-'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replay-requests", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keys", choices=("scheduler", "prebuilt"), default="scheduler",
                    help="how the replay hands over keys (sglang_cache_bench's replay())")
    ap.add_argument("--c-evict", action="store_true",
                    help="also time the adapter's kv_evict C call alone (kv_evict_c); "
                    "its wrapper adds to evict and total")
    ap.add_argument("--before", nargs="+", help="runs of the first build (compare mode)")
    ap.add_argument("--after", nargs="+", help="runs of the second build (compare mode)")
    args = ap.parse_args()
    if bool(args.before) != bool(args.after):
        sys.exit("sglang_replay_methods: --before and --after go together")
    if args.before:
        return compare(args.before, args.after)
    if args.replay_requests < 1 or args.repeats < 1:
        sys.exit("sglang_replay_methods: --replay-requests and --repeats must be >= 1")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sglang_cache_bench as scb
    import torch
    from sglang.srt.mem_cache.radix_cache import RadixKey

    class MethodClock(scb.CallClock):
        """The bench's call clock (its own overhead taken off), by method."""

        def __init__(self, tree):
            super().__init__()
            self.by = collections.defaultdict(lambda: [0, 0])
            # By the name the replay calls it by: the adapter binds C calls
            # on its instance (no __name__ of the method's), and a Python
            # method's bound object is new at each read but compares equal.
            self.names = [(getattr(tree, n), n) for n in METHODS]

        def name_of(self, fn):
            return next((n for obj, n in self.names if obj == fn), getattr(fn, "__name__", "?"))

        def __call__(self, fn, *a):
            c0 = time.thread_time_ns()
            r = fn(*a)
            d = time.thread_time_ns() - c0 - self.offset_cpu
            e = self.by[self.name_of(fn)]
            e[0] += d
            e[1] += 1
            return r

    torch.set_num_threads(1)
    mreqs = scb.mooncake_like(argparse.Namespace(seed=args.seed,
                                                 replay_requests=args.replay_requests,
                                                 page_size=1))
    items = ([array("q", r) for r in mreqs] if args.keys == "scheduler" else
             [(RadixKey(array("q", r)), RadixKey(array("q", r[:-1]))) for r in mreqs])
    capacity = scb.replay_capacity(mreqs)  # as sglang_cache_bench's replay
    caches, _ = scb.make_caches(argparse.Namespace(page_size=1), sum(map(len, mreqs)))
    for name in ("sglang_unified", "radixkv_adapter"):
        build = caches[name][0]
        runs = []
        for rep in range(args.repeats):
            tree, *_ = build()
            clk = MethodClock(tree)
            inner = getattr(tree, "_kv_evict", None) if args.c_evict else None
            if inner is not None:
                # the adapter's evict without its Python around it: the C
                # call alone, as "kv_evict_c" (inside "evict", not added to
                # the total; the wrapper's own call lands in "evict")
                def kv_evict_c(*a, inner=inner, clk=clk):
                    c0 = time.thread_time_ns()
                    r = inner(*a)
                    e = clk.by["kv_evict_c"]
                    e[0] += time.thread_time_ns() - c0 - clk.offset_cpu
                    e[1] += 1
                    return r
                tree._kv_evict = kv_evict_c
            scb.replay(tree, tree.token_to_kv_pool_allocator, items, capacity,
                       insert_frees_duplicates=name == "sglang_unified", call=clk,
                       keys=args.keys)
            ms = {k: round(v[0] / 1e6, 4) for k, v in sorted(clk.by.items())}
            calls = {k: v[1] for k, v in sorted(clk.by.items())}
            total = round(sum(v for k, v in ms.items() if k != "kv_evict_c"), 4)
            runs.append(dict(ms, total=total))
            print(json.dumps({"cache": name, "replay": rep, "thread_cpu_ms": ms,
                              "total_ms": total, "calls": calls}))
        summary = {k: {"median": statistics.median(r[k] for r in runs),
                       "min": min(r[k] for r in runs), "max": max(r[k] for r in runs)}
                   for k in runs[0]}
        print(json.dumps({"cache": name, "replays": args.repeats,
                          "requests": args.replay_requests, "thread_cpu_ms": summary}))


if __name__ == "__main__":
    main()
