/* cache.h - the prefix-cache interface every kind implements.
 *
 * Kinds (by name, registered in cache_kinds.h; see cache_create()):
 *   radix         compressed radix tree (SGLang RadixAttention)
 *   hash          vLLM-v1 full-block hashing; hash functions xxh3|sha256|md5
 *   hash-nocache  computes every block hash, never reuses (cost of hashing alone)
 *   trie          one node per token, uncompressed (ablation of compression)
 *   none          no reuse: pages go back to the pool when a request ends
 *
 * The cache never sees model data; it maps token ids to page ids of one
 * page_pool. With page size P, matches and inserts are cut down to whole pages.
 *
 * Ownership, in one picture (a request of 7 tokens, P = 2, 4 cached):
 *
 *   tokens   t0 t1 | t2 t3 | t4 t5 | t6
 *   pages    [ p9  ][ p4  ][ p12 ][ p13 ]
 *            \__ cache's __/\_ request's, INFLIGHT _/
 *            (locked by match)
 *
 *   match(s, tokens, 6) -> len 4, pages {p9, p4}; lock(s) protects them.
 *   insert(tokens, 6, {p9, p4, p12}) -> *prefix_len = 4: p12 becomes the
 *   cache's (CACHED); p13 (partial page) stays with the caller, who frees it.
 *   If *prefix_len comes back larger than what the caller matched (another
 *   request inserted the same tokens meanwhile), the caller frees its own pages
 *   in [matched/P, prefix_len/P): the cache keeps exactly one owner per page.
 *   Exception, the hash kind under "keep" (vLLM's rule, cache_config): insert
 *   adopts every full page beyond the caller's matched prefix, so
 *   *prefix_len = matched and two pages may hold the same block (duplicates,
 *   each still with one owner). Either way "free what is still INFLIGHT"
 *   (cache_client.h) is right.
 *
 * Callers do not write this protocol out themselves: cache_client.h is its
 * one implementation (admit, commit, release).
 *
 * A request's state travels in a cache_seq (below): its namespace and
 * priority in, the matched path, its pages and its locks out. match, insert,
 * lock and unlock take one; nothing is set on the cache before a call.
 *
 * Namespaces: a seq's 64-bit namespace (salt); 0 is the default tenant.
 * Identical tokens under different namespaces never share pages.
 *
 * Invariant (cache_check): pool free + evictable + protected + in-flight = pool
 * size, all in pages, and each kind's own structure is consistent.
 */
#ifndef RKV_CACHE_H
#define RKV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "page_pool.h"
#include "rkv_status.h"

typedef struct cache cache;

/* One request's cache state, passed to every call that acts for the request:
 *
 *   what the request is     ns, priority        set by the caller before match
 *   what the cache said     len, pages, handle  written by match / insert_hold
 *   what the request holds  locks               counted by cache_lock / unlock
 *
 * The cache keeps nothing per request between calls: a call reads the
 * request's namespace and priority from the seq it is given, so two
 * interleaved requests never see each other's settings.
 *
 * Ownership: the caller owns the seq and its pages[] storage (grown as needed,
 * released by cache_seq_free(); the page ids are the cache's pages, valid while
 * locks > 0 or until the next evict). handle is opaque (a node for the tree
 * kinds; the hash kind locks by page ids). A seq with len 0 may still be
 * locked and unlocked (no-op). A seq that holds locks cannot be matched again
 * (RKV_EINVAL): the new answer would lose the held one; unlock it first, or
 * move the hold with cache_insert_hold(). */
typedef struct cache_seq {
    uint64_t ns;       /* namespace (salt) of the request; 0 the default tenant */
    int32_t priority;  /* trace field "priority" (0 default); read by the priority policy */
    int32_t len;       /* matched (or held) tokens, a multiple of page_size */
    int32_t num_pages; /* len / page_size */
    int32_t *pages;    /* (num_pages) page ids, cache-owned pages */
    int32_t cap;       /* capacity of pages[] */
    int32_t locks;     /* cache_lock calls not yet undone by cache_unlock */
    void *handle;      /* kind-specific: last node of the path */
} cache_seq;

/* An empty seq for namespace ns at priority. */
void cache_seq_init(cache_seq *s, uint64_t ns, int32_t priority);
/* Frees pages[] and empties s (ns and priority back to 0). */
void cache_seq_free(cache_seq *s);
/* Make room for n pages in s->pages (capacity doubles; RKV_EINVAL for n < 0,
 * RKV_ENOMEM past INT32_MAX / 2 pages or out of memory, s unchanged). */
rkv_status cache_seq_reserve(cache_seq *s, int32_t n);
/* The same seq for another request: namespace and priority, the answer
 * cleared. RKV_EINVAL while it holds locks. */
rkv_status cache_seq_reset(cache_seq *s, uint64_t ns, int32_t priority);

typedef struct cache_sizes {
    int64_t evictable_tokens; /* unlocked, in the cache */
    int64_t protected_tokens; /* locked (refcount > 0), in the cache */
    int64_t pinned_tokens;    /* subset of protected locked for the cache's life */
    int64_t num_nodes;        /* nodes (tree kinds) or cached blocks (hash) */
} cache_sizes;

typedef struct cache_stats {
    uint64_t match_calls, insert_calls, evict_calls;
    uint64_t matched_tokens, inserted_tokens, evicted_tokens;
    uint64_t splits;          /* radix only */
    uint64_t hash_computations;
} cache_stats;

typedef enum cache_dump_format {
    CACHE_DUMP_TEXT = 0, /* indented tree / block list, for humans */
    CACHE_DUMP_DOT,      /* graphviz */
    CACHE_DUMP_JSON,     /* one JSON object on one line (tree evolution) */
} cache_dump_format;

typedef struct cache_config {
    const char *kind;        /* "radix" (default if NULL), "hash", "hash-nocache", "trie", "none" */
    const char *policy;      /* eviction: any evict_policy.h name, "lru" (default) */
    const char *hash_fn;     /* "xxh3" (default), "sha256", "md5" (hash kinds) */
    /* hash kind, a full block computed twice (cache_hash.c): "keep" caches both
     * copies, as vLLM does; "dedup" frees the second. NULL: keep under lru,
     * dedup under the other policies (they evict leaves of a parent tree,
     * which only dedup keeps); keep with another policy is refused. */
    const char *hash_duplicates;
} cache_config;

/* Accepted values of cache_config.hash_duplicates, NULL-terminated. */
extern const char *const cache_hash_duplicates_names[];

/* What a kind can do, so that callers ask instead of comparing names: the
 * one capability word of a kind, given by its line in the registry
 * (cache_kinds.h) and copied into every cache it creates. */
enum {
    CACHE_CAP_REUSE = 1u << 0,  /* a match finds what an insert stored (not none, not hash-nocache) */
    CACHE_CAP_EVICTS = 1u << 1, /* evicts in the order of an eviction policy (evict_policy.h) */
    CACHE_CAP_HASHES = 1u << 2, /* hashes blocks with cfg->hash_fn */
    CACHE_CAP_TREE = 1u << 3,   /* a tree of nodes with times: dumps, pictures, the node hooks */
    /* lock and unlock read only m->pages: a caller may hold any cached pages
     * it names, e.g. a request's own chain after its insert (hash). */
    CACHE_CAP_LOCK_PAGES = 1u << 4,
};

/* What the eviction hook and cache_visit() see of one node (tree kinds). The
 * tokens pointer is valid only during the callback. */
typedef struct cache_node_info {
    uint64_t id;           /* unique, creation order; root 0 */
    uint64_t parent_id;    /* root's is 0 too */
    int32_t slot;          /* dense index (reused after eviction), for arrays */
    int32_t parent_slot;   /* -1 for the root */
    int32_t len;           /* this node's own edge tokens */
    int32_t lock;          /* handles at or below this node */
    uint64_t time;         /* clock of the last call that entered it */
    uint64_t created;      /* clock of the call that created it */
    const int32_t *tokens; /* (len) the edge tokens */
} cache_node_info;

typedef void (*cache_node_fn)(void *ctx, const cache_node_info *node);

/* The vtable each kind fills in; callers use the cache_* wrappers below. */
typedef struct cache_ops {
    const char *name;
    /* match writes s's answer (len, pages, handle) and leaves s->locks alone;
     * insert reads s's namespace and priority only. */
    rkv_status (*match)(cache *c, cache_seq *s, const int32_t *tokens, int32_t n);
    rkv_status (*insert)(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                         const int32_t *pages, int32_t *prefix_len);
    rkv_status (*lock)(cache *c, const cache_seq *s);
    rkv_status (*unlock)(cache *c, const cache_seq *s);
    int64_t (*evict)(cache *c, int64_t n_tokens);
    void (*sizes)(const cache *c, cache_sizes *out);
    rkv_status (*check)(const cache *c, char *err, size_t errlen);
    void (*dump)(const cache *c, FILE *f, cache_dump_format fmt);
    void (*destroy)(cache *c);
    /* Optional (NULL: the kind has none), for pictures and eviction logs
     * (cache-sim) without reaching into a kind's internals: fn sees every
     * evicted node, in eviction order (fn NULL: off); visit walks every node,
     * parents before children; clock reads the logical clock. Each returns
     * false when the kind (or, under a wrapper, the wrapped kind) has none. */
    bool (*set_evict_hook)(cache *c, cache_node_fn fn, void *ctx);
    bool (*visit)(const cache *c, cache_node_fn fn, void *ctx);
    bool (*clock)(const cache *c, uint64_t *out);
    /* Optional (NULL: cache_insert_hold() does insert, match, lock, unlock,
     * and refuses pages NULL): insert, then s holds the inserted path, in one
     * walk; pages NULL takes the missing pages from the pool. */
    rkv_status (*insert_hold)(cache *c, cache_seq *s, const int32_t *tokens, int32_t n,
                              const int32_t *pages, int32_t *prefix_len);
} cache_ops;

/* Common header; each kind embeds it first in its own struct. */
struct cache {
    const cache_ops *ops;
    page_pool *pool;
    int32_t page_size;
    cache_stats stats;
    int64_t pinned_tokens; /* locked for the cache's life (cache_pin.h); kinds leave it alone */
    unsigned caps;         /* CACHE_CAP_*: the kind's registry line, or the wrapped kind's under a wrapper */
};

/* Create a cache of the named kind over pool (the pool outlives the cache).
 * Unknown kind/policy/hash names: RKV_EINVAL with a message in err naming it. */
rkv_status cache_create(const cache_config *cfg, page_pool *pool, cache **out, char *err,
                        size_t errlen);
void cache_destroy(cache *c);
/* Names accepted by cache_create, NULL-terminated (for --help and experiments). */
extern const char *const cache_kind_names[];

/* Longest cached prefix of tokens[0..n) in s->ns, cut to whole pages, into
 * s (len, pages, handle). Advances the clock. RKV_EINVAL while s holds locks. */
static inline rkv_status cache_match_prefix(cache *c, cache_seq *s, const int32_t *tokens,
                                            int32_t n)
{ return s->locks ? RKV_EINVAL : c->ops->match(c, s, tokens, n); }
/* Store tokens[0..n) (cut to whole pages) with pages[0..n/P) in s->ns, at
 * s->priority. *prefix_len = how many leading tokens were already cached.
 * Pages beyond *prefix_len become the cache's (page_pool_adopt). s's answer
 * and locks are left as they were. */
static inline rkv_status cache_insert(cache *c, const cache_seq *s, const int32_t *tokens,
                                      int32_t n, const int32_t *pages, int32_t *prefix_len)
{ return c->ops->insert(c, s, tokens, n, pages, prefix_len); }
/* cache_insert(), after which s holds the inserted path: what a match of
 * tokens[0..n) would find right after the insert (for a kind that reuses,
 * CACHE_CAP_REUSE: len = the whole pages of n, pages = the cache's where it
 * already held them, else pages[]; handle = the path's last node). A seq
 * that held locks holds as many on the new path (taken before the old ones
 * are let go); an unlocked one stays unlocked. So a caller need not match
 * again after an insert. The radix kind does it in one walk of the tree.
 * On failure s is as it was.
 *
 * pages NULL: the cache takes the pages for what it lacks from the pool once
 * its walk has found them, so only those are allocated; s->pages[*prefix_len
 * / P ..) are then the ones it took (CACHED). RKV_ENOSPC when the pool is
 * short (nothing new cached); RKV_ENOTSUP for a kind without its own
 * insert_hold (only radix has one): allocate and pass pages instead. */
rkv_status cache_insert_hold(cache *c, cache_seq *s, const int32_t *tokens, int32_t n,
                             const int32_t *pages, int32_t *prefix_len);
/* Reference counts on s's path (s->locks counts them): locked entries are
 * never evicted. */
static inline rkv_status cache_lock(cache *c, cache_seq *s)
{
    rkv_status st = c->ops->lock(c, s);
    if (st == RKV_OK) s->locks++;
    return st;
}
static inline rkv_status cache_unlock(cache *c, cache_seq *s)
{
    rkv_status st = c->ops->unlock(c, s);
    if (st == RKV_OK && s->locks > 0) s->locks--;
    return st;
}
/* Evict unlocked entries until at least n_tokens are freed or nothing is left;
 * returns the tokens freed (pages go back to the pool). */
static inline int64_t cache_evict(cache *c, int64_t n_tokens) { return c->ops->evict(c, n_tokens); }
/* pinned_tokens comes from the common header (cache_pin.h), not the kind. */
static inline void cache_get_sizes(const cache *c, cache_sizes *out)
{
    c->ops->sizes(c, out);
    out->pinned_tokens = c->pinned_tokens;
}
static inline void cache_dump(const cache *c, FILE *f, cache_dump_format fmt) { c->ops->dump(c, f, fmt); }
static inline bool cache_can(const cache *c, unsigned cap) { return (c->caps & cap) == cap; }
/* The optional node hooks (see cache_ops); false: not supported. */
static inline bool cache_set_evict_hook(cache *c, cache_node_fn fn, void *ctx)
{ return c->ops->set_evict_hook && c->ops->set_evict_hook(c, fn, ctx); }
static inline bool cache_visit(const cache *c, cache_node_fn fn, void *ctx)
{ return c->ops->visit && c->ops->visit(c, fn, ctx); }
static inline bool cache_clock(const cache *c, uint64_t *out)
{ return c->ops->clock && c->ops->clock(c, out); }
/* Kind's own consistency + the pool invariant (cached pages = evictable +
 * protected). */
static inline rkv_status cache_check(const cache *c, char *err, size_t errlen)
{ return c->ops->check(c, err, errlen); }

#endif
