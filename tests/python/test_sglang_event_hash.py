"""The extension's SGLang KV-event chain (radixkv._radixkv.sglang_event_hashes,
the code Cache.kv_event_store runs) against SGLang 0.5.23's own functions:
get_hash_str (its native SHA-256 page chain), hash_str_to_int64,
namespaced_block_hash with seeds from kv_event_namespace_seed (random
extra_key / cache_salt strings, non-ASCII ones too), and the cache_salt's
seed digest as radixkv.sglang and SGLang's recorder start a chain from.
Random tokens (below 2**31 and up to 2**32 - 1), page sizes 1, 4 and 16,
short last pages, with and without a prior digest and a seed, each chain on
both SHA-256 routes (the CPU's SHA instructions where it has them, and
libcrypto forced): any difference fails, and the comparison must have
covered every combination.
Runs in the sglang venv (RKV_SGLANG_PYTHON); skips (77) without.
"""
import hashlib
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

N_CHAINS = 900


def main():
    reexec_in_venv("RKV_SGLANG_PYTHON", __file__, "scripts/sglang_venv.sh makes it")
    import sglang_harness as h
    why = h.native_hash_missing()
    if why:
        print(f"skip: {why}")
        return 77
    from sglang.srt.disaggregation.kv_events import kv_event_namespace_seed, namespaced_block_hash
    from sglang.srt.mem_cache.utils import get_hash_str, hash_str_to_int64
    from radixkv._radixkv import _sha256_route, sglang_event_hashes

    rng = random.Random(11)
    words = ["a", "lora-b", "", "ns\u00e9", "\u4e2d\u6587", "x" * 40]
    diffs, seen = 0, set()
    first = None
    for t in range(N_CHAINS):
        P = (1, 4, 16)[t % 3]
        n = rng.randrange(0, 6 * P + 2)
        top = (1 << 32) - 1 if t % 4 == 0 else (1 << 31) - 1
        toks = [rng.randint(0, top) for _ in range(n)]
        how = t // 3 % 3  # no prior, a random digest, a cache_salt's seed digest
        if how == 0:
            prior = None
        elif how == 1:
            prior = rng.randbytes(32)
        else:
            prior = hashlib.sha256(b"sglang-cache-salt-v1\0"
                                   + rng.choice(words).encode("utf-8")).digest()
        seed = None
        if t // 9 % 2:
            extra = rng.choice(words + [None])
            salt = rng.choice(words) if extra is None else rng.choice(words + [None])
            seed = kv_event_namespace_seed(extra_key=extra, cache_salt=salt)
        chain = get_hash_str(toks, prior.hex() if prior else None, page_size=P)
        want = [hash_str_to_int64(h) for h in chain]
        if seed is not None:
            want = [namespaced_block_hash(h, namespace_seed=seed) for h in want]
        for portable in (False, True):
            was = _sha256_route(portable)[1]
            try:
                digests, got = sglang_event_hashes(toks, P, prior, seed)
            finally:
                _sha256_route(was)
            if [d.hex() for d in digests] != chain or got != want:
                diffs += 1
                if first is None:
                    first = (t, P, toks[:8], prior, seed, got[:3], want[:3], portable)
        seen.add((P, how, seed is not None, n % P != 0 and P > 1))
    route = "SHA instructions and libcrypto" if _sha256_route()[0] else "libcrypto only"
    print(f"sglang_event_hash: {N_CHAINS} chains ({route}) against SGLang's get_hash_str, "
          f"hash_str_to_int64 and namespaced_block_hash: {diffs} differ; "
          f"{len(seen)} of 30 combinations of page size, prior, seed, short last page")
    if first is not None:
        print(f"first difference: chain {first[0]} P={first[1]} tokens {first[2]}.. "
              f"prior={first[3]!r} seed={first[4]!r} libcrypto forced={first[7]}\n"
              f"radixkv: {first[5]}\nsglang:  {first[6]}")
        return 1
    # Page size 1 has no short last page: 3 * 2 = 6 for it, 3 * 2 * 2 = 12 for 4 and 16 each.
    if len(seen) != 30:
        print(f"FAIL: only {len(seen)} of 30 combinations compared")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
