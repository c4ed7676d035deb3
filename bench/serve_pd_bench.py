#!/usr/bin/env python3
"""serve_pd_bench: what the prefill/decode handoff costs per request.

Two set-ups on loopback, each behind sglang-router so the router's own cost is
in both: a colocated `radixkv serve` (regular mode, one worker) and a
`--role prefill` + `--role decode` pair sharing a redis-server
(--pd-disaggregation). Each repeat sends the same fresh prompts (groups
sharing a prefix) one at a time to both, interleaved, greedy, and checks the
outputs agree. Reported (one JSON line; medians over the repeats with
[min, max]):

  latency_ms        per-request wall time, median of the repeat's requests,
                    per set-up; ratio = pd / colocated per repeat
  cpu_ms_per_request  user + system CPU of each server process (and of the
                    routers and redis-server) over the repeat / requests, read
                    from /proc/PID/stat: the handoff's work beside wall time
  decode_cached_share  prompt tokens the decode server matched (its own counter:
                    vllm-router answers with the prefill's usage) / prompt tokens
Usage: serve_pd_bench.py --radixkv build/runtime/radixkv [--repeats 5]
       [--prompts 16] [--prefix-len 64] [--suffix-len 16] [--output-len 8]
       [--router sglang|vllm]
Runs under the serve venv's python (sglang-router) with redis-server on PATH."""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
from pd_util import PdRouter, Redis, post  # noqa: E402
from router_util import Router  # noqa: E402
from serve_util import Server  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """User + system seconds of process pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def med(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def prompts(rep, n, prefix_len, suffix_len):
    groups = 4
    base = 1 + rep * 7919
    pre = [[(base + g * 1009 + i * 37) % 3900 + 10 for i in range(prefix_len)] for g in range(groups)]
    return [pre[k % groups] + [(base + k * 613 + i * 29) % 3900 + 10 for i in range(suffix_len + k % 3)]
            for k in range(n)]


def timed(port, body):
    t0 = time.perf_counter()
    st, r = post(port, body)
    dt = time.perf_counter() - t0
    if st != 200:
        sys.exit(f"request failed: {st} {r}")
    return dt, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--radixkv", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prefix-len", type=int, default=64)
    ap.add_argument("--suffix-len", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=8)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--router", choices=["sglang", "vllm"], default="sglang",
                    help="the pair's router: sglang-router --pd-disaggregation or vllm-router "
                         "--vllm-pd-disaggregation (the colocated baseline: sglang-router)")
    a = ap.parse_args()
    if not shutil.which("redis-server"):
        sys.exit("redis-server not found on PATH")
    engine = ["--model-name", "tiny", "--page-size", str(a.page_size), "--num-pages", "4096",
              "--tokenizer", "ids"]
    tmp = tempfile.mkdtemp(prefix="rkv-pd-bench-")
    redis = Redis(tmp)
    tier = ["--tier-remote", redis.url, "--tier-remote-ns", "bench", "--tier-remote-tokens",
            "1000000"]
    procs, routers = [], []
    try:
        colo = Server(a.radixkv, *engine)
        pre = Server(a.radixkv, *engine, *tier, "--role", "prefill")
        dec = Server(a.radixkv, *engine, *tier, "--role", "decode")
        procs = [colo, pre, dec]
        crouter = Router([colo.base], "round_robin", kind="sglang")
        prouter = PdRouter(pre.base, dec.base, kind=a.router)
        routers = [crouter, prouter]
        pids = {"colocated": colo.proc.pid, "prefill": pre.proc.pid, "decode": dec.proc.pid,
                "router_colocated": crouter.proc.pid, "router_pd": prouter.proc.pid,
                "redis": redis.proc.pid}
        lat = {"colocated": [], "pd": []}
        ratio, cpu, share = [], {k: [] for k in pids}, []
        for rep in range(a.repeats):
            ps = prompts(rep, a.prompts, a.prefix_len, a.suffix_len)
            c0 = {k: cpu_s(p) for k, p in pids.items()}
            hits0 = dec.metrics()["radixkv:prefix_cache_hits_total"]
            times = {"colocated": [], "pd": []}
            prompt = 0
            for i, p in enumerate(ps):
                body = {"model": "tiny", "prompt": " ".join(map(str, p)),
                        "max_tokens": a.output_len, "temperature": 0}
                order = [("colocated", crouter.port), ("pd", prouter.port)]
                if (i + rep) % 2:
                    order.reverse()
                out = {}
                for name, port in order:
                    dt, r = timed(port, body)
                    times[name].append(dt)
                    out[name] = r["choices"][0]["text"]
                    if name == "pd":
                        prompt += len(p)
                if out["colocated"] != out["pd"]:
                    sys.exit(f"outputs differ on prompt {i}: {out}")
            for k, p in pids.items():
                cpu[k].append((cpu_s(p) - c0[k]) * 1e3 / a.prompts)
            for k in lat:
                lat[k].append(statistics.median(times[k]) * 1e3)
            ratio.append(lat["pd"][-1] / lat["colocated"][-1])
            share.append((dec.metrics()["radixkv:prefix_cache_hits_total"] - hits0) / prompt)
        print(json.dumps({
            "bench": "serve_pd", "router": a.router, "repeats": a.repeats, "prompts": a.prompts,
            "prefix_len": a.prefix_len, "suffix_len": a.suffix_len, "output_len": a.output_len,
            "page_size": a.page_size, "model": "tiny (built-in), cpu backend",
            "latency_ms": {k: med(v) for k, v in lat.items()},
            "ratio_pd_over_colocated": med(ratio),
            "cpu_ms_per_request": {k: med(v) for k, v in cpu.items()},
            "decode_cached_share": med(share),
            "load1": os.getloadavg()[0]}))
    finally:
        for r in routers:
            r.stop()
        for s in procs:
            s.kill()
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
