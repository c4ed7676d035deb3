"""radixkv.sglang.RadixCache against SGLang 0.5.23's own RadixCache, both
driven in one process by the same random operation sequences (the cache
simulator's step protocol of sglang_harness.py: match_prefix with and
without extra_key, inc/dec_lock_ref, evict under pressure, insert; page
sizes 1, 4 and 16): equal match lengths, equal KV indices returned, equal
evicted KV indices in order, equal evictable and protected sizes after
every call. The check can fail: every tenth sequence also runs the adapter
under fifo, which must differ from SGLang's lru somewhere. Runs in the sglang venv (RKV_SGLANG_PYTHON); skips (77) without.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

N_SEQS = int(os.environ.get("RKV_SGLANG_SEQUENCES", "10000"))


class SlotLog:
    """An allocator that records the KV indices freed to it, in order."""
    device = "cpu"

    def __init__(self):
        self.freed = []

    def free_segment(self, slots, start_pos=0):
        self.freed += slots.tolist()

    def free(self, slots):
        self.free_segment(slots)


def check_tree_locks(rng, n_seqs):
    """BasePrefixCache.lock / unlock, which the adapter overrides (no
    inc_lock_ref receipt to convert, no size reads for a delta), against
    SGLang's RadixCache's inherited ones: random inserts, matches, locks
    (a node locked twice, the root), unlocks (None too) and evictions under
    locks; equal TreeLock receipts, equal sizes after every call, equal
    evicted KV indices in order. The number of sequences that differed."""
    import torch
    from radixkv.sglang import RadixCache as Adapter
    from sglang.srt.mem_cache.base_prefix_cache import (EvictParams, InsertParams,
                                                        MatchPrefixParams)
    from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
    diffs = 0
    for t in range(n_seqs):
        P, seed = (1, 4, 16)[t % 3], rng.random()
        logs = []
        for side in ("sglang", "radixkv"):
            r, kv = random.Random(seed), SlotLog()
            tree = (RadixCache.create_simulated(mock_allocator=kv, page_size=P)
                    if side == "sglang" else
                    Adapter.create_simulated(mock_allocator=kv, page_size=P, num_pages=1024))
            held, log, nxt = [], [], 0
            for _ in range(40):
                toks = [r.randrange(4) for _ in range(r.randrange(1, 6) * P)]
                op = r.random()
                if op < 0.35:
                    res = tree.insert(InsertParams(key=RadixKey(toks),
                                                   value=torch.arange(nxt, nxt + len(toks))))
                    nxt += len(toks)
                    # Every field as SGLang's, in its order (the adapter fills
                    # InsertResult's dict itself), the node aside.
                    log.append(("insert", res.prefix_len, type(res).__name__,
                                [(k, v) for k, v in vars(res).items()
                                 if k != "last_device_node"]))
                elif op < 0.7:
                    m = tree.match_prefix(MatchPrefixParams(key=RadixKey(toks)))
                    for _ in range(1 + (r.random() < 0.2)):
                        lk = tree.lock(m.last_device_node)
                        held.append(lk)
                        log.append(("lock", m.device_prefix_len, type(lk).__name__, lk.receipt,
                                    lk.swa_released))
                elif op < 0.85 and held:
                    tree.unlock(held.pop(r.randrange(len(held))))
                elif op < 0.88:
                    tree.unlock(None)
                else:
                    ev = tree.evict(EvictParams(num_tokens=r.randrange(1, 4 * P)))
                    log.append(("evict", ev.num_tokens_evicted))
                log.append((tree.evictable_size(), tree.protected_size()))
            while held:
                tree.unlock(held.pop())
            log.append((tree.evictable_size(), tree.protected_size(), kv.freed))
            logs.append(log)
        diffs += logs[0] != logs[1]
    return diffs


def main():
    reexec_in_venv("RKV_SGLANG_PYTHON", __file__, "scripts/sglang_venv.sh makes it")
    import sglang_harness as h
    from radixkv.sglang import RadixCache as Adapter
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams

    rng = random.Random(41)
    diffs = ops = requests = evicted = fifo_diffs = 0
    first = None
    for t in range(N_SEQS):
        P = (1, 4, 16)[t % 3]
        trace = h.random_trace(rng, P, vocab=30, max_lines=9, max_extra=2 * P + 6, namespace_p=0.25,
                               namespaces=["a", "b", ""])
        longest = max(-(-len(l["tokens"]) // P) for l in trace)
        num_pages = rng.randrange(max(2, longest // 2), longest * 3 + 2)
        logs = []
        for side in ("sglang", "radixkv") + (("fifo",) if t % 10 == 0 else ()):
            sizes = []
            if side == "sglang":
                tree, kv = h.make_sglang(num_pages, P)
            elif side == "radixkv":
                kv = h.PagedAllocator(num_pages, P)
                tree = Adapter.create_simulated(mock_allocator=kv, page_size=P,
                                                num_pages=2 * num_pages)
            else:
                kv = h.PagedAllocator(num_pages, P)
                tree = Adapter(CacheInitParams(disable=False, req_to_token_pool=None,
                                               token_to_kv_pool_allocator=kv, page_size=P,
                                               eviction_policy="fifo"), num_pages=2 * num_pages)
            reqs, steps = h.replay(trace, P, num_pages, tree=tree, kv=kv, with_kv=True,
                                   on_op=lambda name, tr: sizes.append(
                                       (name, tr.evictable_size(), tr.protected_size())))
            flat_steps = [(s["step"], [x for node in s["evicted"] for x in node]) for s in steps]
            logs.append((reqs, flat_steps, kv.freed_slots, sizes))
        a, b = logs[:2]
        fifo_diffs += len(logs) == 3 and logs[2] != a
        ops += len(a[3])
        requests += len(a[0])
        evicted += len(a[2])
        if a != b:
            diffs += 1
            if first is None:
                what = ["requests (matched, kv)", "evicted tokens", "evicted kv indices",
                        "sizes after each call"]
                first = (P, num_pages, trace, [w for w, x, y in zip(what, a, b) if x != y], a, b)
    print(f"sglang_adapter: {N_SEQS} sequences, {requests} requests, {ops} calls with sizes "
          f"compared, {evicted} evicted KV indices, {diffs} differences; the adapter under fifo "
          f"differs on {fifo_diffs} of {(N_SEQS + 9) // 10}")
    if first:
        P, num_pages, trace, what, a, b = first
        print(f"first difference ({', '.join(what)}): P={P} pages={num_pages}\ntrace={trace}\n"
              f"sglang={a}\nradixkv={b}")
        return 1
    if fifo_diffs == 0:
        print("FAIL: fifo never differed: the comparison cannot tell policies apart")
        return 1
    lock_seqs = max(30, N_SEQS // 20)
    lock_diffs = check_tree_locks(rng, lock_seqs)
    print(f"sglang_adapter: lock / unlock, {lock_seqs} sequences, {lock_diffs} differences")
    if lock_diffs:
        return 1
    return check_bound_calls()


def check_bound_calls():
    """The adapter's match_prefix, path_device_indices, insert, evict, lock
    and unlock bound on the instance to C calls (RadixCache._bind): the
    class's methods answer the same; setting disable
    takes the bindings off (SGLang's disabled answers, nothing cached or
    locked) and clearing it puts them back; a dropped adapter is freed at
    once (the bindings hold no reference cycle through it). 0, or 1 naming
    the first failure."""
    import gc
    import weakref
    import torch
    from radixkv.sglang import RadixCache as Adapter
    from functools import partial
    from sglang.srt.mem_cache.base_prefix_cache import (DecLockRefParams, EvictParams,
                                                        InsertParams, InsertResult,
                                                        MatchPrefixParams, TreeLock)
    from sglang.srt.mem_cache.radix_cache import RadixKey

    def fail(what):
        print(f"FAIL: bound calls: {what}")
        return 1

    tree = Adapter.create_simulated(mock_allocator=SlotLog(), page_size=1, num_pages=64)
    key = RadixKey(list(range(5)))
    a = tree.insert(InsertParams(key=key, value=torch.arange(5)))
    b = Adapter.insert(tree, InsertParams(key=key, value=torch.arange(5, 10)))
    if (a.prefix_len, b.prefix_len) != (0, 5) or type(b) is not InsertResult:
        return fail(f"insert {a.prefix_len}, the class's insert {b.prefix_len}")
    for k in (key, RadixKey(list(range(7)), limit=4), RadixKey(list(range(5)), limit=-2),
              RadixKey(list(range(5)), extra_key="e")):
        m, mc = (tree.match_prefix(MatchPrefixParams(key=k)),
                 Adapter.match_prefix(tree, MatchPrefixParams(key=k)))
        if (type(m) is not type(mc) or m.device_prefix_len != mc.device_prefix_len
                or m[4:] != mc[4:] or not torch.equal(
                    tree.path_device_indices(m.last_device_node),
                    Adapter.path_device_indices(tree, mc.last_device_node))):
            return fail(f"match_prefix {m!r}, the class's {mc!r}")
    evicted = {}
    for side in ("bound", "class"):
        t2 = Adapter.create_simulated(mock_allocator=SlotLog(), page_size=2, num_pages=64)
        for i in range(4):
            t2.insert(InsertParams(key=RadixKey(list(range(10 * i, 10 * i + 6))),
                                   value=torch.arange(6 * i, 6 * i + 6)))
        evict = t2.evict if side == "bound" else partial(Adapter.evict, t2)
        evicted[side] = ([evict(EvictParams(num_tokens=n)) for n in (3, 0, -1, 5, 100, 1)],
                         t2.token_to_kv_pool_allocator.freed)
    if evicted["bound"] != evicted["class"]:
        return fail(f"evict {evicted['bound']}, the class's {evicted['class']}")
    ev = (tree.take_events(), tree.take_events())
    if ev != ([], []) or ev[0] is ev[1] or ev[0] != Adapter.take_events(tree):
        return fail(f"take_events with events off: {ev!r}")
    node = tree.match_prefix(MatchPrefixParams(key=key)).last_device_node
    lk = Adapter.lock(tree, node)
    if tree.protected_size() != 5 or lk != TreeLock(node, DecLockRefParams()):
        return fail(f"the class's lock: {lk!r}, protected {tree.protected_size()}")
    Adapter.unlock(tree, lk)
    tree.disable = True
    off = (tree.insert(InsertParams(key=RadixKey(list(range(9))), value=torch.arange(9))),
           tree.lock(node), tree.match_prefix(MatchPrefixParams(key=key)).device_prefix_len)
    if (off[0] != InsertResult(prefix_len=0) or off[1] != TreeLock(node, DecLockRefParams())
            or off[2] != 0 or tree.protected_size() != 0 or tree.evictable_size() != 5):
        return fail(f"disabled: {off!r}")
    tree.unlock(off[1])
    tree.disable = False
    lk = tree.lock(node)
    if tree.protected_size() != 5:
        return fail("lock after enabling again")
    tree.unlock(lk)
    gc.disable()
    try:
        ref = weakref.ref(tree)
        del tree, node, lk, off
        if ref() is not None:
            return fail("a dropped adapter lives on until a garbage collection")
    finally:
        gc.enable()
    print("sglang_adapter: bound calls as the methods, disable on and off, freed at once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
