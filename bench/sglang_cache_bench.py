#!/usr/bin/env python3
"""Per-call cost of SGLang's prefix caches against radixkv's, on the same keys,
in one run, through the interface SGLang's scheduler calls (match_prefix,
insert, evict with its params objects): JSON on stdout.

Caches:
  sglang_python    SGLang 0.5.23's classic RadixCache (Python)
  sglang_unified   its UnifiedRadixCache, FULL component only, with the tree
                   core SGLang selects for backend "rust" (the Rust TreeCore
                   when it loads; SGLang falls back to its Python core
                   otherwise, and the JSON names which one ran and why).
                   The Rust core needs torch 2.11-2.14: run in the venv of
                   scripts/sglang_rust_venv.sh to measure it. Its insert
                   frees the duplicate range itself (past prev_prefix_len),
                   which the classic cache leaves to its caller.
  radixkv_adapter  radixkv.sglang.RadixCache (the C tree through the package)
  *_events         sglang_python, sglang_unified and radixkv_adapter with KV cache events on
                   (enable_kv_cache_events; each call's events taken right
                   after it, as the scheduler's publisher drains them)
  radixkv_api      radixkv.Cache itself (match / alloc + insert / evict_pages):
                   the binding without SGLang's params objects and tensors

Keys (RadixKey over array('q')) and KV index tensors are built before the
timed calls, once per request, for every SGLang-interface cache alike; the
API row gets numpy int32 token arrays. Workload: a shared-prompt tree (--prompts system prompts of --prompt-len
tokens, each request one of them, cut at a random point, plus --suffix-len
tokens of its own), --requests requests. Phases per repeat, each cache fresh:
insert every request (timed per call), match every request (timed per call),
then --evicts one-token evict calls (each frees one leaf). Then a whole
replay of a Mooncake-shaped trace (--replay-requests, 512-token blocks)
through an SGLang-style schedule loop with each SGLang-interface cache
(keys handed over as SGLang's scheduler does, and made before the loop:
--replay-keys, replay()), its
capacity a third of the trace's distinct tokens, so that it evicts all along
(a third of all its tokens held every distinct one: no evictions): wall and
thread CPU time, hit tokens and evict calls (equal across caches, or the loop
is wrong), and, from a second replay per
repeat with every call on the tree timed, the wall and thread CPU time inside
the cache's own calls (in_cache_*) with their ratios: the loop's tensor work
(torch.cat, arange) is the same for every cache and hides the caches'
difference in the whole-loop times. Per phase: median
per-call wall time over --repeats repeats with the range, the thread CPU time
of the phase, and each cache's ratio to sglang_python. Real time.monotonic
clocks everywhere (this measures, it does not compare answers).

Run in the sglang Rust-core venv (scripts/sglang_rust_venv.sh; the sglang
venv of scripts/sglang_venv.sh runs it too, with the Python core in the
unified row) with the package importable:
  PYTHONPATH=build/python "$(scripts/sglang_rust_venv.sh)" \
      bench/sglang_cache_bench.py --requests 2000
"""
import argparse
import json
import random
import statistics
import sys
import time
from array import array

import torch


class Allocator:
    """The three methods SGLang's caches call on a KV allocator."""
    device = "cpu"

    def __init__(self):
        self.freed = 0

    def free(self, idx):
        self.freed += len(idx)

    def free_segment(self, idx, start_pos=0):
        self.freed += len(idx)


def workload(args):
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(32000) for _ in range(args.prompt_len)] for _ in range(args.prompts)]
    reqs = []
    for _ in range(args.requests):
        p = rng.choice(prompts)
        cut = rng.randrange(args.prompt_len // 2, args.prompt_len + 1)
        reqs.append(p[:cut] + [rng.randrange(32000) for _ in range(args.suffix_len)])
    P = args.page_size
    reqs = [r[:len(r) // P * P] for r in reqs]
    return reqs


def make_caches(args, total_tokens):
    from sglang.srt.mem_cache.base_prefix_cache import (EvictParams, InsertParams,
                                                        MatchPrefixParams)
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.radix_cache import RadixCache
    import radixkv
    from radixkv.sglang import RadixCache as Adapter

    P = args.page_size
    made = {}

    def sglang_like(factory, events=False):
        def build():
            kv = Allocator()
            tree = factory(kv)

            def insert(kv_item):
                key, v = kv_item
                tree.insert(InsertParams(key=key, value=v))
                if events:
                    tree.take_events()

            def match(kv_item):
                return tree.match_prefix(MatchPrefixParams(key=kv_item[0])).device_prefix_len

            def evict():
                n = tree.evict(EvictParams(num_tokens=1)).num_tokens_evicted
                if events:
                    tree.take_events()
                return n
            return tree, insert, match, evict
        return build

    made["sglang_python"] = (sglang_like(lambda kv: RadixCache.create_simulated(
        mock_allocator=kv, page_size=P)), {})
    info = {}
    try:
        from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
        from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
        from sglang.srt.mem_cache.unified_cache.tree_core_registry import (_rust_fallback_reason,
                                                                           select_tree_core_backend)

        def unified(kv, events=False):
            p = CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=kv,
                                page_size=P, tree_components=(ComponentType.FULL,),
                                tree_core_backend="rust", enable_kv_cache_events=events)
            return UnifiedRadixCache(p)
        probe = CacheInitParams(disable=False, req_to_token_pool=None,
                                token_to_kv_pool_allocator=Allocator(), page_size=P,
                                tree_components=(ComponentType.FULL,), tree_core_backend="rust")
        info = {"tree_core": select_tree_core_backend(probe),
                "rust_unavailable_because": _rust_fallback_reason(probe)}
        made["sglang_unified"] = (sglang_like(unified), info)
        made["sglang_unified_events"] = (sglang_like(lambda kv: unified(kv, events=True),
                                                      events=True), info)
    except ImportError as e:
        info = {"unavailable": f"UnifiedRadixCache does not import here: {e}"}

    def adapter(kv):
        return Adapter.create_simulated(mock_allocator=kv, page_size=P,
                                        num_pages=2 * (total_tokens // P + 1))
    made["radixkv_adapter"] = (sglang_like(adapter), {})
    made["sglang_python_events"] = (sglang_like(lambda kv: RadixCache.create_simulated(
        mock_allocator=kv, page_size=P, enable_kv_cache_events=True), events=True), {})

    def adapter_events(kv):
        return Adapter.create_simulated(mock_allocator=kv, page_size=P,
                                        num_pages=2 * (total_tokens // P + 1),
                                        enable_kv_cache_events=True)
    made["radixkv_adapter_events"] = (sglang_like(adapter_events, events=True), {})

    def api():
        c = radixkv.Cache("radix", P, 2 * (total_tokens // P + 1))

        def insert(toks):
            pages = c.alloc(len(toks) // P)
            pre = c.insert(toks, pages)
            if pre:
                c.free(pages[:pre // P])

        def match(toks):
            return c.match(toks).length

        def evict():
            return c.evict_pages(1)[0]
        return c, insert, match, evict
    made["radixkv_api"] = (api, {})
    return made, info


def mooncake_like(args):
    """Mooncake-shaped requests: hash ids of 512-token blocks, token j of
    block h is h * 512 + j (docs/ARCHITECTURE.md); a few popular block
    chains shared at random depths, then blocks of the request's own."""
    rng = random.Random(args.seed + 1)
    chains = [[rng.randrange(1 << 20) for _ in range(24)] for _ in range(8)]
    reqs, fresh = [], 1 << 21
    for _ in range(args.replay_requests):
        ids = rng.choice(chains)[:rng.randrange(1, 24)]
        for _ in range(rng.randrange(1, 6)):
            ids.append(fresh)
            fresh += 1
        reqs.append([h * 512 + j for h in ids for j in range(512)])
    return reqs


def replay_capacity(mreqs):
    """The replay's KV pool: a third of the trace's distinct tokens (block h's
    first token is h * 512, mooncake_like), so that it evicts all along."""
    return len({t for r in mreqs for t in r[::512]}) * 512 // 3


class CallClock:
    """Thread CPU and wall time summed over the cache's own calls in a replay
    (each tree.* call between two reads of both clocks), so the cache's share
    of the loop shows apart from the loop's tensor work, which is the same
    for every cache. The clock reads themselves cost time: `offset` is the
    median of empty intervals, taken off every call (what is left of it is a
    bias common to all caches)."""

    def __init__(self):
        self.cpu = self.wall = self.calls = 0
        empty_c, empty_w = [], []
        for _ in range(2001):
            c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            empty_w.append(time.perf_counter_ns() - w0)
            empty_c.append(time.thread_time_ns() - c0)
        self.offset_cpu, self.offset_wall = statistics.median(empty_c), statistics.median(empty_w)

    def __call__(self, fn, *a):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        r = fn(*a)
        self.wall += time.perf_counter_ns() - w0 - self.offset_wall
        self.cpu += time.thread_time_ns() - c0 - self.offset_cpu
        self.calls += 1
        return r


def plain_call(fn, *a):
    return fn(*a)


def replay(tree, kv, items, capacity, insert_frees_duplicates=False, call=plain_call,
           keys="scheduler"):
    """An SGLang-style schedule loop, one request at a time: match (all but
    the last token), lock, evict the shortfall, take slots, insert, free the
    duplicates insert found, unlock. Returns the hit tokens and the evict
    calls.

    keys: how the loop hands the caches their keys. "scheduler", as SGLang
    0.5.23's scheduler does: items are the requests' token arrays (what a
    Req holds, full_untruncated_fill_ids); match_prefix gets the request's
    whole array with a limit (Req.init_next_round_input passes it with
    key_limit = len - 1, no copy), insert a slice of it taken just before
    the call (RadixCache.checkpoint: full_untruncated_fill_ids[:up_to]).
    "prebuilt": items are (key, match key) pairs made before the loop, two
    arrays a request, both read cold by the calls.

    The classic RadixCache leaves the duplicates to its caller
    (cache_finished_req frees value[protected:prefix_len]); UnifiedRadixCache's
    insert frees value[prev_prefix_len:prefix_len] itself, so for it the loop
    passes prev_prefix_len (what its cache_finished_req passes: the locked
    prefix) and frees nothing; freeing them twice would count phantom free
    slots and the hit tokens would differ from the other caches'.

    call(fn, *args) makes every call on the tree (plain_call, or a CallClock
    that times them); params objects and tensors are built outside it."""
    from sglang.srt.mem_cache.base_prefix_cache import (EvictParams, InsertParams,
                                                        MatchPrefixParams)
    from sglang.srt.mem_cache.radix_cache import RadixKey
    used, nxt, hits, evicts = 0, 0, 0, 0
    for item in items:
        if keys == "scheduler":
            ids = item
            n = len(ids)
            short_key = RadixKey(ids, limit=n - 1)
        else:
            key, short_key = item
            n = len(key)
        mp = MatchPrefixParams(key=short_key)
        m = call(tree.match_prefix, mp)
        node, matched = m.last_device_node, m.device_prefix_len
        hits += matched
        lock = call(tree.lock, node)  # BasePrefixCache.lock: inc_lock_ref and its receipt
        need = n - matched
        free = capacity - used + kv.freed
        if need > free:
            ep = EvictParams(num_tokens=need - free)
            call(tree.evict, ep)
            evicts += 1
            free = capacity - used + kv.freed
        prefix = call(tree.path_device_indices, node)
        value = torch.cat([prefix.to(torch.int64), torch.arange(nxt, nxt + need, dtype=torch.int64)])
        nxt += need
        used += need
        if keys == "scheduler":
            key = RadixKey(ids[:n])
        ip = InsertParams(key=key, value=value, prev_prefix_len=matched)
        r = call(tree.insert, ip)
        if r.prefix_len > matched and not insert_frees_duplicates:
            kv.free_segment(value[matched:r.prefix_len])
        call(tree.unlock, lock)
        call(tree.take_events)  # [] with events off; drained per request with them on
    return hits, evicts


def run_phase(fn, items):
    per = []
    cpu0 = time.thread_time_ns()
    for x in items:
        t0 = time.perf_counter_ns()
        fn(x)
        per.append(time.perf_counter_ns() - t0)
    return statistics.median(per) / 1e3, sum(per) / len(per) / 1e3, (time.thread_time_ns() - cpu0) / 1e9


def replay_phase(args, caches, mreqs, keys):
    """The whole replay: every SGLang-interface cache, a fresh one per repeat,
    capacity a third of the trace's distinct tokens (evictions all along),
    the keys handed over as `keys` says (replay())."""
    replay_rows = {}
    if not args.replay_requests:
        return replay_rows
    from sglang.srt.mem_cache.radix_cache import RadixKey
    if keys == "scheduler":
        m_items = [array("q", r) for r in mreqs]
    else:
        m_items = [(RadixKey(array("q", r)), RadixKey(array("q", r[:-1]))) for r in mreqs]
    capacity = replay_capacity(mreqs)
    for name, (build, _info) in caches.items():
        if name == "radixkv_api":
            continue
        walls, cpus, in_wall, in_cpu, builds = [], [], [], [], []
        frees = name.startswith("sglang_unified")
        for _ in range(args.repeats):
            # The cache's construction is outside the replay's clocks (a
            # server builds it once at start) but reported: the adapter
            # allocates and touches its value table there (kv_reserve).
            b0 = time.perf_counter_ns()
            tree, _i, _m, _e = build()
            builds.append((time.perf_counter_ns() - b0) / 1e9)
            kv = tree.token_to_kv_pool_allocator
            c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            hits, evicts = replay(tree, kv, m_items, capacity, insert_frees_duplicates=frees,
                                  keys=keys)
            walls.append((time.perf_counter_ns() - w0) / 1e9)
            cpus.append((time.thread_time_ns() - c0) / 1e9)
            # Again on a fresh cache with every tree call timed (apart from
            # the run above, whose whole-loop times carry no clock reads).
            tree, _i, _m, _e = build()
            clock = CallClock()
            timed = replay(tree, tree.token_to_kv_pool_allocator, m_items, capacity,
                           insert_frees_duplicates=frees, call=clock, keys=keys)
            if timed != (hits, evicts):
                raise SystemExit(f"{name}: the timed replay (hit tokens, evict calls) {timed}, "
                                 f"the plain one {(hits, evicts)}")
            in_wall.append(clock.wall / 1e9)
            in_cpu.append(clock.cpu / 1e9)
        replay_rows[name] = {"wall_s": round(statistics.median(walls), 4),
                             "range_s": [round(min(walls), 4), round(max(walls), 4)],
                             "thread_cpu_s": round(statistics.median(cpus), 4),
                             "hit_tokens": hits,
                             "evict_calls": evicts,
                             "capacity_tokens": capacity,
                             "build_s": round(statistics.median(builds), 4),
                             "cache_calls": clock.calls,
                             "in_cache_wall_s": round(statistics.median(in_wall), 4),
                             "in_cache_range_s": [round(min(in_wall), 4), round(max(in_wall), 4)],
                             "in_cache_thread_cpu_s": round(statistics.median(in_cpu), 4)}
    base_w = replay_rows["sglang_python"]["wall_s"]
    for name, r in replay_rows.items():
        r["speedup_vs_sglang_python"] = round(base_w / r["wall_s"], 2)
        # The same ratios for the time inside the cache's calls alone.
        for field, suffix in (("in_cache_wall_s", ""), ("in_cache_thread_cpu_s", "_cpu")):
            r[f"in_cache_speedup{suffix}_vs_sglang_python"] = round(
                replay_rows["sglang_python"][field] / r[field], 2)
            if "sglang_unified" in replay_rows:
                r[f"in_cache_speedup{suffix}_vs_sglang_unified"] = round(
                    replay_rows["sglang_unified"][field] / r[field], 2)
        if "sglang_unified" in replay_rows:
            r["speedup_vs_sglang_unified"] = round(
                replay_rows["sglang_unified"]["wall_s"] / r["wall_s"], 2)
        if name.endswith("_events"):
            r["speedup_vs_sglang_python_events"] = round(
                replay_rows["sglang_python_events"]["wall_s"] / r["wall_s"], 2)
            if "sglang_unified_events" in replay_rows:
                r["speedup_vs_sglang_unified_events"] = round(
                    replay_rows["sglang_unified_events"]["wall_s"] / r["wall_s"], 2)
    return replay_rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--prompt-len", type=int, default=2000)
    ap.add_argument("--suffix-len", type=int, default=200)
    ap.add_argument("--page-size", type=int, default=1)
    ap.add_argument("--evicts", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replay-requests", type=int, default=300,
                    help="requests of the whole-replay phase (0: none)")
    ap.add_argument("--replay-keys", choices=("scheduler", "prebuilt", "both"), default="both",
                    help="how the replay hands over keys (replay()): as SGLang 0.5.23's "
                         "scheduler (JSON 'replay'), made before the loop (JSON "
                         "'replay_prebuilt'), or both")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch's intra-op threads (1: every cache's tensor work runs on "
                         "the calling thread, so its thread CPU time counts all of it)")
    args = ap.parse_args()
    torch.set_num_threads(args.torch_threads)
    reqs = workload(args)
    # Token lists as numpy for the API row: what a caller holding numpy passes.
    import numpy as np
    np_reqs = [np.asarray(r, dtype=np.int32) for r in reqs]
    total = sum(len(r) for r in reqs)
    mreqs = mooncake_like(args) if args.replay_requests else []
    # radixkv's pools hold page ids for the larger of the two workloads.
    caches, unified_info = make_caches(args, max(total, sum(len(r) for r in mreqs)))
    # The caller's data, built once outside the timed calls (as a scheduler
    # holds its requests' keys and KV indices): a RadixKey and KV indices
    # per request for the SGLang interface.
    from sglang.srt.mem_cache.radix_cache import RadixKey
    sg_items, at = [], 0
    for r in reqs:
        sg_items.append((RadixKey(array("q", r)), torch.arange(at, at + len(r), dtype=torch.int64)))
        at += len(r)
    rows = {name: {"insert": [], "match": [], "evict": [], "cpu_s": {"insert": [], "match": [], "evict": []},
                   "mean_us": {"insert": [], "match": [], "evict": []}}
            for name in caches}
    matched = {}
    for _ in range(args.repeats):
        for name, (build, _info) in caches.items():
            tree, insert, match, evict = build()
            items = np_reqs if name == "radixkv_api" else sg_items
            for phase, fn, xs in (("insert", insert, items), ("match", match, items),
                                  ("evict", lambda _: evict(), range(args.evicts))):
                med, mean, cpu = run_phase(fn, xs)
                rows[name][phase].append(med)
                rows[name]["mean_us"][phase].append(mean)
                rows[name]["cpu_s"][phase].append(cpu)
            matched[name] = sum(match(x) for x in items[:50])
    out = {"bench": "sglang_cache_bench", "args": vars(args), "tokens": total,
           "torch": torch.__version__, "unified": unified_info,
           "matched_first_50": matched, "caches": {}}
    for keys, field in (("scheduler", "replay"), ("prebuilt", "replay_prebuilt")):
        if args.replay_keys in (keys, "both"):
            out[field] = {"requests": args.replay_requests, "keys": keys,
                          "rows": replay_phase(args, caches, mreqs, keys)}
    base = rows["sglang_python"]
    for name, r in rows.items():
        o = {}
        for phase in ("insert", "match", "evict"):
            xs = r[phase]
            o[phase] = {"median_us_per_call": round(statistics.median(xs), 3),
                        "range_us": [round(min(xs), 3), round(max(xs), 3)],
                        "mean_us_per_call": round(statistics.median(r["mean_us"][phase]), 3),
                        "thread_cpu_s": round(statistics.median(r["cpu_s"][phase]), 4),
                        "speedup_vs_sglang_python": round(
                            statistics.median(base[phase]) / statistics.median(xs), 2)}
            if "sglang_unified" in rows:
                o[phase]["speedup_vs_sglang_unified"] = round(
                    statistics.median(rows["sglang_unified"][phase]) / statistics.median(xs), 2)
            if name.endswith("_events"):
                o[phase]["speedup_vs_sglang_python_events"] = round(
                    statistics.median(rows["sglang_python_events"][phase])
                    / statistics.median(xs), 2)
                if "sglang_unified_events" in rows:
                    o[phase]["speedup_vs_sglang_unified_events"] = round(
                        statistics.median(rows["sglang_unified_events"][phase])
                        / statistics.median(xs), 2)
        out["caches"][name] = o
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
