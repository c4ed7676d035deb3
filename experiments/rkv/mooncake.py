"""Mooncake-format traces (FAST'25 release) and the cache-sim / run helpers the
Mooncake experiments share (real_trace_capacity, eviction_policy, page_size,
sglang_ablations)."""
import json
import math
import os
import random
import time

from .core import command_text, fail, run_json, summary_of

BLOCK = 512  # tokens per Mooncake hash id

MOONCAKE_TRACES = {"conversation": "conversation_trace.jsonl",
                   "synthetic": "synthetic_trace.jsonl"}
MOONCAKE_HELP = ("the FAST25-release/traces/ folder of github.com/kvcache-ai/Mooncake; "
                 "pass --mooncake-dir or set RKV_MOONCAKE_DIR")


def read_mooncake(path, max_requests=None):
    """[(input_length, hash_ids)] of a Mooncake trace; checks the block count."""
    reqs = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if max_requests is not None and len(reqs) >= max_requests:
                break
            if not line.strip():
                continue
            r = json.loads(line)
            n, ids = r["input_length"], r["hash_ids"]
            if len(ids) != math.ceil(n / BLOCK):
                raise ValueError(f"{path}:{lineno}: {len(ids)} hash ids for {n} tokens")
            reqs.append((n, ids))
    return reqs


def write_mooncake(path, reqs):
    with open(path, "w") as f:
        for i, (n, ids) in enumerate(reqs):
            f.write(json.dumps({"timestamp": i * 100, "input_length": n,
                                "output_length": 16, "hash_ids": ids}) + "\n")


def synth_mooncake(seed, sessions=40, turns=6, system_prompts=3, max_blocks=12):
    """A tiny conversation-like trace in Mooncake format: sessions share one of
    a few system prompts and grow turn by turn (each turn's prompt is the
    previous prompt plus new blocks); sessions interleave, some return late.
    Ids are prefix-chained like the real traces: a fresh id per new block."""
    rng = random.Random(seed)
    next_id = [0]

    def fresh(k):
        ids = list(range(next_id[0], next_id[0] + k))
        next_id[0] += k
        return ids

    systems = [fresh(rng.randint(1, 3)) for _ in range(system_prompts)]
    live = []
    for s in range(sessions):
        live.append({"ids": list(systems[rng.randrange(system_prompts)]), "left": turns})
    reqs = []
    while live:
        sess = live[rng.randrange(min(len(live), 8))]  # a window of active sessions
        room = max_blocks - len(sess["ids"])
        if room <= 0:
            sess["left"] = 0
        else:
            sess["ids"] = sess["ids"] + fresh(rng.randint(1, min(3, room)))
            n = (len(sess["ids"]) - 1) * BLOCK + rng.randint(1, BLOCK)
            reqs.append((n, list(sess["ids"])))
            # A partial last block is not reusable: the next turn starts a new id there.
            if n % BLOCK:
                sess["ids"] = sess["ids"][:-1]
            sess["left"] -= 1
        if sess["left"] <= 0:
            live.remove(sess)
    return reqs


def unique_blocks(reqs):
    """(distinct ids, distinct ids of full blocks) of a Mooncake request list."""
    every, full = set(), set()
    for n, ids in reqs:
        every.update(ids)
        full.update(ids[:n // BLOCK])
    return len(every), len(full)


def log_space(lo, hi, points):
    """points integers from lo to hi (both included), log-spaced, distinct."""
    if points <= 1 or hi <= lo:
        return [hi]
    out = []
    for k in range(points):
        v = int(round(math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * k / (points - 1))))
        if not out or v > out[-1]:
            out.append(v)
    return out


def _run_summary(cmd, name):
    """Run a `radixkv run` command; its summary with the mean TTFT and latency
    of the requests added (the summary gives percentiles) and the wall time."""
    w0 = time.perf_counter()
    lines = run_json(cmd, name)
    wall = time.perf_counter() - w0
    s = summary_of(lines)
    done = [r for r in lines if r.get("type") == "request" and "error" not in r]
    s["ttft_mean"] = sum(r["ttft"] for r in done) / len(done) if done else None
    s["latency_mean"] = sum(r["latency"] for r in done) / len(done) if done else None
    s["wall_seconds"] = wall
    s["command"] = command_text(cmd)
    return s


def run_sim(radixkv, trace, model, name, extra=(), gpu="h100"):
    """`radixkv run --backend sim` on a trace (see _run_summary)."""
    return _run_summary([radixkv, "run", "--backend", "sim", "--model", model, "--gpu", gpu,
                         "--trace", trace, "--no-progress"] + list(extra), name)


def head_lines(src, dst, n):
    """Copies the first n lines of src to dst (all of them when n is None)."""
    with open(src) as f, open(dst, "w") as g:
        for i, line in enumerate(f):
            if n is not None and i >= n:
                break
            g.write(line)
    return dst


def mooncake_path(name, cfg_trace, mooncake_dir, synthetic, tmpdir, seed=7):
    """The path of a Mooncake trace, or of the generated stand-in with
    --synthetic; exits 77 when the real trace is missing."""
    if synthetic:
        path = os.path.join(tmpdir, f"generated_{cfg_trace}.jsonl")
        if not os.path.exists(path):
            write_mooncake(path, synth_mooncake(seed))
        return path
    path = os.path.join(mooncake_dir, MOONCAKE_TRACES[cfg_trace])
    if not os.path.exists(path):
        fail(name, f"skip: {path} is missing ({MOONCAKE_HELP})", 77)
    return path


def trace_stats(path):
    """(requests, longest prompt + output) of a JSON Lines or Mooncake trace."""
    n = longest = 0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if "hash_ids" in r:
                total = r["input_length"] + r.get("output_length", 16)
            else:
                total = len(r["tokens"]) + r.get("max_tokens", 16)
            n += 1
            longest = max(longest, total)
    return n, longest


def cache_sim(radixkv, trace, cache, capacity, page_size, name, policy=None):
    """The summary of one `radixkv cache-sim --summary-only` replay, with the
    wall time of the process added."""
    cmd = [radixkv, "cache-sim", "--cache", cache, "--capacity", str(int(capacity)),
           "--page-size", str(page_size), "--summary-only", "--no-progress", trace]
    if policy:
        cmd[4:4] = ["--evict-policy", policy]
    w0 = time.perf_counter()
    s = summary_of(run_json(cmd, name))
    s["wall_seconds"] = time.perf_counter() - w0
    s["command"] = command_text(cmd)
    return s


def working_set(radixkv, trace, page_size, name):
    """Tokens a cache of unlimited size computes on the trace (prompt tokens
    minus matched tokens under radix): the capacity at which nothing is evicted,
    up to partial pages."""
    s = cache_sim(radixkv, trace, "radix", prompt_tokens(trace) + page_size, page_size, name)
    return s["new_tokens"]


def prompt_tokens(path):
    """Σ prompt tokens of a JSON Lines or Mooncake trace."""
    total = 0
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                total += r["input_length"] if "hash_ids" in r else len(r["tokens"])
    return total


def run_engine(radixkv, trace, be, name, extra=()):
    """`radixkv run` on a real backend (cpu): like run_sim, with its threads."""
    opts = ["--threads", str(be["threads"])] if be.get("threads") else []
    return _run_summary([radixkv, "run", "--backend", be["backend"], "--model", be["model"],
                         "--trace", trace, "--no-progress"] + opts + list(extra), name)


# The name a generated stand-in goes by in tables and prose: never a Mooncake trace's.
STAND_IN = "generated"


def stand_in(rows):
    """Rows with the generated stand-in named as what it is. Without the traces
    every Mooncake workload of an experiment (mooncake-conversation,
    mooncake-synthetic) is the same generated trace, so the rows of the first
    such workload are kept under the name "generated" and the copies of the
    others dropped; rows of real traces and other workloads are unchanged."""
    def generated(r):
        c = r["config"]
        return str(c.get("workload", "")).startswith("mooncake") and \
            (c.get("source") or {}).get("mooncake") == STAND_IN
    names = list(dict.fromkeys(r["config"]["workload"] for r in rows if generated(r)))
    out = []
    for r in rows:
        w = r["config"].get("workload")
        if w in names[1:]:
            continue
        if names and w == names[0]:
            r = dict(r, config=dict(r["config"], workload=STAND_IN))
        out.append(r)
    return out


def is_mooncake(workload):
    """A workload read from the Mooncake traces, or from their generated stand-in."""
    return workload == STAND_IN or str(workload).startswith("mooncake")
