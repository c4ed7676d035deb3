/* cache_pin.c - see cache_pin.h. Everything goes through cache.h, so each
 * kind keeps its own rules (a split under a pin inherits its lock count in the
 * tree kinds; a locked block leaves the free queue in the hash kind). */
#include "cache_pin.h"
#include "cache_client.h"
#include "rkv_core.h"

#include <stdlib.h>
#include <string.h>

void cache_pins_init(cache_pins *p) { memset(p, 0, sizeof *p); }

/* Steps 1 and 2: tokens[0..whole) into the cache, its K/V computed by
 * p->fill in the pages it did not hold yet. Nothing stays locked. */
static rkv_status pin_store(cache *c, cache_pins *p, const int32_t *tokens, int32_t whole,
                            uint64_t ns, char *err, size_t errlen)
{
    const int32_t P = c->page_size, np = whole / P;
    page_pool *pool = c->pool;
    /* 1: what is cached already (an earlier pin's prefix), held while we
     * reserve pages for the rest, evicting unpinned entries if the pool is full. */
    cache_seq mm;
    cache_seq_init(&mm, ns, 0);
    int32_t *pages = malloc(sizeof *pages * (size_t)np);
    rkv_status st = pages ? cache_seq_reserve(&mm, np) : RKV_ENOMEM;
    if (st == RKV_OK) st = cache_client_admit(c, &mm, tokens, whole, np, pages, NULL);
    int32_t need = np - mm.num_pages;
    if (st != RKV_OK) {
        int32_t held = (int32_t)(c->pinned_tokens / P);
        free(pages);
        cache_seq_free(&mm);
        if (st != RKV_ENOSPC)
            return rkv_fail(st, err, errlen, "pin: match failed: %s", rkv_status_str(st));
        return rkv_fail(RKV_ENOSPC, err, errlen,
                        "pin: a prefix of %d tokens needs %d more pages, only %d are free (pool %d "
                        "pages, %d pinned already)", whole, need, page_pool_num_free(pool),
                        pool->num_pages, held);
    }
    /* 2: the prefix's K/V into the new pages, then insert; whatever the
     * cache did not adopt goes back to the pool. */
    rkv_status fill_st = RKV_OK;
    if (need > 0 && p->fill) st = fill_st = p->fill(p->fill_ctx, tokens, whole, pages, mm.len);
    /* Pages never committed (the fill failed) are freed by release. */
    bool filled = st == RKV_OK;
    if (filled) st = cache_client_commit(c, &mm, tokens, whole, pages, mm.num_pages, np, NULL);
    cache_client_release(c, &mm, pages + mm.num_pages, filled ? 0 : need);
    free(pages);
    cache_seq_free(&mm);
    if (fill_st != RKV_OK)
        return rkv_fail(st, err, errlen, "pin: computing the prefix's KV failed: %s",
                        rkv_status_str(st));
    if (st != RKV_OK) return rkv_fail(st, err, errlen, "pin: insert failed: %s", rkv_status_str(st));
    return RKV_OK;
}

rkv_status cache_pin(cache *c, cache_pins *p, const int32_t *tokens, int32_t n, uint64_t ns,
                     int32_t *pinned_len, char *err, size_t errlen)
{
    const int32_t P = c->page_size;
    if (pinned_len) *pinned_len = 0;
    if (n < 0 || (n > 0 && !tokens)) return rkv_fail(RKV_EINVAL, err, errlen, "pin: bad token array");
    int32_t whole = n - n % P;
    if (whole < P)
        return rkv_fail(RKV_EINVAL, err, errlen,
                        "pin: a prefix of %d tokens is shorter than one page (%d tokens): nothing "
                        "to pin", n, P);
    if (whole / P > c->pool->num_pages)
        return rkv_fail(RKV_ENOSPC, err, errlen,
                        "pin: a prefix of %d tokens needs %d pages, the whole pool holds %d", whole,
                        whole / P, c->pool->num_pages);
    if (rkv_grow32((void **)&p->m, &p->cap, (int64_t)p->n + 1, sizeof *p->m))
        return rkv_fail(RKV_ENOMEM, err, errlen, "pin: out of host memory");
    rkv_status st = pin_store(c, p, tokens, whole, ns, err, errlen);
    if (st != RKV_OK) return st;

    /* 3: match the whole prefix again and keep its lock for the cache's life. */
    cache_sizes before, after;
    cache_get_sizes(c, &before);
    cache_seq *m = &p->m[p->n];
    cache_seq_init(m, ns, 0);
    if ((st = cache_client_match(c, m, tokens, whole)) != RKV_OK) {
        cache_seq_free(m);
        return rkv_fail(st, err, errlen, "pin: lock failed: %s", rkv_status_str(st));
    }
    if (m->len != whole && cache_can(c, CACHE_CAP_REUSE)) {
        cache_unlock(c, m);
        cache_seq_free(m);
        return rkv_fail(RKV_ECORRUPT, err, errlen,
                        "pin: cache %s matched %d of the %d tokens just inserted", c->ops->name,
                        m->len, whole);
    }
    p->n++;
    cache_get_sizes(c, &after);
    c->pinned_tokens += after.protected_tokens - before.protected_tokens;
    if (pinned_len) *pinned_len = m->len;
    return RKV_OK;
}

rkv_status cache_pins_check(cache *c, const cache_pins *p, char *err, size_t errlen)
{
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    if (sz.pinned_tokens > sz.protected_tokens || sz.pinned_tokens < 0)
        return rkv_fail(RKV_ECORRUPT, err, errlen, "pins: %lld pinned tokens but only %lld protected",
                    (long long)sz.pinned_tokens, (long long)sz.protected_tokens);
    for (int32_t i = 0; i < p->n && !p->released; i++)
        for (int32_t k = 0; k < p->m[i].num_pages; k++)
            if (page_pool_state(c->pool, p->m[i].pages[k]) != PAGE_CACHED)
                return rkv_fail(RKV_ECORRUPT, err, errlen, "pins: page %d of pin %d is no longer cached",
                            p->m[i].pages[k], i);
    return RKV_OK;
}

rkv_status cache_pins_release(cache *c, cache_pins *p)
{
    rkv_status first = RKV_OK;
    if (p->released) return RKV_OK;
    for (int32_t i = p->n - 1; i >= 0; i--) {
        rkv_status st = cache_unlock(c, &p->m[i]);
        if (st != RKV_OK && first == RKV_OK) first = st;
    }
    c->pinned_tokens = 0;
    p->released = true;
    return first;
}

void cache_pins_free(cache_pins *p)
{
    for (int32_t i = 0; i < p->n; i++) cache_seq_free(&p->m[i]);
    free(p->m);
    memset(p, 0, sizeof *p);
}
