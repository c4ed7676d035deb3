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

rkv_status page_pool_init(page_pool *p, int32_t num_pages, int32_t page_size)
{
    memset(p, 0, sizeof *p);
    if (num_pages < 0 || page_size < 1) return RKV_EINVAL;
    p->free_stack = malloc(sizeof(int32_t) * (size_t)(num_pages ? num_pages : 1));
    p->state = calloc((size_t)(num_pages ? num_pages : 1), 1);
    if (!p->free_stack || !p->state) {
        free(p->free_stack);
        free(p->state);
        memset(p, 0, sizeof *p);
        return RKV_ENOMEM;
    }
    p->num_pages = num_pages;
    p->page_size = page_size;
    /* Stack top is the lowest id, so a fresh pool hands out 0, 1, 2, ... */
    for (int32_t i = 0; i < num_pages; i++) p->free_stack[i] = num_pages - 1 - i;
    p->num_free = num_pages;
    return RKV_OK;
}

void page_pool_destroy(page_pool *p)
{
    free(p->free_stack);
    free(p->state);
    memset(p, 0, sizeof *p);
}

rkv_status page_pool_alloc(page_pool *p, int32_t n, int32_t *out)
{
    if (n < 0) return RKV_EINVAL;
    if (n > p->num_free) return RKV_ENOSPC;
    for (int32_t i = 0; i < n; i++) {
        int32_t pg = p->free_stack[--p->num_free];
        p->state[pg] = PAGE_INFLIGHT;
        out[i] = pg;
    }
    /* A run freed first page first is popped last page first: hand each such
     * stretch (ids falling by one) out ascending, as the run it was. The set
     * of pages, and the stack, are what they would be without this. */
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && out[j] == out[j - 1] - 1) j++;
        for (int32_t a = i, b = j - 1; a < b; a++, b--) {
            int32_t x = out[a];
            out[a] = out[b];
            out[b] = x;
        }
        i = j;
    }
    p->num_inflight += n;
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

rkv_status page_pool_free(page_pool *p, const int32_t *pages, int32_t n)
{
    rkv_status st = check_batch(p, pages, n, (1u << PAGE_INFLIGHT) | (1u << PAGE_CACHED));
    if (st != RKV_OK) return st;
    for (int32_t i = 0; i < n; i++) {
        int32_t pg = pages[i];
        count_move(p, p->state[pg], -1);
        p->state[pg] = PAGE_FREE;
        p->free_stack[p->num_free++] = pg;
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
    /* first page pushed first, as page_pool_free() would push the same list
     * (the stack's order is what a spill tier reads as eviction order) */
    for (int32_t i = 0; i < count; i++) {
        int32_t pg = first + i;
        count_move(p, p->state[pg], -1);
        p->state[pg] = PAGE_FREE;
        p->free_stack[p->num_free++] = pg;
    }
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

rkv_status page_pool_check(const page_pool *p, char *err, size_t errlen)
{
    int32_t cnt[3] = {0, 0, 0};
    for (int32_t i = 0; i < p->num_pages; i++) {
        if (p->state[i] > PAGE_CACHED) {
            if (err) snprintf(err, errlen, "page %d has bad state %d", i, p->state[i]);
            return RKV_ECORRUPT;
        }
        cnt[p->state[i]]++;
    }
    if (cnt[PAGE_FREE] != p->num_free || cnt[PAGE_INFLIGHT] != p->num_inflight ||
        cnt[PAGE_CACHED] != p->num_cached) {
        if (err)
            snprintf(err, errlen,
                     "page counts disagree: states free=%d inflight=%d cached=%d, "
                     "counters free=%d inflight=%d cached=%d",
                     cnt[0], cnt[1], cnt[2], p->num_free, p->num_inflight, p->num_cached);
        return RKV_ECORRUPT;
    }
    for (int32_t i = 0; i < p->num_free; i++) {
        int32_t pg = p->free_stack[i];
        if (pg < 0 || pg >= p->num_pages || p->state[pg] != PAGE_FREE) {
            if (err) snprintf(err, errlen, "free stack slot %d holds page %d not free", i, pg);
            return RKV_ECORRUPT;
        }
    }
    return RKV_OK;
}
