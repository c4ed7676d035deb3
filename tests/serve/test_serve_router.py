#!/usr/bin/env python3
"""Two `radixkv serve` replicas behind each existing router that is installed:
  sglang-router (cache_aware): it takes text prompts only (a string or a list of
    strings; a list of token ids is refused before it reaches a worker), so the
    replicas run with --tokenizer ids and prompts go out as decimal-id text;
  vllm-router (cache_aware): forwards token-id prompts as they are.
Through each router the outputs equal a direct replica's, every request is
answered once, and repeats of a prompt hit the cache.
Runs under RKV_SERVE_PYTHON (scripts/serve_venv.sh); exits 77 (skip) when no
router is installed.
Usage: test_serve_router.py PATH/TO/radixkv"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, check, reexec_under_serve_python  # noqa: E402

reexec_under_serve_python(__file__, "openai")
from router_util import Router, available  # noqa: E402

RADIXKV = sys.argv[1]
ENGINE = ["--model-name", "tiny", "--page-size", "4", "--num-pages", "512"]


def through(kind):
    text = kind == "sglang"
    replicas = [Server(RADIXKV, *ENGINE, *(["--tokenizer", "ids"] if text else []))
                for _ in range(2)]
    router = None
    try:
        router = Router([r.base for r in replicas], "cache_aware", kind=kind)
        groups = [[(g * 577 + i * 41) % 4000 + 1 for i in range(40)] for g in range(6)]

        def prompt(ids):
            return " ".join(map(str, ids)) if text else ids

        direct = {}
        for g, p in enumerate(groups):
            st, r, _ = replicas[0].post({"prompt": prompt(p), "max_tokens": 4, "temperature": 0})
            check(st == 200, f"direct: {st} {r}")
            direct[g] = r["choices"][0]["token_ids"]
            if text:
                check(r["choices"][0]["text"] == "".join(f" {t}" for t in direct[g]), f"text: {r}")
        for _ in range(3):
            for g, p in enumerate(groups):
                st, r = router.post({"model": "tiny", "prompt": prompt(p), "max_tokens": 4,
                                     "temperature": 0})
                check(st == 200, f"{kind}: {st} {r}")
                check(r["choices"][0]["token_ids"] == direct[g],
                      f"{kind}, group {g}: {r['choices'][0]['token_ids']} != direct {direct[g]}")
        ms = [r.metrics() for r in replicas]
        ok = [m['radixkv:requests_total{outcome="ok"}'] for m in ms]
        hits = sum(m["radixkv:prefix_cache_hits_total"] for m in ms)
        check(sum(ok) == 6 + 18, f"{kind}: requests per replica {ok}")
        # Whatever the routing, each group's third visit finds its prefix on the
        # replica it lands on or the policy is not cache-aware at all: at least
        # the third round hits (36 of 40 tokens matched, page size 4).
        check(hits >= 6 * 36, f"{kind}: prefix hits {hits}")
        for r in replicas:
            rc, summary = r.stop()
            check(rc == 0 and summary["pages_inflight"] == 0, f"exit {rc}: {summary}")
        return ok, hits
    finally:
        if router:
            router.stop()
        for r in replicas:
            r.kill()


def main():
    kinds = [k for k in ("sglang", "vllm") if available(k)]
    if not kinds:
        print("neither sglang-router nor vllm-router is installed: skipping", file=sys.stderr)
        sys.exit(77)
    for kind in kinds:
        ok, hits = through(kind)
        print(f"serve router ({kind}-router): ok (requests per replica {ok}, {hits:.0f} hit tokens)")


if __name__ == "__main__":
    main()
