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

How it maps. radixkv's tree stores page ids of its own pool; the C extension
keeps, per radixkv page, the SGLang KV indices of that page (page_size of
them: Cache.kv_insert stores them for the pages an insert adopts), so
path_device_indices returns SGLang's own KV indices (gathered in C when asked,
as SGLang gathers its node values then), and an eviction hands them back to
SGLang's allocator (free_segment), in the order radixkv evicted them (one call
per evict, the pages' indices concatenated: node boundaries are radixkv's).
Every SGLang call is one C call plus the params objects: no per-page Python
objects, no tensor arithmetic beyond wrapping the returned int64 values as a
tensor (a DLPack capsule the tensor takes over). insert, lock and unlock
are themselves C calls, bound on the instance (RadixCache._bind), that read
and build SGLang's params and result objects too.
extra_key and cache_salt are namespaces (radixkv.namespace_id of both), so
keys that differ in either never share entries, as in SGLang. The clock is
radixkv's logical one (one tick per call), where SGLang's stamps
time.monotonic(): the LRU order is the same whenever SGLang's clock moves
between calls. Eviction policies are radixkv's registered ones
(radixkv.policies()); SGLang's names lru, lfu, fifo and priority exist in both.

KV cache events: BlockStored / BlockRemoved / AllBlocksCleared as SGLang's
own tree records them (its KVCacheEventRecorder, so take_events() merges
them the same way), block hashes from SGLang's page hash chain, computed
in the C extension (Cache.kv_event_store), which keeps each page's digest
and hash beside it to continue the chain and to name evicted pages.

Keys with extra_key or cache_salt publish the block hashes SGLang publishes
for them (the salt seeds the chain; the namespace seed of its recorder, with
or without dynamo_kv_event_format and LoRA names, namespaces each hash).

Not supported (refused with an error, never ignored): EAGLE's bigram keys,
metrics collection; hierarchical cache, SWA and Mamba are the unified tree's
and not part of this interface. `checkpoint` (SGLang's
scheduler's insert of a running request) follows RadixCache's own steps but
is not driven by the comparison tests, which call match_prefix, insert,
evict and the lock counts directly.

Imports sglang (and torch) when imported; the rest of radixkv does not.
"""
import dataclasses
import hashlib
import weakref
from functools import partial
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.dlpack import to_dlpack
from sglang.srt.mem_cache.base_prefix_cache import (BasePrefixCache, DecLockRefParams,
                                                    DecLockRefResult, EvictParams, EvictResult,
                                                    IncLockRefResult, InsertParams, InsertResult,
                                                    MatchPrefixParams, MatchResult, TreeLock)
from sglang.srt.disaggregation.kv_events import (BlockRemoved, BlockStored, StorageMedium,
                                                  kv_event_namespace_seed)
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.events import KVCacheEventRecorder
from sglang.srt.mem_cache.radix_cache import RadixKey

from . import Cache, namespace_id, policies

__all__ = ["RadixCache", "RadixKey"]

# A DLPack capsule as a tensor over its memory (kv_values / kv_evict with
# dlpack=True): torch's C entry point where it has one, a call where the
# public from_dlpack first asks the capsule for __dlpack__ (a failed
# attribute lookup, about a third of its cost).
_from_dlpack = getattr(torch._C, "_from_dlpack", None)
if _from_dlpack is None:
    from torch.utils.dlpack import from_dlpack as _from_dlpack

# Pages in radixkv's pool when the allocator does not say how many KV slots
# SGLang has (create_simulated): the pool keeps two bits per page, plus its
# index of free extents.
DEFAULT_PAGES = 1 << 20


class Node:
    """What match_prefix and insert return as the last device node: the
    radixkv match, which is also the lock handle; its KV indices come from
    the C extension when path_device_indices asks (as SGLang's own node
    gathers its path's values only then). The C calls make it as
    object.__new__(Node) with `match` set (a holder given as (Node,)), so
    __init__ must do nothing else."""

    __slots__ = ("match",)

    def __init__(self, match):
        self.match = match


def _namespace(key: RadixKey) -> int:
    if key.extra_key is None and key.cache_salt is None:
        return 0
    # A marker before each part: "" and None stay apart, as in SGLang's child keys.
    return namespace_id(f"e:{key.extra_key!r}\x00s:{key.cache_salt!r}")


def _match_tail() -> Optional[tuple]:
    """The defaults of MatchResult's fields after its first four, so that
    match_prefix builds the tuple MatchResult(device_prefix_len=n,
    last_device_node=node, last_host_node=node, best_match_node=node) would
    without that call's generated keyword __new__ (a Python frame per match).
    None, and match_prefix calls MatchResult itself, when this SGLang's
    MatchResult has other leading fields or a later field without a default."""
    fields, defaults = MatchResult._fields, MatchResult._field_defaults
    if fields[:4] != ("device_prefix_len", "last_device_node", "last_host_node",
                      "best_match_node") or not all(f in defaults for f in fields[4:]):
        return None
    return tuple(defaults[f] for f in fields[4:])


_MATCH_TAIL = _match_tail()


def _template(cls, required: tuple) -> Optional[tuple]:
    """(instance dict, fresh) of the dataclass cls built with its required
    fields `required` (its leading fields, in order) given None, for the C
    calls that build cls(...) as its generated __init__ would
    (Cache.kv_insert_params, Cache.kv_lock: object.__new__(cls), then the
    dict's fields set in its order), without that __init__'s Python frame:
    SGLang's scheduler builds these objects per request. fresh names the
    fields whose default_factory (list or dict) makes a new empty container
    per instance; each built object gets new ones. The object holds the same
    keys in the same order with the same values as that __init__ leaves, so
    it compares, prints and reads the same. None, and the caller calls cls
    itself, when cls is not such a dataclass: slots, frozen, a __post_init__
    or __new__ of its own, a required field other than the leading
    `required`, a default factory other than list or dict."""
    if (not dataclasses.is_dataclass(cls) or hasattr(cls, "__slots__")
            or hasattr(cls, "__post_init__") or cls.__new__ is not object.__new__):
        return None
    made = getattr(cls, "__dataclass_params__", None)
    if made is None or not made.init or made.frozen:
        return None
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    if tuple(names[:len(required)]) != required:
        return None
    fresh = []
    for f in fields[len(required):]:
        if f.default_factory in (list, dict):
            fresh.append(f.name)
        elif f.default is dataclasses.MISSING:
            return None
    d = vars(cls(*[None] * len(required)))
    if list(d) != names:
        return None
    for f in fields:
        if f.name in fresh and (type(d[f.name]) is not f.default_factory or d[f.name]):
            return None
    return dict(d), tuple(fresh)


def _insert_dict() -> Optional[dict]:
    """InsertResult's template for Cache.kv_insert_params (which sets
    prefix_len, last_device_node and a fresh cache_actions list), when
    _template finds InsertResult such a dataclass with last_device_node among
    its fields and cache_actions its one default factory (a list); None, and
    kv_insert_params calls InsertResult with keywords, otherwise."""
    t = _template(InsertResult, ("prefix_len",))
    if t is None or "last_device_node" not in t[0] or t[1] != ("cache_actions",):
        return None
    d = t[0]
    d["prefix_len"] = 0
    return d


_INSERT_DICT = _insert_dict()
# TreeLock(node, DecLockRefParams()) as Cache.kv_lock builds it: each class
# with its template, or with None where it is not such a dataclass (kv_lock
# then calls it).
# EvictResult(num_tokens_evicted=n) as Cache.kv_evict_params builds it.
_EVICT_T = _template(EvictResult, ()) or (None, ())
# The methods RadixCache._bind binds to C calls on the instance.
_BOUND = ("match_prefix", "path_device_indices", "insert", "evict", "take_events", "lock",
          "unlock")
_LOCK_SPEC = (TreeLock, *(_template(TreeLock, ("node", "receipt")) or (None, ())),
              DecLockRefParams, *(_template(DecLockRefParams, ()) or (None, ())))


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
        if params.enable_metrics:
            raise NotImplementedError("radixkv.sglang.RadixCache: metrics are not supported")
        if self.eviction_policy not in policies():
            raise ValueError(f"radixkv.sglang.RadixCache: eviction policy "
                             f"'{self.eviction_policy}' is not one of {policies()}")
        alloc = self.token_to_kv_pool_allocator
        dev = getattr(alloc, "device", "cpu") if alloc is not None else "cpu"
        self.device = torch.device(dev) if isinstance(dev, (str, torch.device)) else torch.device("cpu")
        self._on_cpu = self.device.type == "cpu"
        size = getattr(alloc, "size", None)
        # As many pages as SGLang's pool: the tree holds one page per page of
        # KV slots it caches, and an insert takes pages only for the part of
        # its key the walk did not find (Cache.kv_insert's one walk).
        self.num_pages = num_pages or (int(size) // self.page_size + 1 if size
                                       else DEFAULT_PAGES)
        # With the pool's size known (the allocator's, or the caller's), the
        # value table is allocated and touched once, as SGLang allocates its
        # KV pools at start, rather than faulted in by the first inserts;
        # without it (DEFAULT_PAGES) it grows as inserts reach new pages.
        self._reserve = bool(num_pages or size)
        # SGLang's own recorder (its queue, coalescing and take()); the adapter
        # hands it the events SGLang's tree would record (_events_*).
        self.kv_events = KVCacheEventRecorder(
            enabled=params.enable_kv_cache_events and not self._disable,
            page_size=self.page_size, dynamo_format=params.dynamo_kv_event_format,
            lora_names=params.kv_event_lora_names)
        self._events = self.kv_events.enabled
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
                                 dynamo_kv_event_format=dynamo_kv_event_format,
                                 kv_event_lora_names=kv_event_lora_names)
        return cls(params, num_pages=num_pages)

    def reset(self):
        # The KV indices of each radixkv page live in the C extension
        # (Cache.kv_insert / kv_values / kv_evict): one C call per SGLang call,
        # no per-page Python objects.
        if self.cache is None:
            self.cache = Cache("radix", self.page_size, self.num_pages,
                               policy=self.eviction_policy)
            if self._reserve:
                self.cache.kv_reserve()
        else:
            self.cache.reset()
        self._empty = torch.empty((0,), dtype=torch.int64, device=self.device)
        self.root_node = Node(None)
        self._empty_match = MatchResult(device_prefix_len=0, last_device_node=self.root_node,
                                        last_host_node=self.root_node,
                                        best_match_node=self.root_node)
        # What kv_match builds in C from a match (the tuple match_prefix
        # returns: length, then the node three times, then MatchResult's
        # defaults), or None for an SGLang whose MatchResult differs.
        self._into = (None if _MATCH_TAIL is None else
                      (MatchResult, (Node,), 3, _MATCH_TAIL, self._empty_match))
        # What kv_insert_params needs to serve insert() in C (None: events
        # on or a device other than the CPU, where every insert takes the
        # general route): the InsertResult's template, or None to call it.
        self._insert_spec = (None if self._events or not self._on_cpu else
                             (to_dlpack, torch.Tensor, (Node,), self.root_node, InsertResult,
                              _INSERT_DICT, ("cache_actions",), RadixCache._insert_general,
                              weakref.ref(self)))
        self._bind()
        self.kv_events.record_all_cleared()

    # ---- lookups -----------------------------------------------------------

    def match_prefix(self, params: MatchPrefixParams) -> MatchResult:
        """The general route of match_prefix (an enabled cache's is bound to
        Cache.kv_match_params by _bind, which comes back here for a key with
        a namespace, bigrams or a negative limit)."""
        key = params.key
        if self._disable:
            return self._empty_match
        if key.is_bigram:
            raise NotImplementedError("radixkv.sglang.RadixCache: bigram keys are not supported")
        # kv_match takes the page-aligned head itself. The common key (no
        # namespace) skips _namespace's call:
        # match_prefix is the per-request hot path, and its Python was about
        # a seventh of it on sglang_cache_bench's keys.
        if key.extra_key is None and key.cache_salt is None:
            ns = 0
        else:
            ns = _namespace(key)
        # A limit (SGLang's scheduler matches each request's whole token
        # array with one) is passed down, not sliced: raw_token_ids() would
        # copy the head first, a read and a write of the whole key.
        toks, limit = key.token_ids, key.limit
        if limit is not None and limit < 0:
            # Python's slice of a negative cap (counted from the end).
            toks, limit = key.raw_token_ids(), None
        if self._into is not None:
            # The MatchResult (or the empty one) built in C, where the
            # length read, the tuple concatenation and tuple.__new__'s lookup
            # were Python: match_prefix on a 15-token cached key 362 -> 291
            # ns (both builds in one process, 15 alternations, min).
            return self.cache.kv_match(toks, ns, self._into, limit)
        m = self.cache.kv_match(toks, ns, None, limit)
        n = m.length
        if n == 0:
            return self._empty_match
        node = Node(m)
        return MatchResult(device_prefix_len=n, last_device_node=node,
                           last_host_node=node, best_match_node=node)

    def touch_prefix(self, key: RadixKey) -> None:
        if self._disable or not len(key):
            return
        if key.is_bigram:
            raise NotImplementedError("radixkv.sglang.RadixCache: bigram keys are not supported")
        self.cache.kv_match(key.raw_token_ids(), _namespace(key))

    def path_device_indices(self, node: Node) -> torch.Tensor:
        """The route for a device other than the CPU (on the CPU this is
        Cache.kv_path_values, bound by _bind)."""
        if node.match is None:
            return self._empty
        # The values gathered in C into a block that the tensor then owns
        # (a DLPack capsule): no numpy array between them.
        t = _from_dlpack(self.cache.kv_values(node.match, True))
        return t if self._on_cpu else t.to(self.device)

    # ---- the per-request calls bound on the instance -----------------------

    @property
    def disable(self) -> bool:
        return self._disable

    @disable.setter
    def disable(self, value: bool):
        # insert, lock and unlock are bound to C calls while the cache is
        # enabled (_bind); the methods below serve a disabled one.
        self._disable = value
        if getattr(self, "cache", None) is not None:
            self._bind()

    def _bind(self):
        """The scheduler's per-request calls as instance attributes bound to
        the C extension's (match_prefix: Cache.kv_match_params,
        path_device_indices: kv_path_values, insert: kv_insert_params,
        evict: kv_evict_params, lock: kv_lock, unlock: kv_unlock), so that
        each is that C call with no Python frame around it: the checks, the
        Node and SGLang's MatchResult / InsertResult / EvictResult / TreeLock
        / DecLockRefParams are built there. The methods of the same names
        (the general routes) serve when the cache is disabled or its device
        is not the CPU, insert and evict when events are on, and
        match_prefix for an SGLang whose MatchResult kv_match cannot build;
        the bound match_prefix, insert and evict hand them any call that is
        not the plain one. The bound calls hold no reference to self (their
        general route names it by a weak reference), so that dropping the
        adapter frees its tree at once, not at the next garbage
        collection."""
        # Plain attribute stores (not through self.__dict__), so that the
        # instance keeps its class's shared-key layout: with its dict
        # materialized every attribute read of the hot methods was slower
        # (match_prefix on a short key 235 -> 295 ns). CPython 3.11 shares
        # at most 30 keys per class: the per-call C methods are read from
        # self.cache rather than bound on the instance as well.
        on, c = not self._disable, self.cache
        self.match_prefix = (partial(c.kv_match_params, (self._into, RadixCache.match_prefix,
                                                           weakref.ref(self)))
                             if on and self._into is not None else None)
        self.path_device_indices = (partial(c.kv_path_values, (_from_dlpack, self._empty))
                                    if self._on_cpu else None)
        self.insert = (partial(c.kv_insert_params, self._insert_spec)
                       if on and self._insert_spec is not None else None)
        self.evict = (partial(c.kv_evict_params, (_from_dlpack, EvictResult, *_EVICT_T,
                                                  RadixCache.evict, weakref.ref(self)))
                      if on and not self._events and self._on_cpu else None)
        # With events off, take_events is the fresh empty list itself.
        self.take_events = list if not self._events else None
        self.lock = partial(c.kv_lock, _LOCK_SPEC) if on else None
        self.unlock = c.kv_unlock if on else None
        for name in _BOUND:
            if getattr(self, name) is None:
                delattr(self, name)

    # ---- insert and evict --------------------------------------------------

    def insert(self, params: InsertParams) -> InsertResult:
        """The general route of insert (the scheduler's plain call is bound
        to Cache.kv_insert_params by _bind, which comes back here for any
        other call)."""
        if self._insert_spec is not None and not self._disable:
            return self.cache.kv_insert_params(self._insert_spec, params)
        return self._insert_general(params.key, params.value)

    def _insert_general(self, key: RadixKey, value) -> InsertResult:
        """insert() for every other call: disabled, events on, a key with a
        limit, a namespace or bigrams, values None or not on the CPU."""
        if self._disable:
            return InsertResult(prefix_len=0)
        if key.is_bigram:
            raise NotImplementedError("radixkv.sglang.RadixCache: bigram keys are not supported")
        toks = key.token_ids if key.limit is None else key.raw_token_ids()
        if value is None:
            values = np.asarray(toks, dtype=np.int64)
        else:
            if not (self._on_cpu and value.is_cpu):
                value = value.cpu()
            values = to_dlpack(value)
        # Match, page allocation, the values of the new pages, insert and the
        # inserted path's match: one C call (Cache.kv_insert).
        if self._events:
            prefix, m = self._insert_with_events(key, toks, values)
        else:
            prefix, m = self.cache.kv_insert(
                toks, values,
                0 if key.extra_key is None and key.cache_salt is None else _namespace(key))
        return InsertResult(prefix_len=prefix,
                            last_device_node=Node(m) if m.length else self.root_node)

    def evict(self, params: EvictParams) -> EvictResult:
        """The general route of evict (with events off on the CPU, evict is
        bound to Cache.kv_evict_params by _bind, which comes back here for a
        count not above 0)."""
        if self._disable or params.num_tokens <= 0:
            return EvictResult()
        if self._events:
            # Each freed page's tag: the block hash kv_event_store gave it.
            freed, values, hashes = self.cache.kv_evict(params.num_tokens, True, True)
            if len(hashes):
                hashes = hashes.tolist()
                # SGLang records one BlockRemoved per node and the recorder
                # merges consecutive ones: one event with the pages in order.
                self.kv_events.enqueue(BlockRemoved(block_hashes=hashes,
                                                    medium=StorageMedium.GPU))
        else:
            freed, values = self.cache.kv_evict(params.num_tokens, False, True)
        # values: a DLPack capsule of the freed pages' KV indices (freed of them).
        if freed:
            t = _from_dlpack(values)
            self.token_to_kv_pool_allocator.free_segment(
                t if self._on_cpu else t.to(self.device), start_pos=0)
        return EvictResult(num_tokens_evicted=freed)

    def _insert_with_events(self, key: RadixKey, toks, values):
        """kv_insert, then the event block hashes of the pages the tree
        adopted, a tag on each new page (so an evict names them), and a
        BlockStored for them, as SGLang's recorder merges its per-page events.

        SGLang's chain (KVCacheEventRecorder.record_store): page by page from
        the root, each page's digest seeded with the digest of the one before
        (Cache.kv_event_store hashes in C and keeps each page's digest beside
        its tag, so the next insert's chain continues from its parent page).
        A key with extra_key or cache_salt is hashed as SGLang's
        compute_node_event_hash_values hashes it: the chain starts from the
        cache_salt's seed, or from nothing with extra_key alone (the tokens
        only), and every published hash, the parent's included, is passed
        through namespaced_block_hash with the namespace seed of
        _event_namespace. The LoRA name table is read when a page is stored
        (SGLang names a namespace at admission, before its first insert); an
        eviction publishes the hash stored then."""
        P = self.page_size
        prefix, m = self.cache.kv_insert(toks, values, _namespace(key))
        n = m.length
        k = prefix // P
        if k * P < n:
            seed, lora_name = self._event_namespace(key)
            # A chain from the root starts from the cache_salt's seed digest.
            prior = (hashlib.sha256(b"sglang-cache-salt-v1\0" + key.cache_salt.encode("utf-8"))
                     .digest() if not k and key.cache_salt is not None else None)
            parent, hashes, token_ids = self.cache.kv_event_store(m, k, toks, seed, prior)
            self.kv_events.enqueue(BlockStored(
                block_hashes=hashes, parent_block_hash=parent,
                token_ids=token_ids, block_size=P, lora_id=None,
                medium=StorageMedium.GPU, cache_salt=key.cache_salt, session_id=None,
                lora_name=lora_name))
        return prefix, m

    def _event_namespace(self, key: RadixKey):
        """(namespace seed for namespaced_block_hash, lora_name) of key's
        events, as SGLang's recorder derives them: with its default format
        only a LoRA-named extra_key namespaces the hashes (cache_salt already
        seeds the chain); with dynamo_kv_event_format both parts do."""
        names = self.kv_events.lora_names
        if key.extra_key is None and key.cache_salt is None:
            return None, (names.resolve(None) if self.kv_events.dynamo_format else names.get(None))
        if self.kv_events.dynamo_format:
            return (kv_event_namespace_seed(extra_key=key.extra_key, cache_salt=key.cache_salt),
                    names.resolve(key.extra_key))
        lora_name = names.get(key.extra_key)
        return (kv_event_namespace_seed(
            extra_key=key.extra_key if lora_name is not None else None, cache_salt=None),
            lora_name)

    def take_events(self):
        """BasePrefixCache.take_events: with events off, the fresh empty list
        SGLang's disabled recorder answers, without the two calls down to it
        (the scheduler drains events after every batch); _bind binds `list`
        itself in its place then."""
        return self.kv_events.take() if self._events else []

    # ---- locks and sizes ---------------------------------------------------

    def inc_lock_ref(self, node: Node) -> IncLockRefResult:
        if self._disable or node.match is None:
            return IncLockRefResult(delta=0)
        c = self.cache
        before = c.evictable_tokens
        c.lock(node.match)
        return IncLockRefResult(delta=c.evictable_tokens - before)

    def dec_lock_ref(self, node: Node,
                     params: Optional[DecLockRefParams] = None) -> DecLockRefResult:
        if self._disable or node.match is None:
            return DecLockRefResult(delta=0)
        c = self.cache
        before = c.evictable_tokens
        c.unlock(node.match)
        return DecLockRefResult(delta=c.evictable_tokens - before)

    def lock(self, node: Node) -> TreeLock:
        """BasePrefixCache.lock without inc_lock_ref's receipt: the lock
        it returns is the same (this cache's receipt is empty, as the
        classic RadixCache's: DecLockRefParams()), without the two size
        reads for a delta nobody reads here and the receipt's conversion.
        An enabled cache's lock is Cache.kv_lock, bound by _bind (the lock
        and both dataclasses in one C call: TreeLock(node,
        DecLockRefParams()) alone was ~0.18 us in Python)."""
        if not self._disable:
            return self.cache.kv_lock(_LOCK_SPEC, node)
        return TreeLock(node, DecLockRefParams())

    def unlock(self, lock: Optional[TreeLock]) -> None:
        """BasePrefixCache.unlock: dec_lock_ref on the lock's node, whose
        receipt this cache does not read, without its delta's size reads;
        an enabled cache's unlock is Cache.kv_unlock, bound by _bind."""
        if not self._disable:
            self.cache.kv_unlock(lock)

    def supports_prefix_sharing(self) -> bool:
        return not self._disable

    def evictable_size(self):
        return self.cache.evictable_tokens

    def protected_size(self):
        return self.cache.protected_tokens

    def full_evictable_size(self):
        return self.evictable_size()

    def full_protected_size(self):
        return self.protected_size()

    def total_size(self):
        return self.cache.evictable_tokens + self.cache.protected_tokens

    def pretty_print(self):
        print(f"radixkv radix tree: {self.cache.sizes()}")

    # ---- the scheduler's insert of a running request ------------------------

    def checkpoint(self, req, *, up_to: int, **kwargs):
        """Insert req's tokens up to up_to with its KV indices, free the
        duplicates the tree already held, and move req's lock to the new
        path (RadixCache.checkpoint's steps, without split prompts)."""
        if self._disable:
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
