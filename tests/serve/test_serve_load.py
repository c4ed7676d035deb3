#!/usr/bin/env python3
"""Bounded load on `radixkv serve`: 200 concurrent streaming requests, in 10
groups sharing a prefix. None is lost, duplicated or mixed up (each stream's
tokens equal `radixkv run`'s greedy outputs for its own prompt), cached tokens
are reported, and after the drain every page is free or cached, the page
accounting holds and the server exits 0 on SIGINT.
Usage: test_serve_load.py PATH/TO/radixkv"""
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, check, run_reference  # noqa: E402

RADIXKV = sys.argv[1]
N, GROUPS, MAX_TOKENS = 200, 10, 6
ENGINE = ["--page-size", "16", "--num-pages", "1024", "--max-running", "64"]


def prompts():
    out = []
    for i in range(N):
        g = i % GROUPS
        prefix = [(g * 977 + k * 31) % 4000 + 1 for k in range(48)]
        suffix = [(i * 7919 + k * 13) % 4000 + 1 for k in range(8)]
        out.append(prefix + suffix)
    return out


def main():
    ps = prompts()
    s = Server(RADIXKV, *ENGINE)
    results = [None] * N
    try:
        def worker(i):
            results[i] = s.stream({"prompt": ps[i], "max_tokens": MAX_TOKENS, "temperature": 0,
                                   "stream_options": {"include_usage": True}}, timeout=240)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
        check(not any(t.is_alive() for t in threads), "a stream did not finish within 240 s")
        m = s.wait_idle()
        rc, summary = s.stop(sig=signal.SIGINT)
    finally:
        s.kill()
    ref = run_reference(RADIXKV, [(p, MAX_TOKENS) for p in ps], *ENGINE)
    ids, cached = set(), 0
    for i, r in enumerate(results):
        check(r is not None, f"request {i}: no result")
        st, events, done = r
        check(st == 200 and done, f"request {i}: status {st}, [DONE] {done}: {events[:1]}")
        toks = [t for e in events if e["choices"] for t in e["choices"][0]["token_ids"]]
        check(toks == ref[i], f"request {i}: streamed {toks}, run gives {ref[i]}")
        ids.add(events[0]["id"])
        check(all(e["id"] == events[0]["id"] for e in events), f"request {i}: mixed ids")
        usage = events[-1]["usage"]
        check(usage["completion_tokens"] == MAX_TOKENS and usage["prompt_tokens"] == len(ps[i]),
              f"request {i}: usage {usage}")
        cached += usage["prompt_tokens_details"]["cached_tokens"]
    check(len(ids) == N, f"{len(ids)} distinct completion ids for {N} requests")
    # Each group's 48-token prefix is 3 pages; at most the first few of a group
    # miss it (admitted in the same step before it is cached).
    check(cached >= (N - 4 * GROUPS) * 48, f"cached tokens {cached} too few")
    check(m["radixkv:page_accounting_ok"] == 1 and
          m['radixkv:kv_pages{state="free"}'] + m['radixkv:kv_pages{state="cached"}'] == 1024,
          f"pages after drain: {m}")
    check(rc == 0 and summary["requests_ok"] == N and summary["pages_inflight"] == 0,
          f"exit {rc}, summary {summary}")
    print(f"serve load: ok ({N} streams, {cached} cached prompt tokens)")


if __name__ == "__main__":
    main()
