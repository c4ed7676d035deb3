#!/usr/bin/env python3
"""Golden outputs: `radixkv cache-sim` and `radixkv run --backend sim` on fixed
traces (and `radixkv gen`, which made them) must print exactly what they printed
when the expected files were made.

This guards refactors that promise "behaviour unchanged": every case below is
run, its stdout (and, for cases with a dump, every JSON and DOT file of the dump
directory) is compared byte for byte with tests/golden/expected/<case>/.

Masked before comparing, because they measure the machine, not the behaviour:
  cache-sim summary  "seconds"                wall time of the replay
  run summary        "sched_cpu_ms_per_step"  scheduler CPU time
Each is replaced by "*" in both the output and the expected file (the expected
files keep the masked form). SVG files of a dump depend on the installed
graphviz and are not compared. stderr is not compared (progress, tables).

Usage: golden.py RADIXKV [--update]
  --update  rewrite tests/golden/expected/ from the current binary (review the
            diff: it is the behaviour change).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = os.path.join(HERE, "traces")
EXPECTED = os.path.join(HERE, "expected")
MASKED = ("seconds", "sched_cpu_ms_per_step")
MASK_RE = re.compile(r'"(' + "|".join(MASKED) + r')":[^,}]*')


def t(name):
    return os.path.join(TRACES, name)


SIM = ["cache-sim", "--no-progress"]
RUN = ["run", "--backend", "sim", "--no-progress", "--fixed-clock"]

# (case name, arguments, dump?) -- a dump directory is appended as --dump-dir.
CASES = [
    ("sim_radix_lru_p1", SIM + ["--cache", "radix", "--capacity", "300", "--page-size", "1",
                                "--check", t("multi_turn.jsonl")], False),
    ("sim_radix_lru_p4", SIM + ["--cache", "radix", "--capacity", "200", "--page-size", "4",
                                t("multi_turn.jsonl")], False),
    ("sim_radix_lfu_p4", SIM + ["--cache", "radix", "--evict-policy", "lfu", "--capacity", "200",
                                "--page-size", "4", t("tree_of_thought.jsonl")], False),
    ("sim_radix_fifo_p2", SIM + ["--cache", "radix", "--evict-policy", "fifo", "--capacity", "120",
                                 "--page-size", "2", t("tree_of_thought.jsonl")], False),
    ("sim_radix_dump", SIM + ["--cache", "radix", "--capacity", "60", "--page-size", "4",
                              t("tot_small.jsonl")], True),
    ("sim_hash_xxh3_p4", SIM + ["--cache", "hash", "--capacity", "200", "--page-size", "4",
                                "--check", t("multi_turn.jsonl")], False),
    ("sim_hash_sha256_p8", SIM + ["--cache", "hash", "--hash", "sha256", "--capacity", "160",
                                  "--page-size", "8", t("tree_of_thought.jsonl")], False),
    ("sim_hash_md5_p4", SIM + ["--cache", "hash", "--hash", "md5", "--capacity", "120",
                               "--page-size", "4", t("tree_of_thought.jsonl")], False),
    ("sim_hash_dump", SIM + ["--cache", "hash", "--capacity", "60", "--page-size", "4",
                             t("tot_small.jsonl")], True),
    ("sim_hash_nocache_p4", SIM + ["--cache", "hash-nocache", "--capacity", "200", "--page-size",
                                   "4", t("multi_turn.jsonl")], False),
    ("sim_trie_p1", SIM + ["--cache", "trie", "--capacity", "250", "--page-size", "1",
                           "--check", t("multi_turn.jsonl")], False),
    ("sim_trie_p4", SIM + ["--cache", "trie", "--capacity", "120", "--page-size", "4",
                           t("tree_of_thought.jsonl")], False),
    ("sim_trie_dump", SIM + ["--cache", "trie", "--capacity", "60", "--page-size", "4",
                             t("tot_small.jsonl")], True),
    ("sim_none_p4", SIM + ["--cache", "none", "--capacity", "200", "--page-size", "4",
                           t("multi_turn.jsonl")], False),
    ("sim_radix_pin", SIM + ["--cache", "radix", "--capacity", "200", "--page-size", "4",
                             "--pin", t("pin.jsonl"), t("multi_turn.jsonl")], False),
    ("sim_hash_pin", SIM + ["--cache", "hash", "--capacity", "200", "--page-size", "4",
                            "--pin", t("pin.jsonl"), t("multi_turn.jsonl")], False),
    ("sim_radix_tier", SIM + ["--cache", "radix", "--capacity", "120", "--page-size", "4",
                              "--tier-host", "200", "--tier-disk", "200", "--model", "default",
                              t("multi_turn.jsonl")], False),
    ("sim_hash_tier", SIM + ["--cache", "hash", "--capacity", "120", "--page-size", "4",
                             "--tier-host", "400", t("tree_of_thought.jsonl")], False),
    ("sim_mooncake_radix", SIM + ["--cache", "radix", "--capacity", "4096", "--page-size", "512",
                                  t("mooncake.jsonl")], False),
    ("sim_mooncake_hash", SIM + ["--cache", "hash", "--capacity", "3072", "--page-size", "256",
                                 t("mooncake.jsonl")], False),
    ("run_radix_fcfs_sync", RUN + ["--kv-tokens", "256", "--trace", t("multi_turn.jsonl")], False),
    ("run_radix_lpm_overlap", RUN + ["--kv-tokens", "320", "--sched-policy", "lpm", "--schedule",
                                     "overlap", "--trace", t("tree_of_thought.jsonl")], False),
    ("run_hash_dfs_p8", RUN + ["--cache", "hash", "--page-size", "8", "--kv-tokens", "256",
                               "--sched-policy", "dfs-weight", "--trace", t("tree_of_thought.jsonl")],
     False),
    ("run_trie_random", RUN + ["--cache", "trie", "--page-size", "4", "--kv-tokens", "200",
                               "--sched-policy", "random", "--seed", "3", "--max-running", "4",
                               "--trace", t("multi_turn.jsonl")], False),
    ("run_none_offline", RUN + ["--cache", "none", "--kv-tokens", "512", "--offline",
                                "--trace", t("multi_turn.jsonl")], False),
    ("run_radix_pin_tier", RUN + ["--kv-tokens", "192", "--pin", t("pin.jsonl"), "--tier-host",
                                  "512", "--trace", t("multi_turn.jsonl")], False),
    ("run_replicas_cache_aware", RUN + ["--replicas", "2", "--router", "cache-aware",
                                        "--kv-tokens", "256", "--trace",
                                        t("tree_of_thought.jsonl")], False),
    ("run_replicas_least_load", RUN + ["--replicas", "3", "--router", "least-load",
                                       "--kv-tokens", "256", "--evict-policy", "lfu",
                                       "--trace", t("multi_turn.jsonl")], False),
    # Many engines on one clock and disaggregated pools: the driver's order of
    # steps and handoffs (replicas.c) must not change when it gets faster.
    ("run_replicas_6_overlap", RUN + ["--replicas", "6", "--router", "round-robin",
                                      "--schedule", "overlap", "--kv-tokens", "256",
                                      "--trace", t("multi_turn.jsonl")], False),
    ("run_disagg_2_3", RUN + ["--prefill", "2", "--decode", "3", "--router", "cache-aware",
                              "--kv-tokens", "256", "--trace", t("multi_turn.jsonl")], False),
    ("run_disagg_tcp_slo", RUN + ["--prefill", "1", "--decode", "2", "--link", "tcp",
                                  "--schedule", "overlap", "--slo-ttft", "0.05", "--slo-tpot",
                                  "0.01", "--kv-tokens", "320", "--trace",
                                  t("tree_of_thought.jsonl")], False),
    ("run_disagg_mooncake", RUN + ["--prefill", "3", "--decode", "2", "--page-size", "64",
                                   "--kv-tokens", "4096", "--max-tokens", "6",
                                   "--trace", t("mooncake.jsonl")], False),
    # The traces above came from these commands (gen: seeded workloads).
    ("gen_multi_turn", ["gen", "multi-turn", "--num", "6", "--turns", "3", "--prompt-len", "24",
                        "--output-len", "6", "--shared-len", "40", "--seed", "3", "--rate", "50",
                        "--vocab", "500"], False),
    ("gen_tree_of_thought", ["gen", "tree-of-thought", "--num", "3", "--prompt-len", "30",
                             "--branching", "2", "--depth", "2", "--shared-len", "12", "--seed",
                             "5", "--vocab", "500"], False),
    ("run_mooncake_overlap", RUN + ["--schedule", "overlap", "--page-size", "64",
                                    "--kv-tokens", "4096", "--max-tokens", "4",
                                    "--trace", t("mooncake.jsonl")], False),
]


def first_difference(a, b, a_name, b_name):
    """Where texts a and b first differ: "differs at line N" and the two lines
    there, each under its name (the names padded to one width)."""
    x, y = a.splitlines(), b.splitlines()
    first = next((i for i in range(max(len(x), len(y)))
                  if i >= len(x) or i >= len(y) or x[i] != y[i]), 0)
    w = max(len(a_name), len(b_name)) + 1
    return (f"differs at line {first + 1}\n"
            f"  {a_name + ':':<{w}} {x[first][:300] if first < len(x) else '(missing)'}\n"
            f"  {b_name + ':':<{w}} {y[first][:300] if first < len(y) else '(missing)'}")


def mask(text):
    return MASK_RE.sub(lambda m: '"%s":"*"' % m.group(1), text)


def run_case(exe, args, dump, tmp):
    """Returns {relative file name: masked text} for one case."""
    out = {}
    argv = [exe] + args
    if dump:
        d = os.path.join(tmp, "dump")
        argv = argv[:-1] + ["--dump-dir", d, argv[-1]]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(args)}\n{p.stderr}")
    out["stdout.jsonl"] = mask(p.stdout)
    if dump:
        for name in sorted(os.listdir(d)):
            if name.endswith((".json", ".dot")):
                with open(os.path.join(d, name)) as f:
                    out["dump/" + name] = mask(f.read())
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    exe, update = sys.argv[1], "--update" in sys.argv[2:]
    failures = 0
    for name, args, dump in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                got = run_case(exe, args, dump, tmp)
            except RuntimeError as e:
                print(f"FAIL {name}: {e}", file=sys.stderr)
                failures += 1
                continue
        want_dir = os.path.join(EXPECTED, name)
        if update:
            shutil.rmtree(want_dir, ignore_errors=True)
            for rel, text in got.items():
                path = os.path.join(want_dir, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            continue
        want = {}
        for root, _, files in os.walk(want_dir):
            for fn in files:
                path = os.path.join(root, fn)
                with open(path) as f:
                    want[os.path.relpath(path, want_dir)] = f.read()
        if not want:
            print(f"FAIL {name}: no expected files in {want_dir} (run with --update)",
                  file=sys.stderr)
            failures += 1
            continue
        for rel in sorted(set(got) | set(want)):
            if got.get(rel) != want.get(rel):
                failures += 1
                print(f"FAIL {name}/{rel}: "
                      + first_difference(got.get(rel) or "", want.get(rel) or "", "got", "want"),
                      file=sys.stderr)
    if update:
        print(f"wrote {len(CASES)} cases under {EXPECTED}")
        return 0
    print(f"{len(CASES)} cases, {failures} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
