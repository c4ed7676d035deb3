/* page_pool.h - a fixed set of KV-cache pages, the only currency between the
 * caches and the runtime.
 *
 * A pool has num_pages pages of page_size tokens each. Every page is in
 * exactly one of three states:
 *
 *     FREE      in a free extent, owned by nobody
 *     INFLIGHT  handed out by page_pool_alloc(), owned by a request
 *     CACHED    owned by a prefix cache (evictable or protected)
 *
 *     alloc:  FREE -> INFLIGHT          free:   INFLIGHT|CACHED -> FREE
 *     page_pool_adopt (cache insert):   INFLIGHT -> CACHED
 *
 * The cache-family invariant  free + evictable + protected + in-flight = pool
 * is checked by cache_check() against these counts.
 *
 * Free pages are kept as extents (maximal runs of consecutive free ids), so
 * that a request's pages stay consecutive after eviction has freed pages all
 * over the pool (the radix tree stores a node's pages as runs: one run costs
 * one word, a scattered page one more word each, and a match copies a run
 * with one store per page instead of a load per page):
 *
 *   state   F F F I I C C F F C F F F F I      (F free, I in flight, C cached)
 *   page    0 1 2 3 4 5 6 7 8 9 ...
 *   extents [0,3)       [7,9)   [10,14)
 *
 *   - boundary tags: an extent's first page holds its length, its last page
 *     the first page's id, so a freed run finds the free extents on both
 *     sides in O(1) and merges with them (coalescing: no two free extents are
 *     ever adjacent);
 *   - size classes: extents sit in doubly linked lists by length class
 *     (exact lengths 1..32, then four classes per power of two), with a bitmap
 *     of the non-empty classes. alloc(n) takes the first n pages of the
 *     smallest extent of at least n pages it finds (class of n scanned a
 *     little, then the next non-empty class, where every extent fits), so a
 *     request gets one run whenever one extent can hold it; only when none
 *     can, it takes the largest extents whole until the rest fits one.
 *
 * Everything is deterministic (lists are LIFO, no addresses or clocks).
 */
#ifndef RKV_PAGE_POOL_H
#define RKV_PAGE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

enum { PAGE_FREE = 0, PAGE_INFLIGHT = 1, PAGE_CACHED = 2 };

/* Length classes: exact up to PAGE_CLASS_EXACT, then four per power of two
 * (lengths below 2^31). */
enum { PAGE_CLASS_EXACT = 32, PAGE_CLASSES = PAGE_CLASS_EXACT + 4 * 26 };

/* Host bytes the pool itself keeps per page: its state byte, its extent
 * triple and its slot in the free log (for up-front memory checks). */
#define PAGE_POOL_BYTES_PER_PAGE (1 + 3 * 4 + 4)

typedef struct page_pool {
    int32_t num_pages;
    int32_t page_size;   /* tokens per page, >= 1 */
    int32_t num_free;
    int32_t num_inflight;
    int32_t num_cached;
    int32_t num_extents; /* free extents */
    uint8_t *state;      /* (num_pages) PAGE_* */
    /* Free extents: at first page f of extent [f, f + c): ext[f].tag = c,
     * ext[f].next and .prev link its class list (-1 ends); at its last page l
     * (c > 1): ext[l].tag = -(f + 1). Other entries are stale. One array of
     * triples, so a merge with a neighbour reads one line, not three. */
    struct page_ext {
        int32_t tag, next, prev;
    } *ext;
    int32_t head[PAGE_CLASSES]; /* first extent of each class, -1 empty */
    uint64_t nonempty[(PAGE_CLASSES + 63) / 64];
    /* Frees since the last allocation, in order (see page_pool_freed_since). */
    int32_t *freed;
    int32_t num_freed;
    uint64_t freed_total; /* pages freed since init */
} page_pool;

/* All pages start FREE, one extent. Returns RKV_EINVAL for num_pages < 0 or
 * page_size < 1. */
rkv_status page_pool_init(page_pool *p, int32_t num_pages, int32_t page_size);
void page_pool_destroy(page_pool *p);

/* Allocate n pages, all or nothing: on RKV_ENOSPC nothing changes. The pages
 * become INFLIGHT and are written to out[0..n) as ascending runs: one run
 * whenever a free extent holds n pages (a fresh pool hands out 0, 1, 2, ..),
 * else as few as the largest extents give. */
rkv_status page_pool_alloc(page_pool *p, int32_t n, int32_t *out);

/* Return pages (INFLIGHT or CACHED) to the pool. A page id out of range or
 * already FREE (or twice in the list) is a caller bug: RKV_EINVAL, and no
 * page is freed. */
rkv_status page_pool_free(page_pool *p, const int32_t *pages, int32_t n);

/* Return the run of pages first .. first + count - 1 (INFLIGHT or CACHED),
 * exactly as page_pool_free() of that list would, without the list, in one
 * merge with its free neighbours. Checked like free. */
rkv_status page_pool_free_run(page_pool *p, int32_t first, int32_t count);

/* INFLIGHT -> CACHED (a cache takes ownership on insert). Checked like free. */
rkv_status page_pool_adopt(page_pool *p, const int32_t *pages, int32_t n);

/* CACHED -> INFLIGHT (a cache hands a page back to a request, e.g. the hash
 * kind or a spill tier). Checked like free. */
rkv_status page_pool_release(page_pool *p, const int32_t *pages, int32_t n);

/* The pages freed since a mark, in the order they were freed: callers that
 * learn what an eviction freed (a spill tier, the cache simulator's log for
 * kinds without node events) take a mark before and read after. A mark stays
 * readable until the next allocation (frees between two allocations are at
 * most num_pages, so the log never grows); reading an older one is
 * RKV_EINVAL. *pages points into the pool, valid until its next change. */
static inline uint64_t page_pool_free_mark(const page_pool *p) { return p->freed_total; }
rkv_status page_pool_freed_since(const page_pool *p, uint64_t mark, const int32_t **pages,
                                 int32_t *n);

/* Ask for the lines freeing run [first, first + count) will read (its state
 * and its neighbours' extent tags), so a caller with other work to do first
 * (the tree unlinking the node) overlaps their misses with its own. */
static inline void page_pool_prefetch_run(const page_pool *p, int32_t first, int32_t count)
{
    __builtin_prefetch(p->state + first, 1);
    if (first > 0) __builtin_prefetch(&p->ext[first - 1], 1);
    if (first + count < p->num_pages) __builtin_prefetch(&p->ext[first + count], 1);
}

static inline int32_t page_pool_num_free(const page_pool *p) { return p->num_free; }
static inline int32_t page_pool_pages_for(const page_pool *p, int64_t tokens)
{
    return (int32_t)((tokens + p->page_size - 1) / p->page_size);
}

/* Recount the state array and compare with the counters; check that the
 * free extents are exactly the maximal runs of FREE pages, tagged at both
 * ends, each once in the list of its class, and the class bitmap. On failure
 * writes a message to err (if non-NULL) and returns RKV_ECORRUPT. */
rkv_status page_pool_check(const page_pool *p, char *err, size_t errlen);

#endif
