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
 *   match(tokens, 6)  -> len 4, pages {p9, p4}; lock(m) protects them.
 *   insert(tokens, 6, {p9, p4, p12}) -> *prefix_len = 4: p12 becomes the
 *   cache's (CACHED); p13 (partial page) stays with the caller, who frees it.
 *   If *prefix_len comes back larger than what the caller matched (another
 *   request inserted the same tokens meanwhile), the caller frees its own pages
 *   in [matched/P, prefix_len/P): the cache keeps exactly one owner per page.
 *
 * Callers do not write this protocol out themselves: cache_client.h is its
 * one implementation (admit, commit, release).
 *
 * Namespaces: match and insert take a 64-bit namespace (salt); 0 is the default
 * tenant. Identical tokens under different namespaces never share pages.
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

/* Result of a match. pages points into storage owned by the match struct
 * (grown as needed); release it with cache_match_free(). handle is opaque to
 * the caller (a node for the tree kinds, unused by the hash kind, which locks
 * by page ids). A match with len 0 may still be locked/unlocked (no-op). */
typedef struct cache_match {
    int32_t len;       /* matched tokens, a multiple of page_size */
    int32_t num_pages; /* len / page_size */
    int32_t *pages;    /* (num_pages) page ids, cache-owned pages */
    int32_t cap;       /* capacity of pages[] */
    void *handle;      /* kind-specific: last matched node */
    uint64_t ns;       /* namespace the match was made in */
} cache_match;

void cache_match_init(cache_match *m);
void cache_match_free(cache_match *m);
/* Make room for n pages in m->pages. */
rkv_status cache_match_reserve(cache_match *m, int32_t n);

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
} cache_config;

/* What a kind can do, so that callers ask instead of comparing names: the
 * one capability word of a kind, given by its line in the registry
 * (cache_kinds.h) and copied into every cache it creates. */
enum {
    CACHE_CAP_REUSE = 1u << 0,  /* a match finds what an insert stored (not none, not hash-nocache) */
    CACHE_CAP_EVICTS = 1u << 1, /* evicts in the order of an eviction policy (evict_policy.h) */
    CACHE_CAP_HASHES = 1u << 2, /* hashes blocks with cfg->hash_fn */
    CACHE_CAP_TREE = 1u << 3,   /* a tree of nodes with times: dumps, pictures, the node hooks */
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
    rkv_status (*match)(cache *c, const int32_t *tokens, int32_t n, uint64_t ns, cache_match *out);
    rkv_status (*insert)(cache *c, const int32_t *tokens, int32_t n, const int32_t *pages,
                         uint64_t ns, int32_t *prefix_len);
    rkv_status (*lock)(cache *c, const cache_match *m);
    rkv_status (*unlock)(cache *c, const cache_match *m);
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
} cache_ops;

/* Common header; each kind embeds it first in its own struct. */
struct cache {
    const cache_ops *ops;
    page_pool *pool;
    int32_t page_size;
    cache_stats stats;
    int64_t pinned_tokens; /* locked for the cache's life (cache_pin.h); kinds leave it alone */
    unsigned caps;         /* CACHE_CAP_*: the kind's registry line, or the wrapped kind's under a wrapper */
    int32_t priority;      /* of the request the next match / insert is for (cache_set_priority) */
};

/* Create a cache of the named kind over pool (the pool outlives the cache).
 * Unknown kind/policy/hash names: RKV_EINVAL with a message in err naming it. */
rkv_status cache_create(const cache_config *cfg, page_pool *pool, cache **out, char *err,
                        size_t errlen);
void cache_destroy(cache *c);
/* Names accepted by cache_create, NULL-terminated (for --help and experiments). */
extern const char *const cache_kind_names[];

/* Longest cached prefix of tokens[0..n), cut to whole pages. Advances the clock. */
static inline rkv_status cache_match_prefix(cache *c, const int32_t *tokens, int32_t n,
                                            uint64_t ns, cache_match *out)
{ return c->ops->match(c, tokens, n, ns, out); }
/* Store tokens[0..n) (cut to whole pages) with pages[0..n/P). *prefix_len = how
 * many leading tokens were already cached. Pages beyond *prefix_len become the
 * cache's (page_pool_adopt). */
static inline rkv_status cache_insert(cache *c, const int32_t *tokens, int32_t n,
                                      const int32_t *pages, uint64_t ns, int32_t *prefix_len)
{ return c->ops->insert(c, tokens, n, pages, ns, prefix_len); }
static inline rkv_status cache_lock(cache *c, const cache_match *m) { return c->ops->lock(c, m); }
static inline rkv_status cache_unlock(cache *c, const cache_match *m) { return c->ops->unlock(c, m); }
/* Evict unlocked entries until at least n_tokens are freed or nothing is left;
 * returns the tokens freed (pages go back to the pool). */
static inline int64_t cache_evict(cache *c, int64_t n_tokens) { return c->ops->evict(c, n_tokens); }
/* The request priority (trace field "priority", default 0) that the following
 * match and insert calls carry; the priority eviction policy keeps, per node,
 * the highest that entered it. Other policies ignore it. */
static inline void cache_set_priority(cache *c, int32_t priority) { c->priority = priority; }
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
