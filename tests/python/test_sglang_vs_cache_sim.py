"""SGLang 0.5.23's own RadixCache against `cache-sim --cache radix`
(through radixkv.cache_sim, the same code in process): random traces at page
sizes 1, 4 and 16, several requests per step, eviction under pressure,
namespaces as SGLang's extra_key. Equal per request (matched tokens, or an
error line), equal evicted nodes' tokens in order per step, equal totals.
The harness can fail: the same traces under fifo on radixkv's side must
differ somewhere. Runs in the sglang venv (RKV_SGLANG_PYTHON, made by
scripts/sglang_venv.sh); skips (77) without it.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

N_TRACES = int(os.environ.get("RKV_SGLANG_TRACES", "3000"))


def main():
    reexec_in_venv("RKV_SGLANG_PYTHON", __file__, "scripts/sglang_venv.sh makes it")
    import radixkv
    import sglang_harness as h

    rng = random.Random(20261128)
    diffs = requests = evict_steps = fifo_diffs = 0
    first = None
    for t in range(N_TRACES):
        P = (1, 4, 16)[t % 3]
        trace = h.random_trace(rng, P, vocab=40, max_lines=14, max_extra=3 * P + 8, namespace_p=0.2,
                               namespaces=["a", "b"])
        longest = max(-(-len(l["tokens"]) // P) for l in trace)
        num_pages = rng.randrange(max(2, longest // 2), longest * 3 + 2)
        reqs, steps = h.replay(trace, P, num_pages)
        sim = radixkv.cache_sim(iter(trace), cache="radix", capacity=num_pages * P, page_size=P)
        got = [{"id": r["id"], "step": r["step"], "error": True} if "error" in r else r
               for r in sim.requests]
        requests += len(reqs)
        evict_steps += len(steps)
        if got != reqs or sim.steps != steps:
            diffs += 1
            if first is None:
                first = (P, num_pages, trace, reqs, got, steps, sim.steps)
        if t % 10 == 0:
            fifo = radixkv.cache_sim(iter(trace), cache="radix", capacity=num_pages * P,
                                     page_size=P, evict_policy="fifo")
            fifo_got = [{"id": r["id"], "step": r["step"], "error": True} if "error" in r else r
                        for r in fifo.requests]
            fifo_diffs += fifo_got != reqs or fifo.steps != steps
    print(f"sglang_vs_cache_sim: {N_TRACES} traces, {requests} requests, {evict_steps} evicting "
          f"steps, {diffs} differences; fifo in place of lru differs on {fifo_diffs} of "
          f"{(N_TRACES + 9) // 10}")
    if first:
        P, num_pages, trace, reqs, got, steps, ssteps = first
        print(f"first difference: P={P} pages={num_pages}\ntrace={trace}\nsglang={reqs}\n"
              f"radixkv={got}\nsglang steps={steps}\nradixkv steps={ssteps}")
        return 1
    if fifo_diffs == 0:
        print("FAIL: fifo never differed: the comparison cannot tell policies apart")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
