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
 *     (alloc_runs may go FREE -> CACHED: a cache's insert taking pages)
 *     page_pool_adopt (cache insert):   INFLIGHT -> CACHED
 *
 * Inside the pool a freed page is first PENDING (see "Deferred merging"
 * below); that is FREE to every count and every reader.
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
 * What the pool keeps per page is only its state, in two bits (32 pages to a
 * word): at page size 1 a page is a token, and the tree itself costs about
 * 8 bytes per cached token, so any per-page word here would be most of the
 * cache's host memory. Everything else is per free extent, and under churn
 * there are few of those (eviction frees what the next allocation takes):
 *
 *   - ext: one record per free extent {first, count, next, prev}, in a table
 *     that grows on demand (its free slots chained through next);
 *   - ends: an open-addressing map (linear probing, multiplicative hash) from
 *     an extent's first and last page to its record, so a freed run finds the
 *     free extents on both sides in O(1) and merges with them (coalescing: no
 *     two free extents are ever adjacent); the state bits say whether a
 *     neighbour is free, so the map is only asked about ends that exist;
 *   - size classes: extents sit in doubly linked lists by length class
 *     (exact lengths 1..32, then four classes per power of two), with a bitmap
 *     of the non-empty classes. alloc(n) takes the first n pages of the
 *     smallest extent of at least n pages it finds (class of n scanned a
 *     little, then the next non-empty class, where every extent fits), so a
 *     request gets one run whenever one extent can hold it; only when none
 *     can, it takes the largest extents whole until the rest fits one.
 *
 * Deferred merging. A free does no index work: it writes its pages' state
 * bits as PENDING (the fourth two-bit value) and appends the run to an array
 * of pending runs (8 bytes a run), so freeing a tree node's run costs a
 * state-word write and an append (eviction frees many between two
 * allocations). Whatever reads the index first folds the pending runs in
 * (page_pool_fold(); every allocation does it): in the order they were
 * freed, each run turns FREE and merges, by the steps above, with its FREE
 * neighbours only. A PENDING neighbour was freed after it, so it was not
 * free when eager merging would have merged this run, and nothing leaves
 * FREE in between (only an allocation does, and it folds first): the index
 * goes through the same operations in the same order as if every free had
 * merged at once, and hands out the same pages. The merges' misses are
 * then taken where the next allocation pays them, in one loop.
 *
 * Everything is deterministic (lists are LIFO, no addresses or clocks; which
 * table slot a record sits in never decides an order).
 *
 * Memory: the index grows ahead of need (at three quarters full), so a
 * failed growth is retried on the next folded run and never loses a page.
 * Only if the index is full and cannot grow does a fold leave it stale: the
 * state bits stay the truth, later frees go straight to FREE, and the next
 * allocation rebuilds the index from them (RKV_ENOMEM, nothing changed, if
 * that fails too). A pending array that cannot grow makes the free fold
 * what is pending and merge its own runs at once. The pending array keeps
 * what a burst of frees grew it to until later folds find it mostly unused
 * (halved per allocation, down to 256 runs).
 */
#ifndef RKV_PAGE_POOL_H
#define RKV_PAGE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

/* PAGE_PENDING (both bits) is a freed page the extent index has not taken in
 * yet; it is free for every count and every reader (page_pool_state() says
 * PAGE_FREE), and only the pool tells the two apart. */
enum { PAGE_FREE = 0, PAGE_INFLIGHT = 1, PAGE_CACHED = 2, PAGE_PENDING = 3 };

/* Length classes: exact up to PAGE_CLASS_EXACT, then four per power of two
 * (lengths below 2^31). */
enum { PAGE_CLASS_EXACT = 32, PAGE_CLASSES = PAGE_CLASS_EXACT + 4 * 26 };

/* Host bits the pool keeps for every page from init on (its state); the
 * per-extent index and the free log come on top, as page_pool_host_bytes()
 * reports. */
#define PAGE_POOL_BITS_PER_PAGE 2

/* A run of consecutive page ids: first, first + 1, .., first + count - 1. */
typedef struct page_run {
    int32_t first;
    int32_t count;
} page_run;

typedef struct page_pool {
    int32_t num_pages;
    int32_t page_size;   /* tokens per page, >= 1 */
    int32_t num_free;
    int32_t num_inflight;
    int32_t num_cached;
    int32_t num_extents; /* free extents */
    uint64_t *bits;      /* (num_pages / 32 rounded up) two bits per page: PAGE_* */
    /* Free extents (see above): ext[e] for e in use is [first, first + count)
     * in class_of(count)'s list; a slot not in use is on the chain from
     * ext_spare through next. */
    struct page_ext {
        int32_t first, count, next, prev;
    } *ext;
    int32_t ext_cap, ext_len, ext_spare;
    /* ends: key a first or last page (-1 empty), ext its record;
     * ends_cap a power of two. */
    struct page_end {
        int32_t key, ext;
    } *ends;
    int32_t ends_cap, ends_used, ends_shift;
    int32_t stale; /* the index missed frees: rebuild before the next alloc */
    /* Runs freed since the last fold, in free order, their pages PENDING
     * (empty while the index is stale). */
    page_run *pend;
    int32_t pend_cap, num_pend;
    int32_t head[PAGE_CLASSES]; /* first extent of each class, -1 empty */
    uint64_t nonempty[(PAGE_CLASSES + 63) / 64];
    /* The free log: the runs freed since the first mark after the last
     * allocation, in free order (see page_pool_freed_since); kept only while
     * a mark is live. A free that continues the log's last run, with no mark
     * taken in between, extends that run (the pages in order are the same),
     * so a mark always falls between two runs:
     *
     *   mark free_run(7,3) mark free_run(10,2) free_run(12,1) free_run(4,1)
     *   freed: | {7,3} | {10,3} {4,1}      (| a mark)   freed_pages 7
     */
    page_run *freed;
    int32_t freed_cap, freed_runs;
    int32_t freed_pages;  /* pages the log took (or lost): freed_total - freed_pages is its start */
    int32_t log_join;     /* the last run may be extended: no mark since it was logged */
    int32_t logging;      /* a mark is live: frees are logged */
    int32_t log_lost;     /* the log could not grow: marks read RKV_ENOMEM */
    int32_t log_kept;     /* page_pool_log_reserve: the log holds every run */
    uint64_t freed_total; /* pages freed since init */
} page_pool;

/* All pages start FREE, one extent. Returns RKV_EINVAL for num_pages < 0 or
 * page_size < 1, RKV_ENOMEM when the state bits cannot be had. */
rkv_status page_pool_init(page_pool *p, int32_t num_pages, int32_t page_size);
void page_pool_destroy(page_pool *p);

/* Host bytes page_pool_init() takes for num_pages pages (the state bits and
 * the first index tables), for up-front memory checks. */
uint64_t page_pool_init_bytes(int64_t num_pages);
/* Host bytes the pool holds now: state bits, extent index, free log,
 * pending runs (the index as it is, not folded). */
uint64_t page_pool_host_bytes(const page_pool *p);

/* A page's state: PAGE_FREE, PAGE_INFLIGHT or PAGE_CACHED (a PENDING page
 * is FREE). pg must be in [0, num_pages). */
static inline int page_pool_state(const page_pool *p, int32_t pg)
{
    unsigned s = (unsigned)(p->bits[pg >> 5] >> ((pg & 31) * 2)) & 3u;
    return (int)(s ^ (s & (s >> 1) & 1u) * 3u); /* 3 -> 0 */
}

/* Allocate n pages, all or nothing: on RKV_ENOSPC nothing changes. The pages
 * become INFLIGHT and are written to out[0..n) as ascending runs: one run
 * whenever a free extent holds n pages (a fresh pool hands out 0, 1, 2, ..),
 * else as few as the largest extents give. RKV_ENOMEM (nothing changed) only
 * when a stale index (see above) cannot be rebuilt. */
rkv_status page_pool_alloc(page_pool *p, int32_t n, int32_t *out);

/* page_pool_alloc() with the pages handed out as the runs it would list them
 * in: runs[0..*nruns) (room for n runs; none continues the one before it),
 * in state `to`: PAGE_INFLIGHT, or PAGE_CACHED for a cache that adopts them
 * at once (the radix tree's insert: no page list is written, and no adopt
 * reads one back). */
rkv_status page_pool_alloc_runs(page_pool *p, int32_t n, int to, page_run *runs,
                                int32_t *nruns);

/* Return pages (INFLIGHT or CACHED) to the pool. A page id out of range or
 * already FREE (or twice in the list) is a caller bug: RKV_EINVAL, and no
 * page is freed. */
rkv_status page_pool_free(page_pool *p, const int32_t *pages, int32_t n);

/* Return the run of pages first .. first + count - 1 (INFLIGHT or CACHED),
 * exactly as page_pool_free() of that list would, without the list (one
 * pending run, merged with its free neighbours at the next fold). Checked
 * like free. */
rkv_status page_pool_free_run(page_pool *p, int32_t first, int32_t count);

/* INFLIGHT -> CACHED (a cache takes ownership on insert). Checked like free. */
rkv_status page_pool_adopt(page_pool *p, const int32_t *pages, int32_t n);

/* CACHED -> INFLIGHT (a cache hands a page back to a request, e.g. the hash
 * kind or a spill tier). Checked like free. */
rkv_status page_pool_release(page_pool *p, const int32_t *pages, int32_t n);

/* The runs freed since a mark, in the order they were freed: callers that
 * learn what an eviction freed (a spill tier, the cache simulator's log for
 * kinds without node events) take a mark before and read after. Taking a
 * mark starts the log (nobody pays for it otherwise); a mark stays readable
 * until the next allocation, which ends the log; reading an older one is
 * RKV_EINVAL, and RKV_ENOMEM if the log could not grow for a free since it.
 * The pages of runs[0..*nruns), first to last, are the pages freed since the
 * mark in free order (freed_total - mark of them); two runs freed one after
 * the other with consecutive ids may come back as one. *runs points into the
 * pool, valid until its next change. */
static inline uint64_t page_pool_free_mark(page_pool *p)
{
    p->logging = 1;
    p->log_join = 0; /* the mark's place stays a run boundary */
    return p->freed_total;
}
rkv_status page_pool_freed_since(const page_pool *p, uint64_t mark, const page_run **runs,
                                 int32_t *nruns);
/* Make the free log hold every run from now on (8 bytes a page, for the
 * pool's life: between two allocations each page is freed at most once, so
 * at most num_pages runs), so that no later free can lose it: for a caller
 * that reads marks where it cannot report RKV_ENOMEM (a spill tier's
 * eviction), called where it can (at its creation). RKV_ENOMEM, nothing
 * changed, if not. */
rkv_status page_pool_log_reserve(page_pool *p);

/* The ends map's home slot of a page (multiplicative hashing: the top bits
 * of pg times 2^32 / golden ratio). */
static inline uint32_t page_pool_end_slot(const page_pool *p, int32_t pg)
{
    return ((uint32_t)pg * 2654435769u) >> p->ends_shift;
}

/* Ask for the line freeing run [first, first + count) writes (its first
 * state word; the pending array is written in order), so a caller with other
 * work to do first (the tree unlinking the node) overlaps its miss with its
 * own. */
static inline void page_pool_prefetch_run(const page_pool *p, int32_t first, int32_t count)
{
    (void)count;
    __builtin_prefetch(p->bits + (first >> 5), 1);
}

static inline int32_t page_pool_num_free(const page_pool *p) { return p->num_free; }
static inline int32_t page_pool_pages_for(const page_pool *p, int64_t tokens)
{
    return (int32_t)((tokens + p->page_size - 1) / p->page_size);
}

/* Take the runs freed since the last fold into the extent index (merging
 * each with its free neighbours, in the order they were freed). Allocation
 * does it itself; callers that read the index's fields (num_extents, the
 * tables) call it first. */
void page_pool_fold(page_pool *p);

/* Recount the states and compare with the counters; check that the pending
 * runs are exactly the PENDING pages; check that the free
 * extents are exactly the maximal runs of FREE pages, each with one record,
 * found in the ends map under its first and last page, once in the list of
 * its class, and the class bitmap (a stale index is only counted). On
 * failure writes a message to err (if non-NULL) and returns RKV_ECORRUPT. */
rkv_status page_pool_check(const page_pool *p, char *err, size_t errlen);

#endif
