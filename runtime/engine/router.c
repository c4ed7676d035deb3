/* router.c - see router.h. */
#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cache_client.h"
#include "page_pool.h"
#include "rkv_core.h"

const char *const router_names[] = {"round-robin", "least-load", "cache-aware", NULL};

rkv_status router_kind_parse(const char *name, router_kind *out)
{
    int i = rkv_name_index(router_names, name);
    if (i < 0) return RKV_EINVAL;
    *out = (router_kind)i;
    return RKV_OK;
}

/* One replica's approximate prefix tree: a radix cache over its own pool. */
typedef struct approx {
    page_pool pool;
    cache *c;
} approx;

struct router {
    router_config cfg;
    approx *a;    /* (replicas), cache-aware only */
    int32_t *lens; /* (replicas) scratch: each tree's match */
};

rkv_status router_create(const router_config *cfg, router **out, char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->replicas < 1) {
        snprintf(err, errlen, "--replicas must be >= 1");
        return RKV_EINVAL;
    }
    router *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->cfg = *cfg;
    r->cfg.approx_pages = NULL;
    if (cfg->kind != ROUTER_CACHE_AWARE) {
        *out = r;
        return RKV_OK;
    }
    r->a = calloc((size_t)cfg->replicas, sizeof *r->a);
    r->lens = calloc((size_t)cfg->replicas, sizeof *r->lens);
    if (!r->a || !r->lens) goto oom;
    for (int32_t i = 0; i < cfg->replicas; i++) {
        int64_t pages = cfg->approx_pages[i];
        if (pages > INT32_MAX) pages = INT32_MAX;
        rkv_status st = page_pool_init(&r->a[i].pool, (int32_t)pages, cfg->page_size);
        char why[256] = "";
        if (st == RKV_OK) st = cache_create(NULL, &r->a[i].pool, &r->a[i].c, why, sizeof why);
        if (st) {
            snprintf(err, errlen, "router: approximate tree of replica %d: %s", i,
                     why[0] ? why : rkv_status_str(st));
            router_destroy(r);
            return st;
        }
    }
    *out = r;
    return RKV_OK;
oom:
    router_destroy(r);
    snprintf(err, errlen, "router: out of host memory");
    return RKV_ENOMEM;
}

void router_destroy(router *r)
{
    if (!r) return;
    for (int32_t i = 0; r->a && i < r->cfg.replicas; i++) {
        if (r->a[i].c) cache_destroy(r->a[i].c);
        if (r->a[i].pool.bits) page_pool_destroy(&r->a[i].pool);
    }
    free(r->a);
    free(r->lens);
    free(r);
}

/* Longest prefix of tokens[0..n) in the approximate tree, in *len. */
static rkv_status approx_match(approx *a, const int32_t *tokens, int32_t n, uint64_t ns, int32_t *len)
{
    cache_seq m;
    cache_seq_init(&m, ns, 0);
    rkv_status st = cache_match_prefix(a->c, &m, tokens, n);
    *len = st == RKV_OK ? m.len : 0;
    cache_seq_free(&m);
    return st;
}

/* Remember that tokens went to this replica (LRU room made inside the tree). */
static rkv_status approx_insert(approx *a, const int32_t *tokens, int32_t n, uint64_t ns)
{
    const int32_t P = a->pool.page_size;
    int32_t nb = n / P;
    if (nb < 1) return RKV_OK;
    if (nb > a->pool.num_pages) nb = a->pool.num_pages;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)nb);
    if (!pages) return RKV_ENOMEM;
    cache_seq m;
    cache_seq_init(&m, ns, 0);
    /* A tree too full of locked entries just forgets this prompt. */
    rkv_status st = cache_client_admit(a->c, &m, tokens, nb * P, nb, pages, NULL);
    if (st == RKV_OK) {
        st = cache_client_commit(a->c, &m, tokens, nb * P, pages, m.num_pages, nb, NULL);
        rkv_status us = cache_client_release(a->c, &m, NULL, 0);
        if (st == RKV_OK) st = us;
    } else if (st == RKV_ENOSPC) {
        st = RKV_OK;
    }
    cache_seq_free(&m);
    free(pages);
    return st;
}

/* a is less loaded than b: fewer outstanding, then fewer routed. */
static int lighter(const router_load *load, int32_t a, int32_t b)
{
    return load[a].outstanding < load[b].outstanding
        || (load[a].outstanding == load[b].outstanding && load[a].routed < load[b].routed);
}

static int32_t least_loaded(const router *r, const router_load *load)
{
    int32_t best = 0;
    for (int32_t i = 1; i < r->cfg.replicas; i++)
        if (lighter(load, i, best)) best = i;
    return best;
}

/* The replica whose approximate tree holds the fewest tokens; ties: least loaded. */
static int32_t smallest_tree(const router *r, const router_load *load)
{
    int32_t best = -1;
    int64_t best_tokens = 0;
    for (int32_t i = 0; i < r->cfg.replicas; i++) {
        cache_sizes sz;
        cache_get_sizes(r->a[i].c, &sz);
        int64_t t = sz.evictable_tokens + sz.protected_tokens;
        if (best < 0 || t < best_tokens || (t == best_tokens && lighter(load, i, best))) {
            best = i;
            best_tokens = t;
        }
    }
    return best;
}

rkv_status router_route(router *r, const int32_t *tokens, int32_t n, uint64_t ns, int64_t k,
                        const router_load *load, int32_t *replica, int32_t *predicted, char *err,
                        size_t errlen)
{
    const router_config *c = &r->cfg;
    *predicted = -1;
    switch (c->kind) {
    case ROUTER_ROUND_ROBIN: *replica = (int32_t)(k % c->replicas); return RKV_OK;
    case ROUTER_LEAST_LOAD: *replica = least_loaded(r, load); return RKV_OK;
    case ROUTER_CACHE_AWARE: break;
    }
    int32_t best = -1, best_len = 0, low = least_loaded(r, load);
    rkv_status st;
    for (int32_t i = 0; i < c->replicas; i++) {
        int32_t len;
        if ((st = approx_match(&r->a[i], tokens, n - 1, ns, &len))) goto fail;
        r->lens[i] = len;
        if (len > best_len || (len == best_len && best >= 0 && len > 0
                               && load[i].outstanding < load[best].outstanding)) {
            best = i;
            best_len = len;
        }
    }
    int32_t pick = best;
    if (best >= 0 && load[best].outstanding - load[low].outstanding > c->balance_threshold)
        pick = low;
    else if (best < 0 || (double)best_len < c->cache_threshold * (double)n)
        pick = smallest_tree(r, load); /* little to reuse anywhere: grow the emptiest tree */
    if ((st = approx_insert(&r->a[pick], tokens, n, ns))) goto fail;
    *replica = pick;
    *predicted = r->lens[pick];
    return RKV_OK;
fail:
    snprintf(err, errlen, "router: approximate tree: %s", rkv_status_str(st));
    return st;
}
