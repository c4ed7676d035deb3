"""radixkv's radix tree as SGLang's prefix cache: radixkv.sglang.RadixCache.

The plug-in point. SGLang 0.5.23 has two trees: the classic `RadixCache`
(sglang.srt.mem_cache.radix_cache, a `BasePrefixCache`), and
`UnifiedRadixCache`, whose tree core comes from `tree_core_registry`
("python", "rust"). A registered core must serve the unified tree's
components (full attention, SWA, Mamba) through that core's own node and
receipt protocol, so a radixkv core would have to mirror much more than a
prefix match. The classic cache's interface is small (match_prefix, insert,
evict, inc/dec_lock_ref, sizes, reset) and every SGLang component that takes
a `BasePrefixCache` takes it; replacing it is one constructor call:

    from radixkv.sglang import RadixCache
    tree_cache = RadixCache(cache_init_params)      # instead of SGLang's

How it maps. radixkv's tree stores page ids of its own pool; this class keeps,
per radixkv page, the SGLang KV indices of that page (page_size of them), so a
match returns SGLang's own KV indices, and an eviction hands them back to
SGLang's allocator (free_segment), in the order radixkv evicted them (one call
per evict, the pages' indices concatenated: node boundaries are radixkv's).
extra_key and cache_salt are namespaces (radixkv.namespace_id of both), so
keys that differ in either never share entries, as in SGLang. The clock is
radixkv's logical one (one tick per call), where SGLang's stamps
time.monotonic(): the LRU order is the same whenever SGLang's clock moves
between calls. Eviction policies are radixkv's registered ones
(radixkv.policies()); SGLang's names lru, lfu, fifo and priority exist in both.

Not supported (refused with an error, never ignored): EAGLE's bigram keys,
KV cache events, metrics collection; hierarchical cache, SWA and Mamba are the
unified tree's and not part of this interface. `checkpoint` (SGLang's
scheduler's insert of a running request) follows RadixCache's own steps but
is not driven by the comparison tests, which call match_prefix, insert,
evict and the lock counts directly.

Imports sglang (and torch) when imported; the rest of radixkv does not.
"""
from typing import Any, Optional

import numpy as np
import torch
from sglang.srt.mem_cache.base_prefix_cache import (BasePrefixCache, DecLockRefParams,
                                                    DecLockRefResult, EvictParams, EvictResult,
                                                    IncLockRefResult, InsertParams, InsertResult,
                                                    MatchPrefixParams, MatchResult)
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixKey

from . import Cache, namespace_id, policies

__all__ = ["RadixCache", "RadixKey"]

# Pages in radixkv's pool when the allocator does not say how many KV slots
# SGLang has (create_simulated): page ids cost 17 bytes each.
DEFAULT_PAGES = 1 << 20


class Node:
    """What match_prefix and insert return as the last device node: the
    radixkv match (the lock handle) and the KV indices of its path."""

    __slots__ = ("match", "indices")

    def __init__(self, match, indices):
        self.match = match
        self.indices = indices


def _namespace(key: RadixKey) -> int:
    if key.extra_key is None and key.cache_salt is None:
        return 0
    # A marker before each part: "" and None stay apart, as in SGLang's child keys.
    return namespace_id(f"e:{key.extra_key!r}\x00s:{key.cache_salt!r}")


class RadixCache(BasePrefixCache):
    """SGLang 0.5.23's RadixCache interface over radixkv's radix tree."""

    def __init__(self, params: CacheInitParams, num_pages: Optional[int] = None):
        self.disable = params.disable
        self.req_to_token_pool = params.req_to_token_pool
        self.token_to_kv_pool_allocator = params.token_to_kv_pool_allocator
        self.page_size = params.page_size
        self.is_eagle = params.is_eagle
        self.eviction_policy = params.eviction_policy.lower()
        if self.is_eagle:
            raise NotImplementedError("radixkv.sglang.RadixCache: EAGLE bigram keys are not supported")
        if params.enable_kv_cache_events or params.enable_metrics:
            raise NotImplementedError("radixkv.sglang.RadixCache: KV cache events and metrics are "
                                      "not supported")
        if self.eviction_policy not in policies():
            raise ValueError(f"radixkv.sglang.RadixCache: eviction policy "
                             f"'{self.eviction_policy}' is not one of {policies()}")
        alloc = self.token_to_kv_pool_allocator
        dev = getattr(alloc, "device", "cpu") if alloc is not None else "cpu"
        self.device = torch.device(dev) if isinstance(dev, (str, torch.device)) else torch.device("cpu")
        size = getattr(alloc, "size", None)
        # Twice SGLang's pages: an insert takes a page id for every page of its
        # key before the tree says which it already holds.
        self.num_pages = num_pages or (2 * (int(size) // self.page_size + 1) if size
                                       else DEFAULT_PAGES)
        self.kv_events = None
        self.metrics_collector = None
        self.cache = None
        self.reset()

    @classmethod
    def create_simulated(cls, disable: bool = False, mock_allocator: Optional[Any] = None,
                         page_size: int = 1, enable_kv_cache_events: bool = False,
                         dynamo_kv_event_format: bool = False, kv_event_lora_names=None,
                         num_pages: Optional[int] = None) -> "RadixCache":
        """Without memory pools, as SGLang's own create_simulated."""
        params = CacheInitParams(disable=disable, req_to_token_pool=None,
                                 token_to_kv_pool_allocator=mock_allocator, page_size=page_size,
                                 enable_kv_cache_events=enable_kv_cache_events,
                                 dynamo_kv_event_format=dynamo_kv_event_format)
        return cls(params, num_pages=num_pages)

    def reset(self):
        if self.cache is None:
            self.cache = Cache("radix", self.page_size, self.num_pages,
                               policy=self.eviction_policy)
        else:
            self.cache.reset()
        # (pages, page_size): SGLang's KV indices of each radixkv page, grown on
        # demand; numpy, whose fancy indexing costs a fraction of torch's.
        self._kv = np.zeros((1024, self.page_size), dtype=np.int64)
        self._empty = torch.empty((0,), dtype=torch.int64, device=self.device)
        self.root_node = Node(None, self._empty)
        self._empty_match = MatchResult(device_prefix_len=0, last_device_node=self.root_node,
                                        last_host_node=self.root_node,
                                        best_match_node=self.root_node)

    # ---- lookups -----------------------------------------------------------

    def _tokens(self, key: RadixKey):
        if key.is_bigram:
            raise NotImplementedError("radixkv.sglang.RadixCache: bigram keys are not supported")
        t = key.raw_token_ids()
        n = len(t) // self.page_size * self.page_size
        return t if n == len(t) else t[:n]

    def _indices(self, pages) -> torch.Tensor:
        if len(pages) == 0:
            return self._empty
        t = torch.from_numpy(self._kv[np.asarray(pages)].reshape(-1))
        return t if self.device.type == "cpu" else t.to(self.device)

    def match_prefix(self, params: MatchPrefixParams) -> MatchResult:
        key = params.key
        if self.disable or len(key) == 0:
            return self._empty_match
        toks = self._tokens(key)
        if len(toks) == 0:
            return self._empty_match
        m = self.cache.match(toks, namespace=_namespace(key))
        if m.length == 0:
            return self._empty_match
        node = Node(m, self._indices(m.pages))
        return MatchResult(device_prefix_len=m.length, last_device_node=node,
                           last_host_node=node, best_match_node=node)

    def touch_prefix(self, key: RadixKey) -> None:
        if not self.disable and len(key):
            self.cache.match(self._tokens(key), namespace=_namespace(key))

    def path_device_indices(self, node: Node) -> torch.Tensor:
        return node.indices

    # ---- insert and evict --------------------------------------------------

    def insert(self, params: InsertParams) -> InsertResult:
        if self.disable:
            return InsertResult(prefix_len=0)
        key = params.key
        toks = self._tokens(key)
        n = len(toks)
        value = params.value
        value = (value[:n] if value is not None
                 else torch.tensor(toks[:n], dtype=torch.int64))
        P = self.page_size
        ns = _namespace(key)
        # What the tree holds already, then pages (and their KV indices) for
        # the rest only; the tree adopts those. The match moves radixkv's
        # clock once more, on the same path the insert then touches, so no
        # other node's order changes.
        held = self.cache.match(toks, namespace=ns) if n else None
        k = held.length // P if held is not None else 0
        new = self.cache.alloc(n // P - k)
        top = int(new.max()) + 1 if len(new) else 0
        if top > self._kv.shape[0]:
            grown = np.zeros((max(top, 2 * self._kv.shape[0]), P), dtype=np.int64)
            grown[:self._kv.shape[0]] = self._kv
            self._kv = grown
        if len(new):
            self._kv[new] = value[k * P:].to("cpu", torch.int64).numpy().reshape(-1, P)
        pages = np.concatenate([held.pages, new]) if held is not None else new
        prefix = self.cache.insert(toks, pages, namespace=ns)
        if prefix > k * P:  # only if something else inserted between the two calls
            self.cache.free(new[:prefix // P - k])
        if k == n // P:
            node = Node(held, self._indices(held.pages)) if k else self.root_node
        else:
            m = self.cache.match(toks, namespace=ns)
            node = Node(m, self._indices(m.pages))
        return InsertResult(prefix_len=prefix, last_device_node=node)

    def evict(self, params: EvictParams) -> EvictResult:
        if self.disable or params.num_tokens <= 0:
            return EvictResult()
        freed, pages = self.cache.evict_pages(params.num_tokens)
        if len(pages):
            self.token_to_kv_pool_allocator.free_segment(self._indices(pages), start_pos=0)
        return EvictResult(num_tokens_evicted=freed)

    # ---- locks and sizes ---------------------------------------------------

    def inc_lock_ref(self, node: Node) -> IncLockRefResult:
        if self.disable or node.match is None:
            return IncLockRefResult(delta=0)
        before = self.cache.sizes()["evictable_tokens"]
        self.cache.lock(node.match)
        return IncLockRefResult(delta=self.cache.sizes()["evictable_tokens"] - before)

    def dec_lock_ref(self, node: Node,
                     params: Optional[DecLockRefParams] = None) -> DecLockRefResult:
        if self.disable or node.match is None:
            return DecLockRefResult(delta=0)
        before = self.cache.sizes()["evictable_tokens"]
        self.cache.unlock(node.match)
        return DecLockRefResult(delta=self.cache.sizes()["evictable_tokens"] - before)

    def supports_prefix_sharing(self) -> bool:
        return not self.disable

    def evictable_size(self):
        return self.cache.sizes()["evictable_tokens"]

    def protected_size(self):
        return self.cache.sizes()["protected_tokens"]

    def full_evictable_size(self):
        return self.evictable_size()

    def full_protected_size(self):
        return self.protected_size()

    def total_size(self):
        s = self.cache.sizes()
        return s["evictable_tokens"] + s["protected_tokens"]

    def pretty_print(self):
        print(f"radixkv radix tree: {self.cache.sizes()}")

    def take_events(self):
        return []

    # ---- the scheduler's insert of a running request ------------------------

    def checkpoint(self, req, *, up_to: int, **kwargs):
        """Insert req's tokens up to up_to with its KV indices, free the
        duplicates the tree already held, and move req's lock to the new
        path (RadixCache.checkpoint's steps, without split prompts)."""
        if self.disable:
            return
        token_ids = req.full_untruncated_fill_ids[:up_to]
        kv_indices = self.req_to_token_pool.req_to_token[req.kv.req_pool_idx, :len(token_ids)]
        key = RadixKey(token_ids, req.extra_key, cache_salt=req.cache_salt).page_aligned(
            self.page_size)
        values = kv_indices[:len(key)].to(dtype=torch.int64, copy=True)
        result = self.insert(InsertParams(key=key, value=values, priority=req.priority or 0))
        req.kv.cache_inserted_len = max(req.kv.cache_inserted_len, len(key))
        self.token_to_kv_pool_allocator.free_segment(
            kv_indices[req.kv.cache_protected_len:result.prefix_len],
            start_pos=req.kv.cache_protected_len)
        node = result.last_device_node
        new_indices = self.path_device_indices(node)
        self.req_to_token_pool.write(
            (req.kv.req_pool_idx, slice(req.kv.cache_protected_len, len(new_indices))),
            new_indices[req.kv.cache_protected_len:])
        req.kv.cache_protected_len = len(new_indices)
        self.unlock(req.lock)
        req.lock = self.lock(node)
        req.last_node = node
