#!/usr/bin/env python3
"""vLLM's own KVCacheManager/BlockPool against `radixkv cache-sim --cache hash
--step-semantics vllm`, over generated traces.

Usage: vllm_kv_manager.py RADIXKV DUPLICATES [TRACES [SEED]]

DUPLICATES is keep or dedup (--hash-duplicates). Runs under a python that can
import vllm 0.33.0 (scripts/vllm_venv.sh); vLLM's code is used unmodified, only
observed: BlockPool._maybe_evict_cached_block is wrapped to log which block
left the cache. Each trace is replayed by both; per request the matched tokens,
per step the evicted blocks in order (each as its tokens) and after every step
the free queue (each cached free block as its tokens, in eviction order) must
agree. vLLM keeps a block it computed again beside the cached copy; dedup frees
the copy, so under dedup only traces where no block is computed twice are
compared (the harness says how many it skipped). Exits 1 on any difference,
printing the first few.

Drive of one step, as cache_sim.h's vllm semantics: per request in trace order
get_computed_blocks then allocate_slots(all of its uncached tokens); a request
refused (None) and the rest of its step get an error line; at the step's end
every admitted request is freed in trace order.
"""
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402


def fail_import(e):
    print(f"vllm cannot be imported ({e}); run under the vllm venv (scripts/vllm_venv.sh)",
          file=sys.stderr)
    sys.exit(77)


if __name__ == "__main__":
    reexec_in_venv("RKV_VLLM_PYTHON", __file__, "scripts/vllm_venv.sh makes it")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
try:
    import torch
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import (get_block_hash, get_request_block_hasher,
                                             init_none_hash)
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig,
                                            KVCacheGroupSpec)
    from vllm.v1.request import Request
    import vllm
except Exception as e:  # any import failure means the venv is not usable
    fail_import(e)

if vllm.__version__ != "0.33.0":
    print(f"vllm {vllm.__version__} is not the pinned 0.33.0", file=sys.stderr)
    sys.exit(77)

init_none_hash(sha256)


def gen_trace(rng, aligned):
    """A random trace: P in 1/4/16, a pool of 4..14 pages (eviction pressure),
    prompts from a few shared prefixes plus a random tail, 1..3 requests a step,
    namespaces on some lines. aligned: every length a multiple of P (vLLM then
    recomputes a cached last block: a duplicate)."""
    P = rng.choice([1, 4, 16])
    pages = rng.randint(4, 14)
    prefixes = [[rng.randint(1, 40) for _ in range(rng.randint(1, 3 * P))] for _ in range(3)]
    lines, step, rid = [], 0, 0
    for _ in range(rng.randint(6, 16)):
        for _ in range(rng.choice([1, 1, 2, 3])):
            toks = list(rng.choice(prefixes)) + [rng.randint(1, 40) for _ in range(rng.randint(0, 2 * P))]
            if aligned:
                toks = toks[:max(P, len(toks) // P * P)] + [rng.randint(1, 40)] * max(0, P - len(toks))
            toks = toks[:pages * P] or [1]
            line = {"id": rid, "step": step, "tokens": toks}
            if rng.random() < 0.2:
                line["namespace"] = rng.choice(["a", "b"])
            lines.append(line)
            rid += 1
        step += 1
    return P, pages, lines


def run_radixkv(exe, P, pages, lines, dup, tmp):
    """matched per id, evicted per step (non-empty lists), free queue per step."""
    text = "".join(json.dumps(l) + "\n" for l in lines)
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    # PATH empty: no graphviz, so --dump-dir writes the JSON pictures only (the
    # rest of the environment, sanitizer options included, passes through).
    p = subprocess.run([exe, "cache-sim", "--cache", "hash", "--hash-duplicates", dup,
                        "--step-semantics", "vllm", "--capacity", str(pages * P),
                        "--page-size", str(P), "--check", "--dump-dir", tmp, "-"],
                       input=text, capture_output=True, text=True, env=dict(os.environ, PATH=""))
    if p.returncode != 0:
        raise RuntimeError(f"cache-sim failed ({p.returncode}): {p.stderr.strip()}")
    matched, evicted, steps = {}, {}, []
    for l in p.stdout.splitlines():
        o = json.loads(l)
        if o["type"] == "request":
            matched[o["id"]] = o.get("matched", "refused")
            if not steps or steps[-1] != o["step"]:
                steps.append(o["step"])
        elif o["type"] == "step" and o["evicted"]:
            evicted[o["step"]] = o["evicted"]
    queues = {}
    for k, step in enumerate(steps):
        with open(os.path.join(tmp, "step_%04d.json" % (k + 1))) as f:
            d = json.load(f)
        toks = {b["page"]: b["tokens"] for b in d["blocks"]}
        queues[step] = [toks[pg] for pg in d["free_queue"]]
    return matched, evicted, queues


def run_vllm(P, pages, lines):
    """matched per id, evicted per step (non-empty lists), free queue per step
    (cached blocks, head first), and whether a block was computed twice."""
    spec = FullAttentionSpec(block_size=P, num_kv_heads=1, head_size=8, dtype=torch.float32)
    # +1: vLLM's block 0 is its null block, never handed out.
    cfg = KVCacheConfig(num_blocks=pages + 1, kv_cache_tensors=[],
                        kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
    mgr = KVCacheManager(cfg, max_model_len=1 << 20, scheduler_block_size=P, hash_block_size=P,
                         enable_caching=True)
    pool = mgr.block_pool
    hasher = get_request_block_hasher(P, sha256)
    tokens_of = {}  # block hash -> its tokens
    step_ev = []
    orig = pool._maybe_evict_cached_block

    def observe(block):
        h = block.block_hash
        gone = orig(block)
        if gone:
            step_ev.append(tokens_of[bytes(get_block_hash(h))])
        return gone

    pool._maybe_evict_cached_block = observe
    matched, evicted, queues, dup = {}, {}, {}, False
    steps = []
    for l in lines:
        if not steps or steps[-1][0]["step"] != l["step"]:
            steps.append([])
        steps[-1].append(l)
    for group in steps:
        step_ev.clear()
        admitted, refused = [], False
        for l in group:
            toks = l["tokens"]
            req = Request(str(l["id"]), toks, SamplingParams(max_tokens=1), None,
                          cache_salt=l.get("namespace"), block_hasher=hasher)
            for i, h in enumerate(req.block_hashes):
                tokens_of[bytes(h)] = toks[i * P:(i + 1) * P]
            if refused:
                matched[l["id"]] = "refused"
                continue
            blocks, hit, _ = mgr.get_computed_blocks(req)
            # A full block computed although a copy is cached: vLLM keeps both.
            cached = [pool.get_cached_block(req.block_hashes[i], [0]) is not None
                      for i in range(hit // P, len(toks) // P)]
            got = mgr.allocate_slots(req, len(toks) - hit, hit, blocks)
            if got is None:
                refused = True
                matched[l["id"]] = "refused"
                continue
            dup = dup or any(cached)
            req.num_computed_tokens = len(toks)
            matched[l["id"]] = hit
            admitted.append(req)
        for req in admitted:
            mgr.free(req)
        if step_ev:
            evicted[group[0]["step"]] = list(step_ev)
        queues[group[0]["step"]] = [tokens_of[bytes(get_block_hash(b.block_hash))]
                                    for b in pool.free_block_queue.get_all_free_blocks()
                                    if b.block_hash is not None]
    return matched, evicted, queues, dup


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("keep", "dedup"):
        print(__doc__, file=sys.stderr)
        return 2
    exe, dup_mode = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 42
    rng = random.Random(seed)
    diffs, compared, skipped, requests, evictions, refused, with_dup = [], 0, 0, 0, 0, 0, 0
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for t in range(n):
            P, pages, lines = gen_trace(rng, aligned=(t % 2 == 1))
            vm, ve, vq, dup = run_vllm(P, pages, lines)
            if dup and dup_mode == "dedup":
                skipped += 1
                continue
            rm, re_, rq = run_radixkv(exe, P, pages, lines, dup_mode, tmp)
            compared += 1
            requests += len(lines)
            refused += sum(1 for v in vm.values() if v == "refused")
            with_dup += dup
            evictions += sum(len(v) for v in ve.values())
            for what, a, b in (("matched", rm, vm), ("evicted", re_, ve), ("free queue", rq, vq)):
                if a != b:
                    keys = sorted(set(a) | set(b))
                    k = next(k for k in keys if a.get(k) != b.get(k))
                    diffs.append(f"trace {t} (P={P}, {pages} pages) {what} at {k}: "
                                 f"radixkv {a.get(k)} vllm {b.get(k)}")
    for d in diffs[:5]:
        print("DIFF:", d, file=sys.stderr)
    print(json.dumps({"duplicates": dup_mode, "traces": n, "compared": compared,
                      "skipped_duplicates": skipped, "with_duplicates": with_dup,
                      "requests": requests, "refused": refused, "evicted_blocks": evictions,
                      "differences": len(diffs)}))
    return 1 if diffs or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
