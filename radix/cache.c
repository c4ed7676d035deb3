/* cache.c - the kind-independent part of cache.h: match results, creation by
 * kind name through the registry (cache_kinds.h), destruction. */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

#include "cache_kinds.h"
#include "evict_policy.h"

#define KIND_ENTRY(name, create, caps, summary) {name, create, caps, summary},
const cache_kind cache_kinds[] = {CACHE_KIND_LIST(KIND_ENTRY){NULL, NULL, 0, NULL}};
#undef KIND_ENTRY

#define KIND_NAME(name, create, caps, summary) name,
const char *const cache_kind_names[] = {CACHE_KIND_LIST(KIND_NAME) NULL};
#undef KIND_NAME

const cache_kind *cache_kind_find(const char *name)
{
    if (!name) return &cache_kinds[0];
    for (const cache_kind *k = cache_kinds; k->name; k++)
        if (!strcmp(k->name, name)) return k;
    return NULL;
}

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
    const cache_kind *k = cache_kind_find(cfg->kind);
    if (k) {
        if (!evict_policy_lookup(cfg->policy, k->name, err, errlen)) return RKV_EINVAL;
        rkv_status st = k->create(cfg, pool, out, err, errlen);
        if (st == RKV_OK) (*out)->caps = k->caps;
        return st;
    }
    if (err) {
        size_t used = (size_t)snprintf(err, errlen, "unknown cache kind '%s' (expected one of:", cfg->kind);
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
