/* cache.c - the kind-independent part of cache.h: match results, creation by
 * kind name through the registry (cache_kinds.h), destruction. */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

#include "cache_kinds.h"
#include "evict_policy.h"
#include "rkv_core.h"

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

void cache_seq_init(cache_seq *s, uint64_t ns, int32_t priority)
{
    memset(s, 0, sizeof *s);
    s->ns = ns;
    s->priority = priority;
}

void cache_seq_free(cache_seq *s)
{
    free(s->pages);
    memset(s, 0, sizeof *s);
}

rkv_status cache_seq_reserve(cache_seq *s, int32_t n)
{
    if (n < 0) return RKV_EINVAL;
    return rkv_grow32((void **)&s->pages, &s->cap, n, sizeof *s->pages);
}

rkv_status cache_seq_reset(cache_seq *s, uint64_t ns, int32_t priority)
{
    if (s->locks) return RKV_EINVAL;
    s->ns = ns;
    s->priority = priority;
    s->len = s->num_pages = 0;
    s->handle = NULL;
    return RKV_OK;
}

/* Kinds without their own insert_hold: the insert, then a match of the
 * inserted tokens for the path (a second walk), the held locks moved onto it
 * before they are let go. */
static rkv_status insert_hold_by_match(cache *c, cache_seq *s, const int32_t *tokens, int32_t n,
                                       const int32_t *pages, int32_t *prefix_len)
{
    rkv_status st = c->ops->insert(c, s, tokens, n, pages, prefix_len);
    if (st != RKV_OK) return st;
    cache_seq path;
    cache_seq_init(&path, s->ns, s->priority);
    st = c->ops->match(c, &path, tokens, n);
    int32_t taken = 0;
    for (; st == RKV_OK && taken < s->locks; taken++) st = c->ops->lock(c, &path);
    for (int32_t k = 0; st == RKV_OK && k < s->locks; k++) st = c->ops->unlock(c, s);
    if (st != RKV_OK) {
        while (taken-- > 0) c->ops->unlock(c, &path);
        cache_seq_free(&path);
        return st;
    }
    path.locks = s->locks;
    cache_seq_free(s);
    *s = path;
    return RKV_OK;
}

rkv_status cache_insert_hold(cache *c, cache_seq *s, const int32_t *tokens, int32_t n,
                             const int32_t *pages, int32_t *prefix_len)
{
    if (c->ops->insert_hold) return c->ops->insert_hold(c, s, tokens, n, pages, prefix_len);
    if (!pages) {
        *prefix_len = 0;
        return RKV_ENOTSUP;
    }
    return insert_hold_by_match(c, s, tokens, n, pages, prefix_len);
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
