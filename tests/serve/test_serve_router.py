#!/usr/bin/env python3
"""Two `radixkv serve` replicas behind sglang-router (cache_aware). The router
takes only text prompts (a string or a list of strings; a list of token ids is
refused before it reaches a worker), so the replicas run with --tokenizer ids:
text is decimal token ids. Through the router the outputs equal a direct
replica's and repeats of a prompt hit the cache.
Runs under RKV_SERVE_PYTHON with the sglang_router package; else exits 77.
Usage: test_serve_router.py PATH/TO/radixkv"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, check, reexec_under_serve_python  # noqa: E402

reexec_under_serve_python(__file__, "sglang_router")
from router_util import Router  # noqa: E402

RADIXKV = sys.argv[1]
ENGINE = ["--tokenizer", "ids", "--model-name", "tiny", "--page-size", "4", "--num-pages", "512"]


def text(ids):
    return " ".join(str(t) for t in ids)


def main():
    replicas = [Server(RADIXKV, *ENGINE) for _ in range(2)]
    router = None
    try:
        router = Router([r.base for r in replicas], "cache_aware")
        groups = [[(g * 577 + i * 41) % 4000 + 1 for i in range(40)] for g in range(6)]
        direct = {}
        for g, p in enumerate(groups):
            st, r, _ = replicas[0].post({"prompt": text(p), "max_tokens": 4, "temperature": 0})
            check(st == 200, f"direct: {st} {r}")
            direct[g] = r["choices"][0]["token_ids"]
            check(r["choices"][0]["text"] == "".join(f" {t}" for t in direct[g]), f"text: {r}")
        for rep in range(3):
            for g, p in enumerate(groups):
                st, r = router.post({"model": "tiny", "prompt": text(p), "max_tokens": 4,
                                     "temperature": 0})
                check(st == 200, f"via router: {st} {r}")
                check(r["choices"][0]["token_ids"] == direct[g],
                      f"group {g}: router gives {r['choices'][0]['token_ids']}, direct {direct[g]}")
        ok = [r.metrics()['radixkv:requests_total{outcome="ok"}'] for r in replicas]
        hits = sum(r.metrics()["radixkv:prefix_cache_hits_total"] for r in replicas)
        check(ok[0] + ok[1] == 6 + 18, f"requests per replica {ok}")
        # Cache-aware routing sends a repeat to the replica that has the prompt:
        # at least the second and third rounds hit (36 of 40 tokens matched).
        check(hits >= 12 * 36, f"prefix hits {hits}")
        for r in replicas:
            rc, summary = r.stop()
            check(rc == 0 and summary["pages_inflight"] == 0, f"exit {rc}: {summary}")
    finally:
        if router:
            router.stop()
        for r in replicas:
            r.kill()
    print(f"serve router: ok (requests per replica {ok}, {hits:.0f} hit tokens)")


if __name__ == "__main__":
    main()
