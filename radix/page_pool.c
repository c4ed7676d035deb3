/* page_pool.c - see page_pool.h. */
#include "page_pool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rkv_status_str(rkv_status s)
{
    switch (s) {
    case RKV_OK: return "ok";
    case RKV_ENOMEM: return "out of host memory";
    case RKV_EINVAL: return "invalid argument";
    case RKV_ENOSPC: return "out of pages";
    case RKV_ERANGE: return "value out of range";
    case RKV_EPARSE: return "malformed input";
    case RKV_EIO: return "i/o error";
    case RKV_ENOTSUP: return "not supported";
    case RKV_ECORRUPT: return "invariant violated";
    case RKV_EDEVICE: return "device error";
    }
    return "unknown status";
}

void rkv_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

rkv_status rkv_fail(rkv_status st, char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* ---- free extents ------------------------------------------------------
 *
 * See page_pool.h for the picture. An extent [f, f + c) is tagged at both
 * ends and listed in class_of(c); ext_take() and ext_put() are the only
 * places that change the lists. */

static inline int32_t class_of(int32_t c)
{
    if (c <= PAGE_CLASS_EXACT) return c - 1;
    int b = 31 - __builtin_clz((uint32_t)c); /* >= 5 */
    return PAGE_CLASS_EXACT + (b - 5) * 4 + ((c >> (b - 2)) & 3);
}

static inline void class_mark(page_pool *p, int32_t k, int on)
{
    uint64_t bit = 1ull << (k & 63);
    if (on) p->nonempty[k >> 6] |= bit;
    else p->nonempty[k >> 6] &= ~bit;
}

/* First non-empty class >= k, or -1. */
static int32_t class_next(const page_pool *p, int32_t k)
{
    for (int32_t w = k >> 6; w < (PAGE_CLASSES + 63) / 64; w++) {
        uint64_t bits = p->nonempty[w];
        if (w == k >> 6) bits &= ~0ull << (k & 63);
        if (bits) return w * 64 + __builtin_ctzll(bits);
    }
    return -1;
}

/* Highest non-empty class, or -1. */
static int32_t class_last(const page_pool *p)
{
    for (int32_t w = (PAGE_CLASSES + 63) / 64 - 1; w >= 0; w--)
        if (p->nonempty[w]) return w * 64 + 63 - __builtin_clzll(p->nonempty[w]);
    return -1;
}

/* First page of the free extent whose last page is l. */
static inline int32_t ext_first_of_last(const page_pool *p, int32_t l)
{
    int32_t v = p->ext[l].tag;
    return v > 0 ? l : -v - 1; /* a one-page extent's only tag is its length */
}

/* Add extent [f, f + c) (its pages FREE, no free neighbour) to its class. */
static void ext_put(page_pool *p, int32_t f, int32_t c)
{
    p->ext[f].tag = c;
    if (c > 1) p->ext[f + c - 1].tag = -(f + 1);
    int32_t k = class_of(c), h = p->head[k];
    p->ext[f].next = h;
    p->ext[f].prev = -1;
    if (h >= 0) p->ext[h].prev = f;
    p->head[k] = f;
    class_mark(p, k, 1);
    p->num_extents++;
}

/* Remove the extent starting at f from its class list. */
static void ext_take(page_pool *p, int32_t f)
{
    int32_t k = class_of(p->ext[f].tag), nx = p->ext[f].next, pv = p->ext[f].prev;
    if (pv >= 0) p->ext[pv].next = nx;
    else p->head[k] = nx;
    if (nx >= 0) p->ext[nx].prev = pv;
    if (p->head[k] < 0) class_mark(p, k, 0);
    p->num_extents--;
}

/* Make the pages [g, g + c) free, merged with the free extents next to them. */
static void ext_free(page_pool *p, int32_t g, int32_t c)
{
    if (g > 0 && p->state[g - 1] == PAGE_FREE) {
        int32_t f = ext_first_of_last(p, g - 1);
        ext_take(p, f);
        c += g - f;
        g = f;
    }
    int32_t r = g + c;
    if (r < p->num_pages && p->state[r] == PAGE_FREE) {
        int32_t rc = p->ext[r].tag;
        ext_take(p, r);
        c += rc;
    }
    ext_put(p, g, c);
}

/* Hand out the first n pages of the extent at f (n <= its length) as a run. */
static void ext_carve(page_pool *p, int32_t f, int32_t n, int32_t *out)
{
    int32_t c = p->ext[f].tag;
    ext_take(p, f);
    if (c > n) ext_put(p, f + n, c - n);
    memset(p->state + f, PAGE_INFLIGHT, (size_t)n);
    for (int32_t i = 0; i < n; i++) out[i] = f + i;
}

/* An extent of at least n pages, or -1: within n's class the first of a few
 * that fits (exact classes: any), else the head of the next non-empty class
 * (all of whose extents are longer than n). */
enum { FIT_SCAN = 8 };
static int32_t ext_fit(const page_pool *p, int32_t n)
{
    int32_t k = class_of(n);
    int scanned = 0;
    for (int32_t f = p->head[k]; f >= 0 && scanned < FIT_SCAN; f = p->ext[f].next, scanned++)
        if (p->ext[f].tag >= n) return f;
    int32_t up = k + 1 < PAGE_CLASSES ? class_next(p, k + 1) : -1;
    return up >= 0 ? p->head[up] : -1;
}

/* The longest of the first few extents of the highest class (the pool is not
 * empty). */
static int32_t ext_largest(const page_pool *p)
{
    int32_t best = p->head[class_last(p)];
    int scanned = 0;
    for (int32_t f = best; f >= 0 && scanned < FIT_SCAN; f = p->ext[f].next, scanned++)
        if (p->ext[f].tag > p->ext[best].tag) best = f;
    return best;
}

/* ---- the pool ----------------------------------------------------------- */

rkv_status page_pool_init(page_pool *p, int32_t num_pages, int32_t page_size)
{
    memset(p, 0, sizeof *p);
    if (num_pages < 0 || page_size < 1) return RKV_EINVAL;
    size_t n = (size_t)(num_pages ? num_pages : 1);
    p->state = calloc(n, 1);
    p->ext = malloc(sizeof *p->ext * n);
    p->freed = malloc(sizeof(int32_t) * n);
    if (!p->state || !p->ext || !p->freed) {
        page_pool_destroy(p);
        return RKV_ENOMEM;
    }
    for (int32_t k = 0; k < PAGE_CLASSES; k++) p->head[k] = -1;
    p->num_pages = num_pages;
    p->page_size = page_size;
    p->num_free = num_pages;
    /* one extent: a fresh pool hands out 0, 1, 2, ... */
    if (num_pages > 0) ext_put(p, 0, num_pages);
    return RKV_OK;
}

void page_pool_destroy(page_pool *p)
{
    free(p->state);
    free(p->ext);
    free(p->freed);
    memset(p, 0, sizeof *p);
}

rkv_status page_pool_alloc(page_pool *p, int32_t n, int32_t *out)
{
    if (n < 0) return RKV_EINVAL;
    if (n > p->num_free) return RKV_ENOSPC;
    /* 1) one extent holds the rest: one run, done; 2) otherwise the largest
     * extent whole, and again. Ends: the free pages are >= n. */
    for (int32_t got = 0; got < n;) {
        int32_t f = ext_fit(p, n - got);
        int32_t take = n - got;
        if (f < 0) {
            f = ext_largest(p);
            take = p->ext[f].tag;
        }
        ext_carve(p, f, take, out + got);
        got += take;
    }
    p->num_free -= n;
    p->num_inflight += n;
    /* marks taken before this allocation are spent (see freed_since) */
    p->num_freed = 0;
    return RKV_OK;
}

rkv_status page_pool_freed_since(const page_pool *p, uint64_t mark, const int32_t **pages,
                                 int32_t *n)
{
    uint64_t base = p->freed_total - (uint64_t)p->num_freed;
    *pages = NULL;
    *n = 0;
    if (mark < base || mark > p->freed_total) return RKV_EINVAL;
    *pages = p->freed + (mark - base);
    *n = (int32_t)(p->freed_total - mark);
    return RKV_OK;
}

/* Validate a whole batch before touching anything, so a bad id changes nothing. */
static rkv_status check_batch(page_pool *p, const int32_t *pages, int32_t n,
                              unsigned allowed_mask)
{
    if (n < 0) return RKV_EINVAL;
    rkv_status st = RKV_OK;
    int32_t i = 0;
    /* The high bit of state marks "seen in this batch": duplicates would
     * double-count. Every mark set is cleared again before returning. */
    for (; i < n; i++) {
        int32_t pg = pages[i];
        if (pg < 0 || pg >= p->num_pages || (p->state[pg] & 0x80) ||
            !((1u << p->state[pg]) & allowed_mask)) {
            st = RKV_EINVAL;
            break;
        }
        p->state[pg] |= 0x80;
    }
    for (int32_t j = 0; j < i; j++) p->state[pages[j]] &= 0x7f;
    return st;
}

static void count_move(page_pool *p, uint8_t from, int delta)
{
    if (from == PAGE_INFLIGHT) p->num_inflight += delta;
    else if (from == PAGE_CACHED) p->num_cached += delta;
    else p->num_free += delta;
}

/* Pages [first, first + count), all INFLIGHT or CACHED, become free. */
static void free_checked_run(page_pool *p, int32_t first, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        int32_t pg = first + i;
        count_move(p, p->state[pg], -1);
        p->state[pg] = PAGE_FREE;
        p->freed[p->num_freed++] = pg;
    }
    p->num_free += count;
    p->freed_total += (uint64_t)count;
    ext_free(p, first, count);
}

rkv_status page_pool_free(page_pool *p, const int32_t *pages, int32_t n)
{
    rkv_status st = check_batch(p, pages, n, (1u << PAGE_INFLIGHT) | (1u << PAGE_CACHED));
    if (st != RKV_OK) return st;
    /* ascending stretches of the list go back as runs, one merge each */
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && pages[j] == pages[j - 1] + 1) j++;
        free_checked_run(p, pages[i], j - i);
        i = j;
    }
    return RKV_OK;
}

rkv_status page_pool_free_run(page_pool *p, int32_t first, int32_t count)
{
    if (count < 0 || first < 0 || count > p->num_pages - first) return RKV_EINVAL;
    for (int32_t i = 0; i < count; i++) {
        uint8_t s = p->state[first + i];
        if (s != PAGE_INFLIGHT && s != PAGE_CACHED) return RKV_EINVAL;
    }
    free_checked_run(p, first, count);
    return RKV_OK;
}

static rkv_status move_pages(page_pool *p, const int32_t *pages, int32_t n, uint8_t from,
                             uint8_t to)
{
    rkv_status st = check_batch(p, pages, n, 1u << from);
    if (st != RKV_OK) return st;
    for (int32_t i = 0; i < n; i++) p->state[pages[i]] = to;
    count_move(p, from, -n);
    count_move(p, to, n);
    return RKV_OK;
}

rkv_status page_pool_adopt(page_pool *p, const int32_t *pages, int32_t n)
{
    return move_pages(p, pages, n, PAGE_INFLIGHT, PAGE_CACHED);
}

rkv_status page_pool_release(page_pool *p, const int32_t *pages, int32_t n)
{
    return move_pages(p, pages, n, PAGE_CACHED, PAGE_INFLIGHT);
}

#define CHECK_FAIL(...)                                      \
    do {                                                     \
        if (err) snprintf(err, errlen, "page_pool_check: " __VA_ARGS__); \
        return RKV_ECORRUPT;                                 \
    } while (0)

rkv_status page_pool_check(const page_pool *p, char *err, size_t errlen)
{
    int32_t cnt[3] = {0, 0, 0};
    for (int32_t i = 0; i < p->num_pages; i++) {
        if (p->state[i] > PAGE_CACHED) CHECK_FAIL("page %d has bad state %d", i, p->state[i]);
        cnt[p->state[i]]++;
    }
    if (cnt[PAGE_FREE] != p->num_free || cnt[PAGE_INFLIGHT] != p->num_inflight ||
        cnt[PAGE_CACHED] != p->num_cached)
        CHECK_FAIL("page counts disagree: states free=%d inflight=%d cached=%d, "
                   "counters free=%d inflight=%d cached=%d",
                   cnt[0], cnt[1], cnt[2], p->num_free, p->num_inflight, p->num_cached);
    /* every maximal run of free pages is one extent, tagged at both ends */
    int32_t extents = 0;
    for (int32_t i = 0; i < p->num_pages;) {
        if (p->state[i] != PAGE_FREE) {
            i++;
            continue;
        }
        int32_t j = i;
        while (j < p->num_pages && p->state[j] == PAGE_FREE) j++;
        int32_t c = j - i;
        if (p->ext[i].tag != c)
            CHECK_FAIL("free pages [%d, %d) but the extent at %d says %d pages", i, j, i, p->ext[i].tag);
        if (c > 1 && p->ext[j - 1].tag != -(i + 1))
            CHECK_FAIL("extent [%d, %d) has a bad tag %d at its last page", i, j, p->ext[j - 1].tag);
        extents++;
        i = j;
    }
    if (extents != p->num_extents)
        CHECK_FAIL("%d free extents, %d counted", extents, p->num_extents);
    int32_t listed = 0;
    for (int32_t k = 0; k < PAGE_CLASSES; k++) {
        int on = (p->nonempty[k >> 6] >> (k & 63)) & 1;
        if (on != (p->head[k] >= 0)) CHECK_FAIL("class %d bitmap bit %d, list head %d", k, on, p->head[k]);
        for (int32_t f = p->head[k], pv = -1; f >= 0; pv = f, f = p->ext[f].next) {
            /* the start of a maximal free run, of its class: with the counts
             * equal below, every extent is listed exactly once */
            if (f >= p->num_pages || p->state[f] != PAGE_FREE || p->ext[f].tag < 1 ||
                (f > 0 && p->state[f - 1] == PAGE_FREE) || class_of(p->ext[f].tag) != k ||
                p->ext[f].prev != pv)
                CHECK_FAIL("class %d lists a bad extent at page %d", k, f);
            if (++listed > extents) CHECK_FAIL("class lists hold more than %d extents", extents);
        }
    }
    if (listed != extents) CHECK_FAIL("class lists hold %d of %d extents", listed, extents);
    if (p->num_freed > p->num_pages || (uint64_t)p->num_freed > p->freed_total)
        CHECK_FAIL("free log holds %d pages", p->num_freed);
    return RKV_OK;
}
