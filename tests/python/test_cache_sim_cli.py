"""radixkv.cache_sim against `radixkv cache-sim`: the same trace through the
Python API and through the CLI gives identical per-request results, step
eviction lists and summaries (all but the measured "seconds"), for every
registered kind, every policy a kind takes, page sizes 1, 4 and 16, both
step semantics, and a trace given as a file or as an iterable of requests.
Also: errors are radixkv.Error with the command's message, and Ctrl-C
(SIGINT) stops a replay after its current step with KeyboardInterrupt,
leaving Python's own handler in place afterwards.
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading

import radixkv
from pychecks import check, count

EXE = os.environ.get("RKV_BIN")
if not EXE:
    print("skip: RKV_BIN (the radixkv executable) is not set")
    sys.exit(77)


def make_trace(seed, n):
    """Shared prompts with random suffixes, several requests per step,
    namespaces on some lines: matches, splits and eviction under pressure."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(300) for _ in range(rng.randrange(4, 70))] for _ in range(5)]
    lines, step = [], 0
    for i in range(n):
        if rng.random() < 0.6:
            step += 1
        p = list(rng.choice(prompts))
        p = p[:rng.randrange(1, len(p) + 1)] + [rng.randrange(300) for _ in range(rng.randrange(1, 30))]
        line = {"id": i, "step": step, "tokens": p}
        if rng.random() < 0.15:
            line["namespace"] = rng.choice(["a", "b"])
        lines.append(line)
    return lines


def cli(trace_path, opts):
    args = [EXE, "cache-sim", "--no-progress"]
    for k, v in opts.items():
        args += ["--" + k.replace("_", "-")] + ([] if v is True else [str(v)])
    r = subprocess.run(args + [trace_path], capture_output=True, text=True)
    check(r.returncode == 0, f"cli {args}: {r.stderr}")
    reqs, steps, summary = [], [], None
    for line in r.stdout.splitlines():
        o = json.loads(line)
        t = o.pop("type")
        (reqs if t == "request" else steps if t == "step" else [None]).append(o)
        if t == "summary":
            summary = o
    return reqs, steps, summary


def same(api, ref, what):
    reqs, steps, summary = ref
    if api.requests != reqs:
        diff = next(((a, b) for a, b in zip(api.requests + [None] * len(reqs), reqs) if a != b),
                    (len(api.requests), len(reqs)))
        check(False, f"{what}: per-request results differ (first: {diff})")
    check(api.steps == steps, f"{what}: step eviction lists differ")
    a = dict(api.summary)
    b = dict(summary)
    a.pop("seconds", None)
    b.pop("seconds", None)
    check(a == b, f"{what}: summaries differ: {a} vs {b}")


def test_every_kind(tmp, reg):
    configs = 0
    requests = 0
    traces = []
    for seed in (1, 2):
        lines = make_trace(seed, 120)
        path = os.path.join(tmp, f"t{seed}.jsonl")
        with open(path, "w") as f:
            for l in lines:
                f.write(json.dumps(l) + "\n")
        traces.append((path, lines))
    for k in reg:
        for policy in (k["policies"] if k["evicts"] else [None]):
            for P in (1, 4, 16):
                for ti, (path, lines) in enumerate(traces):
                    opts = {"cache": k["name"], "capacity": 320, "page_size": P}
                    if policy:
                        opts["evict_policy"] = policy
                    if ti == 1 and k["name"] in ("radix", "hash"):
                        opts["step_semantics"] = "vllm"
                    ref = cli(path, opts)
                    check(ref[2]["evicted_tokens"] > 0 or not k["evicts"],
                          f"{opts}: the trace puts the cache under pressure")
                    same(radixkv.cache_sim(path, **opts), ref, f"{opts} (file)")
                    if P == 4:  # the iterable route: requests written by the package
                        same(radixkv.cache_sim(iter(lines), **opts), ref, f"{opts} (iterable)")
                    configs += 1
                    requests += len(ref[0])
    return configs, requests


def test_errors(tmp):
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"id": 0, "tokens": [1, 2]}\n{"id": 1, "tokens": [1, "x"]}\n')
    for opts, what in [({"cache": "radix", "capacity": 10, "page_size": 1}, "bad.jsonl:2"),
                       ({"cache": "nosuch", "capacity": 10, "page_size": 1}, "--cache"),
                       ({"cache": "radix", "capacity": 10, "page_size": 1, "bogus": 1}, "--bogus"),
                       ({"cache": "radix", "page_size": 1}, "--capacity")]:
        try:
            radixkv.cache_sim(bad, **opts)
        except radixkv.Error as e:
            check(what in str(e), f"{opts}: the message names {what}: {e}")
        else:
            check(False, f"{opts}: no radixkv.Error")
    try:
        radixkv.cache_sim(os.path.join(tmp, "missing.jsonl"), cache="radix", capacity=8, page_size=1)
    except radixkv.Error as e:
        check("missing.jsonl" in str(e), f"a missing trace is named: {e}")
    else:
        check(False, "a missing trace: no radixkv.Error")
    try:
        radixkv.cache_sim([{"id": 0, "tokens": [1]}, 5], cache="radix", capacity=8, page_size=1)
    except TypeError as e:
        check("item 1" in str(e), f"a bad request is named: {e}")
    else:
        check(False, "a request that is not an object: no TypeError")


def test_interrupt(tmp):
    """SIGINT while the command reads a FIFO: deterministic, since the
    signal is sent after the first lines went in and before the rest."""
    fifo = os.path.join(tmp, "fifo.jsonl")
    os.mkfifo(fifo)
    lines = make_trace(3, 40)

    def writer():
        with open(fifo, "w") as f:
            for l in lines[:10]:
                f.write(json.dumps(l) + "\n")
            f.flush()
            os.kill(os.getpid(), signal.SIGINT)
            for l in lines[10:]:
                f.write(json.dumps(l) + "\n")

    t = threading.Thread(target=writer)
    t.start()
    try:
        radixkv.cache_sim(fifo, cache="radix", capacity=64, page_size=1)
    except KeyboardInterrupt as e:
        check("interrupted" in str(e), f"the interrupt says so: {e}")
    else:
        check(False, "SIGINT did not stop cache_sim")
    t.join()
    check(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
          "Python's SIGINT handler is back after the call")
    # The next call starts with no stop pending.
    r = radixkv.cache_sim(iter(lines), cache="radix", capacity=64, page_size=1)
    check(len(r.requests) == len(lines), "a call after an interrupt runs to its end")


def test_run(tmp):
    """radixkv.run against `radixkv run --backend sim`: what does not depend
    on measured time (ids, tokens, cache hits, outputs) is identical."""
    lines = make_trace(4, 30)
    path = os.path.join(tmp, "run.jsonl")
    with open(path, "w") as f:
        for l in lines:
            f.write(json.dumps(dict(l, max_tokens=3)) + "\n")
    r = subprocess.run([EXE, "run", "--backend", "sim", "--cache", "radix", "--no-progress",
                        "--trace", path], capture_output=True, text=True)
    check(r.returncode == 0, f"radixkv run: {r.stderr}")
    keys = ("id", "prompt_tokens", "cached_tokens", "output_tokens", "output_ids", "error")
    ref = [{k: o.get(k) for k in keys} for o in map(json.loads, r.stdout.splitlines())
           if o.get("type") != "summary"]
    check(len(ref) == len(lines) and any(o["cached_tokens"] for o in ref),
          f"radixkv run printed {len(ref)} request lines with hits for {len(lines)} requests")
    api = radixkv.run(path, backend="sim", cache="radix")
    check([{k: o.get(k) for k in keys} for o in api.requests] == ref,
          "radixkv.run: per-request results differ from the CLI's")
    check(api.summary["requests"] == len(lines) and api.summary["cache"] == "radix",
          f"radixkv.run summary: {api.summary}")


def main():
    reg = json.loads(subprocess.run([EXE, "list", "--json"], capture_output=True, text=True,
                                    check=True).stdout)["kinds"]
    with tempfile.TemporaryDirectory() as tmp:
        configs, requests = test_every_kind(tmp, reg)
        test_errors(tmp)
        test_interrupt(tmp)
        test_run(tmp)
    print(f"py_cache_sim_vs_cli: {configs} configurations, {requests} requests compared, "
          f"{count()} checks, 0 differences")


if __name__ == "__main__":
    main()
