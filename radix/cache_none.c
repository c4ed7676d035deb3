/* cache_none.c - cache kind "none": no reuse. match finds nothing; insert
 * reports prefix 0 and, like every kind, takes the pages past the prefix (all
 * of them) from the caller — and returns them to the pool at once, so the pool
 * never holds a CACHED page and a request's pages go back as soon as it ends. */
#include <stdlib.h>

#include "cache.h"
#include "cache_kinds.h"

static rkv_status none_match(cache *c, cache_seq *s, const int32_t *tokens, int32_t n)
{
    s->len = s->num_pages = 0;
    s->handle = NULL;
    c->stats.match_calls++;
    return n < 0 ? RKV_EINVAL : RKV_OK;
}

static rkv_status none_insert(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                              const int32_t *pages, int32_t *prefix_len)
{
    *prefix_len = 0;
    c->stats.insert_calls++;
    if (n < 0) return RKV_EINVAL;
    return page_pool_free(c->pool, pages, n / c->page_size);
}

static rkv_status none_lock(cache *c, const cache_seq *s) { return RKV_OK; }
static rkv_status none_unlock(cache *c, const cache_seq *s) { return RKV_OK; }

static int64_t none_evict(cache *c, int64_t n_tokens)
{
    c->stats.evict_calls++;
    return 0;
}

static void none_sizes(const cache *c, cache_sizes *out)
{
    out->evictable_tokens = out->protected_tokens = out->pinned_tokens = out->num_nodes = 0;
}

static rkv_status none_check(const cache *c, char *err, size_t errlen)
{
    rkv_status st = page_pool_check(c->pool, err, errlen);
    if (st != RKV_OK) return st;
    if (c->pool->num_cached != 0) {
        if (err) snprintf(err, errlen, "cache none: pool holds %d cached pages, expected 0",
                          c->pool->num_cached);
        return RKV_ECORRUPT;
    }
    return RKV_OK;
}

static void none_dump(const cache *c, FILE *f, cache_dump_format fmt)
{
    switch (fmt) {
    case CACHE_DUMP_TEXT: fprintf(f, "cache none: nothing cached\n"); break;
    case CACHE_DUMP_DOT: fprintf(f, "digraph none {\n}\n"); break;
    case CACHE_DUMP_JSON: fprintf(f, "{\"kind\":\"none\",\"nodes\":[]}\n"); break;
    }
}

static void none_destroy(cache *c) { free(c); }

static const cache_ops none_ops = {
    .name = "none",
    .match = none_match,
    .insert = none_insert,
    .lock = none_lock,
    .unlock = none_unlock,
    .evict = none_evict,
    .sizes = none_sizes,
    .check = none_check,
    .dump = none_dump,
    .destroy = none_destroy,
};

rkv_status cache_none_create(const cache_config *cfg, page_pool *pool, cache **out, char *err,
                             size_t errlen)
{
    *out = NULL;
    cache *c = calloc(1, sizeof *c);
    if (!c) {
        if (err) snprintf(err, errlen, "cache none: out of host memory");
        return RKV_ENOMEM;
    }
    c->ops = &none_ops;
    c->pool = pool;
    c->page_size = pool->page_size;
    *out = c;
    return RKV_OK;
}
