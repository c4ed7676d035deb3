#!/usr/bin/env python3
"""Stable decode steps move the last batch by one row instead of rebuilding it
(engine.c batch_moves), and the multi-engine driver lets an engine take several
steps per call up to its next event (engine_step_until: quiet decode steps pass
other engines' clocks); the outputs must not notice. Every case below runs
`radixkv run --backend sim` three times, as is, with RKV_REBUILD_BATCHES=1
(every batch built whole) and with RKV_STEP_ONCE=1 (one step per call, the
driver's order step by step), and the stdouts must be equal byte for byte,
after masking the one measured field (the scheduler's CPU per step, which a
single engine reads from the thread clock).

The cases cross what can end a stable decode run: page boundaries (page size
4 with long outputs), preemption (pools too small for the running set),
arrivals, finishes, handoffs between prefill and decode engines, overlap (whose
plans alternate, so nothing moves), sampled tokens (temperature 0.7 draws
depend on the step index), one engine and several. The last cases spread
long outputs over many engines, so that each decodes a batch of one or two
requests for many steps between arrivals, handoffs and other engines' finishes:
the runs where an engine's quiet steps overtake the others most.

Usage: batch_moves.py RADIXKV
"""
import os
import re
import subprocess
import sys
import tempfile

from golden import first_difference  # this folder: the script's own

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = os.path.join(HERE, "traces")
MASK_RE = re.compile(r'"sched_cpu_ms_per_step":[^,}]*')
RUN = ["run", "--backend", "sim", "--no-progress", "--fixed-clock"]


def t(name):
    return os.path.join(TRACES, name)


def cases(tmp):
    long_mt = os.path.join(tmp, "long_multi_turn.jsonl")
    sc = os.path.join(tmp, "self_consistency.jsonl")
    gens = [
        (long_mt, ["gen", "multi-turn", "--num", "8", "--turns", "3", "--prompt-len", "30",
                   "--output-len", "45", "--shared-len", "40", "--seed", "7", "--rate", "40",
                   "--vocab", "500"]),
        (sc, ["gen", "self-consistency", "--num", "4", "--prompt-len", "50", "--branching", "4",
              "--output-len", "37", "--seed", "11", "--vocab", "500"]),
    ]
    return gens, [
        ("one_engine_p4", ["--page-size", "4", "--kv-tokens", "512", "--trace", long_mt]),
        ("one_engine_preempt", ["--page-size", "4", "--kv-tokens", "200", "--trace", long_mt]),
        ("one_engine_sampled", ["--page-size", "8", "--kv-tokens", "1024", "--trace", sc]),
        ("one_engine_overlap", ["--page-size", "4", "--kv-tokens", "512", "--schedule",
                                "overlap", "--trace", long_mt]),
        ("replicas_3", ["--replicas", "3", "--router", "least-load", "--page-size", "4",
                        "--kv-tokens", "320", "--trace", long_mt]),
        ("replicas_5_sampled", ["--replicas", "5", "--router", "cache-aware", "--kv-tokens",
                                "512", "--trace", sc]),
        ("disagg_1_2", ["--prefill", "1", "--decode", "2", "--page-size", "4", "--kv-tokens",
                        "400", "--trace", long_mt]),
        ("disagg_2_3_tcp", ["--prefill", "2", "--decode", "3", "--link", "tcp", "--kv-tokens",
                            "256", "--max-tokens", "30", "--trace", t("multi_turn.jsonl")]),
        ("disagg_3_1_tight", ["--prefill", "3", "--decode", "1", "--page-size", "4",
                              "--kv-tokens", "240", "--trace", long_mt]),
        ("disagg_mooncake", ["--prefill", "3", "--decode", "2", "--page-size", "64",
                             "--kv-tokens", "4096", "--max-tokens", "40", "--trace",
                             t("mooncake.jsonl")]),
        ("disagg_2_6_spread", ["--prefill", "2", "--decode", "6", "--page-size", "4",
                               "--kv-tokens", "600", "--trace", long_mt]),
        # Prompts in chunks of 16 rows keep the prefill engine busy for several
        # steps while decode engines run: a decode engine's quiet steps must not
        # pass the prefill engine's clock (its next chunk may hand it a request).
        ("disagg_1_2_chunked", ["--prefill", "1", "--decode", "2", "--max-batched-tokens",
                                "16", "--page-size", "4", "--kv-tokens", "600", "--trace",
                                long_mt]),
        ("disagg_1_2_chunked_overlap", ["--prefill", "1", "--decode", "2", "--schedule",
                                        "overlap", "--max-batched-tokens", "16", "--page-size",
                                        "4", "--kv-tokens", "600", "--trace", long_mt]),
        ("disagg_1_4_sampled", ["--prefill", "1", "--decode", "4", "--decode-router",
                                "round-robin", "--link", "tcp", "--kv-tokens", "2048",
                                "--trace", sc]),
        ("replicas_8_spread", ["--replicas", "8", "--router", "round-robin", "--page-size",
                               "4", "--kv-tokens", "256", "--trace", long_mt]),
        ("replicas_4_mooncake", ["--replicas", "4", "--router", "cache-aware", "--page-size",
                                 "64", "--kv-tokens", "4096", "--max-tokens", "90", "--trace",
                                 t("mooncake.jsonl")]),
    ]


SWITCHES = ("RKV_REBUILD_BATCHES", "RKV_STEP_ONCE")


def run(exe, args, switch):
    env = dict(os.environ)
    for name in SWITCHES:
        env.pop(name, None)
    if switch:
        env[switch] = "1"
    p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=240, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(args)}\n{p.stderr[-2000:]}")
    return MASK_RE.sub('"sched_cpu_ms_per_step":"*"', p.stdout)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    exe = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        gens, runs = cases(tmp)
        for path, argv in gens:
            p = subprocess.run([exe] + argv + ["--out", path], capture_output=True, text=True,
                               timeout=60)
            if p.returncode != 0:
                print(f"FAIL gen {' '.join(argv)}: {p.stderr}", file=sys.stderr)
                return 1
        for name, args in runs:
            try:
                moved = run(exe, RUN + args, None)
                others = [(sw, run(exe, RUN + args, sw)) for sw in SWITCHES]
            except RuntimeError as e:
                print(f"FAIL {name}: {e}", file=sys.stderr)
                failures += 1
                continue
            lines = moved.count("\n")
            # A run that printed nothing compares nothing.
            if lines < 2 or '"type":"summary"' not in moved:
                print(f"FAIL {name}: {lines} lines, no summary", file=sys.stderr)
                failures += 1
                continue
            bad = [(sw, out) for sw, out in others if out != moved]
            for sw, other in bad:
                print(f"FAIL {name}: {sw}=1 " + first_difference(moved, other, "as is", f"{sw}=1"),
                      file=sys.stderr)
            failures += len(bad)
            if not bad:
                print(f"ok {name}: {lines} lines equal")
    print(f"{len(runs)} cases, {failures} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
