#!/usr/bin/env python3
"""Belady's offline optimum for a Mooncake trace: the hit rate of a prefix cache
of K blocks of 512 tokens that, when it must make room, evicts the block whose
next use lies farthest in the future.

Usage: belady.py TRACE --blocks K [K ...] [--max-requests N]
Prints one JSON line per capacity, shaped like `radixkv cache-sim`'s summary.

Step semantics, as in `radixkv cache-sim --page-size 512` (one request per step):
  1. matched = the longest prefix of the request's blocks held in the cache,
     at most floor((input_length - 1) / 512) blocks (the last token is always
     computed, and matches are cut to whole blocks);
  2. the request needs new = len(hash_ids) - matched pages, its partial last
     block included; when the cache holds more than K - new blocks, the
     farthest-used blocks are evicted until it fits (the matched blocks are
     locked during the step);
  3. every full block of the request is then cached (a partial last block is
     never cached: its tokens are not a whole page);
  a request of more than K blocks is skipped (cache-sim reports it as an error).
"Next use" of a block is the next request that could match it (a position
below that request's match limit). Ties are broken by evicting the deeper
block first. Because ids are prefix-chained, a block is never used before its
parent, so the cache stays closed under prefixes and every cached block of a
request lies on its matched prefix: prefix hits equal block hits, and the
classic argument for Belady's optimality applies. Differences to cache-sim:
this program evicts exactly the shortfall (the radix tree evicts whole nodes,
possibly more), and it knows the future.
"""
import argparse
import heapq
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rkvexp  # noqa: E402

BLOCK = rkvexp.BLOCK
NEVER = float("inf")


def next_uses(reqs):
    """nxt[i][k]: the index of the next request after i that could match
    block k of request i (NEVER if none), for the full blocks of request i."""
    upcoming = {}
    nxt = [None] * len(reqs)
    for i in range(len(reqs) - 1, -1, -1):
        n, ids = reqs[i]
        full = n // BLOCK
        nxt[i] = [upcoming.get(b, NEVER) for b in ids[:full]]
        for b in ids[:(n - 1) // BLOCK]:
            upcoming[b] = i
    return nxt


def simulate(reqs, capacity, nxt=None):
    """Returns the summary dict of one replay at `capacity` blocks."""
    t0 = time.perf_counter()
    if nxt is None:
        nxt = next_uses(reqs)
    cached = {}       # block id -> (next use, depth) as last pushed
    heap = []         # (-next use, -depth, id): max-heap on the next use, lazy deletion
    prompt = matched_total = evicted = errors = 0
    for i, (n, ids) in enumerate(reqs):
        prompt += n
        if len(ids) > capacity:
            errors += 1
            continue
        limit = (n - 1) // BLOCK
        h = 0
        while h < limit and ids[h] in cached:
            h += 1
        matched_total += h * BLOCK
        need = len(ids) - h
        locked = set(ids[:h])
        shortfall = len(cached) + need - capacity
        kept = []
        while shortfall > 0:
            negnext, negdepth, b = heapq.heappop(heap)
            entry = cached.get(b)
            if entry is None or entry != (-negnext, -negdepth):
                continue  # stale
            if b in locked:
                kept.append((negnext, negdepth, b))
                continue
            del cached[b]
            evicted += 1
            shortfall -= 1
        for e in kept:
            heapq.heappush(heap, e)
        for k, b in enumerate(ids[:n // BLOCK]):
            key = (nxt[i][k], k)
            if cached.get(b) != key:
                cached[b] = key
                heapq.heappush(heap, (-key[0], -k, b))
        # Keep the heap from growing without bound through stale entries.
        if len(heap) > 4 * capacity + 1024:
            heap = [(-v[0], -v[1], b) for b, v in cached.items()]
            heapq.heapify(heap)
    return {"type": "summary", "kind": "belady", "capacity": capacity * BLOCK,
            "page_size": BLOCK, "pages": capacity, "requests": len(reqs), "errors": errors,
            "prompt_tokens": prompt, "matched_tokens": matched_total,
            "hit_rate": matched_total / prompt if prompt else 0.0,
            "evicted_tokens": evicted * BLOCK, "seconds": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--blocks", type=int, nargs="+", required=True,
                    help="cache capacities in blocks of 512 tokens")
    ap.add_argument("--max-requests", type=int, default=None)
    a = ap.parse_args()
    for k in a.blocks:
        if k <= 0:
            rkvexp.fail("belady", f"--blocks: {k} is not a positive block count", 2)
    try:
        reqs = rkvexp.read_mooncake(a.trace, a.max_requests)
    except (OSError, ValueError, KeyError) as e:
        rkvexp.fail("belady", f"{a.trace}: {e}", 2)
    nxt = next_uses(reqs)
    for k in a.blocks:
        print(json.dumps(simulate(reqs, k, nxt)), flush=True)


if __name__ == "__main__":
    main()
