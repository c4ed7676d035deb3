"""Drive SGLang 0.5.23's own RadixCache through the cache simulator's step
protocol (docs/ARCHITECTURE.md, cache simulator contract, sglang step
semantics), so that its answers can be compared with `cache-sim --cache
radix` request by request and step by step. Used by the peers suite; runs
only in the sglang venv (scripts/sglang_venv.sh).

Per step, as cache_sim.c does it:
  1. in trace order: match_prefix(tokens[:-1], extra_key, cache_salt) and
     inc_lock_ref (a line's "namespace" is its extra_key, its "salt" the
     cache_salt, which cache-sim traces do not have; a request needing more
     pages than the pool holds is an error line and touches nothing)
  2. shortfall = sum of pages needed - free pages; if > 0, one
     evict(shortfall * page_size)
  3. pages in trace order while they fit; from the first that does not, each
     request is an error line and gives back its lock
  4. in trace order: insert(tokens, matched KV indices + own slots); the
     request frees its own pages the tree already held and its partial page
  5. dec_lock_ref of every match, in trace order

Determinism: SGLang stamps nodes with time.monotonic(); the harness replaces
that clock, in the radix_cache module only, by a counter that grows by one at
every read. Every node a call touches then carries a time no other call's
nodes carry, and a split's new prefix node reads the clock after the call's
access time, so leaves never tie on time: the LRU order is total, and equal
to the logical clock's of radixkv (one tick per call, ties to the node
created first), which never needs its tie rule here either.
"""
import itertools
import types
from array import array

import torch
import sglang.srt.mem_cache.radix_cache as rc
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

_tick = itertools.count(1)
rc.time = types.SimpleNamespace(monotonic=lambda: float(next(_tick)),
                                perf_counter=__import__("time").perf_counter)


class PagedAllocator:
    """The three methods SGLang's RadixCache calls on its KV allocator
    (device, free, free_segment) over a pool of pages: slot = page * P + j.
    It remembers which token each slot holds, so an eviction can be told as
    the evicted node's tokens, in the order SGLang freed them."""

    device = "cpu"

    def __init__(self, num_pages, page_size):
        self.P = page_size
        self.free_pages = list(range(num_pages - 1, -1, -1))  # pop() takes page 0 first
        self.slot_token = {}
        self.log = None  # a list while an eviction is being recorded
        self.freed_slots = []  # every slot freed by an eviction, in order

    def num_free(self):
        return len(self.free_pages)

    def alloc(self, n):
        if n > len(self.free_pages):
            return None
        return [self.free_pages.pop() for _ in range(n)]

    def release(self, pages):
        self.free_pages.extend(pages)

    def free_segment(self, slots, start_pos=0):
        s = slots.tolist()
        self.freed_slots += s
        if self.log is not None:
            self.log.append([self.slot_token[x] for x in s])
        self.release([x // self.P for x in s[::self.P]])

    def free(self, slots):
        self.free_segment(slots)


def native_hash_missing():
    """Why SGLang's native block hash does not load here, or None. SGLang
    hashes event blocks with a C++ module it compiles on first use (torch's
    cpp_extension: a compiler and OpenSSL's headers); without it SGLang's own
    functions cannot hash, so the event tests have nothing to compare with."""
    try:
        from sglang.srt.mem_cache.cpp_utils.native_hash import _load_native_hash_module
        _load_native_hash_module()
    except Exception as e:  # noqa: BLE001 - any failure to build it is the reason
        return f"SGLang's native block hash does not load here ({e}: {e.__cause__})"
    return None


def make_sglang(num_pages, page_size):
    kv = PagedAllocator(num_pages, page_size)
    return RadixCache.create_simulated(mock_allocator=kv, page_size=page_size), kv


def random_trace(rng, P, *, vocab, max_lines, max_extra, namespace_p, namespaces, salt_p=0.0):
    """A trace for replay(): 2 to max_lines - 1 requests, each a random
    prefix of one of three prompts (tokens and prompt lengths below vocab)
    and 1 to max_extra - 1 tokens of its own, each opening a new step with
    probability 1/2; with probability namespace_p a namespace from
    namespaces, with salt_p a salt ("s" or "t"). The tests' traces differ only in these
    numbers; with salt_p 0 no draw is made for the salt, so each test's
    seed gives the sequences it always gave."""
    prompts = [[rng.randrange(vocab) for _ in range(rng.randrange(1, vocab))] for _ in range(3)]
    lines, step = [], 0
    for i in range(rng.randrange(2, max_lines)):
        if rng.random() < 0.5:
            step += 1
        base = rng.choice(prompts)
        toks = base[:rng.randrange(len(base) + 1)] + [rng.randrange(vocab)
                                                      for _ in range(rng.randrange(1, max_extra))]
        line = {"id": i, "step": step, "tokens": toks}
        if rng.random() < namespace_p:
            line["namespace"] = rng.choice(namespaces)
        if salt_p and rng.random() < salt_p:
            line["salt"] = rng.choice(["s", "t"])
        lines.append(line)
    return lines


def steps_of(trace):
    """Consecutive lines with equal step form one step; no step: its own."""
    numbered = [(line.get("step", i), line) for i, line in enumerate(trace)]
    for step, group in itertools.groupby(numbered, key=lambda sl: sl[0]):
        yield step, [line for _, line in group]


def replay(trace, page_size, num_pages, tree=None, kv=None, on_op=None, with_kv=False):
    """The trace through SGLang's RadixCache (or any object with its
    interface, given as tree with its allocator kv). Returns (requests,
    steps): per request {"id", "step", "matched", "new"} or {"id", "step",
    "error": True}; per evicting step {"step", "evicted": [[tokens], ...]}.
    on_op(name, tree), if given, runs after every call into the tree; with_kv
    adds each served request's matched KV indices ("kv")."""
    P = page_size
    if tree is None:
        tree, kv = make_sglang(num_pages, P)
    op = on_op or (lambda name, t: None)
    requests, steps, nth = [], [], 0
    for step, lines in steps_of(trace):
        live, need_total = [], 0
        out = {}
        for line in lines:
            toks = line["tokens"]
            n = len(toks)
            total = -(-n // P)
            if total > num_pages:
                out[id(line)] = {"id": line["id"], "step": step, "error": True}
                continue
            ns = line.get("namespace")
            salt = line.get("salt")
            # All but the last token, as a slice, or (every other match) as
            # SGLang 0.5.23's scheduler asks: the whole array with a limit.
            nth += 1
            key = (RadixKey(array("q", toks), ns, cache_salt=salt, limit=n - 1) if nth % 2
                   else RadixKey(array("q", toks[:-1]), ns, cache_salt=salt))
            m = tree.match_prefix(MatchPrefixParams(key=key))
            op("match_prefix", tree)
            node = m.last_device_node
            tree.inc_lock_ref(node)
            op("inc_lock_ref", tree)
            matched = m.device_prefix_len
            r = {"line": line, "node": node, "matched": matched, "need": total - matched // P,
                 "kv": tree.path_device_indices(node), "locked": True}
            live.append(r)
            need_total += r["need"]
        short = need_total - kv.num_free()
        if short > 0:
            kv.log = []
            tree.evict(EvictParams(num_tokens=short * P))
            op("evict", tree)
            steps.append({"step": step, "evicted": kv.log})
            kv.log = None
        fits = True
        for r in live:
            pages = kv.alloc(r["need"]) if fits else None
            if pages is None:
                fits = False
                tree.dec_lock_ref(r["node"])
                op("dec_lock_ref", tree)
                r["locked"] = False
                continue
            r["pages"] = pages
        for r in live:
            if not r["locked"]:
                continue
            toks, pages = r["line"]["tokens"], r["pages"]
            n, k0 = len(toks), r["matched"] // P
            slots = [p * P + j for p in pages for j in range(P)]
            for i, s in enumerate(slots):
                if k0 * P + i < n:
                    kv.slot_token[s] = toks[k0 * P + i]
            value = torch.cat([r["kv"].to(torch.int64), torch.tensor(slots, dtype=torch.int64)])[:n]
            res = tree.insert(InsertParams(key=RadixKey(array("q", toks), r["line"].get("namespace"),
                                                        cache_salt=r["line"].get("salt")),
                                           value=value))
            op("insert", tree)
            prefix = res.prefix_len
            own = pages[:max(0, prefix // P - k0)] + ([pages[-1]] if n % P else [])
            kv.release(own)
        for r in live:
            if r["locked"]:
                tree.dec_lock_ref(r["node"])
                op("dec_lock_ref", tree)
        for r in live:
            line = r["line"]
            out[id(line)] = ({"id": line["id"], "step": step, "matched": r["matched"],
                              "new": len(line["tokens"]) - r["matched"]} if r["locked"] else
                             {"id": line["id"], "step": step, "error": True})
            if with_kv:
                out[id(line)]["kv"] = r["kv"].tolist()
        requests += [out[id(l)] for l in lines]
    return requests, steps
