#!/usr/bin/env python3
"""Per-page cost of SGLang's KV-event hash chain in the extension
(radixkv._radixkv.sglang_event_hashes over --tokens random token ids), on
both of its SHA-256 routes in the same run: the CPU's SHA instructions where
it has them, and libcrypto forced (radixkv._radixkv._sha256_route). JSON on
stdout: per page size and route, thread CPU and wall ns a page (median and
range over --repeats), and the SHA route's ratio to libcrypto's.

The call also builds the lists it returns (a 32-byte bytes object and an int
a page), the same on both routes, so the ratio understates the chain's own.

    PYTHONPATH=build/python /usr/bin/python3 bench/event_chain_bench.py
"""
import argparse
import array
import json
import random
import statistics
import sys
import time

from radixkv._radixkv import _sha256_route, sglang_event_hashes


def spread(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=100_000, help="tokens a call (default 100000)")
    ap.add_argument("--repeats", type=int, default=15, help="calls per route (default 15)")
    ap.add_argument("--page-sizes", default="1,16", help="comma-separated (default 1,16)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.tokens < 1 or args.repeats < 1:
        sys.exit("event_chain_bench: --tokens and --repeats must be >= 1")
    try:
        sizes = [int(p) for p in args.page_sizes.split(",")]
    except ValueError:
        sys.exit(f"event_chain_bench: --page-sizes {args.page_sizes!r} is not a list of ints")
    rng = random.Random(args.seed)
    toks = array.array("q", (rng.randrange(1 << 31) for _ in range(args.tokens)))
    fast, was = _sha256_route()
    routes = (("sha_ni", False), ("libcrypto", True)) if fast else (("libcrypto", True),)
    out = {"bench": "event_chain_bench", "tokens": args.tokens, "repeats": args.repeats,
           "sha_ni_available": fast, "rows": {}}
    try:
        for P in sizes:
            pages = (args.tokens + P - 1) // P
            row = {"pages": pages}
            # Routes alternate call by call, so load drifts hit both alike.
            cpu = {name: [] for name, _ in routes}
            wall = {name: [] for name, _ in routes}
            digests = {}
            for _ in range(args.repeats):
                for name, force in routes:
                    _sha256_route(force)
                    w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                    got = sglang_event_hashes(toks, P)
                    c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
                    cpu[name].append((c1 - c0) / pages)
                    wall[name].append((w1 - w0) / pages)
                    digests[name] = got
            if len({repr(d) for d in digests.values()}) != 1:
                sys.exit(f"event_chain_bench: the routes' chains differ at page size {P}")
            for name, _ in routes:
                row[name] = {"thread_cpu_ns_per_page": spread(cpu[name]),
                             "wall_ns_per_page": spread(wall[name])}
            if fast:
                row["sha_ni_over_libcrypto_cpu"] = (
                    statistics.median(cpu["sha_ni"]) / statistics.median(cpu["libcrypto"]))
            out["rows"][f"page_size_{P}"] = row
    finally:
        _sha256_route(was)
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
