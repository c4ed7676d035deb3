/* bench_replay.h - one request through a cache, as the simulator and the engine
 * drive it, with each operation timed. Shared by cache_bench and overhead_bench
 * so both measure the same sequence of calls.
 *
 *   match(all tokens but the last) + lock -> evict the shortfall and alloc the
 *   new pages (the partial last page included, as the simulator counts them)
 *   -> insert + free what the cache did not take -> unlock
 *
 * through cache_client.h; the three timings are its match, reserve (eviction
 * and allocation) and commit (insert and frees).
 */
#ifndef RKV_BENCH_REPLAY_H
#define RKV_BENCH_REPLAY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "cache_client.h"
#include "rkv_core.h"

typedef struct replay_cost {
    double match_ns, insert_ns, evict_ns;
    int64_t match_tokens, insert_tokens, evict_tokens, matched;
} replay_cost;

static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A (requests, len) trace of token ids below 32000: request r's first `shared`
 * tokens come from its group's stream (r % groups, seeded 1000003·(group+1) +
 * group_salt), the rest from one private stream seeded `seed`. Caller frees. */
static inline int32_t *bench_make_trace(int32_t requests, int32_t len, int32_t shared,
                                        int32_t groups, uint64_t seed, uint64_t group_salt)
{
    int32_t *t = malloc(sizeof *t * (size_t)requests * (size_t)len);
    if (!t) return NULL;
    uint64_t s = seed;
    for (int32_t r = 0; r < requests; r++) {
        int32_t *row = t + (size_t)r * (size_t)len;
        uint64_t gs = 1000003ull * (uint64_t)(r % groups + 1) + group_salt;
        for (int32_t j = 0; j < shared; j++) row[j] = (int32_t)(rkv_splitmix64_next(&gs) % 32000);
        for (int32_t j = shared; j < len; j++) row[j] = (int32_t)(rkv_splitmix64_next(&s) % 32000);
    }
    return t;
}

/* A fresh cache of kind over pool; NULL after printing "BENCH: why". */
static inline cache *bench_cache_open(const char *bench, const char *kind, page_pool *pool)
{
    cache_config cfg = {kind, NULL, NULL, NULL};
    cache *c = NULL;
    char err[256] = "";
    if (cache_create(&cfg, pool, &c, err, sizeof err) == RKV_OK) return c;
    fprintf(stderr, "%s: %s\n", bench, err);
    return NULL;
}

/* tokens[0..len); pages: room for len / P + 1 ids; m: a reusable match. Requests
 * that do not fit after eviction are matched and unlocked but not inserted. */
static inline rkv_status bench_replay_request(cache *c, page_pool *pool, const int32_t *t,
                                              int32_t len, cache_seq *m, int32_t *pages,
                                              replay_cost *out)
{
    const int32_t P = pool->page_size, nb = (len + P - 1) / P;
    double t0 = bench_now_ns();
    rkv_status st = cache_client_match(c, m, t, len - 1);
    out->match_ns += bench_now_ns() - t0;
    out->match_tokens += len - 1;
    out->matched += m->len;
    if (st != RKV_OK) return st;
    int32_t need = nb - m->num_pages;
    t0 = bench_now_ns();
    st = cache_client_reserve(c, need, pages + m->num_pages, &out->evict_tokens);
    out->evict_ns += bench_now_ns() - t0;
    if (st == RKV_OK) {
        if (m->num_pages) memcpy(pages, m->pages, sizeof *pages * (size_t)m->num_pages);
        t0 = bench_now_ns();
        st = cache_client_commit(c, m, t, len, pages, m->num_pages, nb, NULL);
        out->insert_ns += bench_now_ns() - t0;
        out->insert_tokens += len;
    } else if (st == RKV_ENOSPC) {
        st = RKV_OK;
    }
    rkv_status us = cache_client_release(c, m, NULL, 0);
    return st == RKV_OK ? us : st;
}

/* The requests of a (requests, len) trace through bench_replay_request, in
 * order, up to the first failure, which is printed as "BENCH: KIND, request
 * R: status". 0, or -1 after a failure. */
static inline int bench_replay_trace(const char *bench, const char *kind, cache *c,
                                     page_pool *pool, const int32_t *trace, int32_t requests,
                                     int32_t len, cache_seq *m, int32_t *pages, replay_cost *out)
{
    for (int32_t r = 0; r < requests; r++) {
        const int32_t *t = trace + (size_t)r * (size_t)len;
        rkv_status st = bench_replay_request(c, pool, t, len, m, pages, out);
        if (st != RKV_OK) {
            fprintf(stderr, "%s: %s, request %d: %s\n", bench, kind, r, rkv_status_str(st));
            return -1;
        }
    }
    return 0;
}

/* cache_check after a replay; a failure printed as "BENCH: KIND: message".
 * 0, or -1. */
static inline int bench_replay_check(const char *bench, const char *kind, const cache *c)
{
    char err[256] = "";
    if (cache_check(c, err, sizeof err) == RKV_OK) return 0;
    fprintf(stderr, "%s: %s: %s\n", bench, kind, err);
    return -1;
}

#endif
