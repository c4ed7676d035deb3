/* page_pool.h - a fixed set of KV-cache pages, the only currency between the
 * caches and the runtime.
 *
 * A pool has num_pages pages of page_size tokens each. Every page is in
 * exactly one of three states:
 *
 *     FREE      on the free stack, owned by nobody
 *     INFLIGHT  handed out by page_pool_alloc(), owned by a request
 *     CACHED    owned by a prefix cache (evictable or protected)
 *
 *     alloc:  FREE -> INFLIGHT          free:   INFLIGHT|CACHED -> FREE
 *     page_pool_adopt (cache insert):   INFLIGHT -> CACHED
 *
 * The cache-family invariant  free + evictable + protected + in-flight = pool
 * is checked by cache_check() against these counts.
 */
#ifndef RKV_PAGE_POOL_H
#define RKV_PAGE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

enum { PAGE_FREE = 0, PAGE_INFLIGHT = 1, PAGE_CACHED = 2 };

typedef struct page_pool {
    int32_t num_pages;
    int32_t page_size;   /* tokens per page, >= 1 */
    int32_t num_free;
    int32_t num_inflight;
    int32_t num_cached;
    int32_t *free_stack; /* (num_pages) free page ids; top at num_free - 1 */
    uint8_t *state;      /* (num_pages) PAGE_* */
} page_pool;

/* All pages start FREE. Returns RKV_EINVAL for num_pages < 0 or page_size < 1. */
rkv_status page_pool_init(page_pool *p, int32_t num_pages, int32_t page_size);
void page_pool_destroy(page_pool *p);

/* Allocate n pages, all or nothing: on RKV_ENOSPC nothing changes. The pages
 * become INFLIGHT and are written to out[0..n): the top n of the free stack.
 * Lowest-numbered pages are handed out first on a fresh pool, so runs are
 * repeatable. Consecutive ids come out as ascending runs (caches store runs in
 * a few words) wherever the stack holds them together: on a fresh pool, and
 * where a run was freed (its pages popped last first are handed out in
 * ascending order); otherwise the pages are scattered ids, as valid, only
 * costlier to store. */
rkv_status page_pool_alloc(page_pool *p, int32_t n, int32_t *out);

/* Return pages (INFLIGHT or CACHED) to the free stack. A page id out of range
 * or already FREE is a caller bug: RKV_EINVAL, and no page is freed. */
rkv_status page_pool_free(page_pool *p, const int32_t *pages, int32_t n);

/* Return the run of pages first .. first + count - 1 (INFLIGHT or CACHED),
 * exactly as page_pool_free() of that list would, without the list: the next
 * allocation of as many pages hands the same run out again. Checked like
 * free. */
rkv_status page_pool_free_run(page_pool *p, int32_t first, int32_t count);

/* INFLIGHT -> CACHED (a cache takes ownership on insert). Checked like free. */
rkv_status page_pool_adopt(page_pool *p, const int32_t *pages, int32_t n);

/* CACHED -> INFLIGHT (a cache hands a page back to a request, e.g. the hash
 * kind or a spill tier). Checked like free. */
rkv_status page_pool_release(page_pool *p, const int32_t *pages, int32_t n);

static inline int32_t page_pool_num_free(const page_pool *p) { return p->num_free; }
static inline int32_t page_pool_pages_for(const page_pool *p, int64_t tokens)
{
    return (int32_t)((tokens + p->page_size - 1) / p->page_size);
}

/* Recount the state array and compare with the counters and the free stack.
 * On failure writes a message to err (if non-NULL) and returns RKV_ECORRUPT. */
rkv_status page_pool_check(const page_pool *p, char *err, size_t errlen);

#endif
