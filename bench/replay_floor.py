#!/usr/bin/env python3
"""How far each cache's whole replay is from the memory floor of the
interface: bench/sglang_cache_bench.py's replay (keys as SGLang's scheduler
hands them over) with SGLang's Python RadixCache, its UnifiedRadixCache (the
Rust TreeCore where it loads) and radixkv.sglang.RadixCache, timed inside
the caches' calls (its CallClock), beside bench/replay_floor.c run in the
same process's turn on the same requests: the reads and writes any exact
cache makes on the caller's data (match reads the matched ids, insert reads
its whole key, path_device_indices writes the matched KV indices), with no
tree behind them. JSON on stdout.

The floor is a floor: the cache's own copy of the tokens, its bookkeeping
and the calls are left out (replay_floor.c says what it counts). What it
tells: the thread CPU a cache spends above it, and how large a ratio against
SGLang's Python cache the memory work alone would still allow
(python_over_floor: that cache's time over the floor's).

replay_floor.c also replays the requests through radixkv's radix tree in C
alone (its --capacity: the tree's match, lock, evict and insert, no Python,
no SGLang objects, no tensors, no KV values), and checks that the tree
matches what the adapter matched: "tree" with nothing else between requests,
"tree_churn" with 1 MB of other memory written between them (--churn-kb), as
a process's own work between its cache calls does (the keys then come from
memory, as for the floor's own reads). The adapter's
adapter_minus_tree_cpu_ms and adapter_minus_tree_churn_cpu_ms are what its
interface adds to the tree's own work, by either.

The calls alone: each cache's replay again with the tree's work taken out,
the same calls in the same order with the same params objects, but each
request's key two tokens long (token 0, then one of its own: every match
finds token 0, every insert adds one page, every evict frees one), and the
capacity that makes the replay's number of evict calls (calls_only): what
the interface costs a cache per call, whatever its tree does. The
adapter's calls alone beside the C tree alone (tree_plus_calls_cpu_ms)
and beside the floor (floor_plus_calls_cpu_ms) against SGLang's Python cache's
time over 20 (python_cpu_ms_over_20) tell whether 20x that cache is within
reach of this tree, or of any tree, behind this binding.

Run in the sglang Rust-core venv with the package importable and the build's
replay_floor built:
  PYTHONPATH=build/python "$(scripts/sglang_rust_venv.sh)" bench/replay_floor.py \\
      --floor-bin build/bench/replay_floor
Saved runs as a Markdown table (any python):
  bench/replay_floor.py --table run1.json run2.json ...
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from array import array

CACHES = ("sglang_python", "sglang_unified", "radixkv_adapter")


def spread(xs, scale=1.0):
    xs = [x * scale for x in xs]
    return {"median": round(statistics.median(xs), 4),
            "range": [round(min(xs), 4), round(max(xs), 4)]}


def write_keys(path, items, matched):
    with open(path, "wb") as f:
        f.write(b"RKVFLOOR1")
        f.write(struct.pack("<i", len(items)))
        for ids, m in zip(items, matched):
            f.write(struct.pack("<ii", len(ids), m))
            f.write(ids.tobytes())


def calls_only(scb, build, count, evicts, frees, repeats):
    """Thread CPU ms inside a cache's calls (scb.CallClock) over `count`
    requests whose keys are two tokens (0, then the request's own), so that
    the tree does next to nothing and what is left is each call's cost: the
    params read, the result objects, the tensors, the allocator's callback.
    The capacity is the smallest that makes `evicts` evict calls (a smaller
    one evicts more: each request then needs one token it does not have);
    (spread of the repeats, capacity). Exits when no capacity gives
    `evicts`."""
    keys = [array("q", [0, i + 1]) for i in range(count)]

    def run(capacity, call=scb.plain_call):
        tree, *_ = build()
        return scb.replay(tree, tree.token_to_kv_pool_allocator, keys, capacity,
                          insert_frees_duplicates=frees, call=call)

    lo, hi = 2, count + 2
    while lo < hi:
        mid = (lo + hi) // 2
        if run(mid)[1] > evicts:
            lo = mid + 1
        else:
            hi = mid
    got = run(lo)[1]
    if got != evicts:
        sys.exit(f"replay_floor.py: no capacity makes {evicts} evict calls of {count} "
                 f"two-token requests (capacity {lo}: {got})")
    cpu = []
    for _ in range(repeats):
        clock = scb.CallClock()
        run(lo, clock)
        cpu.append(clock.cpu / 1e6)
    return spread(cpu), lo


NAMES = {"sglang_python": "SGLang RadixCache (Python)",
         "sglang_unified": "SGLang UnifiedRadixCache",
         "radixkv_adapter": "radixkv.sglang.RadixCache"}


def table(paths):
    """A Markdown table of saved runs (this script's JSON): per run the
    floor's parts and each cache's in-call thread CPU with its ratio to the
    floor, then the ranges over the runs."""
    runs = []
    for p in paths:
        try:
            with open(p) as f:
                runs.append((os.path.basename(p), json.load(f)))
        except (OSError, ValueError) as e:
            sys.exit(f"replay_floor.py: --table {p}: {e}")
    caches = [c for c in CACHES if all(c in d["caches"] for _, d in runs)]
    tree = all("tree_total_ms" in d["floor"] for _, d in runs)
    calls = all("adapter_calls_cpu_ms" in d for _, d in runs)
    head = (["run", "floor ms (match / insert / path)"]
            + (["C tree ms, alone / with churn (x floor)"] if tree else [])
            + [f"{NAMES[c]} ms (x floor)" for c in caches]
            + (["adapter's calls alone ms", "C tree + calls / floor + calls, ms"] if calls else [])
            + ["Python / floor", "Python / 20, ms"])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, d in runs:
        f = d["floor"]
        cells = [name, f"{f['total_ms']['median']:.3f} ({f['match_ms']['median']:.3f} / "
                       f"{f['insert_ms']['median']:.3f} / {f['path_ms']['median']:.3f})"]
        if tree:
            cells.append(f"{f['tree_total_ms']['median']:.3f} / "
                         f"{f['tree_churn_total_ms']['median']:.3f} ({d['tree_over_floor_cpu']:.2f}"
                         f" / {d['tree_churn_over_floor_cpu']:.2f})")
        cells += [f"{d['caches'][c]['in_cache_thread_cpu_ms']['median']:.3f} "
                  f"({d['caches'][c]['over_floor_cpu']:.2f})" for c in caches]
        if calls:
            cells += [f"{d['adapter_calls_cpu_ms']:.3f}",
                      f"{d['tree_plus_calls_cpu_ms']:.3f} / {d['floor_plus_calls_cpu_ms']:.3f}"]
        cells += [f"{d['python_over_floor_cpu']:.1f}", f"{d['python_cpu_ms_over_20']:.3f}"]
        print("| " + " | ".join(cells) + " |")
    if len(runs) > 1:
        def rng(xs, fmt):
            return f"{fmt.format(min(xs))}–{fmt.format(max(xs))}"
        cells = ["range", rng([d["floor"]["total_ms"]["median"] for _, d in runs], "{:.3f}")]
        if tree:
            cells.append(rng([d["tree_over_floor_cpu"] for _, d in runs], "{:.2f}") + " / "
                         + rng([d["tree_churn_over_floor_cpu"] for _, d in runs], "{:.2f}") + " x")
        cells += [rng([d["caches"][c]["over_floor_cpu"] for _, d in runs], "{:.2f}") + " x"
                  for c in caches]
        if calls:
            cells += [rng([d["adapter_calls_cpu_ms"] for _, d in runs], "{:.3f}"),
                      rng([d["tree_plus_calls_cpu_ms"] for _, d in runs], "{:.3f}") + " / "
                      + rng([d["floor_plus_calls_cpu_ms"] for _, d in runs], "{:.3f}")]
        cells += [rng([d["python_over_floor_cpu"] for _, d in runs], "{:.1f}"),
                  rng([d["python_cpu_ms_over_20"] for _, d in runs], "{:.3f}")]
        print("| " + " | ".join(cells) + " |")


def cache_rows(scb, caches, items, capacity, repeats):
    """Each cache's replay (scb.replay, timed by its CallClock) and its calls
    alone (calls_only): (rows, the adapter's matched length per request, hit
    tokens and evict calls per cache)."""

    class MatchLog(scb.CallClock):
        """CallClock that also keeps each match_prefix's matched length."""

        def __init__(self):
            super().__init__()
            self.matched = []

        def __call__(self, fn, *a):
            r = super().__call__(fn, *a)
            if hasattr(r, "device_prefix_len"):
                self.matched.append(r.device_prefix_len)
            return r

    rows, matched, hits, evicts = {}, None, {}, {}
    for name in CACHES:
        if name not in caches:
            continue
        build = caches[name][0]
        cpu, wall = [], []
        for _ in range(repeats):
            tree, *_ = build()
            clock = MatchLog()
            h, e = scb.replay(tree, tree.token_to_kv_pool_allocator, items, capacity,
                              insert_frees_duplicates=name.startswith("sglang_unified"),
                              call=clock)
            cpu.append(clock.cpu / 1e6)
            wall.append(clock.wall / 1e6)
            hits[name], evicts[name] = h, e
            if name == "radixkv_adapter":
                matched = clock.matched
        rows[name] = {"in_cache_thread_cpu_ms": spread(cpu), "in_cache_wall_ms": spread(wall)}
        rows[name]["calls_only_thread_cpu_ms"], rows[name]["calls_only_capacity"] = calls_only(
            scb, build, len(items), e, name.startswith("sglang_unified"), repeats)
    return rows, matched, hits, evicts


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--table":
        if len(sys.argv) < 3:
            sys.exit("usage: replay_floor.py --table RUN.json [RUN.json ...]")
        return table(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--floor-bin", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bench",
        "replay_floor"), help="the built bench/replay_floor.c (default: build/bench/replay_floor)")
    ap.add_argument("--replay-requests", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5, help="replays per cache, each on a fresh one")
    ap.add_argument("--rounds", type=int, default=21, help="rounds of the floor")
    args = ap.parse_args()
    if not os.access(args.floor_bin, os.X_OK):
        sys.exit(f"replay_floor.py: --floor-bin {args.floor_bin}: not an executable "
                 "(build it: ninja -C build bench/replay_floor)")
    if args.replay_requests < 1 or args.repeats < 1 or args.rounds < 1:
        sys.exit("replay_floor.py: --replay-requests, --repeats and --rounds must be >= 1")
    # The replay, its workload and caches (torch and SGLang: imported here, so
    # that --table runs in any python).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sglang_cache_bench as scb
    import torch
    torch.set_num_threads(1)

    # sglang_cache_bench's own defaults for what make_caches reads.
    cfg = argparse.Namespace(page_size=1, seed=args.seed, replay_requests=args.replay_requests)
    mreqs = scb.mooncake_like(cfg)
    caches, info = scb.make_caches(cfg, sum(len(r) for r in mreqs))
    items = [array("q", r) for r in mreqs]
    capacity = scb.replay_capacity(mreqs)
    rows, matched, hits, evicts = cache_rows(scb, caches, items, capacity, args.repeats)
    if len(set(hits.values())) != 1:
        sys.exit(f"replay_floor.py: the caches' hit tokens differ: {hits}")
    if len(set(evicts.values())) != 1:
        sys.exit(f"replay_floor.py: the caches' evict calls differ: {evicts}")
    if matched is None or len(matched) != len(items):
        sys.exit("replay_floor.py: radixkv_adapter's replay gave no match length per request")
    with tempfile.TemporaryDirectory() as d:
        keys = os.path.join(d, "keys.bin")
        write_keys(keys, items, matched)
        run = subprocess.run([args.floor_bin, "--keys", keys, "--rounds", str(args.rounds),
                              "--capacity", str(capacity)], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"replay_floor.py: {args.floor_bin} failed ({run.returncode}): {run.stderr}")
    floor = json.loads(run.stdout.strip().splitlines()[-1])
    f_cpu, f_wall = floor["total_ms"]["median"], floor["total_wall_ms"]["median"]
    t_cpu = floor["tree_total_ms"]["median"]
    tc_cpu = floor["tree_churn_total_ms"]["median"]
    for r in rows.values():
        r["over_floor_cpu"] = round(r["in_cache_thread_cpu_ms"]["median"] / f_cpu, 2)
        r["over_floor_wall"] = round(r["in_cache_wall_ms"]["median"] / f_wall, 2)
    py = rows["sglang_python"]["in_cache_thread_cpu_ms"]["median"]
    calls = rows["radixkv_adapter"]["calls_only_thread_cpu_ms"]["median"]
    out = {"bench": "replay_floor", "requests": len(items), "hit_tokens": hits["sglang_python"],
           "matched_tokens": sum(matched), "key_tokens": sum(len(i) for i in items),
           "capacity_tokens": capacity, "repeats": args.repeats, "unified": info,
           "floor": floor, "caches": rows,
           # The largest ratio against SGLang's Python cache the floor allows.
           "python_over_floor_cpu": round(py / f_cpu, 2),
           "python_cpu_ms_over_20": round(py / 20, 4),
           # radixkv's tree in C alone over the floor, and what the adapter's
           # interface (params, results, tensors, values) adds to it.
           "tree_over_floor_cpu": round(t_cpu / f_cpu, 2),
           "tree_churn_over_floor_cpu": round(tc_cpu / f_cpu, 2),
           "adapter_minus_tree_cpu_ms": round(
               rows["radixkv_adapter"]["in_cache_thread_cpu_ms"]["median"] - t_cpu, 4),
           "adapter_minus_tree_churn_cpu_ms": round(
               rows["radixkv_adapter"]["in_cache_thread_cpu_ms"]["median"] - tc_cpu, 4),
           # The adapter's calls with no tree work, added to the C tree alone
           # and to the floor: neither includes the other's work (but for the
           # tree's few steps on two-token keys), so a cache doing both takes
           # about the sum or more. Above the Python cache's time over 20,
           # 20x is out of reach behind these calls.
           "evict_calls": evicts["radixkv_adapter"],
           "adapter_calls_cpu_ms": calls,
           "tree_plus_calls_cpu_ms": round(t_cpu + calls, 4),
           "tree_churn_plus_calls_cpu_ms": round(tc_cpu + calls, 4),
           "floor_plus_calls_cpu_ms": round(f_cpu + calls, 4)}
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
