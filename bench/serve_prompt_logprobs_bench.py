#!/usr/bin/env python3
"""What prompt logprobs cost `radixkv serve` on the cpu backend: server CPU
(the whole process, from /proc) and wall time per sequential request for one
prompt asked plain (its prefix cached after the first), with prompt_logprobs
(every prompt row computed again, as vLLM skips the cache for it, and its
logits kept), and with echo + logprobs; the modes interleave within each
repeat, so load hits them alike.

usage: bench/serve_prompt_logprobs_bench.py RADIXKV [--prompt-tokens L]
           [--requests N] [--repeats R] [--top K] [SERVE ARGS after --]
Prints one JSON line per mode: medians and ranges over R repeats of CPU and
wall ms per request, and the ratios to the plain mode."""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(c, pid, body, n):
    """(server CPU ms, wall ms) per request over n sequential requests."""
    data = json.dumps(body)
    t0, w0 = cpu_seconds(pid), time.perf_counter()
    for _ in range(n):
        c.request("POST", "/v1/completions", body=data)
        r = c.getresponse()
        text = r.read()
        if r.status != 200:
            raise SystemExit(f"{body.keys()}: {r.status} {text[:300]!r}")
    return (cpu_seconds(pid) - t0) / n * 1e3, (time.perf_counter() - w0) / n * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("radixkv")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("serve_args", nargs="*")
    a = ap.parse_args()
    p = subprocess.Popen([a.radixkv, "serve", "--port", "0", "--max-logprobs", str(a.top),
                          *a.serve_args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    try:
        port = json.loads(p.stdout.readline())["port"]
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        prompt = [(i * 37 + 11) % 4000 for i in range(a.prompt_tokens)]
        base = {"prompt": prompt, "max_tokens": 4, "temperature": 0}
        modes = {"plain": base,
                 "prompt_logprobs": dict(base, prompt_logprobs=a.top),
                 "echo_logprobs": dict(base, echo=True, logprobs=a.top)}
        measure(c, p.pid, base, 1)  # the prompt's pages cached, the model warm
        runs = {m: [] for m in modes}
        for _ in range(a.repeats):
            for m, body in modes.items():
                runs[m].append(measure(c, p.pid, body, a.requests))
    finally:
        p.terminate()
        p.wait()
    plain_cpu = statistics.median(x[0] for x in runs["plain"])
    plain_wall = statistics.median(x[1] for x in runs["plain"])
    for m, v in runs.items():
        cpu, wall = [x[0] for x in v], [x[1] for x in v]
        print(json.dumps({
            "bench": "serve_prompt_logprobs", "mode": m, "prompt_tokens": a.prompt_tokens,
            "top": a.top, "requests": a.requests, "repeats": a.repeats,
            "cpu_ms_per_request": round(statistics.median(cpu), 3),
            "cpu_min": round(min(cpu), 3), "cpu_max": round(max(cpu), 3),
            "wall_ms_per_request": round(statistics.median(wall), 3),
            "wall_min": round(min(wall), 3), "wall_max": round(max(wall), 3),
            "cpu_ratio_vs_plain": round(statistics.median(cpu) / plain_cpu, 3) if plain_cpu else None,
            "wall_ratio_vs_plain": round(statistics.median(wall) / plain_wall, 3)}))


if __name__ == "__main__":
    sys.exit(main())
