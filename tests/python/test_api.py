"""radixkv.Cache against a reference model and the CLI's registries; every
misuse an exception, never a crash.

For every registered kind, every policy the kind takes and page sizes 1, 4
and 16: seeded random requests through the caller protocol of
docs/ARCHITECTURE.md (match, lock, allocate, insert, free what the cache did
not adopt, unlock). Without eviction every match is checked against a model
that remembers which page holds each cached page-prefix; under pressure
(evict on shortage) the cache's own check and the page accounting are
checked after every operation. Exit 1 naming the first difference.
"""
import array
import collections
import dataclasses
import datetime
import gc
import json
import os
import random
import subprocess
import weakref
from typing import Any

import radixkv
from pychecks import check, count, raises

try:
    import numpy as np
except ImportError:  # the package works without numpy; those cases skip
    np = None


def registry():
    """Kinds and their policies as `radixkv list --json` gives them."""
    exe = os.environ.get("RKV_BIN")
    if not exe:
        return None
    out = subprocess.run([exe, "list", "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["kinds"]


def accounting(c, what):
    s = c.sizes()
    check(s["free_pages"] + s["inflight_pages"] + s["cached_pages"] == c.num_pages,
          f"{what}: pages do not add up: {s}")
    c.check()


def serve(c, toks, ns, ref, pressure):
    """One request through the caller protocol; returns the match length."""
    P = c.page_size
    m = c.match(toks[:-1], namespace=ns)
    n_match = m.length
    check(n_match % P == 0 and n_match <= len(toks) - 1, f"match length {n_match} (P={P})")
    pages = [int(p) for p in m.pages]
    check(len(pages) == n_match // P, "page count of a match")
    if ref is not None:
        k = 0
        while (k + 1) * P <= len(toks) - 1 and (ns, tuple(toks[:(k + 1) * P])) in ref:
            k += 1
        want = [ref[(ns, tuple(toks[:(i + 1) * P]))] for i in range(k)] if c.kind in (
            "radix", "hash", "trie") else []
        check(pages == want, f"{c.kind} P={P}: match pages {pages} != model {want}")
    c.lock(m)
    need = -(-(len(toks) - n_match) // P)
    if need > c.sizes()["free_pages"] and pressure:
        c.evict((need - c.sizes()["free_pages"]) * P)
        accounting(c, "after evict")
    if need > c.sizes()["free_pages"]:
        raises(radixkv.OutOfPages, lambda: c.alloc(need), "alloc beyond the free pages")
        c.unlock(m)
        return n_match
    new = [int(p) for p in c.alloc(need)]
    allp = pages + new
    prefix = c.insert(toks, allp, namespace=ns)
    check(prefix >= n_match or c.kind in ("none", "hash-nocache"),
          f"insert prefix {prefix} < matched {n_match}")
    # Free what the cache did not take: pages it already held another copy
    # of, and the partial last page (none and hash-nocache take every full
    # page past prefix 0 and free them themselves).
    full = len(toks) // P
    own = [allp[i] for i in range(n_match // P, prefix // P)] + allp[full:]
    if own:
        c.free(own)
    if ref is not None and c.kind in ("radix", "hash", "trie"):
        for i in range(full):
            ref.setdefault((ns, tuple(toks[:(i + 1) * P])), allp[i])
    c.unlock(m)
    accounting(c, f"{c.kind} P={P} after a request")
    return n_match


def random_requests(rng, n, vocab, base_len):
    prompts = [[rng.randrange(vocab) for _ in range(rng.randrange(1, base_len))] for _ in range(4)]
    reqs = []
    for _ in range(n):
        p = list(rng.choice(prompts))
        p = p[:rng.randrange(len(p) + 1)] + [rng.randrange(vocab) for _ in range(rng.randrange(1, 24))]
        reqs.append(p)
    return reqs


def test_protocol(kinds):
    for kind, pols in kinds:
        for policy in pols or [None]:
            for P in (1, 4, 16):
                rng = random.Random(hash((kind, policy, P)) & 0xffff)
                # No pressure: exact against the model.
                c = radixkv.Cache(kind, P, 4096, policy=policy)
                ref = {}
                for toks in random_requests(rng, 40, 50, 60):
                    serve(c, toks, rng.choice([0, 0, 7]), ref, pressure=False)
                c.close()
                # Pressure: a pool of a few requests.
                c = radixkv.Cache(kind, P, max(8, 120 // P), policy=policy)
                for toks in random_requests(rng, 60, 50, 60):
                    if -(-len(toks) // P) <= c.num_pages:
                        serve(c, toks, 0, None, pressure=True)
                c.close()


def test_conversions():
    c = radixkv.Cache("radix", 4, 64)
    toks = list(range(100, 121))
    pages = [int(p) for p in c.alloc(5)]
    check(c.insert(toks, pages) == 0, "first insert caches nothing before it")
    want = [int(p) for p in c.match(toks).pages]
    forms = [toks, tuple(toks), array.array("i", toks), array.array("l", toks),
             array.array("H", toks), memoryview(array.array("q", toks))]
    if np is not None:
        forms += [np.array(toks, dtype=np.int32), np.array(toks, dtype=np.int64),
                  np.array(toks, dtype=np.uint16), np.array(toks, dtype=np.int32)[::1]]
    for f in forms:
        m = c.match(f)
        check([int(p) for p in m.pages] == want, f"tokens as {type(f).__name__}: {list(m.pages)}")
        check(len(m) == 20 and m.length == 20, "match length of 21 tokens at P=4")
        check(memoryview(m).tolist() == want, "buffer protocol of a match")
    if np is not None:
        check(np.asarray(c.match(toks)).dtype == np.int32, "match as numpy: int32")
        check(isinstance(c.match(toks).pages, np.ndarray), "pages are numpy with numpy installed")
        # A strided view is read through its stride.
        strided = np.repeat(np.array(toks, dtype=np.int64), 2)[::2]
        check([int(p) for p in c.match(strided).pages] == want, "strided numpy tokens")
        rev = np.array(toks[::-1], dtype=np.int32)[::-1]
        check([int(p) for p in c.match(rev).pages] == want, "negative-stride numpy tokens")
    c.close()


def test_namespaces():
    c = radixkv.Cache("radix", 1, 64)
    t = [1, 2, 3, 4, 5]
    c.insert(t, [int(p) for p in c.alloc(5)], namespace="tenant-a")
    check(c.match(t, namespace="tenant-a").length == 5, "match in its namespace")
    check(c.match(t, namespace=radixkv.namespace_id("tenant-a")).length == 5,
          "a str namespace is namespace_id(str)")
    check(c.match(t).length == 0, "the default namespace sees nothing of tenant-a")
    check(c.match(t, namespace="tenant-b").length == 0, "another tenant sees nothing")
    check(c.match(t, namespace="tenant-a").namespace == radixkv.namespace_id("tenant-a"),
          "match.namespace")
    raises(ValueError, lambda: c.match(t, namespace=-1), "negative namespace")
    raises(TypeError, lambda: c.match(t, namespace=1.5), "float namespace")
    c.close()


def test_locks():
    c = radixkv.Cache("radix", 2, 32)
    t = list(range(10))
    c.insert(t, [int(p) for p in c.alloc(5)])
    m = c.match(t)
    c.lock(m)
    check(m.locked and c.sizes()["protected_tokens"] == 10, "lock protects")
    check(c.evict(100) == 0, "a locked entry is never evicted")
    c.lock(m)  # a second hold, as SGLang's inc_lock_ref may take
    check(m.locked == 2, "two locks held")
    c.unlock(m)
    check(c.sizes()["protected_tokens"] == 10 and c.evict(100) == 0, "one lock still protects")
    m_after = c.match(t)
    c.lock(m)  # still locked, so still valid after that evict
    c.unlock(m)
    c.unlock(m)
    raises(ValueError, lambda: c.unlock(m), "unlock an unlocked match")
    check(c.sizes()["evictable_tokens"] == 10, "unlock makes it evictable")
    # evict_pages names the pages it freed, in order.
    freed, pages = c.evict_pages(4)
    check(freed == 10 and sorted(int(p) for p in pages) == list(range(5)),
          f"evict_pages: {freed} tokens, pages {list(pages)}")
    raises(ValueError, lambda: c.lock(m_after), "lock a match made before evict_pages")
    accounting(c, "after evict_pages")
    c.insert(t, [int(p) for p in c.alloc(5)])
    # A dropped locked match unlocks itself.
    m2 = c.match(t)
    c.lock(m2)
    del m2
    gc.collect()
    check(c.sizes()["protected_tokens"] == 0, "a collected locked match unlocked itself")
    # A handle made before an evict may name a freed node: refused.
    m3 = c.match(t)
    c.evict(2)
    raises(ValueError, lambda: c.lock(m3), "lock a match made before an evict")
    # ... and after reset, even a locked one.
    m4 = c.match(t)
    c.lock(m4)
    c.reset()
    check(c.sizes()["cached_pages"] == 0 and c.match(t).length == 0, "reset empties the cache")
    raises(ValueError, lambda: c.unlock(m4), "unlock a match from before reset")
    raises(ValueError, lambda: c.lock(m4), "lock a match from before reset")
    other = radixkv.Cache("radix", 2, 32)
    raises(ValueError, lambda: other.lock(c.match(t)), "a match of another cache")
    raises(TypeError, lambda: c.lock(object()), "lock a non-match")
    other.close()
    c.close()


def test_misuse():
    c = radixkv.Cache("radix", 4, 16)
    raises(TypeError, lambda: c.match([1.5, 2]), "float tokens")
    raises(TypeError, lambda: c.match("abc"), "str tokens")
    raises(TypeError, lambda: c.match(b"abc"), "bytes tokens")
    raises(TypeError, lambda: c.match(None), "None tokens")
    raises(TypeError, lambda: c.match(array.array("d", [1.0])), "float array")
    raises(ValueError, lambda: c.match([1, -2, 3]), "negative token id")
    raises(ValueError, lambda: c.match([2 ** 31]), "token id beyond int32")
    raises(ValueError, lambda: c.match([2 ** 70]), "token id beyond int64")
    if np is not None:
        raises(TypeError, lambda: c.match(np.zeros(4)), "float64 numpy tokens")
        raises(TypeError, lambda: c.match(np.zeros((2, 2), dtype=np.int32)), "2-D tokens")
        raises(ValueError, lambda: c.match(np.array([-1], dtype=np.int64)), "negative int64")
        raises(ValueError, lambda: c.match(np.array([2 ** 63], dtype=np.uint64)), "huge uint64")
        # int32 numpy read in place: one pass checks every id (blocks of 8,
        # then the rest), and the message names the first bad one's index.
        for n, at in ((5, 3), (16, 0), (16, 7), (16, 15), (21, 17), (21, 20)):
            for bad in (-1, -2 ** 31):
                t32 = np.arange(n, dtype=np.int32)
                t32[at] = bad
                msg = raises(ValueError, lambda: c.match(t32), f"int32 tokens, {bad} at {at}/{n}")
                check(f"[{at}]" in msg, f"the message names index {at}: {msg}")
            pg = np.zeros(n, dtype=np.int32)
            pg[at] = 16
            msg = raises(ValueError, lambda: c.insert(np.arange(4 * n, dtype=np.int32), pg),
                         f"int32 pages, 16 at {at}/{n}")
            check(f"[{at}]" in msg and "16" in msg, f"the message names page {at}: {msg}")
        accounting(c, "after refused int32 ids")
    raises(ValueError, lambda: c.insert([1, 2, 3, 4], [-1]), "negative page id")
    raises(ValueError, lambda: c.insert([1, 2, 3, 4], [16]), "page id beyond the pool")
    raises(ValueError, lambda: c.insert([1, 2, 3, 4, 5, 6, 7, 8], [0]), "too few pages")
    msg = raises(ValueError, lambda: c.insert([1, 2, 3, 4], [3]), "insert a free page")
    check("in flight" in msg, f"the message says why: {msg}")
    accounting(c, "after refused inserts")
    p = [int(x) for x in c.alloc(1)]
    raises(ValueError, lambda: c.free(p + p), "free a page twice in one call")
    c.insert([1, 2, 3, 4], p)
    raises(ValueError, lambda: c.free(p), "free a cached page")
    raises(ValueError, lambda: c.free([5]), "free a free page")
    raises(radixkv.OutOfPages, lambda: c.alloc(16), "alloc more than free")
    raises(ValueError, lambda: c.alloc(-1), "alloc a negative count")
    raises(ValueError, lambda: c.evict(-1), "evict a negative count")
    check(isinstance(radixkv.OutOfPages("x"), radixkv.Error), "OutOfPages is an Error")
    accounting(c, "after the misuse")
    c.close()
    c.close()  # idempotent
    check(c.closed, "closed")
    for name, fn in [("match", lambda: c.match([1])), ("insert", lambda: c.insert([1], [0])),
                     ("evict", lambda: c.evict(1)), ("sizes", c.sizes), ("check", c.check),
                     ("alloc", lambda: c.alloc(1)), ("reset", c.reset), ("stats", c.stats)]:
        raises(ValueError, fn, f"{name} on a closed cache")
    with radixkv.Cache("trie", 1, 8) as d:
        check(d.match([1]).length == 0, "context manager")
    check(d.closed, "the with block closes the cache")
    raises(ValueError, lambda: radixkv.Cache("nosuch", 1, 8), "unknown kind")
    raises(ValueError, lambda: radixkv.Cache("radix", 1, 8, policy="mru"), "unknown policy")
    raises(ValueError, lambda: radixkv.Cache("hash", 1, 8, hash_fn="crc"), "unknown hash")
    raises(ValueError, lambda: radixkv.Cache("radix", 0, 8), "page size 0")
    raises(ValueError, lambda: radixkv.Cache("radix", 1, 0), "no pages")
    raises(ValueError, lambda: radixkv.Cache("radix", 1), "num_pages missing")
    msg = raises(ValueError, lambda: radixkv.Cache("radix", 1, 8, policy="mru"), "policy msg")
    check("mru" in msg and "lru" in msg, f"the library's message names the value and choices: {msg}")


def dlpack_values(cap):
    """The int64 values in a "dltensor" capsule (kv_values / kv_evict with
    dlpack=True), read through ctypes as a DLPack consumer reads the
    DLManagedTensor: its fields are checked against the ABI, so a layout
    that torch.from_dlpack would misread fails here without torch."""
    import ctypes as C

    class DLTensor(C.Structure):
        _fields_ = [("data", C.c_void_p), ("device_type", C.c_int32),
                    ("device_id", C.c_int32), ("ndim", C.c_int32), ("code", C.c_uint8),
                    ("bits", C.c_uint8), ("lanes", C.c_uint16),
                    ("shape", C.POINTER(C.c_int64)), ("strides", C.c_void_p),
                    ("byte_offset", C.c_uint64)]

    class Managed(C.Structure):
        _fields_ = [("t", DLTensor), ("ctx", C.c_void_p), ("deleter", C.c_void_p)]

    get = C.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
    m = Managed.from_address(get(cap, b"dltensor"))
    t = m.t
    check((t.device_type, t.ndim, t.code, t.bits, t.lanes) == (1, 1, 0, 64, 1)
          and not t.strides and m.deleter, "a 1-D CPU int64 DLPack tensor with a deleter")
    n = t.shape[0]
    return list((C.c_int64 * n).from_address(t.data + t.byte_offset)) if n else []


def test_kv_values():
    """kv_insert / kv_match / kv_values / kv_evict (the per-token values
    radixkv.sglang keeps) against a model of which value each cached token
    prefix holds: every value gathered is the one its first insert stored,
    every evicted value comes back exactly once, misuse is refused."""
    rng = random.Random(7)
    # radix inserts in one walk taking its own pages; trie and hash take the
    # route of kinds without it (match, alloc, insert): both are checked.
    for kind, P in [(k, p) for k in ("radix", "trie", "hash") for p in (1, 4, 16)]:
        c = radixkv.Cache(kind, P, 4096)
        if P == 4:
            c.kv_reserve()  # the whole value table before the first insert
        held = {}      # (the page-prefix holding token j, j) -> the value stored for j
        evicted = []
        stored = 0
        for i in range(300):
            toks = random_requests(rng, 1, 12, 3 * P)[0]
            n = len(toks) // P * P
            vals = array.array("q", [1000 * i + j for j in range(len(toks))])
            if i == 150:
                # kv_reserve with values stored (grows and touches the table):
                # every value checked from here on must survive it.
                c.kv_reserve()
            before = c.evictable_tokens
            prefix, m = c.kv_insert(array.array("q", toks), vals)
            check(m.length == n, f"P={P}: kv_insert's match covers the aligned key")
            check(prefix % P == 0 and prefix <= n, f"P={P}: prefix {prefix}")
            def at(j):
                return (tuple(toks[:(j // P + 1) * P]), j)
            for j in range(prefix, n):
                held[at(j)] = vals[j]
            stored += n - prefix
            got = list(c.kv_values(m))
            want = [held[at(j)] for j in range(n)]
            check(got == want, f"P={P}: kv_values {got} != {want}")
            check(dlpack_values(c.kv_values(m, dlpack=True)) == want,
                  f"P={P}: kv_values as a DLPack capsule")
            check(c.evictable_tokens == before + n - prefix, f"P={P}: evictable grows by the new")
            mm = c.kv_match(toks)
            check(mm.length == n and list(c.kv_values(mm)) == want, f"P={P}: kv_match")
            if i % 7 == 6:
                c.lock(mm)
                if i % 14 == 6:
                    freed, ev = c.kv_evict(3 * P, dlpack=True)
                    ev = dlpack_values(ev)
                else:
                    freed, ev = c.kv_evict(3 * P)
                check(len(ev) == freed, f"P={P}: one value per evicted token")
                evicted += list(ev)
                # Locked: still readable after the evict.
                check(list(c.kv_values(mm)) == want, f"P={P}: locked values survive an evict")
                raises(ValueError, lambda: c.kv_values(m), f"P={P}: stale unlocked match")
                c.unlock(mm)
                gone = set(ev)
                held = {k: v for k, v in held.items() if v not in gone}
        freed, ev = c.kv_evict(1 << 30)
        evicted += list(ev)
        check(sorted(evicted) == sorted(set(evicted)) and len(evicted) == stored,
              f"P={P}: every stored value evicted once ({len(evicted)} of {stored})")
        accounting(c, f"P={P} kv")
        raises(ValueError, lambda: c.kv_insert([1] * P, array.array("q", [5] * (P - 1))),
               f"P={P}: too few values")
        raises(TypeError, lambda: c.kv_insert([1] * P, [5] * P), f"P={P}: values not a buffer")
        raises(TypeError, lambda: c.kv_insert([1] * P, array.array("d", [1.0] * P)),
               f"P={P}: float values")
        raises(ValueError, lambda: c.kv_evict(-1), f"P={P}: negative evict")
        other = radixkv.Cache("radix", P, 64)
        raises(ValueError, lambda: other.kv_values(c.kv_match([1] * P)), "another cache's match")
        # Tags: one per page, set at insert or later, returned by kv_evict.
        t1 = array.array("q", [1] * P + [2] * P)
        _, tm = c.kv_insert(t1, array.array("q", range(2 * P)), tags=array.array("q", [-5, 9]))
        check(list(c.kv_tags(tm)) == [-5, 9], f"P={P}: tags as inserted")
        c.kv_set_tags(tm, 1, array.array("q", [11]))
        check(list(c.kv_tags(tm)) == [-5, 11], f"P={P}: a tag set later")
        raises(ValueError, lambda: c.kv_set_tags(tm, 1, array.array("q", [1, 2])),
               f"P={P}: tags past the path")
        freed, ev, tags = c.kv_evict(1 << 30, tags=True, dlpack=kind == "trie")
        ev = dlpack_values(ev) if kind == "trie" else ev
        # radix: one node of two pages, freed in path order, values and tags
        # alike; the other kinds free the pages leaf first.
        order = (lambda x: list(x)) if kind == "radix" else sorted
        check(freed == 2 * P and order(tags) == [-5, 11] and order(ev) == list(range(2 * P)),
              f"{kind} P={P}: kv_evict with tags: {freed} {tags} {ev}")
        c.insert([7] * P, c.alloc(1))
        raises(ValueError, lambda: c.kv_values(c.kv_match([7] * P)),
               f"P={P}: pages inserted without values")
        c.close()
        raises(ValueError, lambda: c.kv_match([1]), "closed cache")
        raises(ValueError, c.kv_reserve, "kv_reserve on a closed cache")


def wrap64(x):
    """x as the int64 it wraps to (the adapter's values are any int64)."""
    return (x + (1 << 63)) % (1 << 64) - (1 << 63)


def run_values(rng, mode, n, P):
    """n int64 values of one kind: "random" (no two consecutive pages a run),
    "arithmetic" (one run from a random start, wrapping past 2^63 - 1 when
    the start is near it), "mixed" (runs broken at random places, inside
    pages and at their edges, by jumps of any size, +P included)."""
    if mode == "random":
        return [wrap64(rng.getrandbits(64)) for _ in range(n)]
    start = rng.choice([rng.getrandbits(40), (1 << 63) - rng.randrange(1, 3 * P + 2),
                        -(1 << 63) + rng.randrange(4)])
    out = []
    for j in range(n):
        if mode == "mixed" and j and rng.random() < 0.15:
            start += rng.choice([rng.getrandbits(62), P, -P, 1, 0, 2 * P])
        out.append(wrap64(start + j))
    return out


def test_kv_values_runs():
    """kv_values and kv_evict read a page's values, or fill them as the page
    before + page_size where its run bit says they are: on values that are
    not runs (random), runs that wrap past int64's end, runs broken anywhere,
    and pages reused by later inserts that change their neighbours' runs,
    every value gathered is the one stored (a model of the cached prefixes,
    as test_kv_values) and every evicted value comes back once. A small pool
    keeps pages cycling; the sanitizer build also compares each gather with
    the plain copy of the table."""
    rng = random.Random(11)
    for P in (1, 3, 4):
        c = radixkv.Cache("radix", P, 96)
        held = {}
        stored = collections.Counter()
        evicted = collections.Counter()
        for i in range(400):
            toks = random_requests(rng, 1, 6, 6 * P)[0]
            n = len(toks) // P * P
            mode = ("random", "arithmetic", "mixed")[i % 3]
            vals = run_values(rng, mode, len(toks), P)
            free = c.sizes()["free_pages"] * P
            if free < n:
                freed, ev = c.kv_evict(n - free, dlpack=i % 2 == 0)
                ev = dlpack_values(ev) if i % 2 == 0 else list(ev)
                evicted.update(ev)
                # Values repeat across inserts here: what left is what no
                # longer matches (a page prefix is cached or not).
                alive = {k[0] for k in held if c.kv_match(list(k[0])).length == len(k[0])}
                held = {k: v for k, v in held.items() if k[0] in alive}
            prefix, m = c.kv_insert(array.array("q", toks), array.array("q", vals))
            def at(j):
                return (tuple(toks[:(j // P + 1) * P]), j)
            for j in range(prefix, n):
                held[at(j)] = vals[j]
                stored[vals[j]] += 1
            want = [held[at(j)] for j in range(n)]
            check(list(c.kv_values(m)) == want, f"P={P} step {i} ({mode}): kv_values")
            check(dlpack_values(c.kv_values(m, dlpack=True)) == want,
                  f"P={P} step {i} ({mode}): kv_values as DLPack")
        freed, ev = c.kv_evict(1 << 30)
        evicted.update(ev)
        check(evicted == stored, f"P={P}: every stored value evicted once")
        accounting(c, f"P={P} runs")
        # A page rewritten under a cached neighbour: B's first page continued
        # A's last; A's pages go back to C, whose values break the run, and
        # C then B are evicted in one run of page ids, where B's first page
        # must be read, not filled from C's last.
        c.__init__("radix", P, 8)
        def q(xs):
            return array.array("q", [x * P + i for x in xs for i in range(P)])
        _, ma = c.kv_insert(q([1, 2, 3, 4]), q([100, 101, 102, 103]))
        _, mb = c.kv_insert(q([9, 9, 9, 9]), q([104, 105, 106, 107]))
        c.kv_evict(4 * P)
        _, mc = c.kv_insert(q([5, 6, 7, 8]), q([500, 900, 13, 77]))
        check(list(ma.pages) + list(mb.pages) == list(range(8)) and list(mc.pages) == [0, 1, 2, 3],
              f"P={P}: the pool hands A's pages back to C ({list(mc.pages)})")
        c.kv_match(q([9, 9, 9, 9]))  # B used after C: C is evicted first
        freed, ev = c.kv_evict(8 * P)
        check(list(ev) == list(q([500, 900, 13, 77, 104, 105, 106, 107])),
              f"P={P}: C then B evicted with their own values: {list(ev)}")
        # A table past 2 MiB (its own mapping, huge pages where Linux gives
        # them), grown from a small one, then the cache made again with
        # another page size (the old table freed at its own size).
        c.__init__("radix", P, 400_000 // P)
        small = array.array("q", range(P))
        c.kv_insert(array.array("q", [7] * P), small)
        n = 300_000 // P * P
        vals = run_values(random.Random(3), "mixed", n, P)
        vals[n // 2:] = [wrap64(v + 12345) for v in vals[n // 2:]]
        prefix, m = c.kv_insert(array.array("q", [5] * n), array.array("q", vals))
        check(prefix == 0 and list(c.kv_values(m)) == vals, f"P={P}: a grown 2 MiB table")
        freed, ev = c.kv_evict(1 << 30)
        check(sorted(ev) == sorted(vals + list(small)), f"P={P}: the grown table evicted")
        c.__init__("radix", P + 1, 64)
        c.close()


def test_kv_match_int64():
    """kv_match over int64 ids (array('q'), numpy int64: the tree walks them
    in place and the Match keeps its page runs) against kv_match over a list
    of the same ids (narrowed first, pages listed), on two radix caches fed
    the same calls: equal lengths, pages, values, stats, sizes and clocks
    after every call; an id outside [0, 2**31) ends the match where the list
    route's match of the ids before it ends."""
    rng = random.Random(11)
    for P in (1, 4, 16):
        a = radixkv.Cache("radix", P, 8192)   # list keys
        b = radixkv.Cache("radix", P, 8192)   # int64 keys
        at = 0
        for i in range(250):
            toks = random_requests(rng, 1, 12, 4 * P)[0]
            vals = array.array("q", range(at, at + len(toks)))
            at += len(toks)
            if rng.random() < 0.6:
                pa, ma = a.kv_insert(toks, vals)
                pb, mb = b.kv_insert(array.array("q", toks), vals)
                check(pa == pb, f"P={P}: kv_insert prefixes {pa} {pb}")
            key = toks[:rng.randrange(len(toks) + 1)]
            bad = None
            if key and rng.random() < 0.2:
                j = rng.randrange(len(key))
                bad = rng.choice([-1, -(1 << 40), 1 << 31, (1 << 63) - 1])
                wide = key[:j] + [bad] + key[j + 1:]
                ma = a.kv_match(key[:j])
            else:
                wide = key
                ma = a.kv_match(key)
            if np is not None and i % 2:
                mb = b.kv_match(np.asarray(wide, dtype=np.int64))
            else:
                mb = b.kv_match(array.array("q", wide))
            what = f"P={P} call {i} (bad id {bad})"
            check(ma.length == mb.length, f"{what}: lengths {ma.length} {mb.length}")
            check(list(a.kv_values(ma)) == list(b.kv_values(mb)), f"{what}: kv_values")
            if i % 3 == 0:  # the page table, listed from the runs on demand
                check(list(memoryview(ma)) == list(memoryview(mb)), f"{what}: pages")
                check(repr(ma) == repr(mb), f"{what}: repr")
            if i % 5 == 0:
                a.lock(ma)
                b.lock(mb)
                check(list(a.kv_tags(ma)) == list(b.kv_tags(mb)), f"{what}: tags")
                fa, ea = a.kv_evict(2 * P)
                fb, eb = b.kv_evict(2 * P)
                check(fa == fb and list(ea) == list(eb), f"{what}: evicted")
                check(list(a.kv_values(ma)) == list(b.kv_values(mb)), f"{what}: locked values")
                a.unlock(ma)
                b.unlock(mb)
            check(a.stats() == b.stats() and a.sizes() == b.sizes() and a.clock == b.clock,
                  f"{what}: stats, sizes, clock")
        b.check()
        # A bad id past the cached part of an int64 key: refused, nothing new
        # cached, the pool's pages all accounted for.
        before = b.sizes()
        key = list(toks) + [rng.randrange(12) for _ in range(2 * P)]
        key[len(toks) + P] = -3
        msg = raises(ValueError, lambda: b.kv_insert(array.array("q", key),
                                                     array.array("q", range(len(key)))),
                     f"P={P}: a negative id")
        check(f"tokens[{len(toks) + P}]" in msg, f"P={P}: the message names the id: {msg}")
        after = b.sizes()
        check(after["evictable_tokens"] + after["protected_tokens"]
              == before["evictable_tokens"] + before["protected_tokens"],
              f"P={P}: nothing cached by a refused insert")
        b.check()
        accounting(b, f"P={P} int64 keys")
        raises(TypeError, lambda: b.kv_match(array.array("d", [1.0] * P)), f"P={P}: float ids")
        # Arguments by name, and each misuse of them a TypeError.
        kt = array.array("q", toks)
        check(b.kv_match(tokens=kt, namespace=0).length == b.kv_match(kt).length,
              f"P={P}: kv_match by keyword")
        pre, _ = b.kv_insert(values=array.array("q", range(len(kt))), tokens=kt)
        check(pre == len(toks) // P * P, f"P={P}: kv_insert by keyword, all held: {pre}")
        raises(TypeError, lambda: b.kv_match(), f"P={P}: kv_match without tokens")
        raises(TypeError, lambda: b.kv_match(kt, 0, None, 1, 2), f"P={P}: kv_match, five arguments")
        raises(TypeError, lambda: b.kv_match(kt, tokens=kt), f"P={P}: tokens twice")
        raises(TypeError, lambda: b.kv_match(kt, nspace=0), f"P={P}: unknown keyword")
        raises(TypeError, lambda: b.kv_insert(kt), f"P={P}: kv_insert without values")
        b.close()
        raises(ValueError, lambda: b.kv_match(array.array("q", [1] * P)), f"P={P}: closed")


def test_kv_match_into():
    """kv_match's into (radixkv.sglang's match_prefix): the wrapped result
    equals the one built in Python from the plain Match (type, length,
    holders, tail), on both key routes; an empty match answers into's empty
    object itself; a bad into is refused before the match ticks the clock."""
    Result = collections.namedtuple("Result", "n a b c x y", defaults=(None, 7))

    class Holder:
        __slots__ = ("match",)

        def __init__(self, match):
            self.match = match

    empty = Result(0, None, None, None)
    rng = random.Random(5)
    for P in (1, 4):
        a, b = radixkv.Cache("radix", P, 4096), radixkv.Cache("radix", P, 4096)
        for i in range(200):
            # The holder called, or made without a call ((Holder,)).
            into = (Result, Holder if i % 2 else (Holder,), 3, (None, 7), empty)
            toks = random_requests(rng, 1, 10, 3 * P)[0]
            if rng.random() < 0.5:
                vals = array.array("q", range(len(toks)))
                a.kv_insert(toks, vals)
                b.kv_insert(toks, vals)
            key = toks[:rng.randrange(len(toks) + 1)]
            if i % 2:
                key = array.array("q", key)
            m = a.kv_match(key)
            r = b.kv_match(key, 0, into)
            what = f"P={P} call {i}"
            if m.length == 0:
                check(r is empty, f"{what}: the empty result itself")
                continue
            check(type(r) is Result and r.n == m.length and r.x is None and r.y == 7
                  and r.a is r.b is r.c and type(r.a) is Holder, f"{what}: {r!r}")
            check(list(a.kv_values(m)) == list(b.kv_values(r.a.match)), f"{what}: values")
            check(a.clock == b.clock and a.stats() == b.stats(), f"{what}: clock, stats")
        clock = b.clock
        for bad in ((Result, Holder, 3, ()), [Result, Holder, 3, (), empty],
                    (dict, Holder, 3, (), empty), (Result, 5, 3, (), empty),
                    (Result, (5,), 3, (), empty), (Result, (Holder, Holder), 3, (), empty),
                    (Result, (tuple,), 3, (), empty),
                    (Result, Holder, "3", (), empty), (Result, Holder, 3, [], empty)):
            raises(TypeError, lambda: b.kv_match(toks, 0, bad), f"P={P}: into {bad!r}")
        raises(ValueError, lambda: b.kv_match(toks, 0, (Result, Holder, 17, (), empty)),
               f"P={P}: repeat 17")
        check(b.clock == clock, f"P={P}: a refused into matched nothing")
        check(b.kv_match(toks, into=None).length == b.kv_match(toks).length,
              f"P={P}: into=None is the plain Match")


def test_kv_match_limit():
    """kv_match's limit (SGLang's RadixKey.limit, read in place): the match
    of tokens[:limit] on a twin cache, length, values, clock and stats, for
    limits below, at and past the key's length, 0 and None, on both key
    routes (a list, array('q') walked in place) and with a namespace; a
    negative limit is refused by name before it matches anything."""
    rng = random.Random(8)
    for P in (1, 4):
        a, b = radixkv.Cache("radix", P, 4096), radixkv.Cache("radix", P, 4096)
        for i in range(300):
            toks = random_requests(rng, 1, 10, 3 * P)[0]
            ns = ("x", None)[i % 2]
            if rng.random() < 0.5:
                vals = array.array("q", range(len(toks)))
                a.kv_insert(toks, vals, ns)
                b.kv_insert(toks, vals, ns)
            limit = rng.choice((None, 0, len(toks), len(toks) + 3, rng.randrange(len(toks) + 1)))
            key = array.array("q", toks) if i % 3 else toks
            head = toks if limit is None else toks[:limit]
            m = a.kv_match(array.array("q", head) if i % 3 else head, ns)
            r = b.kv_match(key, ns, None, limit)
            what = f"P={P} call {i}, limit {limit} of {len(toks)}"
            check(r.length == m.length, f"{what}: length {r.length}, not {m.length}")
            check(list(a.kv_values(m)) == list(b.kv_values(r)), f"{what}: values")
            check(a.clock == b.clock and a.stats() == b.stats(), f"{what}: clock, stats")
        clock = b.clock
        for key in (toks, array.array("q", toks)):
            raises(ValueError, lambda: b.kv_match(key, None, None, -1), f"P={P}: limit -1")
        check(b.clock == clock, f"P={P}: a refused limit matched nothing")
        check(b.kv_match(toks, limit=None).length == b.kv_match(toks).length,
              f"P={P}: limit=None is the whole key")


def test_kv_dlpack():
    """kv_insert's values as a DLPack capsule (the adapter passes a tensor's
    to_dlpack): the same values as the buffer route, strided and narrow
    integers included; other tensors and capsules refused by name."""
    if np is None or not hasattr(np.ndarray, "__dlpack__"):
        return
    for P in (1, 4):
        a, b = radixkv.Cache("radix", P, 1024), radixkv.Cache("radix", P, 1024)
        rng = random.Random(11)
        for i in range(60):
            toks = random_requests(rng, 1, 6, 3 * P)[0]
            big = np.arange(1000 * i, 1000 * i + 2 * len(toks), dtype=np.int64)
            vals = big[::2] if i % 3 == 0 else big[:len(toks)].astype(np.int32 if i % 3 == 1
                                                                     else np.int64)
            pa, ma = a.kv_insert(array.array("q", toks), vals)
            pb, mb = b.kv_insert(array.array("q", toks), vals.__dlpack__())
            check(pa == pb and list(a.kv_values(ma)) == list(b.kv_values(mb)),
                  f"P={P}: DLPack values as the buffer's")
        msg = raises(TypeError, lambda: b.kv_insert([1] * P, np.zeros(P).__dlpack__()),
                     f"P={P}: float tensor")
        check("kv_insert: values" in msg and "type code 2" in msg, f"names the values: {msg}")
        raises(TypeError, lambda: b.kv_insert([1] * P, np.zeros((P, 1), np.int64).__dlpack__()),
               f"P={P}: 2-D tensor")
        cap = datetime.datetime_CAPI  # a capsule of another name
        msg = raises(TypeError, lambda: b.kv_insert([1] * P, cap), f"P={P}: another capsule")
        check("dltensor" in msg, f"names the capsule: {msg}")


def capsule_of(values):
    """A DLPack capsule of int64 values without numpy: a scratch cache's
    kv_values (the capsule owns its block)."""
    n = len(values)
    s = radixkv.Cache("radix", 1, n + 1)
    _, m = s.kv_insert(array.array("q", range(n)), values)
    return s.kv_values(m, True)


class Key:
    """The fields of SGLang's RadixKey that kv_insert_params reads."""
    __slots__ = ("token_ids", "extra_key", "cache_salt", "is_bigram", "limit")

    def __init__(self, token_ids, extra_key=None, is_bigram=False, limit=None, cache_salt=None):
        self.token_ids, self.extra_key, self.cache_salt = token_ids, extra_key, cache_salt
        self.is_bigram, self.limit = is_bigram, limit


@dataclasses.dataclass
class Params:
    key: Any = None
    value: Any = None


class Vals:
    """A stand-in tensor type: its values as the capsule to_values makes."""

    def __init__(self, values):
        self.values = values


@dataclasses.dataclass
class Result:
    prefix_len: int
    total: int = 0
    last_device_node: Any = None
    actions: list = dataclasses.field(default_factory=list)


class Holder:
    __slots__ = ("match",)

    def __init__(self, match):
        self.match = match


def general_route(owner, key, value):
    return ("general", owner, key, value)


class Owner:
    pass


def insert_spec(root, template, owner, general=general_route, holder=Holder):
    return (lambda v: capsule_of(v.values), Vals, holder, root, Result,
            template, ("actions",), general, weakref.ref(owner))


def test_kv_insert_params():
    """kv_insert_params (radixkv.sglang's insert): the plain call answers what
    kv_insert answers, as the result class's own __init__ would build it (from
    the template or by calling the class), with a fresh list per result;
    every other call goes to the general route untouched (nothing inserted,
    the clock still); refusals raise and leave no page in flight."""
    template = dict(vars(Result(None)))
    rng = random.Random(9)
    owner, root = Owner(), Holder(None)
    for P in (1, 4):
        a, b = radixkv.Cache("radix", P, 4096), radixkv.Cache("radix", P, 4096)
        specs = (insert_spec(root, template, owner),
                 insert_spec(root, None, owner, holder=(Holder,)))
        for i in range(200):
            toks = array.array("q", random_requests(rng, 1, 10, 3 * P)[0])
            vals = array.array("q", range(1000 * i, 1000 * i + len(toks)))
            pa, ma = a.kv_insert(toks, vals)
            r = b.kv_insert_params(specs[i % 2], Params(Key(toks), Vals(vals)))
            what = f"P={P} call {i}"
            node = r.last_device_node
            check(type(r) is Result and r == Result(pa, last_device_node=node)
                  and list(vars(r)) == list(template), f"{what}: {r!r}")
            check(r.actions == [] and r.actions is not template["actions"], f"{what}: fresh list")
            if ma.length == 0:
                check(node is root, f"{what}: empty path: the root")
            else:
                check(type(node) is Holder and node.match.length == ma.length
                      and list(a.kv_values(ma)) == list(b.kv_values(node.match)),
                      f"{what}: the path and its values")
            check(a.clock == b.clock and a.sizes() == b.sizes(), f"{what}: clock, sizes")
        toks = array.array("q", range(1, 2 * P + 1))
        vals = Vals(array.array("q", range(2 * P)))
        clock, sizes = b.clock, b.sizes()
        for params in (Params(Key(toks), None), Params(Key(toks), vals.values),
                       Params(Key(toks, limit=P), vals), Params(Key(toks, extra_key="e"), vals),
                       Params(Key(toks, cache_salt="s"), vals),
                       Params(Key(toks, is_bigram=True), vals)):
            g = b.kv_insert_params(specs[0], params)
            check(g == ("general", owner, params.key, params.value)
                  and g[2] is params.key and g[3] is params.value, f"P={P}: general {g!r}")
            check(b.kv_insert_params(insert_spec(root, template, owner, None), params) is None,
                  f"P={P}: no general route: None")
        check(b.clock == clock and b.sizes() == sizes, f"P={P}: the general route's calls "
              "did nothing")
        gone = Owner()
        spec = insert_spec(root, template, gone)
        del gone
        gc.collect()
        raises(ReferenceError, lambda: b.kv_insert_params(spec, Params(Key(toks, limit=1), vals)),
               f"P={P}: owner gone")
        raises(AttributeError, lambda: b.kv_insert_params(specs[0], object()), f"P={P}: no key")
        raises(AttributeError, lambda: b.kv_insert_params(specs[0], Params(object(), vals)),
               f"P={P}: a key without limit")
        for bad in (specs[0][:8], list(specs[0]), (None,) + specs[0][1:],
                    specs[0][:4] + (dict,) + specs[0][5:],
                    specs[0][:5] + ([],) + specs[0][6:],
                    specs[0][:4] + (int,) + specs[0][5:]):
            raises(TypeError, lambda: b.kv_insert_params(bad, Params(Key(toks), vals)),
                   f"P={P}: spec {bad!r}")
        raises(TypeError, lambda: b.kv_insert_params(specs[0]), f"P={P}: one argument")
        msg = raises(ValueError, lambda: b.kv_insert_params(
            specs[0], Params(Key(toks), Vals(array.array("q", [1])))), f"P={P}: short values")
        check("kv_insert: values" in msg, f"names the values: {msg}")
        check(b.clock == clock and b.sizes() == sizes, f"P={P}: refusals inserted nothing")
        b.check()


class DictKey:
    """Key's fields in an instance dict: no slots to read at an offset."""

    def __init__(self, token_ids):
        self.token_ids, self.extra_key, self.cache_salt = token_ids, None, None
        self.is_bigram, self.limit = False, None


class TwinKey:
    """Key's slots, and a getattr of its own that answers token_ids from
    another slot: only a read through getattr sees what it says."""
    __slots__ = Key.__slots__ + ("twin",)

    def __init__(self, token_ids, twin):
        self.token_ids, self.twin, self.extra_key, self.cache_salt = token_ids, twin, None, None
        self.is_bigram, self.limit = False, None

    def __getattribute__(self, name):
        return object.__getattribute__(self, "twin" if name == "token_ids" else name)


class LoudMeta(type):
    """A metaclass whose class attributes are read through its own getattr."""

    def __getattribute__(cls, name):
        return type.__getattribute__(cls, name)


class MetaKey(Key, metaclass=LoudMeta):
    __slots__ = ()


class MetaHolder(metaclass=LoudMeta):
    __slots__ = ("match",)


def test_slot_reads():
    """kv_insert_params reads a key's fields and sets a holder's match at
    their slots' offsets only for a plain __slots__ class (the offsets found
    through the class's public getattr); a key with an instance dict, a
    getattr of its own, or a metaclass with its own getattr, and a holder
    whose class has such a metaclass, are read and set through getattr and
    answer alike; a class changed after its first use is looked up again."""
    template = dict(vars(Result(None)))
    owner, root = Owner(), Holder(None)
    a, b = radixkv.Cache("radix", 4, 4096), radixkv.Cache("radix", 4, 4096)
    for i, make in enumerate((Key, DictKey, MetaKey, Key, lambda t: TwinKey([9] * 8, t))):
        toks = array.array("q", range(100 * i, 100 * i + 8 + i))
        vals = array.array("q", range(len(toks)))
        holder = (MetaHolder,) if i == 3 else (Holder,)
        spec = insert_spec(root, template, owner, holder=holder)
        pa, ma = a.kv_insert(toks, vals)
        r = b.kv_insert_params(spec, Params(make(toks), Vals(vals)))
        what = f"key class {i}"
        check(r.prefix_len == pa and type(r.last_device_node) is holder[0]
              and r.last_device_node.match.length == ma.length
              and list(b.kv_values(r.last_device_node.match)) == list(a.kv_values(ma)),
              f"{what}: answers as kv_insert")
    # TwinKey's getattr was heeded: the key inserted is its twin's tokens.
    check(b.kv_match(array.array("q", [9] * 8)).length == 0
          and b.kv_match(array.array("q", range(400, 412))).length == 12,
          "a key class with its own getattr is read through it")
    # A class changed after use: its slot is shadowed by a property, so the
    # offsets read before no longer hold; the read goes through getattr.
    class Shadowed:
        __slots__ = Key.__slots__

        def __init__(self, token_ids):
            self.token_ids, self.extra_key, self.cache_salt = token_ids, None, None
            self.is_bigram, self.limit = False, None

    spec = insert_spec(root, template, owner)
    toks = array.array("q", range(600, 608))
    b.kv_insert_params(spec, Params(Shadowed(toks), Vals(array.array("q", range(8)))))
    slot = Shadowed.token_ids
    Shadowed.token_ids = property(lambda self: array.array("q", [7] * 8))
    k = Shadowed.__new__(Shadowed)
    for name in Key.__slots__:
        if name != "token_ids":
            setattr(k, name, None if name != "is_bigram" else False)
    slot.__set__(k, array.array("q", range(700, 708)))
    b.kv_insert_params(spec, Params(k, Vals(array.array("q", range(8)))))
    check(b.kv_match(array.array("q", [7] * 8)).length == 8
          and b.kv_match(array.array("q", range(700, 708))).length == 0,
          "a class changed after its first use is looked up again")
    b.check()


def general_match(owner, params):
    return ("general", owner, params)


def test_kv_match_params():
    """kv_match_params (radixkv.sglang's match_prefix): a key without
    namespace or bigrams, its limit None or >= 0, answers what kv_match with
    into and that limit answers; any other key goes to the general route
    untouched (the clock still); refusals raise."""
    MR = collections.namedtuple("MR", "n a b c x")
    empty = MR(0, None, None, None, None)
    into = (MR, (Holder,), 3, (None,), empty)
    rng = random.Random(13)
    owner = Owner()
    spec = (into, general_match, weakref.ref(owner))
    for P in (1, 4):
        a, b = radixkv.Cache("radix", P, 4096), radixkv.Cache("radix", P, 4096)
        for i in range(200):
            toks = array.array("q", random_requests(rng, 1, 10, 3 * P)[0])
            if rng.random() < 0.5:
                vals = array.array("q", range(len(toks)))
                a.kv_insert(toks, vals)
                b.kv_insert(toks, vals)
            limit = None if i % 3 == 0 else rng.randrange(len(toks) + 2)
            ra = a.kv_match(toks, 0, into, limit)
            rb = b.kv_match_params(spec, Params(Key(toks, limit=limit)))
            what = f"P={P} call {i} limit {limit}"
            if ra is empty:
                check(rb is empty, f"{what}: the empty result itself")
            else:
                check(type(rb) is MR and rb.n == ra.n and rb.a is rb.b is rb.c
                      and type(rb.a) is Holder and rb.x is None
                      and list(a.kv_values(ra.a.match)) == list(b.kv_values(rb.a.match)),
                      f"{what}: {rb!r}")
            check(a.clock == b.clock and a.stats() == b.stats(), f"{what}: clock, stats")
        toks = array.array("q", range(1, 3 * P + 1))
        clock = b.clock
        for key in (Key(toks, extra_key="e"), Key(toks, cache_salt="s"),
                    Key(toks, is_bigram=True), Key(toks, limit=-1), Key(toks, limit=2.0)):
            params = Params(key)
            g = b.kv_match_params(spec, params)
            check(g == ("general", owner, params) and g[2] is params, f"P={P}: general {g!r}")
            check(b.kv_match_params((into, None, None), params) is None,
                  f"P={P}: no general route: None")
        check(b.clock == clock, f"P={P}: the general route's calls matched nothing")
        gone = Owner()
        spec_gone = (into, general_match, weakref.ref(gone))
        del gone
        gc.collect()
        raises(ReferenceError, lambda: b.kv_match_params(spec_gone, Params(Key(toks, limit=-1))),
               f"P={P}: owner gone")
        raises(AttributeError, lambda: b.kv_match_params(spec, object()), f"P={P}: no key")
        raises(AttributeError, lambda: b.kv_match_params(spec, Params(object())),
               f"P={P}: a key without fields")
        for bad in ((into, general_match), [into, None, None], (into, 5, None),
                    (into, general_match, owner), ((MR, Holder, 3), None, None)):
            raises(TypeError, lambda: b.kv_match_params(bad, Params(Key(toks))),
                   f"P={P}: spec {bad!r}")
        raises(OverflowError, lambda: b.kv_match_params(spec, Params(Key(toks, limit=1 << 70))),
               f"P={P}: a limit past 64 bits")
        check(b.clock == clock, f"P={P}: refusals matched nothing")


def test_kv_path_values():
    """kv_path_values (radixkv.sglang's path_device_indices): the empty
    object for a None match, else to_tensor of kv_values(match, dlpack=True);
    kv_values' own refusals pass through."""
    empty = ("empty",)
    spec = (dlpack_values, empty)
    for P in (1, 4):
        c = radixkv.Cache("radix", P, 256)
        toks = array.array("q", range(1, 3 * P + 1))
        _, m = c.kv_insert(toks, array.array("q", range(50, 50 + 3 * P)))
        check(c.kv_path_values(spec, Holder(None)) is empty, f"P={P}: a None match")
        got = c.kv_path_values(spec, Holder(m))
        check(got == list(c.kv_values(m)) == list(range(50, 50 + 3 * P)),
              f"P={P}: the path's values")
        raises(AttributeError, lambda: c.kv_path_values(spec, object()), f"P={P}: no match")
        raises(TypeError, lambda: c.kv_path_values(spec, Holder("m")), f"P={P}: not a Match")
        raises(TypeError, lambda: c.kv_path_values((None, empty), Holder(m)), f"P={P}: bad spec")
        raises(TypeError, lambda: c.kv_path_values(spec), f"P={P}: one argument")
        c.evict(3 * P)
        raises(ValueError, lambda: c.kv_path_values(spec, Holder(m)),
               f"P={P}: evicted since the match")


@dataclasses.dataclass
class EvictParams:
    num_tokens: Any = 0


@dataclasses.dataclass
class Evicted:
    num_tokens_evicted: int = 0
    other: int = 0


class Allocator:
    """What kv_evict_params hands an adapter's allocator: free_segment's
    arguments, in order."""

    def __init__(self):
        self.calls = []

    def free_segment(self, values, start_pos=None):
        self.calls.append((values, start_pos))


def test_kv_evict_params():
    """kv_evict_params (radixkv.sglang's evict): a count > 0 evicts what
    kv_evict evicts, hands the freed values to the owner's allocator
    (free_segment(values, start_pos=0), only when tokens were freed) and
    answers the result class as its __init__ builds it; any other count goes
    to the general route untouched; refusals evict nothing."""
    template = dict(vars(Evicted()))
    rng = random.Random(17)
    for P in (1, 4):
        owner = Owner()
        owner.token_to_kv_pool_allocator = Allocator()
        specs = ((dlpack_values, Evicted, template, (), general_match, weakref.ref(owner)),
                 (dlpack_values, Evicted, None, (), general_match, weakref.ref(owner)))
        a, b = radixkv.Cache("radix", P, 256), radixkv.Cache("radix", P, 256)
        for i in range(300):
            if rng.random() < 0.6:
                toks = array.array("q", random_requests(rng, 1, 10, 3 * P)[0])
                vals = array.array("q", range(1000 * i, 1000 * i + len(toks)))
                for c in (a, b):
                    if c.sizes()["free_pages"] < len(toks) // P + 1:
                        c.kv_evict(len(toks))
                    c.kv_insert(toks, vals)
                continue
            n = rng.randrange(1, 4 * P)
            freed, cap = a.kv_evict(n, False, True)
            want = dlpack_values(cap)
            calls = owner.token_to_kv_pool_allocator.calls
            del calls[:]
            r = b.kv_evict_params(specs[i % 2], EvictParams(n))
            what = f"P={P} call {i}"
            check(type(r) is Evicted and r == Evicted(freed) and list(vars(r)) == list(template),
                  f"{what}: {r!r}, kv_evict freed {freed}")
            check(calls == ([(want, 0)] if freed else []), f"{what}: the allocator got {calls}")
            check(a.sizes() == b.sizes() and a.clock == b.clock, f"{what}: sizes, clock")
        clock, sizes = b.clock, b.sizes()
        for params in (EvictParams(0), EvictParams(-1), EvictParams(2.0)):
            g = b.kv_evict_params(specs[0], params)
            check(g == ("general", owner, params) and g[2] is params, f"P={P}: general {g!r}")
        check(b.clock == clock and b.sizes() == sizes, f"P={P}: the general route evicted nothing")
        raises(OverflowError, lambda: b.kv_evict_params(specs[0], EvictParams(1 << 70)),
               f"P={P}: a count past 64 bits")
        raises(AttributeError, lambda: b.kv_evict_params(specs[0], object()), f"P={P}: no count")
        gone = Owner()
        spec_gone = specs[0][:5] + (weakref.ref(gone),)
        del gone
        gc.collect()
        raises(ReferenceError, lambda: b.kv_evict_params(spec_gone, EvictParams(P)),
               f"P={P}: owner gone")
        raises(AttributeError, lambda: b.kv_evict_params(specs[0][:5] + (weakref.ref(Owner),),
                                                         EvictParams(P)),
               f"P={P}: an owner without an allocator")
        for bad in (specs[0][:5], list(specs[0]), (None,) + specs[0][1:],
                    specs[0][:4] + (None,) + specs[0][5:], specs[0][:5] + (owner,),
                    specs[0][:1] + (int,) + specs[0][2:]):
            raises(TypeError, lambda: b.kv_evict_params(bad, EvictParams(P)),
                   f"P={P}: spec {bad!r}")
        check(b.clock == clock and b.sizes() == sizes, f"P={P}: refusals evicted nothing")
        b.check()


@dataclasses.dataclass
class Receipt:
    node_id: Any = None
    parts: tuple = ()
    uuids: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Lock:
    node: Any
    receipt: Receipt
    released: bool = False


def test_kv_lock():
    """kv_lock / kv_unlock (radixkv.sglang's lock and unlock): the lock
    taken on node.match (none for a None match) and the handle built as
    Lock(node, Receipt()) builds it, from templates or by calling the
    classes; unlock undoes it; a refusal takes no lock."""
    lock_t, receipt_t = dict(vars(Lock(None, None))), dict(vars(Receipt()))
    specs = ((Lock, lock_t, (), Receipt, receipt_t, ("uuids",)),
             (Lock, None, (), Receipt, None, ()))
    for P in (1, 4):
        c = radixkv.Cache("radix", P, 256)
        toks = array.array("q", range(1, 3 * P + 1))
        _, m = c.kv_insert(toks, array.array("q", range(3 * P)))
        node = Holder(m)
        for spec in specs:
            lk = c.kv_lock(spec, node)
            check(type(lk) is Lock and lk == Lock(node, Receipt()) and lk.node is node
                  and type(lk.receipt) is Receipt and lk.receipt.uuids is not receipt_t["uuids"]
                  and list(vars(lk)) == list(lock_t), f"P={P}: {lk!r}")
            check(c.protected_tokens == 3 * P and m.locked == 1, f"P={P}: locked")
            check(c.kv_unlock(lk) is None and c.protected_tokens == 0 and m.locked == 0,
                  f"P={P}: unlocked")
            h = Holder(None)
            none = c.kv_lock(spec, h)
            check(type(none) is Lock and none == Lock(h, Receipt()) and none.node is h,
                  f"P={P}: a None match: a lock object")
            check(c.protected_tokens == 0, f"P={P}: a None match locks nothing")
            c.kv_unlock(none)
            c.kv_unlock(None)
        lk = c.kv_lock(specs[0], node)
        c.kv_unlock(lk)
        raises(ValueError, lambda: c.kv_unlock(lk), f"P={P}: unlock twice")
        raises(AttributeError, lambda: c.kv_lock(specs[0], object()), f"P={P}: no match")
        raises(AttributeError, lambda: c.kv_unlock(object()), f"P={P}: no node")
        raises(TypeError, lambda: c.kv_lock(specs[0], Holder("m")), f"P={P}: not a Match")
        for bad in (specs[0][:5], list(specs[0]), (Lock, [], ()) + specs[0][3:],
                    specs[0][:5] + (["uuids"],)):
            raises(TypeError, lambda: c.kv_lock(bad, node), f"P={P}: spec {bad!r}")
        # The handle cannot be built (a fresh field that holds no container):
        # the lock just taken is given back.
        msg = raises(TypeError, lambda: c.kv_lock(specs[0][:5] + (("parts",),), node),
                     f"P={P}: a fresh tuple")
        check("parts" in msg, f"names the field: {msg}")
        check(c.protected_tokens == 0 and m.locked == 0, f"P={P}: refusals lock nothing")
        c.evict(3 * P)
        raises(ValueError, lambda: c.kv_lock(specs[0], node), f"P={P}: evicted since the match")
        c.check()


def main():
    reg = registry()
    if reg is not None:
        check(radixkv.kinds() == [k["name"] for k in reg], "kinds() is the CLI's registry")
        check(radixkv.policies() == reg[0]["policies"], "policies() is the CLI's registry")
        kinds = [(k["name"], k["policies"] if k["evicts"] else []) for k in reg]
    else:
        kinds = [(k, radixkv.policies() if k in ("radix", "hash", "trie") else [])
                 for k in radixkv.kinds()]
    for obj in (radixkv.Cache, radixkv.Cache.match, radixkv.Cache.insert, radixkv.cache_sim,
                radixkv.run, radixkv.Match, radixkv.Cache.kv_insert_params,
                radixkv.Cache.kv_lock, radixkv.Cache.kv_unlock, radixkv.Cache.kv_match_params,
                radixkv.Cache.kv_path_values, radixkv.Cache.kv_evict_params):
        check(bool(obj.__doc__), f"{obj.__name__} has a docstring")
    test_protocol(kinds)
    test_conversions()
    test_namespaces()
    test_locks()
    test_misuse()
    test_kv_values()
    test_kv_values_runs()
    test_kv_match_int64()
    test_kv_match_into()
    test_kv_match_limit()
    test_kv_dlpack()
    test_kv_insert_params()
    test_slot_reads()
    test_kv_lock()
    test_kv_match_params()
    test_kv_path_values()
    test_kv_evict_params()
    print(f"py_api: {count()} checks passed ({len(kinds)} kinds, numpy "
          f"{'yes' if np is not None else 'no'}, package {os.path.dirname(radixkv.__file__)})")


if __name__ == "__main__":
    main()
