#!/usr/bin/env python3
"""How long one large /v1/completions body keeps other clients waiting.

For each radixkv binary given (the first is the baseline): a sim server, a
client polling GET /health every 2 ms, and REPEATS posts of a body of N
prompts x 2000 token ids with max_tokens -5 (refused after the parse, so
the body's parse is all the server does). Prints JSON: per binary the
largest /health wait during the posts (median and range over repeats) and
its ratio to the baseline's. Wall time only: the waits are what a client sees.
Usage: serve_body_bench.py [--prompts N] [--repeats R] RADIXKV [RADIXKV...]"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
from serve_util import HOST, Server  # noqa: E402


def one(radixkv, body, repeats):
    s = Server(radixkv, "--backend", "sim")
    try:
        waits, stop = [], [False]
        lat = []

        def poll():
            while not stop[0]:
                c = http.client.HTTPConnection(HOST, s.port, timeout=60)
                t = time.perf_counter()
                c.request("GET", "/health")
                c.getresponse().read()
                lat.append(time.perf_counter() - t)
                c.close()
                time.sleep(0.002)

        th = threading.Thread(target=poll)
        th.start()
        for _ in range(repeats):
            time.sleep(0.2)
            lat.clear()
            c = http.client.HTTPConnection(HOST, s.port, timeout=120)
            c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            status = c.getresponse().status
            c.close()
            time.sleep(0.05)
            waits.append(max(lat) if lat else float("nan"))
            assert status == 400, status
        stop[0] = True
        th.join()
        return waits
    finally:
        s.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("radixkv", nargs="+")
    a = ap.parse_args()
    body = json.dumps({"prompt": [[i % 1000 for i in range(2000)] for _ in range(a.prompts)],
                       "max_tokens": -5}).encode()
    res = []
    for b in a.radixkv:
        w = one(b, body, a.repeats)
        res.append({"radixkv": b, "health_wait_max_s_median": statistics.median(w),
                    "range": [min(w), max(w)]})
    for r in res:
        r["ratio_to_baseline"] = r["health_wait_max_s_median"] / res[0]["health_wait_max_s_median"]
    print(json.dumps({"body_bytes": len(body), "repeats": a.repeats, "results": res}, indent=1))


if __name__ == "__main__":
    main()
