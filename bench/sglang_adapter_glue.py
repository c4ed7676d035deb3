"""The Python around radixkv.sglang.RadixCache's C calls, per call.

Each per-request call SGLang's scheduler makes on the adapter (match_prefix,
path_device_indices, insert, lock + unlock, evict), on a short key the cache
holds, so that the tree's own work is small and what the call costs beside
it shows: the call as SGLang makes it (the instance's method, bound to a C
call by RadixCache._bind) against the bare Cache call it wraps (the baseline,
in the same run), nanoseconds per call by thread CPU and by wall clock,
median and range over the repeats. Prints JSON.

    PYTHONPATH=build/python "$(scripts/sglang_rust_venv.sh)" bench/sglang_adapter_glue.py

(any venv with SGLang 0.5.23 and torch: scripts/sglang_venv.sh's too).
"""
import argparse
import json
import statistics
import time
from array import array

import torch
from torch.utils.dlpack import to_dlpack
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey

from radixkv.sglang import RadixCache


class Allocator:
    """SGLang's allocator as the adapter sees it: a device, a size, and a
    free_segment that takes the evicted KV indices."""
    device = "cpu"
    size = 1 << 20

    def free_segment(self, values, start_pos=0):
        pass


def clock(fn, args, calls, repeats, refill=None):
    """ns per call of fn(*args): (thread CPU, wall) medians and ranges over
    the repeats, refill() before each (outside the clocks)."""
    cpu, wall = [], []
    for _ in range(repeats):
        if refill:
            refill()
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(calls):
            fn(*args)
        wall.append((time.perf_counter_ns() - w0) / calls)
        cpu.append((time.thread_time_ns() - c0) / calls)
    return {"cpu_ns": round(statistics.median(cpu), 1),
            "cpu_range_ns": [round(min(cpu), 1), round(max(cpu), 1)],
            "wall_ns": round(statistics.median(wall), 1),
            "wall_range_ns": [round(min(wall), 1), round(max(wall), 1)]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000, help="calls per repeat")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--key-len", type=int, default=15, help="tokens of the cached key")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tree = RadixCache.create_simulated(mock_allocator=Allocator(), page_size=1,
                                       num_pages=1 << 20)
    c = tree.cache
    toks = array("q", range(100, 100 + args.key_len))
    value = torch.arange(args.key_len, dtype=torch.int64)
    ip = InsertParams(key=RadixKey(toks), value=value)
    tree.insert(ip)
    mp = MatchPrefixParams(key=RadixKey(toks))
    node = tree.match_prefix(mp).last_device_node
    cap = to_dlpack(value)
    ep = EvictParams(num_tokens=1)
    # evict: one token a call from a tree of one-token keys, refilled before
    # each repeat.
    singles = [InsertParams(key=RadixKey(array("q", [1 << 30 | i])),
                            value=torch.tensor([i], dtype=torch.int64))
               for i in range(args.calls)]

    def refill():
        for p in singles:
            tree.insert(p)

    def lock_unlock():
        tree.unlock(tree.lock(node))

    def bare_lock_unlock():
        c.lock(node.match)
        c.unlock(node.match)

    n, r = args.calls, args.repeats
    rows = {
        "match_prefix": (clock(tree.match_prefix, (mp,), n, r),
                         clock(c.kv_match, (toks,), n, r)),
        "path_device_indices": (clock(tree.path_device_indices, (node,), n, r),
                                clock(c.kv_values, (node.match, True), n, r)),
        "insert": (clock(tree.insert, (ip,), n, r), clock(c.kv_insert, (toks, cap), n, r)),
        "lock_unlock": (clock(lock_unlock, (), n, r), clock(bare_lock_unlock, (), n, r)),
        "evict": (clock(tree.evict, (ep,), n, r, refill),
                  clock(c.kv_evict, (1, False, True), n, r, refill)),
    }
    out = {"bench": "sglang_adapter_glue", "args": vars(args), "torch": torch.__version__,
           "bound": sorted(k for k in vars(tree) if k in rows or k in ("lock", "unlock")),
           "calls": {}}
    for name, (adapter, bare) in rows.items():
        out["calls"][name] = {
            "adapter": adapter, "bare": bare,
            "adapter_over_bare_cpu_ns": round(adapter["cpu_ns"] - bare["cpu_ns"], 1),
            "adapter_per_bare_cpu": round(adapter["cpu_ns"] / bare["cpu_ns"], 2)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
