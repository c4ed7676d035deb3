"""Reference counts and memory held flat over many binding calls, the error
paths included: a leak of one object or one buffer per call shows up as
growth of the resident set (or of a refcount) over the loop. 1,000,000 calls
(100,000 under the sanitizers, where the interpreter's memory is not the
point: ASan itself checks the extension's accesses, its quarantine would
blur the resident set, and only refcounts are compared there).
"""
import array
import dataclasses
import os
import sys
import weakref

import radixkv
from radixkv._radixkv import sglang_event_hashes

try:
    import numpy as np
except ImportError:
    np = None

SANITIZED = os.environ.get("RKV_PY_SANITIZED") == "1"
CALLS = 100_000 if SANITIZED else 1_000_000


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def refused(exc, fn, *args):
    """fn(*args), which must raise exc: the refusal's path is in the loop
    so that what it allocates is counted; a call that is not refused is
    a failure, since the loop would no longer exercise that path."""
    try:
        fn(*args)
    except exc:
        return
    raise AssertionError(f"{fn.__name__}{args!r} was not refused with {exc.__name__}")


def body(c, toks, arr, nparr, bad):
    """One round: the calls it counts, the refused ones through refused()."""
    m = c.match(toks)
    c.lock(m)
    k = m.length // 4
    allp = [int(p) for p in m.pages] + [int(p) for p in c.alloc(3 - k)]
    n = c.insert(arr, allp)
    if n // 4 > k:
        c.free(allp[k:n // 4])
    c.unlock(m)
    m2 = c.match(nparr if nparr is not None else arr)
    _ = m2.pages
    refused(TypeError, c.match, bad)
    refused(ValueError, c.unlock, m2)
    refused(ValueError, c.alloc, 10 ** 6)
    c.evict(4)
    # The values methods (radixkv.sglang's path), one refused.
    vals = array.array("q", range(100, 112))
    _, m3 = c.kv_insert(arr, vals)
    _ = c.kv_values(m3)
    _ = c.kv_values(m3, dlpack=True)
    c.kv_set_tags(m3, 0, c.kv_tags(m3))
    # radixkv.sglang's event chain (kv_event_store, and the chain alone),
    # then its refusals: tokens too short, a prior past start 0, a seed
    # that is not bytes, a token outside u32, a prior of the wrong length.
    _ = c.kv_event_store(m3, 0, arr, SEED, PRIOR)
    _ = c.kv_event_store(m3, 1, toks)
    _ = sglang_event_hashes(toks, 4, PRIOR, SEED)
    refused(ValueError, c.kv_event_store, m3, 0, SHORT)
    refused(ValueError, c.kv_event_store, m3, 1, arr, None, PRIOR)
    refused(TypeError, c.kv_event_store, m3, 0, arr, 5)
    refused(ValueError, sglang_event_hashes, NEGATIVE, 4)
    refused(ValueError, sglang_event_hashes, arr, 4, b"short")
    refused(TypeError, c.kv_insert, arr, bad)
    c.kv_evict(4, tags=True)
    # A DLPack capsule nobody consumes frees its block when collected.
    c.kv_evict(4, dlpack=True)
    # kv_match's wrapped result (radixkv.sglang's match_prefix), an empty
    # match's shared answer, and a refused into.
    _ = c.kv_match(arr, 0, INTO)
    _ = c.kv_match(bad_key, 0, INTO)
    refused(ValueError, c.kv_match, arr, 0, (tuple, Holder, -1, (), None))
    # radixkv.sglang's insert, lock and unlock: the plain insert, the
    # general route, a refused one; a lock taken and given back, one refused
    # after it was taken (the handle cannot be built).
    r = c.kv_insert_params(INSERT_SPEC, PARAMS)
    _ = c.kv_insert_params(INSERT_SPEC, PARAMS_LIMIT)
    refused(ValueError, c.kv_insert_params, INSERT_SPEC, PARAMS_SHORT)
    c.kv_unlock(c.kv_lock(LOCK_SPEC, r.last_device_node))
    refused(TypeError, c.kv_lock, LOCK_SPEC_BAD, r.last_device_node)
    # match_prefix and path_device_indices: a plain match (its holder made
    # without a call), the general route, a refused limit; a path's values.
    mr = c.kv_match_params(MATCH_SPEC, PARAMS)
    _ = c.kv_match_params(MATCH_SPEC, PARAMS_NEGATIVE)
    refused(OverflowError, c.kv_match_params, MATCH_SPEC, PARAMS_HUGE)
    _ = c.kv_path_values(PATH_SPEC, mr[1])
    _ = c.kv_path_values(PATH_SPEC, Holder(None))
    # evict: a count that frees (the values to the allocator), the general
    # route, a refused count.
    _ = c.kv_evict_params(EVICT_SPEC, EVICT_4)
    _ = c.kv_evict_params(EVICT_SPEC, EVICT_0)
    refused(OverflowError, c.kv_evict_params, EVICT_SPEC, EVICT_HUGE)
    return 45


class Holder:
    __slots__ = ("match",)

    def __init__(self, match):
        self.match = match


class Wrapped(tuple):
    __slots__ = ()


INTO = (Wrapped, Holder, 2, (None, 0), ("empty",))
SEED, PRIOR = b"namespace seed", bytes(range(32))
SHORT, NEGATIVE = array.array("q", [1, 2]), [1, -1]
bad_key = array.array("q", [1 << 40] * 4)


# kv_insert_params / kv_lock's specs over stand-ins for SGLang's classes
# (tests/python/test_api.py checks what they build).
@dataclasses.dataclass
class Params:
    key: object = None
    value: object = None


@dataclasses.dataclass
class Result:
    prefix_len: int
    last_device_node: object = None
    actions: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Receipt:
    uuids: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Lock:
    node: object
    receipt: Receipt


class Key:
    __slots__ = ("token_ids", "extra_key", "cache_salt", "is_bigram", "limit")

    def __init__(self, token_ids, limit=None):
        self.token_ids, self.limit = token_ids, limit
        self.extra_key = self.cache_salt = None
        self.is_bigram = False


class Vals:
    def __init__(self, capsule_of):
        self.capsule_of = capsule_of


def general(owner, *params):
    return None


class Owner:
    pass


def values_source(n):
    """A capsule maker of n int64 values (a cache's kv_values), numpy or not."""
    s = radixkv.Cache("radix", 1, n + 1)
    _, m = s.kv_insert(array.array("q", range(n)), array.array("q", range(100, 100 + n)))
    return lambda: s.kv_values(m, True)


OWNER = Owner()
INSERT_SPEC = (lambda v: v.capsule_of(), Vals, Holder, Holder(None), Result,
               dict(vars(Result(None))), ("actions",), general, weakref.ref(OWNER))
KEY12 = array.array("q", range(1, 13))
PARAMS = Params(Key(KEY12), Vals(values_source(12)))
PARAMS_LIMIT = Params(Key(KEY12, limit=4), PARAMS.value)
PARAMS_SHORT = Params(Key(KEY12), Vals(values_source(2)))
LOCK_SPEC = (Lock, dict(vars(Lock(None, None))), (), Receipt, dict(vars(Receipt())), ("uuids",))
# The receipt cannot be built (a fresh field that holds no list or dict),
# after the lock is taken: kv_lock gives the lock back. (("node",) as the
# lock's fresh fields, once here, was refused by nothing: node is set, not
# copied.)
LOCK_SPEC_BAD = LOCK_SPEC[:4] + ({"uuids": None}, ("uuids",))
MATCH_SPEC = ((Wrapped, (Holder,), 2, (None,), ("empty",)), general, weakref.ref(OWNER))
PARAMS_NEGATIVE = Params(Key(KEY12, limit=-1))
PARAMS_HUGE = Params(Key(KEY12, limit=1 << 70))
PATH_SPEC = (lambda cap: cap, b"")


@dataclasses.dataclass
class EvictParams:
    num_tokens: object = 0


@dataclasses.dataclass
class Evicted:
    num_tokens_evicted: int = 0


class Allocator:
    def free_segment(self, values, start_pos=None):
        pass


OWNER.token_to_kv_pool_allocator = Allocator()
EVICT_SPEC = (lambda cap: cap, Evicted, dict(vars(Evicted())), (), general, weakref.ref(OWNER))
EVICT_4, EVICT_0, EVICT_HUGE = EvictParams(4), EvictParams(0), EvictParams(1 << 70)


def rounds(n, c, *args):
    """body() until at least n calls are made, then the cache's own check;
    the number of calls made."""
    calls = 0
    while calls < n:
        calls += body(c, *args)
    c.check()
    return calls


def main():
    c = radixkv.Cache("radix", 4, 64)
    toks = list(range(1, 13))
    arr = array.array("i", range(1, 13))
    nparr = np.arange(1, 13, dtype=np.int64) if np is not None else None
    bad = [1.5, 2.5]
    watched = [c, toks, arr, bad, INTO, Holder, Wrapped, INSERT_SPEC, PARAMS, PARAMS_LIMIT,
               PARAMS_SHORT, LOCK_SPEC, LOCK_SPEC_BAD, OWNER, Result, Lock, Receipt, Params,
               KEY12, MATCH_SPEC, PARAMS_NEGATIVE, PARAMS_HUGE, PATH_SPEC, EVICT_SPEC, EVICT_4,
               EVICT_0, EVICT_HUGE, SEED, PRIOR, SHORT, NEGATIVE] + ([nparr] if nparr is not None else [])
    rounds(CALLS // 10, c, toks, arr, nparr, bad)  # warm-up: caches and free lists fill
    refs = [sys.getrefcount(o) for o in watched]
    before = rss_kib()
    calls = rounds(CALLS, c, toks, arr, nparr, bad)
    after = rss_kib()
    refs_after = [sys.getrefcount(o) for o in watched]
    if refs != refs_after:
        print(f"FAIL: refcounts moved over {calls} calls: {refs} -> {refs_after}")
        return 1
    s = c.sizes()
    if s["inflight_pages"] != 0 or s["protected_tokens"] != 0:
        print(f"FAIL: pages or locks left behind: {s}")
        return 1
    grew = after - before
    print(f"py_leaks: {calls} calls, resident set {before} -> {after} KiB, refcounts flat")
    # A leak of even 8 bytes per call would be ~8 MB here.
    if not SANITIZED and grew > 2048:
        print(f"FAIL: the resident set grew by {grew} KiB over {calls} calls")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
