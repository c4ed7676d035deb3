/* cache_radix.c - cache kind "radix": cache.h's operations on a radix_tree.
 * The match handle is the tree's node slot (slot 0, the root, is NULL). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cache_kinds.h"
#include "evict_policy.h"
#include "radix_tree.h"

typedef struct cache_radix {
    cache base;
    radix_tree *tree;
    cache_node_fn evict_fn; /* cache.h's eviction hook, fed by the tree's callback */
    void *evict_ctx;
    radix_page_run *runs; /* (runs_cap) a match's or an insert's page runs */
    int32_t runs_cap;
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

/* Room for np pages' runs in cr->runs. */
static rkv_status scratch_reserve(cache_radix *cr, int32_t np)
{
    if (np > cr->runs_cap) {
        radix_page_run *r = realloc(cr->runs, sizeof *r * (size_t)np);
        if (!r) return RKV_ENOMEM;
        cr->runs = r;
        cr->runs_cap = np;
    }
    return RKV_OK;
}

/* Room for a walk of n tokens in cr->runs and s->pages. */
static rkv_status runs_reserve(cache_radix *cr, cache_seq *s, int32_t n)
{
    rkv_status st = cache_seq_reserve(s, n / cr->base.page_size);
    return st != RKV_OK ? st : scratch_reserve(cr, n / cr->base.page_size);
}

static rkv_status radix_match(cache *c, cache_seq *s, const int32_t *tokens, int32_t n)
{
    s->len = s->num_pages = 0;
    s->handle = NULL;
    if (n < 0) return RKV_EINVAL;
    cache_radix *cr = (cache_radix *)c;
    rkv_status st = runs_reserve(cr, s, n);
    if (st != RKV_OK) return st;
    radix_tree_set_priority(tree_of(c), s->priority);
    int32_t len = 0, node = 0, nruns = 0;
    st = radix_tree_match_runs(tree_of(c), tokens, n, s->ns, cr->runs, &nruns, &len, &node);
    c->stats.match_calls++;
    sync_splits(c);
    if (st != RKV_OK) return st;
    /* cache.h hands callers a flat page table */
    radix_page_runs_expand(cr->runs, nruns, s->pages);
    s->len = len;
    s->num_pages = len / c->page_size;
    s->handle = (void *)(intptr_t)node;
    c->stats.matched_tokens += (uint64_t)len;
    return RKV_OK;
}

rkv_status cache_radix_match64(cache *c, cache_seq *s, const int64_t *tokens, int32_t n,
                               const radix_page_run **runs, int32_t *num_runs)
{
    *runs = NULL;
    *num_runs = 0;
    if (c->ops != &radix_ops) return RKV_ENOTSUP;
    if (s->locks) return RKV_EINVAL;
    s->len = s->num_pages = 0;
    s->handle = NULL;
    if (n < 0) return RKV_EINVAL;
    cache_radix *cr = (cache_radix *)c;
    /* Room for the runs only: no page table is written. */
    rkv_status st = scratch_reserve(cr, n / c->page_size);
    if (st != RKV_OK) return st;
    radix_tree_set_priority(tree_of(c), s->priority);
    int32_t len = 0, node = 0, nruns = 0;
    st = radix_tree_match_runs64(tree_of(c), tokens, n, s->ns, cr->runs, &nruns, &len,
                                            &node);
    c->stats.match_calls++;
    sync_splits(c);
    if (st != RKV_OK) return st;
    s->len = len;
    s->handle = (void *)(intptr_t)node;
    c->stats.matched_tokens += (uint64_t)len;
    *runs = cr->runs;
    *num_runs = nruns;
    return RKV_OK;
}

static void count_insert(cache *c, rkv_status st, int32_t n, int32_t prefix_len)
{
    c->stats.insert_calls++;
    sync_splits(c);
    if (st == RKV_OK) c->stats.inserted_tokens += (uint64_t)(n - n % c->page_size - prefix_len);
}

static rkv_status radix_insert(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                               const int32_t *pages, int32_t *prefix_len)
{
    radix_tree_set_priority(tree_of(c), s->priority);
    rkv_status st = radix_tree_insert(tree_of(c), tokens, n, pages, s->ns, prefix_len);
    count_insert(c, st, n, *prefix_len);
    return st;
}

/* The seq's locks move from its matched node to node: the new ones are
 * taken first, so nothing on the shared part is ever unprotected; on a
 * failure the seq keeps its old locks. */
static rkv_status move_locks(radix_tree *t, const cache_seq *s, int32_t node)
{
    rkv_status st = RKV_OK;
    int32_t taken = 0;
    for (; st == RKV_OK && taken < s->locks; taken++) st = radix_tree_lock(t, node);
    int32_t old = (int32_t)(intptr_t)s->handle;
    for (int32_t k = 0; st == RKV_OK && k < s->locks; k++) st = radix_tree_unlock(t, old);
    if (st != RKV_OK)
        while (taken-- > 0) radix_tree_unlock(t, node);
    return st;
}

/* One walk: the tree's insert reports the cached part's pages and the path's
 * last node; the seq's locks move there (new ones taken first, so nothing on
 * the shared part is ever unprotected). pages NULL: the tree takes the new
 * pages from the pool after its walk, and its runs hold the whole path. */
static rkv_status radix_insert_hold(cache *c, cache_seq *s, const int32_t *tokens, int32_t n,
                                    const int32_t *pages, int32_t *prefix_len)
{
    *prefix_len = 0;
    if (n < 0) return RKV_EINVAL;
    cache_radix *cr = (cache_radix *)c;
    rkv_status st = runs_reserve(cr, s, n);
    if (st != RKV_OK) return st;
    radix_tree *t = tree_of(c);
    radix_tree_set_priority(t, s->priority);
    int32_t nruns = 0, node = 0;
    if (pages)
        st = radix_tree_insert_runs(t, tokens, n, pages, s->ns, prefix_len, cr->runs, &nruns,
                                    &node);
    else
        st = radix_tree_insert_take(t, tokens, n, s->ns, prefix_len, cr->runs, &nruns, &node);
    count_insert(c, st, n, *prefix_len);
    if (st != RKV_OK) return st;
    st = move_locks(t, s, node);
    if (st != RKV_OK) return st;
    const int32_t P = c->page_size, whole = n - n % P;
    int32_t held = radix_page_runs_expand(cr->runs, nruns, s->pages);
    if (pages && held < whole / P)
        memcpy(s->pages + held, pages + held, sizeof(int32_t) * (size_t)(whole / P - held));
    s->len = whole;
    s->num_pages = whole / P;
    s->handle = (void *)(intptr_t)node;
    return RKV_OK;
}

rkv_status cache_radix_insert_hold64(cache *c, cache_seq *s, const int64_t *tokens, int32_t n,
                                     int32_t *prefix_len, const radix_page_run **runs,
                                     int32_t *num_runs, int32_t *bad)
{
    *prefix_len = 0;
    *runs = NULL;
    *num_runs = 0;
    *bad = -1;
    if (c->ops != &radix_ops) return RKV_ENOTSUP;
    if (n < 0) return RKV_EINVAL;
    cache_radix *cr = (cache_radix *)c;
    const int32_t P = c->page_size, np = n / P;
    /* The path's runs, the cached part's and the taken pages' (the tree
     * takes them from the pool as runs: no page list is written or read). */
    rkv_status st = scratch_reserve(cr, np + 1);
    if (st != RKV_OK) return st;
    radix_tree *t = tree_of(c);
    radix_tree_set_priority(t, s->priority);
    int32_t nruns = 0, node = 0;
    st = radix_tree_insert_take64(t, tokens, n, s->ns, prefix_len, cr->runs, &nruns, &node, bad);
    count_insert(c, st, n, *prefix_len);
    if (st != RKV_OK) return st;
    st = move_locks(t, s, node); /* as in radix_insert_hold() */
    if (st != RKV_OK) return st;
    s->len = np * P;
    s->num_pages = 0;
    s->handle = (void *)(intptr_t)node;
    *runs = cr->runs;
    *num_runs = nruns;
    return RKV_OK;
}

static rkv_status radix_lock(cache *c, const cache_seq *s)
{
    return radix_tree_lock(tree_of(c), (int32_t)(intptr_t)s->handle);
}

static rkv_status radix_unlock(cache *c, const cache_seq *s)
{
    return radix_tree_unlock(tree_of(c), (int32_t)(intptr_t)s->handle);
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
    free(((cache_radix *)c)->runs);
    free(c);
}

/* The tree's node view, cut down to cache.h's. */
static void node_info(const radix_node_info *n, cache_node_info *out)
{
    *out = (cache_node_info){n->id, n->parent_id, n->slot, n->parent_slot, n->len, n->lock,
                             n->time, n->created, n->tokens};
}

static void on_tree_evict(void *ctx, const radix_node_info *n)
{
    const cache_radix *c = ctx;
    cache_node_info info;
    node_info(n, &info);
    c->evict_fn(c->evict_ctx, &info);
}

static bool radix_set_evict_hook(cache *c, cache_node_fn fn, void *ctx)
{
    cache_radix *r = (cache_radix *)c;
    r->evict_fn = fn;
    r->evict_ctx = ctx;
    radix_tree_set_evict_cb(r->tree, fn ? on_tree_evict : NULL, fn ? r : NULL);
    return true;
}

typedef struct visit_ctx {
    cache_node_fn fn;
    void *ctx;
} visit_ctx;

static void on_tree_visit(void *ctx, const radix_node_info *n)
{
    const visit_ctx *v = ctx;
    cache_node_info info;
    node_info(n, &info);
    v->fn(v->ctx, &info);
}

static bool radix_visit(const cache *c, cache_node_fn fn, void *ctx)
{
    visit_ctx v = {fn, ctx};
    radix_tree_visit(tree_of(c), on_tree_visit, &v);
    return true;
}

static bool radix_clock(const cache *c, uint64_t *out)
{
    *out = radix_tree_clock(tree_of(c));
    return true;
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
    .set_evict_hook = radix_set_evict_hook,
    .visit = radix_visit,
    .clock = radix_clock,
    .insert_hold = radix_insert_hold,
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
