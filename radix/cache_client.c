/* cache_client.c - see cache_client.h. */
#include "cache_client.h"

#include <string.h>

rkv_status cache_client_match(cache *c, cache_seq *s, const int32_t *tokens, int32_t n)
{
    rkv_status st = cache_match_prefix(c, s, tokens, n);
    if (st == RKV_OK) st = cache_lock(c, s);
    return st;
}

rkv_status cache_client_make_room(cache *c, int64_t n, int64_t *evicted)
{
    int64_t free_pages = page_pool_num_free(c->pool);
    if (n <= free_pages) return RKV_OK;
    int64_t freed = cache_evict(c, (n - free_pages) * c->page_size);
    if (evicted) *evicted += freed;
    return n <= page_pool_num_free(c->pool) ? RKV_OK : RKV_ENOSPC;
}

rkv_status cache_client_reserve(cache *c, int32_t n, int32_t *out, int64_t *evicted)
{
    if (n <= 0) return RKV_OK;
    rkv_status st = cache_client_make_room(c, n, evicted);
    if (st == RKV_OK) st = page_pool_alloc(c->pool, n, out);
    return st;
}

rkv_status cache_client_admit(cache *c, cache_seq *m, const int32_t *tokens, int32_t n_match,
                              int32_t total, int32_t *pages, int64_t *evicted)
{
    rkv_status st = cache_client_match(c, m, tokens, n_match);
    if (st != RKV_OK) return st;
    if ((st = cache_client_reserve(c, total - m->num_pages, pages + m->num_pages, evicted))) {
        cache_unlock(c, m);
        return st;
    }
    if (m->num_pages) memcpy(pages, m->pages, sizeof *pages * (size_t)m->num_pages);
    return RKV_OK;
}

rkv_status cache_client_commit(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                               const int32_t *pages, int32_t own, int32_t num_pages,
                               int32_t *prefix_len)
{
    int32_t prefix = 0;
    rkv_status st = cache_insert(c, s, tokens, n, pages, &prefix);
    if (prefix_len) *prefix_len = prefix;
    page_pool *pool = c->pool;
    for (int32_t k = own; k < num_pages; k++) {
        if (page_pool_state(pool, pages[k]) != PAGE_INFLIGHT) continue;
        rkv_status fs = page_pool_free(pool, &pages[k], 1);
        if (st == RKV_OK) st = fs;
    }
    return st;
}

rkv_status cache_client_release(cache *c, cache_seq *m, const int32_t *own, int32_t n_own)
{
    rkv_status st = n_own > 0 ? page_pool_free(c->pool, own, n_own) : RKV_OK;
    if (m) {
        rkv_status us = cache_unlock(c, m);
        if (st == RKV_OK) st = us;
        m->len = m->num_pages = 0;
        m->handle = NULL;
    }
    return st;
}
