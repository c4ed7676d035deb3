/* cache_kinds.h - the one registry of cache kinds: name, constructor,
 * capabilities. cache_create(), cache_kind_names[], `radixkv list`, the CLI
 * help, the benches, the tests and (through `radixkv list --json`) the
 * experiments and notebooks all read it; a kind is added here and nowhere
 * else.
 *
 * Adding a kind: write radix/cache_<name>.c with a constructor of the
 * cache_kind_create_fn shape (it validates what it reads of cfg and writes a
 * message naming the bad value to err; the pool outlives the cache), add one
 * X(...) line to CACHE_KIND_LIST below and the file to radix/meson.build.
 *
 * Policies and hash functions: cache_create() checks cfg->policy against the
 * evict_policy table for every kind, so a bad name fails the same way
 * everywhere. A kind with CACHE_CAP_EVICTS orders its eviction by the policy
 * (every registered one); a kind without it has no order to choose and
 * ignores the name. Only kinds with CACHE_CAP_HASHES read (and check)
 * cfg->hash_fn, from block_hash_fn_names. */
#ifndef RKV_CACHE_KINDS_H
#define RKV_CACHE_KINDS_H

#include "cache.h"

typedef rkv_status (*cache_kind_create_fn)(const cache_config *cfg, page_pool *pool, cache **out,
                                           char *err, size_t errlen);

typedef struct cache_kind {
    const char *name;
    cache_kind_create_fn create;
    unsigned caps;       /* CACHE_CAP_* (cache.h): the kind's one capability word */
    const char *summary; /* one line, for `radixkv list` and help */
} cache_kind;

rkv_status cache_radix_create(const cache_config *cfg, page_pool *pool, cache **out,
                              char *err, size_t errlen);
rkv_status cache_none_create(const cache_config *cfg, page_pool *pool, cache **out,
                             char *err, size_t errlen);
/* nocache = true gives "hash-nocache". */
rkv_status cache_hash_create(const cache_config *cfg, page_pool *pool, bool nocache,
                             cache **out, char *err, size_t errlen);
rkv_status cache_hash_reuse_create(const cache_config *cfg, page_pool *pool, cache **out,
                                   char *err, size_t errlen);
rkv_status cache_hash_nocache_create(const cache_config *cfg, page_pool *pool, cache **out,
                                     char *err, size_t errlen);
rkv_status cache_trie_create(const cache_config *cfg, page_pool *pool, cache **out,
                             char *err, size_t errlen);

/* The registry, in the order lists show it; the first kind is the default. */
#define CACHE_KIND_LIST(X)                                                                   \
    X("radix", cache_radix_create, CACHE_CAP_REUSE | CACHE_CAP_EVICTS | CACHE_CAP_TREE,   \
      "compressed radix tree of tokens (SGLang RadixAttention)")                            \
    X("hash", cache_hash_reuse_create, CACHE_CAP_REUSE | CACHE_CAP_EVICTS | CACHE_CAP_HASHES, \
      "full-block hashing with a free-block queue (vLLM v1)")                               \
    X("hash-nocache", cache_hash_nocache_create, CACHE_CAP_HASHES,                          \
      "computes every block hash, never reuses (the cost of hashing alone)")                \
    X("trie", cache_trie_create, CACHE_CAP_REUSE | CACHE_CAP_EVICTS | CACHE_CAP_TREE,     \
      "one node per token, uncompressed (ablation of compression)")                         \
    X("none", cache_none_create, 0, "no reuse: pages go back to the pool when a request ends") \
    /* one line per kind, above this one */

/* NULL-name terminated. */
extern const cache_kind cache_kinds[];
/* The kind named name (NULL means the default); NULL when unknown. */
const cache_kind *cache_kind_find(const char *name);

#endif
