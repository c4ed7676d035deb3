/* cache.c - the kind-independent part of cache.h: match results, creation by
 * kind name, destruction. */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

#include "cache_kinds.h"

const char *const cache_kind_names[] = {
    "radix",
    "hash", "hash-nocache", "trie",
    "none", NULL,
};

void cache_match_init(cache_match *m)
{
    memset(m, 0, sizeof *m);
}

void cache_match_free(cache_match *m)
{
    free(m->pages);
    memset(m, 0, sizeof *m);
}

rkv_status cache_match_reserve(cache_match *m, int32_t n)
{
    if (n < 0) return RKV_EINVAL;
    if (n <= m->cap) return RKV_OK;
    int32_t cap = m->cap ? m->cap : 16;
    while (cap < n) cap = cap > INT32_MAX / 2 ? n : cap * 2;
    int32_t *p = realloc(m->pages, sizeof *p * (size_t)cap);
    if (!p) return RKV_ENOMEM;
    m->pages = p;
    m->cap = cap;
    return RKV_OK;
}

rkv_status cache_create(const cache_config *cfg, page_pool *pool, cache **out, char *err,
                        size_t errlen)
{
    static const cache_config defaults = {0};
    *out = NULL;
    if (!cfg) cfg = &defaults;
    if (!pool) {
        if (err) snprintf(err, errlen, "cache_create: no page pool");
        return RKV_EINVAL;
    }
    const char *kind = cfg->kind ? cfg->kind : "radix";
    rkv_status st = RKV_EINVAL;
    bool known = true;
    if (!strcmp(kind, "radix")) st = cache_radix_create(cfg, pool, out, err, errlen);
    else if (!strcmp(kind, "none")) st = cache_none_create(cfg, pool, out, err, errlen);
    else if (!strcmp(kind, "hash")) st = cache_hash_create(cfg, pool, false, out, err, errlen);
    else if (!strcmp(kind, "hash-nocache")) st = cache_hash_create(cfg, pool, true, out, err, errlen);
    else if (!strcmp(kind, "trie")) st = cache_trie_create(cfg, pool, out, err, errlen);
    else known = false;
    if (known) {
        if (st == RKV_OK) (*out)->caps = (*out)->ops->caps;
        return st;
    }
    if (err) {
        size_t used = (size_t)snprintf(err, errlen, "unknown cache kind '%s' (expected one of:", kind);
        for (int i = 0; cache_kind_names[i] && used < errlen; i++)
            used += (size_t)snprintf(err + used, errlen - used, " %s", cache_kind_names[i]);
        if (used < errlen) snprintf(err + used, errlen - used, ")");
    }
    return RKV_EINVAL;
}

void cache_destroy(cache *c)
{
    if (c) c->ops->destroy(c);
}
