#!/usr/bin/env python3
"""serve_bench: the hit-rate sweep served over HTTP against `radixkv run` in-process.

For each backend (cpu, sim) and hit rate h, one `radixkv gen sweep` trace is
replayed twice per repeat, interleaved: by `radixkv run --offline` (the engine's
own span: wall time on cpu, the modelled clock on sim) and by `radixkv serve`
with every request sent at once over HTTP from client threads (wall time from
the first send to the last answer; sim's server keeps its modelled clock in step
with wall time, so both measure the same schedule). Reported per configuration
(one JSON line each; medians over the repeats with [min, max]):

  run_rps, served_rps, ratio = served_rps / run_rps
  overhead_us = (served span - run span) / requests: the server's cost per request
  overhead_cpu_us = (server CPU - run CPU) / requests: the same in CPU time, which
      a loaded machine disturbs less than wall time
  cpu_s of each process (user + system of the whole process, start-up and exit
      included for both alike: the kernel's rusage of the exited child), beside
      the wall spans
  hit rates of both (they must agree: the same cache sees the same prompts)
Both processes run with one OpenBLAS thread unless --blas-threads says otherwise.

Usage: serve_bench.py --radixkv build/runtime/radixkv [--repeats 3] [--num 64]
       [--prompt-len 256] [--output-len 8] [--backends cpu,sim] [--hit-rates 0,0.5,0.9]
Loopback only (127.0.0.1)."""
import argparse
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
from serve_util import HOST, Server  # noqa: E402


def children_cpu():
    """User + system seconds of every exited child so far (the kernel's count)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_inprocess(radixkv, trace, engine):
    cpu0 = children_cpu()
    out = subprocess.run([radixkv, "run", "--trace", trace, "--offline", "--no-progress", *engine],
                         capture_output=True, text=True, timeout=1800)
    cpu = children_cpu() - cpu0
    if out.returncode:
        sys.exit("radixkv run failed: " + out.stderr)
    summary = [json.loads(l) for l in out.stdout.splitlines() if '"summary"' in l][-1]
    return summary["duration"], summary["hit_rate"], cpu, summary["requests"]


def run_served(radixkv, reqs, engine, batched):
    """batched: one HTTP request carrying every prompt (a list of lists), so all
    arrive together as in the offline run; else one client thread per request."""
    # The server's CPU is its whole process's, start-up and exit included, as
    # run's is: measured alike, the difference is the serving alone.
    cpu0 = children_cpu()
    s = Server(radixkv, *engine)
    if batched:
        reqs = [{"prompt": [r["prompt"] for r in reqs], "temperature": 0,
                 "max_tokens": reqs[0]["max_tokens"]}]
    try:
        results = [None] * len(reqs)

        def send(i):
            c = http.client.HTTPConnection(HOST, s.port, timeout=1800)
            c.request("POST", "/v1/completions", body=json.dumps(reqs[i]),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            results[i] = (r.status, r.read())
            c.close()

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(reqs))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        span = time.perf_counter() - t0
        bad = [r for r in results if not r or r[0] != 200]
        if bad:
            sys.exit(f"{len(bad)} requests failed: {bad[:2]}")
        m = s.metrics()
        hit = m["radixkv:prefix_cache_hits_total"] / max(1, m["radixkv:prefix_cache_queries_total"])
        rc, _ = s.stop()
        if rc:
            sys.exit("server exited with " + str(rc) + ": " + s.stderr()[-2000:])
        return span, hit, children_cpu() - cpu0
    finally:
        s.kill()


def med(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--radixkv", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=8)
    ap.add_argument("--backends", default="cpu,sim")
    ap.add_argument("--hit-rates", default="0,0.5,0.9")
    ap.add_argument("--clients", default="batched,concurrent",
                    help="batched: one request with every prompt; concurrent: a thread each")
    ap.add_argument("--blas-threads", default="1",
                    help="OPENBLAS_NUM_THREADS for both processes (default 1: idle BLAS threads "
                         "spin, and their CPU time would swamp a per-request overhead); "
                         "'inherit' keeps the environment's")
    a = ap.parse_args()
    if a.blas_threads != "inherit":
        os.environ["OPENBLAS_NUM_THREADS"] = a.blas_threads
    with tempfile.TemporaryDirectory() as d:
        for backend in a.backends.split(","):
            engine = ["--backend", backend, "--max-tokens", str(a.output_len)]
            for h in [float(x) for x in a.hit_rates.split(",")]:
                trace = os.path.join(d, f"sweep_{h}.jsonl")
                subprocess.run([a.radixkv, "gen", "sweep", "--num", str(a.num), "--prompt-len",
                                str(a.prompt_len), "--output-len", str(a.output_len),
                                "--hit-rate", str(h), "--out", trace], check=True, timeout=120)
                reqs = []
                for line in open(trace):
                    q = json.loads(line)
                    reqs.append({"prompt": q["tokens"], "temperature": 0,
                                 "max_tokens": q.get("max_tokens", a.output_len)})
                for clients in a.clients.split(","):
                    report(a, backend, h, engine, trace, reqs, clients)


def report(a, backend, h, engine, trace, reqs, clients):
                rows = {k: [] for k in ["run_s", "served_s", "run_cpu", "served_cpu",
                                        "run_hit", "served_hit"]}
                for _ in range(a.repeats):
                    rs, rh, rc, n = run_inprocess(a.radixkv, trace, engine)
                    ss, sh, sc = run_served(a.radixkv, reqs, engine, clients == "batched")
                    for k, v in zip(rows, [rs, ss, rc, sc, rh, sh]):
                        rows[k].append(v)
                n = len(reqs)
                ratio = [n / s / (n / r) for r, s in zip(rows["run_s"], rows["served_s"])]
                over = [(s - r) / n * 1e6 for r, s in zip(rows["run_s"], rows["served_s"])]
                over_cpu = [(s - r) / n * 1e6 for r, s in zip(rows["run_cpu"], rows["served_cpu"])]
                print(json.dumps({
                    "bench": "serve", "backend": backend, "clients": clients,
                    "hit_rate_target": h, "requests": n,
                    "prompt_len": a.prompt_len, "output_len": a.output_len, "repeats": a.repeats,
                    "run_rps": med([n / x for x in rows["run_s"]]),
                    "served_rps": med([n / x for x in rows["served_s"]]),
                    "ratio_served_over_run": med(ratio),
                    "overhead_us_per_request": med(over),
                    "overhead_cpu_us_per_request": med(over_cpu),
                    "run_span_s": med(rows["run_s"]), "served_span_s": med(rows["served_s"]),
                    "run_cpu_s": med(rows["run_cpu"]), "served_cpu_s": med(rows["served_cpu"]),
                    "run_hit_rate": med(rows["run_hit"]), "served_hit_rate": med(rows["served_hit"]),
                    "clock": "modelled (run) vs wall, paced (served)" if backend == "sim" else "wall",
                    "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "inherit"),
                }), flush=True)


if __name__ == "__main__":
    main()
