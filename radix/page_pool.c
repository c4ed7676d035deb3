/* page_pool.c - see page_pool.h. */
#include "page_pool.h"

#include "rkv_core.h"

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

/* ---- state bits ---------------------------------------------------------
 *
 * Two bits per page, page pg at bits 2*(pg % 32) of word pg / 32. Ranges are
 * handled a word at a time: LO has the low bit of every page's field. */

#define LO 0x5555555555555555ull

/* A page's raw two bits: PAGE_PENDING is told apart from PAGE_FREE only here
 * and in the fold; page_pool_state() reports it as FREE. */
static inline unsigned st_get(const page_pool *p, int32_t pg)
{
    return (unsigned)(p->bits[pg >> 5] >> ((pg & 31) * 2)) & 3u;
}

static inline void st_set(page_pool *p, int32_t pg, unsigned v)
{
    uint64_t *w = &p->bits[pg >> 5];
    unsigned sh = (unsigned)(pg & 31) * 2;
    *w = (*w & ~(3ull << sh)) | ((uint64_t)v << sh);
}

/* The field mask of a run that lies inside one word (1 <= count, first's
 * field + count <= 32): the free paths' and the fold's common case, without
 * branches (a run's alignment in its word is anybody's guess, so a branch
 * on it is mispredicted about every other time). Runs over several words
 * take st_head() and st_tail() below. */
static inline uint64_t st_mask_in_word(int32_t first, int32_t count)
{
    return (~0ull >> (64 - 2 * count)) << (2 * (first & 31));
}

/* The field masks of a run's first and last word: fields from first's on,
 * and up to (first + count - 1)'s (count >= 1). */
static inline uint64_t st_head(int32_t first) { return ~0ull << (2 * (first & 31)); }
static inline uint64_t st_tail(int32_t first, int32_t count)
{
    return ~0ull >> (62 - 2 * ((first + count - 1) & 31));
}

/* Every page of [first, first + count) becomes v: the end words masked,
 * the whole words between them stored outright (a loop the compiler makes
 * wide: at page size 1 an evicted leaf of a long prompt spans many words). */
static void st_fill(page_pool *p, int32_t first, int32_t count, unsigned v)
{
    if (count <= 0) return;
    const uint64_t pat = LO * v;
    uint64_t *b = p->bits, head = st_head(first), tail = st_tail(first, count);
    int32_t w = first >> 5, last = (first + count - 1) >> 5;
    if (w == last) head &= tail;
    b[w] = (b[w] & ~head) | (pat & head);
    if (w == last) return;
    for (int32_t k = w + 1; k < last; k++) b[k] = pat;
    b[last] = (b[last] & ~tail) | (pat & tail);
}

/* The pages of a word's low-bit mask m, which is one stretch of fields. */
static inline int32_t st_pages(uint64_t m)
{
    return (64 - __builtin_clzll(m) - __builtin_ctzll(m) + 1) / 2;
}

/* Add the INFLIGHT and CACHED pages among word x's fields of low-bit mask m
 * (one stretch, not empty) to *in and *ca. */
static inline void st_count_word(uint64_t x, uint64_t m, int32_t *in, int32_t *ca)
{
    uint64_t lo = x & m, hi = (x >> 1) & m;
    /* a node's pages usually share one state: no bit count (without
     * -mpopcnt that is a library call) */
    if (lo == m && !hi) *in += st_pages(m);
    else if (hi == m && !lo) *ca += st_pages(m);
    else {
        *in += __builtin_popcountll(lo & ~hi);
        *ca += __builtin_popcountll(hi & ~lo);
    }
}

/* Count the pages of [first, first + count) that are INFLIGHT and CACHED;
 * returns the number that are neither (FREE or a bad value). The whole
 * words between the end words are compared with all-INFLIGHT and
 * all-CACHED first. */
static int32_t st_count(const page_pool *p, int32_t first, int32_t count, int32_t *inflight,
                        int32_t *cached)
{
    int32_t in = 0, ca = 0;
    if (count > 0) {
        const uint64_t *b = p->bits, head = st_head(first) & LO, tail = st_tail(first, count) & LO;
        int32_t w = first >> 5, last = (first + count - 1) >> 5;
        st_count_word(b[w], w == last ? head & tail : head, &in, &ca);
        if (w != last) {
            for (int32_t k = w + 1; k < last; k++) {
                uint64_t x = b[k];
                if (x == LO) in += 32;
                else if (x == LO << 1) ca += 32;
                else st_count_word(x, LO, &in, &ca);
            }
            st_count_word(b[last], tail, &in, &ca);
        }
    }
    *inflight = in;
    *cached = ca;
    return count - in - ca;
}

/* ---- free extents ------------------------------------------------------
 *
 * See page_pool.h for the picture. An extent's record is listed in
 * class_of(count) and found in the ends map under its first and last page;
 * list_push() and list_unlink() are the only places that change the lists. */

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

/* Record e (first and count set) at the head of its class list. */
static void list_push(page_pool *p, int32_t e)
{
    struct page_ext *x = &p->ext[e];
    int32_t k = class_of(x->count), h = p->head[k];
    x->next = h;
    x->prev = -1;
    if (h >= 0) p->ext[h].prev = e;
    p->head[k] = e;
    class_mark(p, k, 1);
}

static void list_unlink(page_pool *p, int32_t e)
{
    const struct page_ext *x = &p->ext[e];
    int32_t k = class_of(x->count);
    if (x->prev >= 0) p->ext[x->prev].next = x->next;
    else p->head[k] = x->next;
    if (x->next >= 0) p->ext[x->next].prev = x->prev;
    if (p->head[k] < 0) class_mark(p, k, 0);
}

static int32_t ext_new(page_pool *p)
{
    int32_t e = p->ext_spare;
    if (e >= 0) p->ext_spare = p->ext[e].next;
    else e = p->ext_len++; /* capacity reserved by index_reserve() */
    p->num_extents++;
    return e;
}

static void ext_drop(page_pool *p, int32_t e)
{
    p->ext[e].next = p->ext_spare;
    p->ext[e].count = 0;
    p->ext_spare = e;
    p->num_extents--;
}

/* ---- the ends map --------------------------------------------------------
 *
 * Linear probing over a power-of-two table, at most an eighth full after a
 * successful growth, grown again at a quarter, and never full (index_reserve
 * keeps one slot empty), so every probe ends. Deletion shifts the following
 * entries back, so there are no tombstones. */

static inline uint32_t end_home(const page_pool *p, int32_t key)
{
    return page_pool_end_slot(p, key);
}

/* The slot holding key, which must be there. */
static inline uint32_t end_find(const page_pool *p, int32_t key)
{
    uint32_t mask = (uint32_t)p->ends_cap - 1, i = end_home(p, key);
    while (p->ends[i].key != key) i = (i + 1) & mask;
    return i;
}

static inline int32_t end_get(const page_pool *p, int32_t key)
{
    return p->ends[end_find(p, key)].ext;
}

/* key -> e, inserted or overwritten. */
static void end_set(page_pool *p, int32_t key, int32_t e)
{
    uint32_t mask = (uint32_t)p->ends_cap - 1, i = end_home(p, key);
    while (p->ends[i].key >= 0 && p->ends[i].key != key) i = (i + 1) & mask;
    if (p->ends[i].key < 0) p->ends_used++;
    p->ends[i].key = key;
    p->ends[i].ext = e;
}

/* A key known to be absent -> e. */
static inline void end_insert(page_pool *p, int32_t key, int32_t e)
{
    uint32_t mask = (uint32_t)p->ends_cap - 1, i = end_home(p, key);
    while (p->ends[i].key >= 0) i = (i + 1) & mask;
    p->ends_used++;
    p->ends[i].key = key;
    p->ends[i].ext = e;
}

/* Empty slot i, shifting back the entries after it that may move. */
static void end_del_at(page_pool *p, uint32_t i)
{
    uint32_t mask = (uint32_t)p->ends_cap - 1;
    for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (p->ends[j].key < 0) break;
        /* entry j may fill hole i unless its home lies cyclically in (i, j] */
        uint32_t h = end_home(p, p->ends[j].key);
        if (((j - h) & mask) >= ((j - i) & mask)) {
            p->ends[i] = p->ends[j];
            i = j;
        }
    }
    p->ends[i].key = -1;
    p->ends_used--;
}

static void end_del(page_pool *p, int32_t key)
{
    end_del_at(p, end_find(p, key));
}

/* A table of cap slots (a power of two >= 2) holding the entries of the old
 * one; RKV_ENOMEM leaves the old one. */
static rkv_status ends_resize(page_pool *p, int32_t cap)
{
    struct page_end *t = malloc(sizeof *t * (size_t)cap);
    if (!t) return RKV_ENOMEM;
    for (int32_t i = 0; i < cap; i++) t[i].key = -1;
    struct page_end *old = p->ends;
    int32_t old_cap = p->ends_cap;
    p->ends = t;
    p->ends_cap = cap;
    p->ends_shift = 32 - __builtin_ctz((uint32_t)cap);
    p->ends_used = 0;
    for (int32_t i = 0; i < old_cap; i++)
        if (old[i].key >= 0) end_set(p, old[i].key, old[i].ext);
    free(old);
    return RKV_OK;
}

/* Room for `more` further extents: records, and ends-map slots with one left
 * empty. Grows early (records at 3/4 full, so that a failed growth is
 * retried on a later call while there is still room; the map at 1/4, as at
 * 1/2 the longer probes and their mispredicted exits made a free of an
 * in-cache pool take about 1.3x as long). The map grows to an eighth full,
 * not a quarter: while free extents multiply (eviction from a full pool)
 * that halves the rehashing, 0.97x the time per evicted leaf at 8k leaves,
 * and under churn the map is a few lines either way (bench/results/
 * evict-free). RKV_ENOMEM only when there is no room. */
static rkv_status index_reserve(page_pool *p, int64_t more)
{
    int64_t recs = (int64_t)p->num_extents + more, keys = 2 * recs;
    /* records in use are num_extents; new ones come from the spare chain,
     * then the tail, so ext_len stays <= max(ext_len, recs) <= ext_cap */
    if (recs * 4 > (int64_t)p->ext_cap * 3) {
        int32_t cap = p->ext_cap;
        void *e = p->ext;
        if (rkv_grow32(&e, &cap, recs * 4 / 3 + 1, sizeof *p->ext) == RKV_OK) {
            p->ext = e;
            p->ext_cap = cap;
        } else if (recs > p->ext_cap) {
            return RKV_ENOMEM;
        }
    }
    if (keys * 4 > p->ends_cap) {
        int32_t cap = p->ends_cap;
        while ((int64_t)cap < keys * 8 && cap <= INT32_MAX / 4) cap *= 2;
        if (ends_resize(p, cap) != RKV_OK && keys >= p->ends_cap) return RKV_ENOMEM;
    }
    return RKV_OK;
}

/* Add extent [f, f + c) (its pages FREE, no free neighbour), room reserved. */
static void ext_put(page_pool *p, int32_t f, int32_t c)
{
    int32_t e = ext_new(p);
    p->ext[e].first = f;
    p->ext[e].count = c;
    end_set(p, f, e);
    if (c > 1) end_set(p, f + c - 1, e);
    list_push(p, e);
}

/* Make the pages [g, g + c) (already FREE in the bits) one extent with the
 * free extents next to them. The list order is that of taking both
 * neighbours out and putting the merged extent in as a fresh one; the map
 * changes only the ends that change:
 *   1) left neighbour [f, g): its record becomes the merged one, and keeps
 *      its first page's key; g - 1 stops being an end (unless it is f);
 *   2) right neighbour [r, l]: r stops being an end (unless it is l); l now
 *      names the merged record (the right one's, if there is no left one);
 *   3) neither: a new record, keyed under g and g + c - 1. */
static void ext_free(page_pool *p, int32_t g, int32_t c)
{
    int32_t e = -1, f = g, last = g + c - 1;
    /* raw states: a PENDING neighbour was freed after this run, so when
     * this run was freed it was not free (see the fold) */
    if (g > 0 && st_get(p, g - 1) == PAGE_FREE) { /* 1 */
        uint32_t i = end_find(p, g - 1);
        e = p->ends[i].ext;
        list_unlink(p, e);
        f = p->ext[e].first;
        if (f != g - 1) end_del_at(p, i);
    }
    int32_t r = g + c;
    if (r < p->num_pages && st_get(p, r) == PAGE_FREE) { /* 2 */
        uint32_t i = end_find(p, r);
        int32_t x = p->ends[i].ext;
        list_unlink(p, x);
        last = r + p->ext[x].count - 1;
        if (last != r) end_del_at(p, i);
        if (e < 0) {
            e = x;
            end_insert(p, g, e);
        } else {
            ext_drop(p, x);
            end_set(p, last, e);
        }
    } else if (e >= 0) {
        end_insert(p, last, e);
    } else { /* 3 */
        e = ext_new(p);
        end_insert(p, g, e);
        if (c > 1) end_insert(p, last, e);
    }
    p->ext[e].first = f;
    p->ext[e].count = last - f + 1;
    list_push(p, e);
}

/* Hand out the first n pages of extent e (n <= its length) as a run in state
 * to, listed in out (when not NULL); returns its first page. */
static int32_t ext_carve(page_pool *p, int32_t e, int32_t n, unsigned to, int32_t *out)
{
    struct page_ext *x = &p->ext[e];
    int32_t f = x->first, c = x->count;
    list_unlink(p, e);
    end_del(p, f);
    if (c > n) {
        x->first = f + n;
        x->count = c - n;
        if (c - n > 1) end_insert(p, f + n, e); /* else f + n is its last page's key */
        list_push(p, e);
    } else {
        if (c > 1) end_del(p, f + c - 1);
        ext_drop(p, e);
    }
    st_fill(p, f, n, to);
    if (out)
        for (int32_t i = 0; i < n; i++) out[i] = f + i;
    return f;
}

/* An extent of at least n pages, or -1: within n's class the first of a few
 * that fits (exact classes: any), else the head of the next non-empty class
 * (all of whose extents are longer than n). */
enum { FIT_SCAN = 8 };
static int32_t ext_fit(const page_pool *p, int32_t n)
{
    int32_t k = class_of(n);
    int scanned = 0;
    for (int32_t e = p->head[k]; e >= 0 && scanned < FIT_SCAN; e = p->ext[e].next, scanned++)
        if (p->ext[e].count >= n) return e;
    int32_t up = k + 1 < PAGE_CLASSES ? class_next(p, k + 1) : -1;
    return up >= 0 ? p->head[up] : -1;
}

/* The longest of the first few extents of the highest class (the pool is not
 * empty). */
static int32_t ext_largest(const page_pool *p)
{
    int32_t best = p->head[class_last(p)];
    int scanned = 0;
    for (int32_t e = best; e >= 0 && scanned < FIT_SCAN; e = p->ext[e].next, scanned++)
        if (p->ext[e].count > p->ext[best].count) best = e;
    return best;
}

/* Forget the index and rebuild it from the state bits (extents listed in
 * ascending order, so the last is each list's head). RKV_ENOMEM leaves it
 * stale. */
/* The first free page at or after i (num_pages: none) and, in *end, the end
 * of the maximal free run it starts: how the index rebuild and the check
 * walk the free runs from the state words alone. */
static int32_t next_free_run(const page_pool *p, int32_t i, int32_t *end)
{
    while (i < p->num_pages && st_get(p, i) != PAGE_FREE) i++;
    int32_t j = i;
    while (j < p->num_pages && st_get(p, j) == PAGE_FREE) j++;
    *end = j;
    return i;
}

static rkv_status index_rebuild(page_pool *p)
{
    int32_t n = 0;
    for (int32_t i = 0; i < p->num_pages;) {
        if (st_get(p, i) != PAGE_FREE) {
            i++;
            continue;
        }
        n++;
        while (i < p->num_pages && st_get(p, i) == PAGE_FREE) i++;
    }
    for (int32_t k = 0; k < PAGE_CLASSES; k++) p->head[k] = -1;
    memset(p->nonempty, 0, sizeof p->nonempty);
    for (int32_t i = 0; i < p->ends_cap; i++) p->ends[i].key = -1;
    p->ends_used = 0;
    p->ext_len = 0;
    p->ext_spare = -1;
    p->num_extents = 0;
    if (index_reserve(p, n) != RKV_OK) return RKV_ENOMEM;
    for (int32_t j, i = next_free_run(p, 0, &j); i < p->num_pages; i = next_free_run(p, j, &j)) {
        ext_put(p, i, j - i);
    }
    p->stale = 0;
    return RKV_OK;
}

/* Give back what a burst of extents left: when the records in use fall to an
 * eighth of the table (and the table is past its first size), move them to
 * a table of twice their number, numbered in list order (so the lists keep
 * their order: records are renamed, never reordered), with an ends map to
 * match. A failed allocation keeps the old tables: nothing depends on it. */
enum { INIT_RECORDS = 16, INIT_SLOTS = 64 };
static void index_shrink(page_pool *p)
{
    if (p->stale || p->ext_cap <= 4 * INIT_RECORDS || (int64_t)p->num_extents * 8 >= p->ext_cap)
        return;
    int32_t cap = 2 * p->num_extents > INIT_RECORDS ? 2 * p->num_extents : INIT_RECORDS;
    int32_t slots = INIT_SLOTS;
    while (slots < 16 * p->num_extents) slots *= 2; /* two keys each, an eighth full */
    struct page_ext *t = malloc(sizeof *t * (size_t)cap);
    struct page_end *m = malloc(sizeof *m * (size_t)slots);
    if (!t || !m) {
        free(t);
        free(m);
        return;
    }
    int32_t j = 0;
    for (int32_t k = 0; k < PAGE_CLASSES; k++) {
        if (p->head[k] < 0) continue;
        int32_t e = p->head[k];
        p->head[k] = j;
        for (; e >= 0; e = p->ext[e].next, j++) {
            t[j] = p->ext[e];
            t[j].prev = t[j].prev >= 0 ? j - 1 : -1;
            t[j].next = p->ext[e].next >= 0 ? j + 1 : -1;
        }
    }
    free(p->ext);
    p->ext = t;
    p->ext_cap = cap;
    p->ext_len = j;
    p->ext_spare = -1;
    free(p->ends);
    p->ends = m;
    p->ends_cap = slots;
    p->ends_shift = 32 - __builtin_ctz((uint32_t)slots);
    p->ends_used = 0;
    for (int32_t i = 0; i < slots; i++) m[i].key = -1;
    for (int32_t e = 0; e < j; e++) {
        end_set(p, t[e].first, e);
        if (t[e].count > 1) end_set(p, t[e].first + t[e].count - 1, e);
    }
}

/* The same for the free log (used runs of it), after an allocation ended it. */
static void log_shrink(page_pool *p, int32_t used)
{
    if (p->log_kept || p->freed_cap <= 1024 || (int64_t)used * 8 >= p->freed_cap) return;
    int32_t cap = p->freed_cap / 2;
    page_run *f = realloc(p->freed, sizeof *f * (size_t)cap);
    if (!f) return;
    p->freed = f;
    p->freed_cap = cap;
}

/* ---- the pool ----------------------------------------------------------- */

uint64_t page_pool_init_bytes(int64_t num_pages)
{
    return (uint64_t)((num_pages + 31) / 32) * 8 + INIT_RECORDS * sizeof(struct page_ext) +
           INIT_SLOTS * sizeof(struct page_end);
}

uint64_t page_pool_host_bytes(const page_pool *p)
{
    return (((uint64_t)p->num_pages + 31) / 32) * 8 + (uint64_t)p->ext_cap * sizeof *p->ext +
           (uint64_t)p->ends_cap * sizeof *p->ends + (uint64_t)p->freed_cap * sizeof *p->freed +
           (uint64_t)p->pend_cap * sizeof *p->pend;
}

rkv_status page_pool_init(page_pool *p, int32_t num_pages, int32_t page_size)
{
    memset(p, 0, sizeof *p);
    if (num_pages < 0 || page_size < 1) return RKV_EINVAL;
    p->bits = calloc(((size_t)num_pages + 31) / 32 + 1, sizeof *p->bits);
    p->ext = malloc(sizeof *p->ext * INIT_RECORDS);
    if (!p->bits || !p->ext || ends_resize(p, INIT_SLOTS) != RKV_OK) {
        page_pool_destroy(p);
        return RKV_ENOMEM;
    }
    p->ext_cap = INIT_RECORDS;
    p->ext_spare = -1;
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
    free(p->bits);
    free(p->ext);
    free(p->ends);
    free(p->freed);
    free(p->pend);
    memset(p, 0, sizeof *p);
}

static void pend_fold(page_pool *p);

/* page_pool_alloc() into out (a page list) or runs (NULL: out), the pages
 * in state to. */
static rkv_status alloc_into(page_pool *p, int32_t n, unsigned to, int32_t *out, page_run *runs,
                             int32_t *nruns)
{
    if (runs) *nruns = 0;
    if (n < 0 || (to != PAGE_INFLIGHT && to != PAGE_CACHED)) return RKV_EINVAL;
    if (n > p->num_free) return RKV_ENOSPC;
    pend_fold(p);
    if (p->stale && index_rebuild(p) != RKV_OK) return RKV_ENOMEM;
    /* 1) one extent holds the rest: one run, done; 2) otherwise the largest
     * extent whole, and again. Ends: the free pages are >= n. A run never
     * continues the one before: an extent taken whole ends before a page
     * that is not free. */
    for (int32_t got = 0; got < n;) {
        int32_t e = ext_fit(p, n - got);
        int32_t take = n - got;
        if (e < 0) {
            e = ext_largest(p);
            take = p->ext[e].count;
        }
        int32_t f = ext_carve(p, e, take, to, runs ? NULL : out + got);
        if (runs) runs[(*nruns)++] = (page_run){f, take};
        got += take;
    }
    p->num_free -= n;
    if (to == PAGE_CACHED) p->num_cached += n;
    else p->num_inflight += n;
    index_shrink(p);
    /* marks taken before this allocation are spent (see freed_since) */
    log_shrink(p, p->freed_runs);
    p->freed_runs = 0;
    p->freed_pages = 0;
    p->log_join = 0;
    p->logging = 0;
    p->log_lost = 0;
    return RKV_OK;
}

rkv_status page_pool_alloc(page_pool *p, int32_t n, int32_t *out)
{
    return alloc_into(p, n, PAGE_INFLIGHT, out, NULL, NULL);
}

rkv_status page_pool_alloc_runs(page_pool *p, int32_t n, int to, page_run *runs,
                                int32_t *nruns)
{
    return alloc_into(p, n, (unsigned)to, NULL, runs, nruns);
}

rkv_status page_pool_freed_since(const page_pool *p, uint64_t mark, const page_run **runs,
                                 int32_t *nruns)
{
    uint64_t base = p->freed_total - (uint64_t)p->freed_pages;
    *runs = NULL;
    *nruns = 0;
    if (mark < base || mark > p->freed_total) return RKV_EINVAL;
    if (p->log_lost) return RKV_ENOMEM;
    /* Back from the end over the runs since the mark (which the caller walks
     * anyway): a mark stops the next free from extending the last run, so it
     * lies between two runs. */
    int64_t left = (int64_t)(p->freed_total - mark);
    int32_t k = p->freed_runs;
    while (left > 0 && k > 0) left -= p->freed[--k].count;
    if (left != 0) return RKV_ECORRUPT; /* page_pool_check names it */
    *runs = p->freed + k;
    *nruns = p->freed_runs - k;
    return RKV_OK;
}

/* The length of the stretch of consecutive ids at pages[i] (at least 1). */
static inline int32_t stretch_at(const int32_t *pages, int32_t n, int32_t i)
{
    int32_t j = i + 1;
    while (j < n && (int64_t)pages[j] == (int64_t)pages[j - 1] + 1) j++; /* no overflow at INT32_MAX */
    return j - i;
}

/* Whether every page of [a, a + len) (in range) has a state in allowed_mask
 * (INFLIGHT, CACHED or both), a word at a time. */
static int stretch_allowed(const page_pool *p, int32_t a, int32_t len, unsigned allowed_mask)
{
    int32_t in, ca, other = st_count(p, a, len, &in, &ca);
    if (other) return 0;
    if (!(allowed_mask & (1u << PAGE_INFLIGHT)) && in) return 0;
    if (!(allowed_mask & (1u << PAGE_CACHED)) && ca) return 0;
    return 1;
}

rkv_status page_pool_log_reserve(page_pool *p)
{
    /* frees between two allocations are at most num_pages pages (a page
     * leaves FREE only through an allocation), so at most num_pages runs:
     * one a page, where no free continues the one before (pages 0, 2, 4, ..) */
    int32_t need = p->num_pages > 0 ? p->num_pages : 1;
    if (p->freed_cap < need) {
        page_run *f = realloc(p->freed, sizeof *f * (size_t)need);
        if (!f) return RKV_ENOMEM;
        p->freed = f;
        p->freed_cap = need;
    }
    p->log_kept = 1;
    return RKV_OK;
}

/* Stretches check_batch() hands back, so a caller that changes the pages
 * next does not scan the list for them again (a request's pages are a few
 * runs; a longer list is scanned twice). */
enum { BATCH_STRETCHES = 8 };
typedef struct {
    int32_t first[BATCH_STRETCHES], len[BATCH_STRETCHES];
    int32_t n; /* -1: more than BATCH_STRETCHES, not kept */
} stretch_list;

/* Whether two of the n stretches share a page. */
static int stretches_overlap(const stretch_list *sl)
{
    for (int32_t i = 0; i < sl->n; i++)
        for (int32_t j = i + 1; j < sl->n; j++)
            if ((int64_t)sl->first[i] < (int64_t)sl->first[j] + sl->len[j] &&
                (int64_t)sl->first[j] < (int64_t)sl->first[i] + sl->len[i])
                return 1;
    return 0;
}

/* Validate a whole batch before touching anything, so a bad id changes
 * nothing. The list is read as stretches of consecutive ids (a request's
 * pages come in runs), each checked a word at a time. Duplicates would
 * double-count: stretches in ascending order have none; a list of a few
 * stretches in another order (an allocation that took several extents hands
 * them out largest first) has one only where two stretches overlap; any
 * other list is marked state by state (a page of the allowed state s becomes
 * 3, the unused value, and a second visit finds 3), then set back. sl (may
 * be NULL) gets the stretches. */
static rkv_status check_batch(page_pool *p, const int32_t *pages, int32_t n,
                              unsigned allowed_mask, stretch_list *sl)
{
    if (n < 0) return RKV_EINVAL;
    stretch_list own;
    if (!sl) sl = &own;
    int ascending = 1;
    sl->n = 0;
    for (int32_t i = 0; i < n;) {
        int32_t len = stretch_at(pages, n, i), a = pages[i];
        if (a < 0 || a >= p->num_pages || len > p->num_pages - a ||
            !stretch_allowed(p, a, len, allowed_mask))
            return RKV_EINVAL;
        if (i > 0 && a <= pages[i - 1]) ascending = 0;
        if (sl->n >= 0) {
            if (sl->n < BATCH_STRETCHES) {
                sl->first[sl->n] = a;
                sl->len[sl->n++] = len;
            } else {
                sl->n = -1;
            }
        }
        i += len;
    }
    if (ascending) return RKV_OK;
    if (sl->n >= 0) return stretches_overlap(sl) ? RKV_EINVAL : RKV_OK;
    rkv_status st = RKV_OK;
    for (unsigned s = PAGE_INFLIGHT; s <= PAGE_CACHED; s++) {
        if (!((1u << s) & allowed_mask)) continue;
        for (int32_t i = 0; i < n; i++) {
            unsigned v = st_get(p, pages[i]);
            if (v == 3) st = RKV_EINVAL;
            else if (v == s) st_set(p, pages[i], 3);
        }
        for (int32_t i = 0; i < n; i++)
            if (st_get(p, pages[i]) == 3) st_set(p, pages[i], s);
    }
    return st;
}

/* Room in the free log for `more` runs (a mark is live). */
static void log_reserve(page_pool *p, int64_t more)
{
    if (p->log_lost) return;
    int64_t need = (int64_t)p->freed_runs + more;
    if (need <= p->freed_cap) return;
    void *f = p->freed;
    int32_t cap = p->freed_cap;
    if (rkv_grow32(&f, &cap, need, sizeof *p->freed) != RKV_OK) {
        p->log_lost = 1;
        return;
    }
    p->freed = f;
    p->freed_cap = cap;
}

/* ---- deferred merging ----------------------------------------------------
 *
 * A free only marks its run PENDING and appends it to p->pend; the index
 * learns of it in pend_fold(), which every reader of the index calls first
 * (allocation, page_pool_fold). The fold replays the runs in the order they
 * were freed, each turning FREE and merging only with FREE neighbours, i.e.
 * with what was free when it was freed: pages freed after it are still
 * PENDING, and nothing can leave FREE in between (only an allocation does,
 * and it folds first). So the index goes through the very operations eager
 * merging did, in the same order, and its lists (LIFO) hand out the same
 * pages. */

/* Run [first, first + count) into the free log (a mark is live, room made
 * for one run): it extends the last run when it continues it and no mark
 * was taken since that run was logged (so every mark stays on a boundary). */
static inline void log_run(page_pool *p, int32_t first, int32_t count)
{
    page_run *last = p->log_join ? p->freed + p->freed_runs - 1 : NULL;
    if (last && last->first + last->count == first) {
        last->count += count;
    } else {
        p->freed[p->freed_runs++] = (page_run){first, count};
        p->log_join = 1;
    }
    p->freed_pages += count;
}

/* Counters and the free log for pages [first, first + count), in of them
 * INFLIGHT and the rest CACHED, which have just left those states. */
static inline void free_count(page_pool *p, int32_t first, int32_t count, int32_t in)
{
    p->num_inflight -= in;
    p->num_cached -= count - in;
    if (p->logging) {
        if (!p->log_lost) log_run(p, first, count);
        else p->freed_pages += count; /* the log's start stays put: older marks read ENOMEM */
    }
    p->num_free += count;
    p->freed_total += (uint64_t)count;
}

/* Room in the index for one more extent, as eager merging asked before each
 * run (records at 3/4, the map at an eighth: index_reserve); a failed growth
 * with no room left makes the index stale. */
static inline void index_room(page_pool *p, int32_t runs)
{
    int64_t recs = (int64_t)p->num_extents + runs;
    int room = recs * 4 <= (int64_t)p->ext_cap * 3 && recs * 8 <= p->ends_cap;
    if (!p->stale && !room && index_reserve(p, runs) != RKV_OK) p->stale = 1;
}

/* Run [first, first + count), its pages already FREE in the bits, into the
 * index (unless the index is stale: the next allocation rebuilds it). */
static inline void merge_run(page_pool *p, int32_t first, int32_t count)
{
    index_room(p, 1);
    if (!p->stale) ext_free(p, first, count);
}

/* The pending array gives back what a burst of frees grew: halved at each
 * fold (every allocation folds) that used under an eighth of it. */
enum { PEND_KEEP = 256 };
static void pend_shrink(page_pool *p, int32_t used)
{
    if ((int64_t)used * 8 >= p->pend_cap) return;
    int32_t cap = p->pend_cap / 2;
    page_run *r = realloc(p->pend, sizeof *r * (size_t)cap);
    if (!r) return;
    p->pend = r;
    p->pend_cap = cap;
}

static void pend_fold(page_pool *p)
{
    int32_t n = p->num_pend;
    const page_run *r = p->pend;
    for (int32_t i = 0; i < n; i++) {
        int32_t f = r[i].first, c = r[i].count;
        if (c <= 32 - (f & 31)) /* one state word, as a tree node's run often is */
            p->bits[f >> 5] &= ~st_mask_in_word(f, c);
        else
            st_fill(p, f, c, PAGE_FREE);
        merge_run(p, f, c);
    }
    p->num_pend = 0;
    if (p->pend_cap > PEND_KEEP) pend_shrink(p, n);
}

void page_pool_fold(page_pool *p) { pend_fold(p); }

/* Room in the pending array for `runs` more runs; 0 if it cannot grow. */
static int pend_room(page_pool *p, int32_t runs)
{
    void *r = p->pend;
    int32_t cap = p->pend_cap;
    if (rkv_grow32(&r, &cap, (int64_t)p->num_pend + runs, sizeof *p->pend) != RKV_OK) return 0;
    p->pend = r;
    p->pend_cap = cap;
    return 1;
}

/* How a free settles the index for `runs` runs about to be freed: 1 when
 * they go PENDING (room made in the pending array), 0 when they go straight
 * to FREE: a stale index (rebuilt from the bits anyway), or a pending array
 * that cannot grow, after folding what it holds (the runs are then merged
 * one by one, as before deferral: no page is lost). */
static inline int free_defer(page_pool *p, int32_t runs)
{
    if (p->logging) log_reserve(p, runs);
    if (p->stale) return 0;
    if ((int64_t)p->num_pend + runs <= p->pend_cap || pend_room(p, runs)) return 1;
    pend_fold(p);
    return 0;
}

/* Free [first, first + count), in of its pages INFLIGHT, the state bits not
 * yet changed, as free_defer() said. */
static inline void free_counted_run(page_pool *p, int32_t first, int32_t count, int32_t in,
                                    int defer)
{
    free_count(p, first, count, in);
    if (defer) {
        st_fill(p, first, count, PAGE_PENDING);
        p->pend[p->num_pend++] = (page_run){first, count};
    } else {
        st_fill(p, first, count, PAGE_FREE);
        merge_run(p, first, count);
    }
}

rkv_status page_pool_free(page_pool *p, const int32_t *pages, int32_t n)
{
    rkv_status st = check_batch(p, pages, n, (1u << PAGE_INFLIGHT) | (1u << PAGE_CACHED), NULL);
    if (st != RKV_OK) return st;
    int32_t runs = 0;
    for (int32_t i = 0; i < n; i += stretch_at(pages, n, i)) runs++;
    int defer = free_defer(p, runs);
    /* stretches of consecutive ids go back as runs, one merge each */
    for (int32_t i = 0; i < n;) {
        int32_t len = stretch_at(pages, n, i), in, ca;
        st_count(p, pages[i], len, &in, &ca);
        free_counted_run(p, pages[i], len, in, defer);
        i += len;
    }
    return RKV_OK;
}

/* page_pool_free_run() of a run with its range checked, every case. */
static __attribute__((noinline)) rkv_status free_run_any(page_pool *p, int32_t first,
                                                         int32_t count)
{
    int32_t w = first >> 5;
    if (count > 0 && (first + count - 1) >> 5 == w) {
        /* A run within one state word (a tree node's pages, often): checked,
         * counted and marked in one read and one write of the word instead
         * of a counting pass and a filling pass. Every page INFLIGHT (01) or
         * CACHED (10) is exactly one of its two bits set. */
        uint64_t m = st_mask_in_word(first, count), x = p->bits[w];
        uint64_t ml = m & LO, lo = x & ml, hi = (x >> 1) & ml;
        if ((lo ^ hi) != ml) return RKV_EINVAL;
        int32_t in = lo == ml ? count : hi == ml ? 0 : __builtin_popcountll(lo);
        int defer = free_defer(p, 1);
        free_count(p, first, count, in);
        if (defer) {
            p->bits[w] = x | m; /* PENDING is both bits */
            p->pend[p->num_pend++] = (page_run){first, count};
        } else {
            p->bits[w] = x & ~m;
            merge_run(p, first, count);
        }
        return RKV_OK;
    }
    /* no pages, nothing to check (st_count() of an empty run inside a word
     * would count the pages of an empty mask: __builtin_clzll(0)) */
    if (count == 0) return RKV_OK;
    int32_t in, ca;
    if (st_count(p, first, count, &in, &ca) != 0) return RKV_EINVAL;
    free_counted_run(p, first, count, in, free_defer(p, 1));
    return RKV_OK;
}

rkv_status page_pool_free_run(page_pool *p, int32_t first, int32_t count)
{
    if (count < 0 || first < 0 || count > p->num_pages - first) return RKV_EINVAL;
    int32_t w = first >> 5;
    /* The eviction's case, kept short (no calls, so no registers to save):
     * one state word, every page in one state, room pending and, with a mark
     * live, room for one run in a log that was not lost. Anything else is
     * free_run_any()'s. */
    const int log = p->logging;
    if (count > 0 && (first + count - 1) >> 5 == w && !p->stale && p->num_pend < p->pend_cap &&
        (!log || (p->freed_runs < p->freed_cap && !p->log_lost))) {
        uint64_t m = st_mask_in_word(first, count), x = p->bits[w];
        uint64_t ml = m & LO, lo = x & ml, hi = (x >> 1) & ml;
        int32_t in;
        if (lo == ml && !hi) in = count;
        else if (hi == ml && !lo) in = 0;
        else return free_run_any(p, first, count);
        p->num_inflight -= in;
        p->num_cached -= count - in;
        p->num_free += count;
        p->freed_total += (uint64_t)count;
        if (log) log_run(p, first, count);
        p->bits[w] = x | m; /* PENDING is both bits */
        p->pend[p->num_pend++] = (page_run){first, count};
        return RKV_OK;
    }
    return free_run_any(p, first, count);
}

static void count_move(page_pool *p, unsigned from, int delta)
{
    if (from == PAGE_INFLIGHT) p->num_inflight += delta;
    else if (from == PAGE_CACHED) p->num_cached += delta;
    else p->num_free += delta;
}

static rkv_status move_pages(page_pool *p, const int32_t *pages, int32_t n, unsigned from,
                             unsigned to)
{
    stretch_list sl;
    rkv_status st = check_batch(p, pages, n, 1u << from, &sl);
    if (st != RKV_OK) return st;
    if (sl.n >= 0) {
        for (int32_t k = 0; k < sl.n; k++) st_fill(p, sl.first[k], sl.len[k], to);
    } else {
        for (int32_t i = 0; i < n;) {
            int32_t len = stretch_at(pages, n, i);
            st_fill(p, pages[i], len, to);
            i += len;
        }
    }
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

/* The record the ends map holds for key, or -1 (a probe that meets an empty
 * slot or goes round the whole table). */
static int32_t end_lookup(const page_pool *p, int32_t key)
{
    uint32_t mask = (uint32_t)p->ends_cap - 1, i = end_home(p, key);
    for (int32_t k = 0; k < p->ends_cap && p->ends[i].key >= 0; k++, i = (i + 1) & mask)
        if (p->ends[i].key == key) return p->ends[i].ext;
    return -1;
}

rkv_status page_pool_check(const page_pool *p, char *err, size_t errlen)
{
    int32_t cnt[4] = {0, 0, 0, 0};
    for (int32_t i = 0; i < p->num_pages; i++) cnt[st_get(p, i)]++;
    if (cnt[PAGE_FREE] + cnt[PAGE_PENDING] != p->num_free || cnt[PAGE_INFLIGHT] != p->num_inflight ||
        cnt[PAGE_CACHED] != p->num_cached)
        CHECK_FAIL("page counts disagree: states free=%d (%d of them pending) inflight=%d "
                   "cached=%d, counters free=%d inflight=%d cached=%d",
                   cnt[0] + cnt[3], cnt[3], cnt[1], cnt[2], p->num_free, p->num_inflight,
                   p->num_cached);
    /* the pending runs are exactly the PENDING pages (a page goes PENDING
     * only from INFLIGHT or CACHED, so two runs never share one) */
    if (p->num_pend < 0 || p->num_pend > p->pend_cap || (p->stale && p->num_pend))
        CHECK_FAIL("%d pending runs (room for %d, index %s)", p->num_pend, p->pend_cap,
                   p->stale ? "stale" : "kept");
    int64_t pending = 0;
    for (int32_t k = 0; k < p->num_pend; k++) {
        page_run r = p->pend[k];
        if (r.first < 0 || r.count < 1 || r.count > p->num_pages - r.first)
            CHECK_FAIL("pending run %d [%d, +%d) out of the pool's %d pages", k, r.first, r.count,
                       p->num_pages);
        for (int32_t i = r.first; i < r.first + r.count; i++)
            if (st_get(p, i) != PAGE_PENDING)
                CHECK_FAIL("pending run %d [%d, +%d): page %d has state %u", k, r.first, r.count,
                           i, st_get(p, i));
        pending += r.count;
    }
    if (pending != cnt[PAGE_PENDING])
        CHECK_FAIL("%d pages are pending, the pending runs hold %lld", cnt[PAGE_PENDING],
                   (long long)pending);
    if (p->freed_runs < 0 || p->freed_runs > p->freed_cap || p->freed_pages > p->num_pages ||
        (uint64_t)p->freed_pages > p->freed_total || (p->log_join && !p->freed_runs))
        CHECK_FAIL("free log holds %d pages in %d runs (room for %d runs)", p->freed_pages,
                   p->freed_runs, p->freed_cap);
    /* every logged page was freed since the last allocation, so is still
     * free, and the runs add up to the log's pages */
    int64_t logged = 0;
    for (int32_t k = 0; k < p->freed_runs; k++) {
        page_run r = p->freed[k];
        if (r.first < 0 || r.count < 1 || r.count > p->num_pages - r.first)
            CHECK_FAIL("free log run %d [%d, +%d) out of the pool's %d pages", k, r.first,
                       r.count, p->num_pages);
        for (int32_t i = r.first; i < r.first + r.count; i++)
            if (page_pool_state(p, i) != PAGE_FREE)
                CHECK_FAIL("free log run %d [%d, +%d): page %d is not free", k, r.first,
                           r.count, i);
        logged += r.count;
    }
    if (p->log_lost ? logged > p->freed_pages : logged != p->freed_pages)
        CHECK_FAIL("free log runs hold %lld pages, the log counts %d%s", (long long)logged,
                   p->freed_pages, p->log_lost ? " (some lost)" : "");
    if (p->stale) return RKV_OK; /* the next allocation rebuilds the index */
    /* every maximal run of FREE (folded) pages is one extent, found under
     * both ends */
    int32_t extents = 0, keys = 0;
    for (int32_t j, i = next_free_run(p, 0, &j); i < p->num_pages; i = next_free_run(p, j, &j)) {
        int32_t e = end_lookup(p, i);
        if (e < 0 || e >= p->ext_len || p->ext[e].first != i || p->ext[e].count != j - i)
            CHECK_FAIL("free pages [%d, %d) but the ends map gives record %d for page %d", i, j,
                       e, i);
        if (end_lookup(p, j - 1) != e)
            CHECK_FAIL("extent [%d, %d): its last page maps to record %d, not %d", i, j,
                       end_lookup(p, j - 1), e);
        extents++;
        keys += j - i > 1 ? 2 : 1;
    }
    if (extents != p->num_extents)
        CHECK_FAIL("%d free extents, %d counted", extents, p->num_extents);
    if (keys != p->ends_used) CHECK_FAIL("ends map holds %d keys, extents have %d", p->ends_used, keys);
    if (p->ends_used >= p->ends_cap) CHECK_FAIL("ends map full (%d slots)", p->ends_cap);
    int32_t spare = 0;
    for (int32_t e = p->ext_spare; e >= 0; e = p->ext[e].next)
        if (e >= p->ext_len || p->ext[e].count != 0 || ++spare > p->ext_len)
            CHECK_FAIL("the spare record chain is broken at record %d", e);
    if (spare + extents != p->ext_len)
        CHECK_FAIL("%d records: %d extents and %d spare", p->ext_len, extents, spare);
    int32_t listed = 0;
    for (int32_t k = 0; k < PAGE_CLASSES; k++) {
        int on = (p->nonempty[k >> 6] >> (k & 63)) & 1;
        if (on != (p->head[k] >= 0)) CHECK_FAIL("class %d bitmap bit %d, list head %d", k, on, p->head[k]);
        for (int32_t e = p->head[k], pv = -1; e >= 0; pv = e, e = p->ext[e].next) {
            /* a record in use (the ends map agrees), of its class: with the
             * counts equal, every extent is listed exactly once */
            if (e >= p->ext_len || p->ext[e].count < 1 || end_lookup(p, p->ext[e].first) != e ||
                class_of(p->ext[e].count) != k || p->ext[e].prev != pv)
                CHECK_FAIL("class %d lists a bad extent record %d", k, e);
            if (++listed > extents) CHECK_FAIL("class lists hold more than %d extents", extents);
        }
    }
    if (listed != extents) CHECK_FAIL("class lists hold %d of %d extents", listed, extents);
    return RKV_OK;
}
