/* cache_radix.c - cache kind "radix": cache.h's operations on a radix_tree.
 * The match handle is the tree's node slot (slot 0, the root, is NULL). */
#include <stdint.h>
#include <stdlib.h>

#include "cache.h"
#include "cache_kinds.h"
#include "evict_policy.h"
#include "radix_tree.h"

typedef struct cache_radix {
    cache base;
    radix_tree *tree;
} cache_radix;

static const cache_ops radix_ops;

static inline radix_tree *tree_of(const cache *c) { return ((const cache_radix *)c)->tree; }

/* cache_stats.splits mirrors the tree's count (match and insert split nodes). */
static void sync_splits(cache *c)
{
    radix_tree_sizes sz;
    radix_tree_get_sizes(tree_of(c), &sz);
    c->stats.splits = sz.splits;
}

static rkv_status radix_match(cache *c, const int32_t *tokens, int32_t n, uint64_t ns,
                              cache_match *out)
{
    out->len = out->num_pages = 0;
    out->handle = NULL;
    out->ns = ns;
    if (n < 0) return RKV_EINVAL;
    rkv_status st = cache_match_reserve(out, n / c->page_size);
    if (st != RKV_OK) return st;
    radix_tree_set_priority(tree_of(c), c->priority);
    int32_t len = 0, node = 0;
    st = radix_tree_match(tree_of(c), tokens, n, ns, out->pages, &len, &node);
    c->stats.match_calls++;
    sync_splits(c);
    if (st != RKV_OK) return st;
    out->len = len;
    out->num_pages = len / c->page_size;
    out->handle = (void *)(intptr_t)node;
    c->stats.matched_tokens += (uint64_t)len;
    return RKV_OK;
}

static rkv_status radix_insert(cache *c, const int32_t *tokens, int32_t n, const int32_t *pages,
                               uint64_t ns, int32_t *prefix_len)
{
    radix_tree_set_priority(tree_of(c), c->priority);
    rkv_status st = radix_tree_insert(tree_of(c), tokens, n, pages, ns, prefix_len);
    c->stats.insert_calls++;
    sync_splits(c);
    if (st == RKV_OK) {
        int32_t whole = n - n % c->page_size;
        c->stats.inserted_tokens += (uint64_t)(whole - *prefix_len);
    }
    return st;
}

static rkv_status radix_lock(cache *c, const cache_match *m)
{
    return radix_tree_lock(tree_of(c), (int32_t)(intptr_t)m->handle);
}

static rkv_status radix_unlock(cache *c, const cache_match *m)
{
    return radix_tree_unlock(tree_of(c), (int32_t)(intptr_t)m->handle);
}

static int64_t radix_evict(cache *c, int64_t n_tokens)
{
    int64_t freed = radix_tree_evict(tree_of(c), n_tokens);
    c->stats.evict_calls++;
    c->stats.evicted_tokens += (uint64_t)freed;
    return freed;
}

static void radix_sizes(const cache *c, cache_sizes *out)
{
    radix_tree_sizes s;
    radix_tree_get_sizes(tree_of(c), &s);
    out->evictable_tokens = s.evictable_tokens;
    out->protected_tokens = s.protected_tokens;
    out->pinned_tokens = 0;
    out->num_nodes = s.num_nodes;
}

static rkv_status radix_check(const cache *c, char *err, size_t errlen)
{
    rkv_status st = page_pool_check(c->pool, err, errlen);
    if (st != RKV_OK) return st;
    return radix_tree_check(tree_of(c), err, errlen);
}

static void radix_dump(const cache *c, FILE *f, cache_dump_format fmt)
{
    switch (fmt) {
    case CACHE_DUMP_TEXT: radix_tree_dump_text(tree_of(c), f, 16); break;
    case CACHE_DUMP_DOT: radix_tree_dump_dot(tree_of(c), f, 8); break;
    case CACHE_DUMP_JSON: radix_tree_dump_json(tree_of(c), f, -1); break;
    }
}

static void radix_destroy(cache *c)
{
    radix_tree_destroy(tree_of(c));
    free(c);
}

static const cache_ops radix_ops = {
    .name = "radix",
    .match = radix_match,
    .insert = radix_insert,
    .lock = radix_lock,
    .unlock = radix_unlock,
    .evict = radix_evict,
    .sizes = radix_sizes,
    .check = radix_check,
    .dump = radix_dump,
    .destroy = radix_destroy,
};

rkv_status cache_radix_create(const cache_config *cfg, page_pool *pool, cache **out, char *err,
                              size_t errlen)
{
    *out = NULL;
    radix_policy pol;
    const char *name = cfg ? cfg->policy : NULL;
    if (!evict_policy_lookup(name, "cache radix", err, errlen)) return RKV_EINVAL;
    radix_policy_parse(name, &pol); /* cannot fail now */
    cache_radix *c = calloc(1, sizeof *c);
    if (!c) return RKV_ENOMEM;
    rkv_status st = radix_tree_create(pool, pol, &c->tree);
    if (st != RKV_OK) {
        if (err) snprintf(err, errlen, "cache radix: %s", rkv_status_str(st));
        free(c);
        return st;
    }
    c->base.ops = &radix_ops;
    c->base.pool = pool;
    c->base.page_size = pool->page_size;
    *out = &c->base;
    return RKV_OK;
}

radix_tree *cache_radix_tree(struct cache *c)
{
    return c && c->ops == &radix_ops ? tree_of(c) : NULL;
}
