#!/usr/bin/env python3
"""Server CPU per sequential request (thread CPU of the whole radixkv process,
from /proc), for one or more radixkv binaries in the same run: each request
arrives at an idle engine, so the engine's idle-transition work (the page
accounting check where a build runs it) is charged to every request.

usage: bench/serve_idle_bench.py [--requests N] [--repeats R] NAME=RADIXKV [...]
Prints one JSON line per binary: median and range over R repeats of the server
CPU per request (ms) and the ratio to the first binary."""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(binary, n):
    p = subprocess.Popen([binary, "serve", "--backend", "sim", "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = json.loads(p.stdout.readline())["port"]
        body = json.dumps({"prompt": list(range(1, 65)), "max_tokens": 4, "temperature": 0})
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/completions", body=body)  # warm-up
        c.getresponse().read()
        t0 = cpu_seconds(p.pid)
        for _ in range(n):
            c.request("POST", "/v1/completions", body=body)
            r = c.getresponse()
            r.read()
            assert r.status == 200, r.status
        return (cpu_seconds(p.pid) - t0) / n * 1e3
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("binaries", nargs="+", help="NAME=PATH")
    a = ap.parse_args()
    runs = {}
    for _ in range(a.repeats):  # interleaved, so load hits every binary alike
        for spec in a.binaries:
            name, path = spec.split("=", 1)
            runs.setdefault(name, []).append(one_run(path, a.requests))
    base = statistics.median(next(iter(runs.values())))
    for name, v in runs.items():
        m = statistics.median(v)
        print(json.dumps({"bench": "serve_idle", "binary": name, "requests": a.requests,
                          "repeats": a.repeats, "cpu_ms_per_request": round(m, 4),
                          "min": round(min(v), 4), "max": round(max(v), 4),
                          "ratio_vs_first": round(m / base, 4) if base else None}))


if __name__ == "__main__":
    sys.exit(main())
