"""KV cache events of radixkv.sglang.RadixCache against SGLang 0.5.23's own
RadixCache, both with enable_kv_cache_events, driven in one process by the
same random operation sequences (sglang_harness.py's step protocol; keys
plain or with extra_key and/or cache_salt; page sizes 1, 4 and 16; SGLang's
default event format and dynamo's, each with and without a LoRA name for
extra_key "a"): after every call into the tree, take_events() of both must
be equal (event types, block hashes, parent hashes, token ids, block sizes,
cache_salt, lora_name, in order). The check can fail: a sequence replayed
with events off on the adapter must give none where SGLang gave some, and
the sequences must store blocks under a cache_salt and under a LoRA name.
Runs in the sglang venv (RKV_SGLANG_PYTHON); skips (77) without.
"""
import os
import random
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

N_SEQS = int(os.environ.get("RKV_SGLANG_SEQUENCES", "600"))


def lora_names(named):
    """SGLang's KvEventLoraNames, naming extra_key "a" when named (as
    admission registers a LoRA request's namespace)."""
    from sglang.srt.mem_cache.events import KvEventLoraNames
    names = KvEventLoraNames()
    if named:
        names.register(types.SimpleNamespace(lora_id="0" * 32, extra_key="a"), "lora-a")
    return names


def as_tuple(ev):
    fields = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
              "medium", "cache_salt", "session_id", "lora_name")
    return (type(ev).__name__,) + tuple(repr(getattr(ev, f, None)) for f in fields)


def main():
    reexec_in_venv("RKV_SGLANG_PYTHON", __file__, "scripts/sglang_venv.sh makes it")
    import sglang_harness as h
    why = h.native_hash_missing()
    if why:
        print(f"skip: {why}")
        return 77
    from radixkv.sglang import RadixCache as Adapter
    from sglang.srt.mem_cache.radix_cache import RadixCache

    rng = random.Random(23)
    diffs = events = stored = removed = 0
    off_missing = salted = named = 0
    first = None
    for t in range(N_SEQS):
        P = (1, 4, 16)[t % 3]
        dynamo, named_a = t % 4 in (1, 3), t % 4 >= 2
        names = lora_names(named_a)
        trace = h.random_trace(rng, P, vocab=30, max_lines=9, max_extra=2 * P + 6, namespace_p=0.3,
                               namespaces=["a", "b", ""], salt_p=0.15)
        longest = max(-(-len(l["tokens"]) // P) for l in trace)
        num_pages = rng.randrange(max(2, longest // 2), longest * 3 + 2)
        logs = []
        for side in ("sglang", "radixkv", "off"):
            kv = h.PagedAllocator(num_pages, P)
            if side == "sglang":
                tree = RadixCache.create_simulated(mock_allocator=kv, page_size=P,
                                                   enable_kv_cache_events=True,
                                                   dynamo_kv_event_format=dynamo,
                                                   kv_event_lora_names=names)
            else:
                tree = Adapter.create_simulated(mock_allocator=kv, page_size=P,
                                                num_pages=2 * num_pages,
                                                enable_kv_cache_events=side == "radixkv",
                                                dynamo_kv_event_format=dynamo,
                                                kv_event_lora_names=names)
            log = [("init", [as_tuple(e) for e in tree.take_events()])]
            h.replay(trace, P, num_pages, tree=tree, kv=kv, with_kv=True,
                     on_op=lambda name, tr: log.append(
                         (name, [as_tuple(e) for e in tr.take_events()])))
            logs.append(log)
        a, b, off = logs
        n = sum(len(e) for _, e in a)
        events += n
        stored += sum(1 for _, es in a for e in es if e[0] == "BlockStored")
        removed += sum(1 for _, es in a for e in es if e[0] == "BlockRemoved")
        # as_tuple's fields 7 and 9: cache_salt and lora_name.
        salted += sum(1 for _, es in a for e in es if e[0] == "BlockStored" and e[7] != "None")
        named += sum(1 for _, es in a for e in es if e[0] == "BlockStored" and e[9] != "None")
        off_missing += n > 0 and off != a
        if a != b:
            diffs += 1
            if first is None:
                first = (t, P, num_pages, trace, next((x, y) for x, y in zip(a, b) if x != y))
    print(f"sglang_events: {N_SEQS} sequences, {events} events ({stored} BlockStored, "
          f"{removed} BlockRemoved; {salted} stores with a cache_salt, {named} with a LoRA "
          f"name), {diffs} sequences differ; events off differs on {off_missing}")
    if first is not None:
        t, P, num_pages, trace, (x, y) = first
        print(f"first difference: seq {t} P={P} pages={num_pages}\ntrace={trace}\n"
              f"sglang:  {x}\nradixkv: {y}")
        return 1
    if removed == 0 or stored == 0 or off_missing == 0 or salted == 0 or named == 0:
        print("FAIL: the sequences never stored, never evicted, never stored under a "
              "cache_salt or a LoRA name, or events off went unnoticed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
