#!/usr/bin/env python3
"""vLLM 0.33.0's own Scheduler against `radixkv cache-sim --cache hash
--step-semantics vllm`, for what the two share.

Usage: vllm_scheduler.py RADIXKV [TRACES [SEED]]

The scheduler runs with a CPU VllmConfig (a one-layer model config written to
a temporary folder; no weights, no tokenizer) and a stub model output that
samples one fixed token per scheduled request. Every request asks for one
token, so it finishes at the end of the step it was scheduled in, as
cache-sim's requests do; a generated trace step's requests arrive at that
engine step. Checked per trace:
  - the requests cache-sim serves in each step up to its first refusal are the
    ones the scheduler schedules in that step (after it, vLLM retries a refused
    request in a later step, which cache-sim does not model);
  - replayed through cache-sim with the steps the scheduler actually used, every
    request is served, its matched tokens equal the scheduler's
    num_computed_tokens at scheduling, and each step evicts the same blocks in the same order.
Exits 1 on any difference, printing the first few.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

if __name__ == "__main__":
    # Before vllm_kv_manager's imports, which need the venv.
    reexec_in_venv("RKV_VLLM_PYTHON", __file__, "scripts/vllm_venv.sh makes it")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_kv_manager as kvm  # noqa: E402  (checks the vllm version too)

try:
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.structured_output import StructuredOutputManager
except Exception as e:
    kvm.fail_import(e)

MODEL = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 1,
         "num_hidden_layers": 1, "vocab_size": 1000, "max_position_embeddings": 4096,
         "rms_norm_eps": 1e-5, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2}


def make_config(model_dir, P):
    mc = ModelConfig(model=model_dir, skip_tokenizer_init=True, max_model_len=4096, dtype="float32")
    cc = CacheConfig(block_size=P, enable_prefix_caching=True)
    sc = SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=4096, max_model_len=4096,
                         enable_chunked_prefill=False, is_encoder_decoder=False)
    return VllmConfig(model_config=mc, cache_config=cc, scheduler_config=sc,
                      device_config=DeviceConfig(device="cpu"))


def run_scheduler(model_dir, P, pages, lines):
    """Per engine step the scheduled request ids in order; per id its
    num_computed_tokens at scheduling; per engine step the evicted blocks (non-empty lists)."""
    vc = make_config(model_dir, P)
    vc.cache_config.num_gpu_blocks = pages + 1  # what the engine sets after profiling
    spec = kvm.FullAttentionSpec(block_size=P, num_kv_heads=1, head_size=8, dtype=kvm.torch.float32)
    cfg = kvm.KVCacheConfig(num_blocks=pages + 1, kv_cache_tensors=[],
                            kv_cache_groups=[kvm.KVCacheGroupSpec(["layer.0"], spec)])
    sched = Scheduler(vc, cfg, StructuredOutputManager(vc), block_size=P, hash_block_size=P)
    pool = sched.kv_cache_manager.block_pool
    hasher = kvm.get_request_block_hasher(P, kvm.sha256)
    tokens_of, step_ev = {}, []
    orig = pool._maybe_evict_cached_block

    def observe(block):
        h = block.block_hash
        gone = orig(block)
        if gone:
            step_ev.append(tokens_of[bytes(kvm.get_block_hash(h))])
        return gone

    pool._maybe_evict_cached_block = observe
    arrivals = {}
    for l in lines:
        arrivals.setdefault(l["step"], []).append(l)
    scheduled, cached, evicted = {}, {}, {}
    left, t = len(lines), 0
    while left and t < 10 * len(lines) + 100:
        for l in arrivals.get(t, []):
            req = kvm.Request(str(l["id"]), l["tokens"], kvm.SamplingParams(max_tokens=1, ignore_eos=True),
                              None, cache_salt=l.get("namespace"), block_hasher=hasher)
            for i, h in enumerate(req.block_hashes):
                tokens_of[bytes(h)] = l["tokens"][i * P:(i + 1) * P]
            sched.add_request(req)
        step_ev.clear()
        out = sched.schedule()
        ids = [r.req_id for r in out.scheduled_new_reqs]
        if ids:
            scheduled[t] = [int(i) for i in ids]
            for r in out.scheduled_new_reqs:  # computed at scheduling = its prefix hit
                cached[int(r.req_id)] = r.num_computed_tokens
        req_ids = list(out.num_scheduled_tokens.keys())
        mro = ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: k for k, r in enumerate(req_ids)},
                                sampled_token_ids=[[7] for _ in req_ids])
        sched.update_from_output(out, mro)
        left -= len(ids)
        if step_ev:
            evicted[t] = list(step_ev)
        t += 1
    return scheduled, cached, evicted


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    exe = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    rng = kvm.random.Random(seed)
    diffs, requests, waited = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "model")
        dump_dir = os.path.join(tmp, "dump")
        os.makedirs(model_dir)
        os.makedirs(dump_dir)
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump(MODEL, f)
        for t in range(n):
            P, pages, lines = kvm.gen_trace(rng, aligned=(t % 2 == 1))
            scheduled, cached, evicted = run_scheduler(model_dir, P, pages, lines)
            requests += len(lines)
            # 1: admissions agree up to cache-sim's first refusal.
            rm, _, _ = kvm.run_radixkv(exe, P, pages, lines, "keep", dump_dir)
            by_step = {}
            for l in lines:
                by_step.setdefault(l["step"], []).append(l["id"])
            for step in sorted(by_step):
                served = [i for i in by_step[step] if rm[i] != "refused"]
                if len(served) < len(by_step[step]):
                    break
                if scheduled.get(step, []) != served:
                    diffs.append(f"trace {t} step {step}: cache-sim serves {served}, "
                                 f"vLLM schedules {scheduled.get(step, [])}")
                    break
            # 2: the scheduler's own steps through cache-sim.
            restep = {i: s for s, ids in scheduled.items() for i in ids}
            order = [i for s in sorted(scheduled) for i in scheduled[s]]
            byid = {l["id"]: l for l in lines}
            relines = [dict(byid[i], step=restep[i]) for i in order]
            waited += sum(1 for l in lines if restep.get(l["id"]) != l["step"])
            if len(relines) != len(lines):
                diffs.append(f"trace {t}: vLLM scheduled {len(relines)} of {len(lines)} requests")
                continue
            rm2, re2, _ = kvm.run_radixkv(exe, P, pages, relines, "keep", dump_dir)
            for what, a, b in (("matched", rm2, cached), ("evicted", re2, evicted)):
                if a != b:
                    k = next(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
                    diffs.append(f"trace {t} (P={P}, {pages} pages) {what} at {k}: "
                                 f"radixkv {a.get(k)} vllm {b.get(k)}")
    for d in diffs[:5]:
        print("DIFF:", d, file=sys.stderr)
    print(json.dumps({"traces": n, "requests": requests, "waited": waited,
                      "differences": len(diffs)}))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
