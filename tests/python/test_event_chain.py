"""SGLang's KV-event hash chain in the extension (radixkv._radixkv's
sglang_event_hashes and Cache.kv_event_store) against a model written from
SGLang's definition with hashlib, no SGLang needed (tests/python/
test_sglang_event_hash.py compares with SGLang's own functions):

    digest[j] = SHA-256(digest[j-1] or the prior (none: nothing) ||
                        page j's tokens as little-endian u32s)
    hash[j]   = int64 of digest[j]'s first 8 bytes, big-endian
    seeded:     int64 of SHA-256(seed || hash[j] as 8 big-endian bytes)[:8]

1) the chain alone: random tokens (lists, int64 and int32 arrays, tokens up
   to 2**32 - 1), page sizes 1, 4 and 16, short last pages, with and without
   a prior and a seed; and every page size 1..33 with every last-page length;
2) kv_event_store on a radix cache under random inserts and evicts: each
   insert's new pages continue the chain from their parent page's stored
   digest, parent is that page's hash, the token ids are the new pages',
   and every page kv_evict frees names the hash stored for it;
3) every refusal names its argument, and leaves the tables as they were;
3b) a page id reused: a page evicted (or reset away) and adopted again by
   another key keeps its earlier owner's digest in the table; a chain
   continued from it without a kv_event_store since must be refused, by
   every route that leaves a page without one (an insert with no event
   store after it, an event store that raised, a reset, kv_set_tags); and,
   in a fault-injection build, after evictions whose free log was lost to a
   failed allocation (which cannot say which pages they freed);
4) the chain's SHA-256 itself (the CPU's SHA instructions where it has them,
   libcrypto forced) against hashlib on random messages of every length
   0..200 bytes split at every point into the two parts the chain passes,
   and 1) and 2) again with the chain forced onto libcrypto.
Exit 1 naming the first difference.
"""
import array
import hashlib
import random
import struct

import radixkv
from radixkv._radixkv import (_fault_alloc_for_tests, _sha256_for_tests, _sha256_route,
                              sglang_event_hashes)
from pychecks import check, count, raises


def model_chain(tokens, P, prior=None, seed=None):
    """(digests, hashes) of tokens in pages of P, as SGLang defines them."""
    digests, hashes = [], []
    for s in range(0, len(tokens), P):
        page = tokens[s:s + P]
        prior = hashlib.sha256((prior or b"") + struct.pack(f"<{len(page)}I", *page)).digest()
        h = int.from_bytes(prior[:8], "big", signed=True)
        if seed is not None:
            h = int.from_bytes(hashlib.sha256(seed + h.to_bytes(8, "big", signed=True))
                               .digest()[:8], "big", signed=True)
        digests.append(prior)
        hashes.append(h)
    return digests, hashes


def chain_alone(rng):
    """1) sglang_event_hashes against the model."""
    cases = 0
    for P in (1, 4, 16):
        for t in range(60):
            n = rng.randrange(0, 5 * P + 3)
            top = (1 << 32) - 1 if t % 3 == 0 else 50
            toks = [rng.randint(0, top) for _ in range(n)]
            prior = rng.randbytes(32) if t % 2 else None
            seed = rng.randbytes(rng.choice((0, 7, 32))) if t % 5 >= 2 else None
            want = model_chain(toks, P, prior, seed)
            forms = [toks, array.array("q", toks)]
            if top < 1 << 31:
                forms.append(array.array("i", toks))
            for form in forms:
                got = sglang_event_hashes(form, P, prior, seed)
                check(got == (list(want[0]), list(want[1])),
                      f"chain P={P} n={n} prior={prior is not None} seed={seed!r} "
                      f"({type(form).__name__}): {got[1][:3]} != {want[1][:3]}")
                cases += 1
    # The comparisons can fail: a prior, a seed and one token each change
    # what the model says.
    toks = list(range(8))
    base = model_chain(toks, 4)
    check(model_chain(toks, 4, b"\0" * 32) != base and model_chain(toks, 4, seed=b"") != base
          and model_chain(toks[:7] + [9], 4) != base, "the model's chain depends on its inputs")
    return cases


def chain_shapes(rng):
    """1b) every page size 1..33 and every length of the last page, with and
    without a prior: the fast chain lays each page's tokens, padding and
    length into message words by their count (whole vectors of 4 tokens, 0-3
    left over, one or two blocks), so each count is its own case."""
    cases = 0
    for P in range(1, 34):
        for n in range(0, 2 * P + 2):
            toks = [rng.randrange(1 << 32) for _ in range(n)]
            prior = rng.randbytes(32) if n % 2 else None
            got = sglang_event_hashes(array.array("q", toks), P, prior)
            check(got == tuple(map(list, model_chain(toks, P, prior))),
                  f"chain shape P={P} n={n} prior={prior is not None}")
            cases += 1
    return cases


def with_cache(rng, P):
    """2) kv_event_store beside kv_insert and kv_evict on a radix cache."""
    c = radixkv.Cache("radix", P, 40)
    prior = rng.randbytes(32)
    stored = {}  # page-aligned prefix (tuple) -> (digest, hash) stored for its last page
    evicted = 0
    for step in range(300):
        base = rng.choice(([], [1, 2, 3, 4] * P, [5] * (2 * P)))
        toks = base + [rng.randrange(6) for _ in range(rng.randrange(0, 4 * P))]
        toks = toks[:len(toks) // P * P]
        seed = rng.choice((None, b"ns-a", b"ns-b"))
        vals = array.array("q", range(len(toks)))
        try:
            prefix, m = c.kv_insert(array.array("q", toks), vals)
        except radixkv.OutOfPages:
            n, _, tags = c.kv_evict(rng.randrange(1, 8 * P), tags=True)
            known = {h for _, h in stored.values()}
            check(all(int(t) in known for t in tags) and len(tags) * P == n,
                  f"P={P} step {step}: evicted tags {list(tags)[:4]} not all stored hashes")
            evicted += len(tags)
            continue
        k = prefix // P
        use_prior = prior if k == 0 else None
        form = toks if step % 2 else array.array("q", toks)
        parent, hashes, token_ids = c.kv_event_store(m, k, form, seed, use_prior)
        # The model: from the parent page's stored digest, or from the prior.
        start = stored[tuple(toks[:k * P])][0] if k else prior
        digests, want = model_chain(toks[k * P:], P, start, seed)
        check(hashes == want, f"P={P} step {step}: hashes {hashes[:3]} != {want[:3]} (from page {k})")
        check(token_ids == toks[k * P:], f"P={P} step {step}: token_ids")
        want_parent = stored[tuple(toks[:k * P])][1] if k else None
        check(parent == want_parent, f"P={P} step {step}: parent {parent} != {want_parent}")
        for j, (d, h) in enumerate(zip(digests, hashes)):
            stored[tuple(toks[:(k + j + 1) * P])] = (d, h)
        check(list(c.kv_tags(m))[k:] == hashes, f"P={P} step {step}: the pages' tags")
    c.check()
    check(evicted > 0, f"P={P}: the sequence never evicted")


def refusals():
    """3) bad arguments, each refused with a message; a refused call leaves
    the pages' tags as they were."""
    c = radixkv.Cache("radix", 4, 16)
    toks = array.array("q", range(1, 13))
    _, m = c.kv_insert(toks, array.array("q", range(12)))
    parent, hashes, _ = c.kv_event_store(m, 0, toks)
    tags = list(c.kv_tags(m))
    store = c.kv_event_store
    raises(ValueError, lambda: store(m, 4, toks), "start past the path")
    raises(ValueError, lambda: store(m, -1, toks), "negative start")
    raises(TypeError, lambda: store(m, "0", toks), "start not an int")
    raises(ValueError, lambda: store(m, 1, toks, None, b"\0" * 32), "a prior past start 0")
    raises(ValueError, lambda: store(m, 0, toks, None, b"\0" * 31), "a prior of 31 bytes")
    raises(TypeError, lambda: store(m, 0, toks, 5), "a seed that is not bytes")
    raises(ValueError, lambda: store(m, 0, toks[:11]), "tokens shorter than the path")
    raises(TypeError, lambda: store(m, 0, [1.5] * 12), "tokens that are not ints")
    raises(TypeError, lambda: store(m, 0, 12), "tokens not a sequence")
    raises(ValueError, lambda: store(m, 0, [-1] + list(toks[1:])), "a negative token")
    raises(ValueError, lambda: store(m, 0, [1 << 32] + list(toks[1:])), "a token past u32")
    raises(ValueError, lambda: store(m, 0, [1 << 70] + list(toks[1:])), "a token past int64")
    raises(TypeError, lambda: store(m), "missing arguments")
    raises(TypeError, lambda: store(m, 0, toks, nope=1), "an unknown keyword")
    raises(TypeError, lambda: store(toks, 0, toks), "not a match")
    check(list(c.kv_tags(m)) == tags, "a refused kv_event_store left the tags as they were")
    # A parent page whose tag came from kv_insert, with no digest stored.
    other = array.array("q", [9] * 8)
    _, m2 = c.kv_insert(other, array.array("q", range(8)), None, array.array("q", [7, 8]))
    msg = raises(ValueError, lambda: store(m2, 1, other), "a parent page without a digest")
    check("no event digest" in msg, f"the message says what is missing: {msg}")
    raises(ValueError, lambda: sglang_event_hashes([1, 2], 0), "page size 0")
    raises(ValueError, lambda: sglang_event_hashes([1, -2], 4), "a negative token, alone")
    raises(ValueError, lambda: sglang_event_hashes([1], 4, b"x"), "a short prior, alone")
    raises(TypeError, lambda: sglang_event_hashes([1], 4, None, 3.0), "a float seed, alone")
    c.close()
    raises(ValueError, lambda: store(m, 0, toks), "a closed cache")


def reused_pages():
    """3b) a stale digest on a reused page id is no digest."""
    P = 4
    key_a = array.array("q", range(100, 108))  # two pages
    key_b = array.array("q", range(200, 212))  # three pages; b[:8] reuses a's pages

    def reused(c, after):
        """key_a inserted and event-stored, then after(c) (which frees its
        pages or leaves the cache empty) and key_b's first two pages
        inserted on the same page ids; the Match of key_b's two pages."""
        _, ma = c.kv_insert(key_a, array.array("q", range(8)))
        c.kv_event_store(ma, 0, key_a, None, b"\1" * 32)
        pages_a = list(ma.pages)
        after(c)
        _, mb = c.kv_insert(key_b[:8], array.array("q", range(8)))
        check(list(mb.pages) == pages_a, f"key_b took key_a's page ids: {list(mb.pages)} "
              f"!= {pages_a}")
        return mb

    def extend_refused(c, how):
        prefix, m = c.kv_insert(key_b, array.array("q", range(12)))
        check(prefix == 8, f"{how}: key_b's third page extends its first two")
        msg = raises(ValueError, lambda: c.kv_event_store(m, 2, key_b),
                     f"{how}: a chain continued from a reused page's stale digest")
        check("page 1 of the match's path has no event digest" in msg,
              f"{how}: the message names the page: {msg}")

    def evict_all(c):
        c.kv_evict(1 << 20)

    # An insert with no kv_event_store after it, for each kind that caches
    # (the kinds without a one-walk insert adopt through alloc and insert).
    for kind in ("radix", "trie", "hash"):
        c = radixkv.Cache(kind, P, 3)
        reused(c, evict_all)
        extend_refused(c, f"{kind}: evicted by kv_evict")
    c = radixkv.Cache("radix", P, 3)
    reused(c, lambda c: c.evict(1 << 20))
    extend_refused(c, "evicted by evict")
    c = radixkv.Cache("radix", P, 3)
    reused(c, lambda c: c.evict_pages(1 << 20))
    extend_refused(c, "evicted by evict_pages")
    c = radixkv.Cache("radix", P, 3)
    reused(c, lambda c: c.reset())
    extend_refused(c, "after reset")
    # A kv_event_store that raised after the kv_insert adopted the pages.
    c = radixkv.Cache("radix", P, 3)
    mb = reused(c, evict_all)
    raises(ValueError, lambda: c.kv_event_store(mb, 0, [-1] * 8), "a negative token")
    extend_refused(c, "after a kv_event_store that raised")
    # The same pages event-stored again: the chain continues, from the new digest.
    c = radixkv.Cache("radix", P, 3)
    mb = reused(c, evict_all)
    c.kv_event_store(mb, 0, key_b[:8])
    _, m = c.kv_insert(key_b, array.array("q", range(12)))
    parent, hashes, _ = c.kv_event_store(m, 2, key_b)
    digests, want = model_chain(list(key_b), P)
    check(hashes == want[2:] and parent == want[1],
          f"a reused page event-stored again continues its own chain: {hashes} != {want[2:]}")
    # A page retagged by kv_set_tags: its tag is no longer its digest's.
    c = radixkv.Cache("radix", P, 3)
    _, m = c.kv_insert(key_b[:8], array.array("q", range(8)))
    c.kv_event_store(m, 0, key_b[:8])
    c.kv_set_tags(m, 1, array.array("q", [5]))
    extend_refused(c, "after kv_set_tags")
    c.check()


def lost_free_log():
    """3b) with the free log lost: every allocation fails while the cache
    evicts key_a's pages, so the log of freed pages cannot grow and the evict
    cannot say which pages it freed; the pages reused after it still show
    neither key_a's digest nor its values. 0 cases in a build without fault
    injection."""
    if not _fault_alloc_for_tests(0):
        return 0
    P = 4
    key_a = array.array("q", range(100, 108))
    key_b = array.array("q", range(200, 212))
    cases = 0
    for route in ("kv_evict", "evict", "evict_pages"):
        for reuse in ("kv_insert", "insert"):
            how = f"log lost in {route}, pages reused by {reuse}"
            c = radixkv.Cache("radix", P, 3)
            _, m = c.kv_insert(key_a, array.array("q", range(8)))
            c.kv_event_store(m, 0, key_a)
            _fault_alloc_for_tests(1, True)
            try:
                getattr(c, route)(1 << 20)
                lost = False
            except MemoryError as e:
                lost = "free log" in str(e)
            finally:
                _fault_alloc_for_tests(0)
            check(route == "evict" or lost, f"{how}: the evict reports the lost log")
            check(c.sizes()["cached_pages"] == 0, f"{how}: the evict happened")
            if reuse == "kv_insert":
                c.kv_insert(key_b[:8], array.array("q", range(8)))
                _, m = c.kv_insert(key_b, array.array("q", range(12)))
                raises(ValueError, lambda: c.kv_event_store(m, 2, key_b),
                       f"{how}: a chain continued from a stale digest")
            else:
                pages = c.alloc(2)
                c.insert(key_b[:8], pages)
                check(sorted(pages) == [0, 1], f"{how}: key_a's page ids reused: {list(pages)}")
                msg = raises(ValueError, lambda: c.kv_values(c.kv_match(key_b[:8])),
                             f"{how}: values read from pages that took none")
                check("has no values" in msg, f"{how}: the message says so: {msg}")
            c.check()
            cases += 1
    return cases


def sha256_direct(rng):
    """4) the chain's SHA-256 on both routes against hashlib: every length
    0..200 (one, two and four blocks with their padding, the 55/56 and
    119/120 edges where the length spills into another block), every split
    between the chain's two parts (prior digest, page bytes)."""
    n = 0
    for length in range(201):
        data = rng.randbytes(length)
        want = hashlib.sha256(data).digest()
        for split in range(length + 1):
            for portable in (False, True):
                got = _sha256_for_tests(data, split, portable)
                check(got == want, f"sha256 len={length} split={split} portable={portable}: "
                      f"{got.hex()[:16]} != {want.hex()[:16]}")
                n += 1
    # The check can fail: one changed byte changes the digest.
    check(_sha256_for_tests(b"\1" * 36, 32, False) != hashlib.sha256(b"\0" * 36).digest(),
          "the digest depends on its input")
    raises(ValueError, lambda: _sha256_for_tests(b"ab", 3, False), "a split past the data")
    return n


def main():
    rng = random.Random(7)
    fast, _ = _sha256_route()
    n = sha256_direct(rng)
    n_chains = chain_alone(rng) + chain_shapes(rng)
    for P in (1, 4, 16):
        with_cache(rng, P)
    refusals()
    reused_pages()
    n_lost = lost_free_log()
    # The same chains with every page hashed by libcrypto: the routes agree
    # on whole chains, not only on lone messages.
    _, was = _sha256_route(True)
    try:
        check(_sha256_route()[0] is False, "forcing libcrypto takes the chain off the SHA path")
        rng = random.Random(7)
        sha256_direct(rng)
        n_chains += chain_alone(rng) + chain_shapes(rng)
        for P in (1, 4, 16):
            with_cache(rng, P)
    finally:
        _sha256_route(was)
    check(_sha256_route()[0] == fast, "the route comes back")
    print(f"event_chain: SHA-256 on {'the SHA instructions' if fast else 'libcrypto only'}, "
          f"{n} digests against hashlib, {n_chains} chains against the model (both routes), "
          f"{n_lost} lost-free-log cases (fault-injection builds only), {count()} checks passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
