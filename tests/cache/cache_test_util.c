/* cache_test_util.c - see cache_test_util.h. */
#include "cache_test_util.h"

#include <stdlib.h>
#include <string.h>

rkv_status tu_request(cache *c, const int32_t *tokens, int32_t n, uint64_t ns, cache_match *m,
                      int32_t *matched, int32_t *prefix)
{
    const int32_t P = c->page_size;
    rkv_status st = cache_match_prefix(c, tokens, n, ns, m);
    if (st != RKV_OK) return st;
    *matched = m->len;
    st = cache_lock(c, m);
    if (st != RKV_OK) return st;
    int32_t nb = n / P, need = nb - m->num_pages;
    int32_t free_pages = page_pool_num_free(c->pool);
    if (need > free_pages) cache_evict(c, (int64_t)(need - free_pages) * P);
    if (need > page_pool_num_free(c->pool)) {
        cache_unlock(c, m);
        return RKV_ENOSPC;
    }
    int32_t *pages = malloc(sizeof *pages * (size_t)(nb ? nb : 1));
    if (!pages) return RKV_ENOMEM;
    if (m->num_pages) memcpy(pages, m->pages, sizeof *pages * (size_t)m->num_pages);
    st = page_pool_alloc(c->pool, need, pages + m->num_pages);
    if (st == RKV_OK) st = cache_insert(c, tokens, n, pages, ns, prefix);
    if (st == RKV_OK && *prefix / P > m->num_pages)
        st = page_pool_free(c->pool, pages + m->num_pages, *prefix / P - m->num_pages);
    /* A kind that keeps nothing (none) leaves its pages with the caller. */
    for (int32_t i = m->num_pages; st == RKV_OK && i < nb; i++)
        if (c->pool->state[pages[i]] == PAGE_INFLIGHT) st = page_pool_free(c->pool, &pages[i], 1);
    free(pages);
    return st;
}

cache *tu_create(const char *kind, const char *hash_fn, page_pool *pool)
{
    cache_config cfg = {kind, NULL, hash_fn};
    cache *c = NULL;
    char err[256] = "";
    rkv_status st = cache_create(&cfg, pool, &c, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "cache_create(%s): %s", kind, err);
    return c;
}
