/* match_compat.c - cache_match_* and cache_create for the cache suite until
 * radix/cache.c is on this branch; only the kinds built here are known. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cache_kinds.h"

void cache_match_init(cache_match *m) { memset(m, 0, sizeof *m); }

void cache_match_free(cache_match *m)
{
    free(m->pages);
    memset(m, 0, sizeof *m);
}

rkv_status cache_match_reserve(cache_match *m, int32_t n)
{
    if (n <= m->cap) return RKV_OK;
    int32_t cap = m->cap ? m->cap : 8;
    while (cap < n) cap *= 2;
    int32_t *p = realloc(m->pages, sizeof *p * (size_t)cap);
    if (!p) return RKV_ENOMEM;
    m->pages = p;
    m->cap = cap;
    return RKV_OK;
}

rkv_status cache_create(const cache_config *cfg, page_pool *pool, cache **out, char *err,
                        size_t errlen)
{
    const char *k = cfg && cfg->kind ? cfg->kind : "radix";
    if (strcmp(k, "hash") == 0) return cache_hash_create(cfg, pool, false, out, err, errlen);
    if (strcmp(k, "hash-nocache") == 0) return cache_hash_create(cfg, pool, true, out, err, errlen);
    if (strcmp(k, "trie") == 0) return cache_trie_create(cfg, pool, out, err, errlen);
    if (err) snprintf(err, errlen, "unknown cache kind '%s'", k);
    return RKV_EINVAL;
}

void cache_destroy(cache *c)
{
    if (c) c->ops->destroy(c);
}
