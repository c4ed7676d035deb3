#!/usr/bin/env python3
"""The allocation-failure loop (issue 21): a short cache-sim run, a short `run`
with pins and tiers, and the attention entry points, with allocation k of
radixkv's own code failing, for every k (or a deterministic sample of them when
there are more than --max-points).

Each point must either
  - end in a clean error: non-zero exit, a "radixkv ...: ..." message naming
    the memory that failed, no summary line, only complete JSON lines on
    stdout, the tier's files gone; or
  - absorb the failure: exit 0 with the same output as the run without one
    (timings aside);
and never give a sanitizer report (leaks included: run with detect_leaks=1).
After an error the commands run the cache's own check on what remains; it
must pass.

--part loaders runs the scenarios added for issue 29 instead (the sharded
checkpoint loader, `run --tier-remote` against a redis-server started here),
as a test of its own so that each part has its own time limit.

Needs a build with -Dfault_injection=true (radix/fault_alloc.h); otherwise 77.
Usage: test_alloc_faults.py RADIXKV FAULT_ATTN [--max-points N] [--part base|loaders]
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402
import redis_util  # noqa: E402

EXE, ATTN = sys.argv[1], sys.argv[2]
MAX_POINTS = int(sys.argv[sys.argv.index("--max-points") + 1]) if "--max-points" in sys.argv else 120
PART = sys.argv[sys.argv.index("--part") + 1] if "--part" in sys.argv else "base"
cli = CliCheck(EXE)
check = cli.check


def run(args, k, log, tier_dir=None):
    env = {"RKV_FAULT_ALLOC": str(k), "RKV_FAULT_ALLOC_LOG": log,
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")}
    if os.path.exists(log):
        os.unlink(log)
    rc, out, err = cli.run(args, stdin=None, env=env, timeout=120)
    calls, fired = 0, 0
    if os.path.exists(log):
        with open(log) as f:
            calls, fired = (int(x) for x in f.read().split())
    return rc, out, err, calls, fired


# Every sim scenario runs --fixed-clock: by default the sim clock also charges
# the scheduler's measured CPU time, so with arrivals spread in time a loaded
# machine (or a point whose failure path costs more CPU) steps differently, and
# both the output and the number of allocations change from run to run.


def stable(out):
    """The output without its timings (floats vary from run to run)."""
    lines = []
    for l in out.splitlines():
        o = json.loads(l)
        lines.append({k: v for k, v in o.items() if not isinstance(v, float)})
    return lines


def sample(total, most=None):
    most = most or MAX_POINTS
    if total <= most:
        return list(range(1, total + 1))
    head, tail = most // 3, most // 6
    mid = most - head - tail
    pts = set(range(1, head + 1)) | set(range(total - tail + 1, total + 1))
    step = (total - head - tail) / (mid + 1)
    pts |= {head + int(step * (i + 1)) for i in range(mid)}
    return sorted(pts)


def scenario(name, args, tmp, tier_dir=None, most=None, fresh_ns=False):
    log = os.path.join(tmp, "alloc.log")
    tries = [0]

    def with_ns(a):
        """A remote tier namespace of its own per invocation (fresh_ns)."""
        tries[0] += 1
        return a + ["--tier-remote-ns", f"faults{tries[0]}"] if fresh_ns else a

    rc, out0, err0, total, _ = run(with_ns(args), 0, log)
    if total == 0:
        print("radixkv was built without -Dfault_injection=true: skipping", file=sys.stderr)
        sys.exit(77)
    check(rc == 0, f"{name}: the run without a failure exits 0 ({err0.strip()[-300:]})")
    base = stable(out0)
    pts = sample(total, most)
    clean = absorbed = 0
    for k in pts:
        rc, out, err, calls, fired = run(with_ns(args), k, log)
        what = f"{name}: allocation {k} of {total}"
        check("Sanitizer" not in err and "runtime error" not in err,
              f"{what}: sanitizer report\n{err[-3000:]}")
        check(out == "" or out.endswith("\n"), f"{what}: output cut inside a line")
        if tier_dir:
            left = os.listdir(tier_dir)
            check(not left, f"{what}: tier files left behind: {left[:3]}")
        if not fired:
            check(rc == 0, f"{what}: not reached, yet exit {rc}")
            continue
        if rc == 0:
            same = stable(out) == base
            check(same, f"{what}: exit 0 with different output\n{err[-500:]}")
            absorbed += same
            continue
        try:
            types = [json.loads(l)["type"] for l in out.splitlines()]
        except ValueError:
            types = ["<not JSON>"]
        msg = [l for l in err.splitlines() if l.startswith("radixkv")]
        check(not any("fails its check" in l for l in msg), f"{what}: the cache is inconsistent after the error: {msg[-1:]}")
        ok = ("summary" not in types and "<not JSON>" not in types and msg
              and any("memory" in l or "cannot allocate" in l for l in msg) and rc in (1, 2))
        check(ok, f"{what}: exit {rc}, not a clean out-of-memory error: {msg[-2:]} {types[-2:]}")
        clean += bool(ok)
    print(f"{name}: {total} allocation points, {len(pts)} tried, {clean} clean errors, "
          f"{absorbed} absorbed without a change", file=sys.stderr)


def write_sharded_checkpoint(d):
    """A tiny Llama-style checkpoint in two shards with an index (issue 29:
    the sharded loader joins the loop)."""
    V, C, F, QD, KD = 64, 128, 32, 128, 64
    cfg = {"model_type": "llama", "vocab_size": V, "hidden_size": C, "intermediate_size": F,
           "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
           "max_position_embeddings": 256, "eos_token_id": 1, "tie_word_embeddings": False}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    L = "model.layers.0."
    shapes = [("model.embed_tokens.weight", [V, C]), (L + "input_layernorm.weight", [C]),
              (L + "self_attn.q_proj.weight", [QD, C]), (L + "self_attn.k_proj.weight", [KD, C]),
              (L + "self_attn.v_proj.weight", [KD, C]), (L + "self_attn.o_proj.weight", [C, QD]),
              (L + "post_attention_layernorm.weight", [C]), (L + "mlp.gate_proj.weight", [F, C]),
              (L + "mlp.up_proj.weight", [F, C]), (L + "mlp.down_proj.weight", [C, F]),
              ("model.norm.weight", [C]), ("lm_head.weight", [V, C])]
    rnd = random.Random(5)
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    for part, shard in enumerate(names):
        mine = shapes[:6] if part == 0 else shapes[6:]
        header, blobs, off = {}, [], 0
        for name, shape in mine:
            n = 1
            for x in shape:
                n *= x
            blob = struct.pack(f"<{n}f", *[rnd.uniform(-0.1, 0.1) for _ in range(n)])
            header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
            blobs.append(blob)
            off += len(blob)
            weight_map[name] = shard
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(d, shard), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


with tempfile.TemporaryDirectory() as tmp:
    trace = os.path.join(tmp, "trace.jsonl")
    with open(trace, "w") as f:
        for i in range(12):
            toks = [1, 2, 3, 4] + [10 + (i % 3), 20 + i, 30 + i]
            f.write(json.dumps({"id": i, "step": i // 2, "tokens": toks, "max_tokens": 2}) + "\n")
    pin = os.path.join(tmp, "pin.jsonl")
    with open(pin, "w") as f:
        f.write('{"tokens": [1, 2, 3, 4]}\n')
    # Batches that grow from step to step (the engine's batch arrays are
    # re-grown: a failure there once leaked them), every point tried.
    grow = os.path.join(tmp, "grow.jsonl")
    with open(grow, "w") as f:
        for i in range(8):
            toks = [1, 2, 3, 4] + [100 + i] * (3 + 8 * i)
            f.write(json.dumps({"id": i, "step": i, "arrival": 0.001 * i, "tokens": toks,
                                "max_tokens": 3}) + "\n")
    if PART == "base":
        scenario("cache-sim radix", ["cache-sim", "--cache", "radix", "--capacity", "16", "--page-size", "2",
                                     "--tier-host", "8", "--tier-disk", "8", "--pin", pin, "--check",
                                     "--no-progress", trace], tmp)
        scenario("cache-sim hash", ["cache-sim", "--cache", "hash", "--capacity", "16", "--page-size", "2",
                                    "--check", "--no-progress", trace], tmp)
        tdir = os.path.join(tmp, "tier")
        os.mkdir(tdir)
        scenario("run", ["run", "--threads", "1", "--no-progress", "--trace", trace, "--pin", pin,
                         "--kv-tokens", "24", "--page-size", "2", "--tier-host", "8", "--tier-disk", "8",
                         "--tier-dir", tdir, "--max-running", "4"], tmp, tier_dir=tdir)
        scenario("run sim, growing batches", ["run", "--backend", "sim", "--fixed-clock", "--no-progress", "--trace", grow,
                                              "--page-size", "2", "--max-running", "8"], tmp, most=80)
        # The multi-replica driver under every router (its approximate trees
        # included: a failure there once changed the route silently).
        for router in ("round-robin", "least-load", "cache-aware"):
            scenario(f"run --replicas 2 --router {router}",
                     ["run", "--backend", "sim", "--fixed-clock", "--no-progress", "--trace", grow, "--page-size", "2",
                      "--replicas", "2", "--router", router], tmp, most=80 if router == "cache-aware" else 30)
        # Disaggregated: handoffs, their NIC queues, handoffs waiting for room on
        # the decode engine and a request refused before its prefill (issue 45;
        # this pool makes all of them happen).
        scenario("run --prefill 2 --decode 1", ["run", "--backend", "sim", "--fixed-clock", "--no-progress", "--trace", grow,
                                                "--page-size", "2", "--kv-tokens", "64", "--prefill", "2",
                                                "--decode", "1", "--decode-router", "cache-aware"], tmp,
                 most=60)
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        p = subprocess.run([ATTN], capture_output=True, text=True, env=env, timeout=120)
        sys.stderr.write(p.stdout)
        check(p.returncode == 0 and "Sanitizer" not in p.stderr,
              f"attention entry points: exit {p.returncode}\n{p.stderr[-2000:]}")
    else:
        # The sharded checkpoint loader (config, index, two shards) under a short run.
        ckpt = os.path.join(tmp, "ckpt")
        os.mkdir(ckpt)
        write_sharded_checkpoint(ckpt)
        scenario("run, sharded checkpoint", ["run", "--threads", "1", "--no-progress", "--trace", trace,
                                             "--model", ckpt, "--weights", ckpt, "--page-size", "2",
                                             "--max-running", "4"], tmp, most=60)
        # Disaggregated engines (the handoff from a prefill to a decode engine)
        # on a profile read from a file: the profile reader's allocations too.
        prof = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime",
                            "backends", "profiles", "h100.json")
        scenario("run --prefill/--decode --sim-profile",
                 ["run", "--backend", "sim", "--fixed-clock", "--no-progress", "--trace", grow, "--page-size", "2",
                  "--prefill", "1", "--decode", "1", "--sim-profile", prof], tmp, most=60)
        # The remote tier (a redis-server started here; left out without one). Its
        # namespace is new at every point, so no point reads another's pages. The
        # reply timeout is long: at the default 1 s a loaded machine can take the
        # tier down mid-run (tier_remote.h), which changes the output and the
        # order of the allocations, so a point would not fail where it should.
        if redis_util.installed():
            redis = redis_util.Redis(tmp)
            try:
                scenario("run --tier-remote", ["run", "--backend", "sim", "--fixed-clock", "--no-progress", "--trace", grow,
                                               "--page-size", "2", "--kv-tokens", "48", "--tier-remote", redis.url,
                                               "--tier-remote-ttl", "60", "--tier-remote-timeout", "60000"],
                         tmp, most=60, fresh_ns=True)
            finally:
                redis.stop()
        else:
            print("run --tier-remote: redis-server not found, scenario left out", file=sys.stderr)

sys.exit(cli.finish("every allocation point ends cleanly"))
