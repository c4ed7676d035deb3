/* radix_bench.c - micro-benchmarks of the compressed radix tree. Prints one
 * JSON object per scenario on stdout (JSON Lines); every scenario carries a
 * baseline measured in the same run and the ratio against it.
 *
 * Timing: every figure is measured --repeats times (5 unless told) and reported as
 * {"median", "min", "max"}; each sample carries the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) beside the wall clock, and ratios are taken from
 * CPU time, sample by sample, so a loaded machine (other jobs stealing the
 * core) shows as a gap between wall and CPU figures instead of a false
 * slowdown. Ratios are throughput ratios: baseline time / measured time.
 *
 * Scenarios:
 *   match_cached_100k_nopages a 100k-token prompt cached as one node, matched
 *                            in full again and again without page ids;
 *                            baseline memcmp of the same tokens
 *   match_cached_100k        the same, copying one page id per token (P = 1)
 *   match_cached_100k_runs   the same, the page ids returned as page runs
 *   match_cached_100k_runs_expanded  runs, then expanded to a flat page table
 *                            by radix_page_runs_expand()
 *   match_cached_100k_chain  the same prompt split into 100 nodes
 *   match_cached_100k_p16    one node at page size 16 (the engine's default):
 *                            the compare alone, page ids are 1/16 of the copy
 *   shared_prompt_tree       8 system prompts x 2048 tokens, each followed by
 *                            three levels of continuations (fan-out 32, 32,
 *                            then 3-7; segments of 12-28 tokens; vocabulary
 *                            128,256; seeded): one request per leaf (~2.1k
 *                            tokens), inserted in a shuffled order into an
 *                            empty tree, then matched with page ids, then
 *                            matched partially (its last segment replaced by
 *                            one never seen: the match ends at a node
 *                            boundary), then every node evicted one per call.
 *                            Per-request figures; baseline memcmp of each
 *                            request's tokens; host bytes per cached token
 *   shared_prompts_insert    requests that share 64 system prompts and earlier
 *                            conversations (~1M cached tokens, ~50k nodes),
 *                            each one match + lock + alloc + insert + unlock
 *                            through cache.h; baseline memcmp over the same
 *                            tokens
 *   shared_prompts_match     every request matched again, fully cached
 *   evict_pressure           the same requests with a pool of a quarter of the
 *                            tokens, evicting on every shortage; baseline: one
 *                            heapify of all candidates (a lower bound of what a
 *                            rebuild per eviction costs), ratio = that time /
 *                            time per evicted leaf
 *   evict_scaling            evict all leaves one by one from flat trees of 8k
 *                            and 128k leaves; growth of the cost per leaf
 *                            (O(log n) with few cache misses keeps it near 1);
 *                            _with_alloc: with one allocation after the
 *                            evictions timed in (a pool merges frees there)
 *
 *   steady_*                 steady state: a long replay with eviction
 *                            pressure, then match, match_runs, insert and
 *                            evict each timed cold and warm in its own replay;
 *                            the same tree on a pool of its own ("fresh") and
 *                            on one another tree churns ("churned"); runs per
 *                            allocation and per match, host bytes per cached
 *                            token with and without the pool's (scenario 6);
 *                            evict also with the flow's allocations timed in
 *                            (cpu_ns_per_leaf_cold_with_allocs)
 *
 * Usage: radix_bench [--scale S] [--seed N] [--repeats R] [--only SCENARIO] [--mooncake DIR]
 *   S multiplies the sizes (default 1), R in 1..32; --only runs the scenario groups whose
 *   name starts with SCENARIO; the Mooncake steady-state replay runs when a
 *   directory holding conversation_trace.jsonl is given (--mooncake, else
 *   $RKV_MOONCAKE_DIR), and is skipped with a note on stderr otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "cache.h"
#include "cli.h"
#include "radix_tree.h"
#include "rkv_config.h"
#include "rkv_core.h"

#if RKV_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

/* Bytes the allocator has handed out (size classes included), or -1 without
 * jemalloc. The tree's own count is of requested sizes; this one is what the
 * process really pays. */
static int64_t allocated_bytes(void)
{
#if RKV_HAVE_JEMALLOC
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    mallctl("epoch", &epoch, &sz, &epoch, sz);
    size_t a = 0;
    sz = sizeof a;
    if (mallctl("stats.allocated", &a, &sz, NULL, 0) == 0) return (int64_t)a;
#endif
    return -1;
}

/* repeats per figure (--repeats; 5 unless told), at most REPEATS_MAX */
enum { REPEATS_MAX = 32 };
static int repeats = 5;

/* Wall and thread CPU time side by side: a start point, or an accumulated span. */
typedef struct stopwatch {
    double wall, cpu;
} stopwatch;

static stopwatch sw_start(void)
{
    return (stopwatch){bench_clock_s(CLOCK_MONOTONIC), bench_clock_s(CLOCK_THREAD_CPUTIME_ID)};
}

static void sw_stop(stopwatch *acc, stopwatch t0)
{
    stopwatch t1 = sw_start();
    acc->wall += t1.wall - t0.wall;
    acc->cpu += t1.cpu - t0.cpu;
}

/* One figure over the repeats. */
typedef struct series {
    int n;
    double v[REPEATS_MAX];
} series;

static void series_add(series *s, double v)
{
    if (s->n < REPEATS_MAX) s->v[s->n++] = v;
}

static double series_median(const series *s)
{
    if (!s->n) return 0;
    double v[REPEATS_MAX];
    memcpy(v, s->v, sizeof(double) * (size_t)s->n);
    return bench_stats_of(v, s->n).med;
}

/* ,"key":{"median":m,"min":a,"max":b}; ,"key":null when nothing was measured */
static void put_range(const char *key, const series *s)
{
    if (!s->n) {
        printf(",\"%s\":null", key);
        return;
    }
    double lo = s->n ? s->v[0] : 0, hi = lo;
    for (int i = 1; i < s->n; i++) {
        if (s->v[i] < lo) lo = s->v[i];
        if (s->v[i] > hi) hi = s->v[i];
    }
    printf(",\"%s\":{\"median\":%.4g,\"min\":%.4g,\"max\":%.4g}", key, series_median(s), lo, hi);
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rng_state, bench_seed;
static uint64_t rnd64(void) { return mix64(rng_state++); }
static int32_t rnd_below(int32_t n) { return (int32_t)(rnd64() % (uint64_t)n); }
static int32_t rnd_token(void) { return 1000 + rnd_below(31000); }

static void die(const char *what, rkv_status st)
{
    fprintf(stderr, "radix_bench: %s: %s\n", what, rkv_status_str(st));
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "radix_bench: out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* The compiler must not drop the baseline's work. */
static volatile int64_t sink;

static double bytes_per_token(const radix_tree *t)
{
    radix_tree_sizes s;
    radix_tree_get_sizes(t, &s);
    int64_t tok = s.evictable_tokens + s.protected_tokens;
    return tok ? (double)s.host_bytes / (double)tok : 0.0;
}

/* Insert tokens[0..n) with fresh pages, freeing duplicates. */
/* ,"allocator_bytes_per_token":x, or null where the allocator cannot count
 * (heap_delta < 0: no jemalloc) */
static void put_allocator_bpt(int64_t heap_delta, int64_t cached)
{
    if (heap_delta >= 0 && cached > 0)
        printf(",\"allocator_bytes_per_token\":%.3f", (double)heap_delta / (double)cached);
    else printf(",\"allocator_bytes_per_token\":null");
}

static void insert_fresh(radix_tree *t, page_pool *pool, const int32_t *tok, int32_t n)
{
    int32_t np = n / pool->page_size;
    int32_t *pages = xmalloc(sizeof(int32_t) * (size_t)np);
    rkv_status st = page_pool_alloc(pool, np, pages);
    if (st != RKV_OK) die("page_pool_alloc", st);
    int32_t prefix = 0;
    st = radix_tree_insert(t, tok, n, pages, 0, &prefix);
    if (st != RKV_OK) die("radix_tree_insert", st);
    page_pool_free(pool, pages, prefix / pool->page_size);
    free(pages);
}

/* ---- scenario 1: a long, fully cached prompt ------------------------------ */

/* What a match hands back: nothing, one page id per page in a flat table,
 * page runs, or page runs expanded to a flat table by the helper. */
typedef enum long_mode { LONG_NOPAGES, LONG_FLAT, LONG_RUNS, LONG_RUNS_EXPANDED } long_mode;

static radix_page_run long_runs[100000];

static int32_t long_match(radix_tree *t, const int32_t *tok, int32_t n, long_mode mode,
                          int32_t *pages)
{
    int32_t len = 0, node = 0, nruns = 0;
    if (mode == LONG_RUNS || mode == LONG_RUNS_EXPANDED) {
        radix_tree_match_runs(t, tok, n, 0, long_runs, &nruns, &len, &node);
        if (mode == LONG_RUNS_EXPANDED) radix_page_runs_expand(long_runs, nruns, pages);
        else sink += long_runs[0].count;
    } else {
        radix_tree_match(t, tok, n, 0, mode == LONG_NOPAGES ? NULL : pages, &len, &node);
    }
    return len;
}

static void bench_long_match(const char *name, int chain, int32_t P, long_mode mode, double scale)
{
    const int32_t n = 100000;
    int reps = (int)(400 * scale) + 1;
    page_pool pool;
    radix_tree *t;
    rkv_status st = page_pool_init(&pool, n / P, P);
    if (st != RKV_OK) die("page_pool_init", st);
    if ((st = radix_tree_create(&pool, RADIX_LRU, &t)) != RKV_OK) die("radix_tree_create", st);
    int32_t *tok = xmalloc(sizeof(int32_t) * n), *copy = xmalloc(sizeof(int32_t) * n);
    int32_t *pages = xmalloc(sizeof(int32_t) * n);
    for (int32_t i = 0; i < n; i++) tok[i] = rnd_token();
    memcpy(copy, tok, sizeof(int32_t) * n);
    insert_fresh(t, &pool, tok, n);
    int32_t len = 0, node = 0;
    if (chain) /* matches ending every 1000 tokens split it into 100 nodes */
        for (int32_t k = 1000; k < n; k += 1000) radix_tree_match(t, tok, k, 0, pages, &len, &node);
    /* warm up both */
    long_match(t, copy, n, mode, pages);
    sink += memcmp(tok, copy, sizeof(int32_t) * n);

    /* tree and baseline alternate, so both see the same load */
    series tree_cpu = {0}, tree_wall = {0}, base_cpu = {0}, ratio = {0};
    for (int round = 0; round < repeats; round++) {
        stopwatch a = {0, 0}, b = {0, 0}, t0 = sw_start();
        for (int r = 0; r < reps; r++) {
            len = long_match(t, copy, n, mode, pages);
            if (len != n) {
                fprintf(stderr, "radix_bench: matched %d of %d tokens\n", len, n);
                exit(1);
            }
        }
        sw_stop(&a, t0);
        t0 = sw_start();
        for (int r = 0; r < reps; r++) {
            copy[r % 7] ^= 0; /* keep the loop from being hoisted */
            sink += memcmp(tok, copy, sizeof(int32_t) * n);
        }
        sw_stop(&b, t0);
        series_add(&tree_cpu, (double)n * reps / a.cpu);
        series_add(&tree_wall, (double)n * reps / a.wall);
        series_add(&base_cpu, (double)n * reps / b.cpu);
        series_add(&ratio, b.cpu / a.cpu);
    }
    radix_tree_sizes s;
    radix_tree_get_sizes(t, &s);
    printf("{\"scenario\":\"%s\",\"page_size\":%d,\"prompt_tokens\":%d,\"nodes\":%lld,"
           "\"ops_per_repeat\":%d,\"repeats\":%d,\"host_bytes_per_token\":%.3f",
           name, P, n, (long long)s.num_nodes, reps, repeats, bytes_per_token(t));
    put_range("tokens_per_cpu_s", &tree_cpu);
    put_range("tokens_per_wall_s", &tree_wall);
    printf(",\"baseline\":\"memcmp\"");
    put_range("baseline_tokens_per_cpu_s", &base_cpu);
    put_range("ratio", &ratio);
    printf("}\n");
    fflush(stdout);
    radix_tree_destroy(t);
    page_pool_destroy(&pool);
    free(tok);
    free(copy);
    free(pages);
}

/* The cheapest possible rebuild of the candidate set: heapify n (time, id)
 * keys already gathered in an array (no tree walk at all). SGLang rebuilt a
 * heap of all leaves on every eviction; this is a lower bound of that cost.
 * Median of three, in CPU seconds. */
static double heapify_seconds(int64_t n)
{
    if (n < 1) n = 1;
    uint64_t *src = xmalloc(sizeof(uint64_t) * (size_t)n), *h = xmalloc(sizeof(uint64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) src[i] = rnd64();
    series cpu = {0};
    for (int round = 0; round < 3; round++) {
        stopwatch sw = {0, 0}, t0 = sw_start();
        memcpy(h, src, sizeof(uint64_t) * (size_t)n);
        for (int64_t i = n / 2 - 1; i >= 0; i--) {
            int64_t j = i;
            uint64_t v = h[j];
            for (;;) {
                int64_t c = 2 * j + 1;
                if (c >= n) break;
                if (c + 1 < n && h[c + 1] < h[c]) c++;
                if (h[c] >= v) break;
                h[j] = h[c];
                j = c;
            }
            h[j] = v;
        }
        sw_stop(&sw, t0);
        sink += (int64_t)h[0];
        series_add(&cpu, sw.cpu);
    }
    free(src);
    free(h);
    return series_median(&cpu);
}

/* ---- scenarios 2 and 3: requests sharing system prompts ------------------ */

/* Request i = request parent's first `cut` tokens (or a system prompt) plus a
 * tail of TAIL fresh tokens. Stored compactly and materialised in batches. */
enum { NSYS = 64, SYS_LEN = 1024, TAIL = 30, MAX_LEN = 6000, BATCH = 512 };

typedef struct req {
    int32_t parent; /* -1: system prompt sys */
    int32_t sys;
    int32_t cut;
    int32_t len;
} req;

typedef struct workload {
    int32_t nreq;
    req *r;
    int32_t *sys; /* (NSYS, SYS_LEN) */
} workload;

static void make_workload(workload *w, int32_t nreq)
{
    w->nreq = nreq;
    w->r = xmalloc(sizeof(req) * (size_t)nreq);
    w->sys = xmalloc(sizeof(int32_t) * NSYS * SYS_LEN);
    for (int32_t i = 0; i < NSYS * SYS_LEN; i++) w->sys[i] = rnd_token();
    for (int32_t i = 0; i < nreq; i++) {
        req *q = &w->r[i];
        int32_t j = i >= NSYS ? rnd_below(i) : -1;
        if (j < 0 || rnd_below(10) < 4 || w->r[j].len > MAX_LEN) {
            q->parent = -1;
            q->sys = i < NSYS ? i : rnd_below(NSYS);
            q->cut = SYS_LEN;
        } else {
            /* continue conversation j from a point after its system prompt */
            q->parent = j;
            q->sys = w->r[j].sys;
            q->cut = SYS_LEN + rnd_below(w->r[j].len - SYS_LEN + 1);
        }
        q->len = q->cut + TAIL;
    }
}

static int32_t tail_token(int32_t i, int32_t k)
{
    return 1000 + (int32_t)(mix64((uint64_t)i * 64 + (uint64_t)k + 0x5eed) % 31000);
}

/* Write request i's tokens to buf (room for len). */
static void materialise(const workload *w, int32_t i, int32_t *buf)
{
    int32_t limit = w->r[i].len;
    for (int32_t x = i;;) {
        const req *q = &w->r[x];
        for (int32_t k = q->cut; k < q->cut + TAIL && k < limit; k++) buf[k] = tail_token(x, k - q->cut);
        if (q->cut < limit) limit = q->cut;
        if (q->parent < 0) {
            memcpy(buf, w->sys + (size_t)q->sys * SYS_LEN, sizeof(int32_t) * (size_t)limit);
            return;
        }
        x = q->parent;
    }
}

typedef struct batch {
    int32_t *tok;   /* concatenated tokens of the batch */
    int64_t *off;   /* (BATCH + 1) */
    int32_t first, count;
} batch;

static void fill_batch(const workload *w, batch *b, int32_t first)
{
    b->first = first;
    b->count = w->nreq - first < BATCH ? w->nreq - first : BATCH;
    b->off[0] = 0;
    for (int32_t k = 0; k < b->count; k++) {
        materialise(w, first + k, b->tok + b->off[k]);
        b->off[k + 1] = b->off[k] + w->r[first + k].len;
    }
}

typedef struct flow_result {
    stopwatch total, evict;
    int64_t tokens, evicted_leaves, evicted_tokens, shortfalls;
} flow_result;

/* The engine's flow per request: match, lock, alloc the rest (evict on a
 * shortage), insert, free duplicates, unlock. */
static void run_flow(const workload *w, cache *c, batch *b, int32_t *pages, flow_result *res)
{
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    page_pool *pool = c->pool;
    for (int32_t first = 0; first < w->nreq; first += BATCH) {
        fill_batch(w, b, first);
        stopwatch t0 = sw_start();
        for (int32_t k = 0; k < b->count; k++) {
            const int32_t *tok = b->tok + b->off[k];
            int32_t n = (int32_t)(b->off[k + 1] - b->off[k]);
            rkv_status st = cache_match_prefix(c, &m, tok, n);
            if (st == RKV_OK) st = cache_lock(c, &m);
            if (st != RKV_OK) die("match/lock", st);
            int32_t P = pool->page_size, have = m.num_pages, need = n / P - have;
            if (need > pool->num_free) {
                stopwatch te = sw_start();
                res->shortfalls++;
                res->evicted_tokens += cache_evict(c, (int64_t)(need - pool->num_free) * P);
                sw_stop(&res->evict, te);
            }
            memcpy(pages, m.pages, sizeof(int32_t) * (size_t)have);
            if (page_pool_alloc(pool, need, pages + have) == RKV_OK) {
                int32_t prefix = 0;
                if ((st = cache_insert(c, &m, tok, n, pages, &prefix)) != RKV_OK) die("insert", st);
                page_pool_free(pool, pages + have, prefix / P - have);
            }
            cache_unlock(c, &m);
            res->tokens += n;
        }
        sw_stop(&res->total, t0);
    }
    cache_seq_free(&m);
}

/* memcmp over the same token streams, batch by batch: the cost floor of
 * reading every request's tokens once. */
static stopwatch baseline_memcmp(const workload *w, batch *b, int32_t *scratch)
{
    stopwatch t = {0, 0};
    for (int32_t first = 0; first < w->nreq; first += BATCH) {
        fill_batch(w, b, first);
        memcpy(scratch, b->tok, sizeof(int32_t) * (size_t)b->off[b->count]);
        stopwatch t0 = sw_start();
        for (int32_t k = 0; k < b->count; k++)
            sink += memcmp(b->tok + b->off[k], scratch + b->off[k],
                           sizeof(int32_t) * (size_t)(b->off[k + 1] - b->off[k]));
        sw_stop(&t, t0);
    }
    return t;
}

/* Every request of w matched in t (batches filled outside the clock); the
 * matched tokens, the matching time added to *tm. */
static int64_t match_all(const workload *w, radix_tree *t, batch *b, int32_t *pages,
                         stopwatch *tm)
{
    int64_t matched = 0;
    int32_t len = 0, node = 0;
    for (int32_t first = 0; first < w->nreq; first += BATCH) {
        fill_batch(w, b, first);
        stopwatch t0 = sw_start();
        for (int32_t k = 0; k < b->count; k++) {
            radix_tree_match(t, b->tok + b->off[k], (int32_t)(b->off[k + 1] - b->off[k]), 0, pages,
                             &len, &node);
            matched += len;
        }
        sw_stop(tm, t0);
    }
    return matched;
}

/* The evict_pressure figures over the rounds; the counts are the last round's. */
typedef struct evict_figs {
    series cpu, wall, leaf, ratio;
    flow_result ev;
    int64_t cands;
    double bpt;
    int32_t pool_pages;
} evict_figs;

/* One round of the flow on a pool of a quarter of the cached tokens, into e:
 * eviction per leaf against heapifying every candidate once. */
static void evict_round(const workload *w, batch *b, int32_t *pages, int64_t cached,
                        const cache_config *cfg, evict_figs *e)
{
    page_pool pool;
    cache *c;
    char err[256];
    rkv_status st;
    if ((st = page_pool_init(&pool, (int32_t)(cached / 4), 1)) != RKV_OK) die("page_pool_init", st);
    if ((st = cache_create(cfg, &pool, &c, err, sizeof err)) != RKV_OK) die(err, st);
    radix_tree *t = cache_radix_tree(c);
    flow_result *ev = &e->ev;
    memset(ev, 0, sizeof *ev);
    run_flow(w, c, b, pages, ev);
    radix_tree_sizes s;
    radix_tree_get_sizes(t, &s);
    double t_scan = heapify_seconds(s.num_candidates);
    ev->evicted_leaves = (int64_t)s.evictions;
    series_add(&e->cpu, ev->tokens / ev->total.cpu);
    series_add(&e->wall, ev->tokens / ev->total.wall);
    if (ev->evicted_leaves > 0 && ev->evict.cpu > 0) { /* else no figure, not a 0 */
        double per_leaf = ev->evict.cpu / (double)ev->evicted_leaves;
        series_add(&e->leaf, 1e9 * per_leaf);
        series_add(&e->ratio, t_scan / per_leaf);
    }
    e->cands = s.num_candidates;
    e->bpt = bytes_per_token(t);
    e->pool_pages = pool.num_pages;
    cache_destroy(c);
    page_pool_destroy(&pool);
}

static void print_evict_pressure(const workload *w, const evict_figs *e)
{
    const flow_result *ev = &e->ev;
    printf("{\"scenario\":\"evict_pressure\",\"page_size\":1,\"requests\":%d,"
           "\"pool_pages\":%d,\"shortfalls\":%lld,\"evicted_leaves\":%lld,"
           "\"evicted_tokens\":%lld,\"host_bytes_per_token\":%.3f,\"repeats\":%d",
           w->nreq, e->pool_pages, (long long)ev->shortfalls, (long long)ev->evicted_leaves,
           (long long)ev->evicted_tokens, e->bpt, repeats);
    put_range("tokens_per_cpu_s", &e->cpu);
    put_range("tokens_per_wall_s", &e->wall);
    put_range("cpu_ns_per_evicted_leaf", &e->leaf);
    printf(",\"baseline\":\"heapify all candidates once (rebuild per eviction)\","
           "\"candidates\":%lld", (long long)e->cands);
    put_range("ratio", &e->ratio);
    printf("}\n");
}

static void bench_shared(double scale)
{
    workload w;
    make_workload(&w, (int32_t)(32000 * scale) + NSYS);
    int64_t total = 0;
    int32_t maxlen = 0;
    for (int32_t i = 0; i < w.nreq; i++) {
        total += w.r[i].len;
        if (w.r[i].len > maxlen) maxlen = w.r[i].len;
    }
    batch b = {xmalloc(sizeof(int32_t) * (size_t)maxlen * BATCH), xmalloc(sizeof(int64_t) * (BATCH + 1)), 0, 0};
    int32_t *scratch = xmalloc(sizeof(int32_t) * (size_t)maxlen * BATCH);
    int32_t *pages = xmalloc(sizeof(int32_t) * (size_t)maxlen);
    cache_config cfg = {.kind = "radix", .policy = "lru"};
    char err[256];
    series ins_cpu = {0}, ins_wall = {0}, ins_ratio = {0}, base_cpu = {0};
    series match_cpu = {0}, match_wall = {0}, match_ratio = {0};
    evict_figs evf = {0};
    int64_t heap_delta = -1, cached = 0, nodes = 0, matched = 0, req_tokens = 0;
    uint64_t splits = 0;
    double bpt = 0;
    for (int round = 0; round < repeats; round++) {
        /* 2a: insert flow with room for everything */
        page_pool pool;
        rkv_status st = page_pool_init(&pool, (int32_t)(total < 4000000 ? total : 4000000), 1);
        if (st != RKV_OK) die("page_pool_init", st);
        cache *c;
        int64_t heap0 = allocated_bytes();
        if ((st = cache_create(&cfg, &pool, &c, err, sizeof err)) != RKV_OK) die(err, st);
        flow_result ins = {0};
        run_flow(&w, c, &b, pages, &ins);
        int64_t heap1 = allocated_bytes();
        stopwatch tb = baseline_memcmp(&w, &b, scratch);
        radix_tree *t = cache_radix_tree(c);
        radix_tree_sizes s;
        radix_tree_get_sizes(t, &s);
        cached = s.evictable_tokens + s.protected_tokens;
        nodes = s.num_nodes;
        splits = s.splits;
        req_tokens = ins.tokens;
        bpt = bytes_per_token(t);
        if (heap0 >= 0) heap_delta = heap1 - heap0;
        series_add(&ins_cpu, ins.tokens / ins.total.cpu);
        series_add(&ins_wall, ins.tokens / ins.total.wall);
        series_add(&base_cpu, ins.tokens / tb.cpu);
        series_add(&ins_ratio, tb.cpu / ins.total.cpu);

        /* 2b: every request again, fully cached */
        stopwatch tm = {0, 0};
        matched = match_all(&w, t, &b, pages, &tm);
        series_add(&match_cpu, matched / tm.cpu);
        series_add(&match_wall, matched / tm.wall);
        series_add(&match_ratio, (matched / tm.cpu) / (ins.tokens / tb.cpu));
        cache_destroy(c);
        page_pool_destroy(&pool);

        /* 3: the same flow with a quarter of the pages */
        evict_round(&w, &b, pages, cached, &cfg, &evf);
    }
    printf("{\"scenario\":\"shared_prompts_insert\",\"page_size\":1,\"requests\":%d,"
           "\"request_tokens\":%lld,\"cached_tokens\":%lld,\"nodes\":%lld,\"splits\":%llu,"
           "\"repeats\":%d,\"host_bytes_per_token\":%.3f",
           w.nreq, (long long)req_tokens, (long long)cached, (long long)nodes,
           (unsigned long long)splits, repeats, bpt);
    put_allocator_bpt(heap_delta, cached);
    put_range("tokens_per_cpu_s", &ins_cpu);
    put_range("tokens_per_wall_s", &ins_wall);
    printf(",\"baseline\":\"memcmp\"");
    put_range("baseline_tokens_per_cpu_s", &base_cpu);
    put_range("ratio", &ins_ratio);
    printf("}\n{\"scenario\":\"shared_prompts_match\",\"page_size\":1,\"requests\":%d,"
           "\"matched_tokens\":%lld,\"hit_rate\":%.4f,\"nodes\":%lld,\"repeats\":%d",
           w.nreq, (long long)matched, (double)matched / (double)req_tokens, (long long)nodes,
           repeats);
    put_range("tokens_per_cpu_s", &match_cpu);
    put_range("tokens_per_wall_s", &match_wall);
    printf(",\"baseline\":\"memcmp\"");
    put_range("baseline_tokens_per_cpu_s", &base_cpu);
    put_range("ratio", &match_ratio);
    printf("}\n");
    print_evict_pressure(&w, &evf);
    fflush(stdout);
    free(b.tok);
    free(b.off);
    free(scratch);
    free(pages);
    free(w.r);
    free(w.sys);
}

/* ---- scenario 5: the shared-prompt tree ---------------------------------- */

/* Segments of the generated tree: system prompts at level 0, continuations
 * below. A request is the path from a system prompt to one leaf segment. */
enum {
    SP_SYS = 8, SP_SYS_LEN = 2048, SP_FAN1 = 32, SP_FAN2 = 32, SP_FAN3_MIN = 3, SP_FAN3_MAX = 7,
    SP_SEG_MIN = 12, SP_SEG_MAX = 28, SP_VOCAB = 128256, SP_BATCH = 256, SP_LEVELS = 4,
};

typedef struct sp_seg {
    int64_t off; /* into sp_tree.tok */
    int32_t len;
    int32_t parent; /* -1 for a system prompt */
} sp_seg;

typedef struct sp_tree {
    int32_t *tok;
    int64_t ntok;
    sp_seg *seg;
    int32_t nseg;
    int32_t *req; /* (nreq) leaf segment of each request, in a shuffled order */
    int32_t nreq, maxlen, nsys;
    double mean_len; /* tokens per request */
} sp_tree;

/* A segment of len random tokens under parent; its first token differs from
 * those of its earlier siblings seg[sib0..nseg), so siblings never share a
 * prefix and the tree has exactly one node per segment. */
static int32_t sp_add(sp_tree *g, int32_t parent, int32_t len, int32_t sib0)
{
    sp_seg *s = &g->seg[g->nseg];
    s->off = g->ntok;
    s->len = len;
    s->parent = parent;
    int32_t *t = g->tok + g->ntok;
    for (int32_t i = 0; i < len; i++) t[i] = rnd_below(SP_VOCAB);
    for (int32_t k = sib0; k < g->nseg; k++)
        if (g->tok[g->seg[k].off] == t[0]) {
            t[0] = rnd_below(SP_VOCAB);
            k = sib0 - 1; /* check every sibling again */
        }
    g->ntok += len;
    return g->nseg++;
}

static int32_t sp_seg_len(void) { return SP_SEG_MIN + rnd_below(SP_SEG_MAX - SP_SEG_MIN + 1); }

static void sp_make(sp_tree *g, int32_t nsys)
{
    int64_t max_seg = (int64_t)nsys * (1 + SP_FAN1 + SP_FAN1 * SP_FAN2 * (1 + SP_FAN3_MAX));
    int64_t max_tok = (int64_t)nsys * SP_SYS_LEN + max_seg * SP_SEG_MAX;
    memset(g, 0, sizeof *g);
    g->tok = xmalloc(sizeof(int32_t) * (size_t)max_tok);
    g->seg = xmalloc(sizeof(sp_seg) * (size_t)max_seg);
    g->req = xmalloc(sizeof(int32_t) * (size_t)max_seg);
    for (int32_t s = 0; s < nsys; s++) {
        int32_t a = sp_add(g, -1, SP_SYS_LEN, g->nseg);
        int32_t sib1 = g->nseg;
        for (int32_t i = 0; i < SP_FAN1; i++) sp_add(g, a, sp_seg_len(), sib1);
        for (int32_t i = 0; i < SP_FAN1; i++) {
            int32_t b = sib1 + i, sib2 = g->nseg;
            for (int32_t j = 0; j < SP_FAN2; j++) sp_add(g, b, sp_seg_len(), sib2);
            for (int32_t j = 0; j < SP_FAN2; j++) {
                int32_t c = sib2 + j, sib3 = g->nseg;
                int32_t fan = SP_FAN3_MIN + rnd_below(SP_FAN3_MAX - SP_FAN3_MIN + 1);
                for (int32_t k = 0; k < fan; k++) g->req[g->nreq++] = sp_add(g, c, sp_seg_len(), sib3);
            }
        }
    }
    for (int32_t i = g->nreq - 1; i > 0; i--) { /* Fisher-Yates */
        int32_t j = rnd_below(i + 1), x = g->req[i];
        g->req[i] = g->req[j];
        g->req[j] = x;
    }
    g->maxlen = SP_SYS_LEN + 3 * SP_SEG_MAX;
    g->nsys = nsys;
    int64_t total = 0;
    for (int32_t r = 0; r < g->nreq; r++)
        for (int32_t s = g->req[r]; s >= 0; s = g->seg[s].parent) total += g->seg[s].len;
    g->mean_len = g->nreq ? (double)total / g->nreq : 0;
}

/* Request r's tokens into buf; returns the length. The segments on its path
 * go to path[0..SP_LEVELS), root first. */
static int32_t sp_materialise(const sp_tree *g, int32_t r, int32_t *buf, int32_t *path)
{
    int32_t depth = 0, n = 0;
    for (int32_t s = g->req[r]; s >= 0; s = g->seg[s].parent) path[depth++] = s;
    for (int32_t i = 0, j = depth - 1; i < j; i++, j--) {
        int32_t x = path[i];
        path[i] = path[j];
        path[j] = x;
    }
    for (int32_t i = 0; i < depth; i++) {
        const sp_seg *s = &g->seg[path[i]];
        memcpy(buf + n, g->tok + s->off, sizeof(int32_t) * (size_t)s->len);
        n += s->len;
    }
    return n;
}

typedef struct sp_batch {
    int32_t count;
    int32_t *tok, *copy, *pages; /* (SP_BATCH * maxlen) each, request k at k * maxlen */
    int32_t len[SP_BATCH], leaf_len[SP_BATCH], expect[SP_BATCH];
} sp_batch;

typedef struct sp_op {
    series cpu, wall, ratio; /* ns per request (per call for eviction); memcmp / op */
} sp_op;

static void sp_record(sp_op *o, stopwatch op, stopwatch base, int64_t count)
{
    series_add(&o->cpu, 1e9 * op.cpu / (double)count);
    series_add(&o->wall, 1e9 * op.wall / (double)count);
    if (base.cpu > 0) series_add(&o->ratio, base.cpu / op.cpu);
}

/* The memcmp floor: every request's tokens compared with a copy once. */
static void sp_memcmp(const sp_batch *b, int32_t maxlen, stopwatch *acc)
{
    stopwatch t0 = sw_start();
    for (int32_t k = 0; k < b->count; k++)
        sink += memcmp(b->tok + (size_t)k * maxlen, b->copy + (size_t)k * maxlen,
                       sizeof(int32_t) * (size_t)b->len[k]);
    sw_stop(acc, t0);
}

static void sp_print(const char *op, const sp_tree *g, int64_t nodes, int64_t leaves,
                     int64_t unique, const sp_op *o, const char *unit, const char *extra)
{
    printf("{\"scenario\":\"shared_prompt_tree_%s\",\"page_size\":1,\"system_prompts\":%d,"
           "\"requests\":%d,\"nodes\":%lld,\"leaves\":%lld,\"unique_tokens\":%lld,"
           "\"mean_request_tokens\":%.1f,\"vocab\":%d,\"repeats\":%d%s",
           op, g->nsys, g->nreq, (long long)nodes, (long long)leaves, (long long)unique,
           g->mean_len, SP_VOCAB, repeats, extra);
    char key[64];
    snprintf(key, sizeof key, "cpu_ns_per_%s", unit);
    put_range(key, &o->cpu);
    snprintf(key, sizeof key, "wall_ns_per_%s", unit);
    put_range(key, &o->wall);
    if (o->ratio.n) {
        printf(",\"baseline\":\"memcmp of the request's tokens\"");
        put_range("ratio", &o->ratio);
    }
    printf("}\n");
}

/* Fill batch b with requests [first, first + count): tokens, a copy for the
 * memcmp floor, and (when pool is set) fresh pages for the part of each
 * request not yet cached, which `seen` (per segment) predicts. */
static void sp_fill(const sp_tree *g, sp_batch *b, int32_t first, page_pool *pool, uint8_t *seen)
{
    int32_t path[SP_LEVELS];
    b->count = g->nreq - first < SP_BATCH ? g->nreq - first : SP_BATCH;
    for (int32_t k = 0; k < b->count; k++) {
        int32_t *tok = b->tok + (size_t)k * g->maxlen;
        int32_t n = sp_materialise(g, first + k, tok, path);
        memcpy(b->copy + (size_t)k * g->maxlen, tok, sizeof(int32_t) * (size_t)n);
        b->len[k] = n;
        b->leaf_len[k] = g->seg[g->req[first + k]].len;
        if (!pool) continue;
        int32_t cached = 0, depth = 0;
        while (depth < SP_LEVELS && path[depth] != g->req[first + k] && seen[path[depth]])
            cached += g->seg[path[depth++]].len;
        for (int32_t i = 0; i < SP_LEVELS; i++) {
            seen[path[i]] = 1;
            if (path[i] == g->req[first + k]) break;
        }
        b->expect[k] = cached;
        rkv_status st = page_pool_alloc(pool, n - cached, b->pages + (size_t)k * g->maxlen + cached);
        if (st != RKV_OK) die("page_pool_alloc", st);
    }
}

/* One batch inserted, timed into op; exits when a request's cached prefix
 * is not the expected one (first: the batch's first request, for the message). */
static void sp_insert_batch(const sp_tree *g, const sp_batch *b, radix_tree *t, int32_t first,
                            stopwatch *op)
{
    int32_t got[SP_BATCH];
    stopwatch t0 = sw_start();
    for (int32_t k = 0; k < b->count; k++) {
        rkv_status st = radix_tree_insert(t, b->tok + (size_t)k * g->maxlen, b->len[k],
                                          b->pages + (size_t)k * g->maxlen, 0, &got[k]);
        if (st != RKV_OK) die("radix_tree_insert", st);
    }
    sw_stop(op, t0);
    for (int32_t k = 0; k < b->count; k++)
        if (got[k] != b->expect[k]) {
            fprintf(stderr, "radix_bench: request %d: %d tokens cached, expected %d\n", first + k,
                    got[k], b->expect[k]);
            exit(1);
        }
}

/* One batch matched three ways, each timed: with page ids (mop), as runs
 * (rop), then with each request's last segment replaced by one never seen
 * (pop: the match ends at a node boundary); exits when a length is wrong. */
static void sp_match_batch(const sp_tree *g, sp_batch *b, radix_tree *t, radix_page_run *runs,
                           stopwatch *mop, stopwatch *rop, stopwatch *pop)
{
    int32_t got[SP_BATCH], node;
    stopwatch t0 = sw_start();
    for (int32_t k = 0; k < b->count; k++)
        radix_tree_match(t, b->tok + (size_t)k * g->maxlen, b->len[k], 0,
                         b->pages + (size_t)k * g->maxlen, &got[k], &node);
    sw_stop(mop, t0);
    t0 = sw_start();
    for (int32_t k = 0; k < b->count; k++) {
        int32_t nruns = 0;
        radix_tree_match_runs(t, b->tok + (size_t)k * g->maxlen, b->len[k], 0, runs, &nruns,
                              &got[k], &node);
        sink += nruns;
    }
    sw_stop(rop, t0);
    for (int32_t k = 0; k < b->count; k++) {
        if (got[k] != b->len[k]) {
            fprintf(stderr, "radix_bench: matched %d of %d tokens\n", got[k], b->len[k]);
            exit(1);
        }
        /* a last segment never seen: its first token lies outside the vocabulary */
        b->tok[(size_t)k * g->maxlen + b->len[k] - b->leaf_len[k]] = SP_VOCAB;
    }
    t0 = sw_start();
    for (int32_t k = 0; k < b->count; k++)
        radix_tree_match(t, b->tok + (size_t)k * g->maxlen, b->len[k], 0,
                         b->pages + (size_t)k * g->maxlen, &got[k], &node);
    sw_stop(pop, t0);
    for (int32_t k = 0; k < b->count; k++) {
        if (got[k] != b->len[k] - b->leaf_len[k]) {
            fprintf(stderr, "radix_bench: partial match %d, expected %d\n", got[k],
                    b->len[k] - b->leaf_len[k]);
            exit(1);
        }
        b->tok[(size_t)k * g->maxlen + b->len[k] - b->leaf_len[k]] =
            b->copy[(size_t)k * g->maxlen + b->len[k] - b->leaf_len[k]];
    }
}

/* Evict one node per call until the tree is empty, timed in blocks of 4096
 * calls into eop; returns the nodes evicted. */
static int64_t sp_evict_all(radix_tree *t, stopwatch *eop)
{
    int64_t calls = 0;
    for (;;) {
        int64_t freed = 0;
        stopwatch t0 = sw_start();
        for (int i = 0; i < 4096; i++) freed += radix_tree_evict(t, 1) > 0;
        sw_stop(eop, t0);
        calls += freed;
        if (freed < 4096) return calls;
    }
}

static void bench_shared_prompt_tree(double scale)
{
    sp_tree g;
    int32_t nsys = (int32_t)(SP_SYS * scale + 0.5);
    /* its own seed, so the tree is the same whatever ran before it */
    uint64_t saved = rng_state;
    rng_state = mix64(bench_seed ^ 0x5a5a5a5aULL);
    sp_make(&g, nsys < 1 ? 1 : nsys);
    rng_state = saved;
    size_t room = (size_t)SP_BATCH * (size_t)g.maxlen;
    sp_batch b = {0, xmalloc(sizeof(int32_t) * room), xmalloc(sizeof(int32_t) * room),
                  xmalloc(sizeof(int32_t) * room), {0}, {0}, {0}};
    uint8_t *seen = xmalloc((size_t)g.nseg);
    sp_op ins = {0}, mat = {0}, mruns = {0}, part = {0}, ev = {0};
    radix_page_run *runs = xmalloc(sizeof(radix_page_run) * (size_t)g.maxlen);
    int64_t nodes = 0, leaves = 0, cached = 0, heap_delta = -1, host = 0, evicted_calls = 0;
    for (int round = 0; round < repeats; round++) {
        page_pool pool;
        radix_tree *t;
        rkv_status st = page_pool_init(&pool, (int32_t)g.ntok, 1);
        if (st != RKV_OK) die("page_pool_init", st);
        int64_t heap0 = allocated_bytes();
        if ((st = radix_tree_create(&pool, RADIX_LRU, &t)) != RKV_OK) die("radix_tree_create", st);
        memset(seen, 0, (size_t)g.nseg);

        /* insert: every request into the empty tree, shuffled */
        stopwatch op = {0, 0}, base = {0, 0};
        for (int32_t first = 0; first < g.nreq; first += SP_BATCH) {
            sp_fill(&g, &b, first, &pool, seen);
            sp_insert_batch(&g, &b, t, first, &op);
            sp_memcmp(&b, g.maxlen, &base);
        }
        sp_record(&ins, op, base, g.nreq);
        int64_t heap1 = allocated_bytes();
        radix_tree_sizes s;
        radix_tree_get_sizes(t, &s);
        nodes = s.num_nodes;
        leaves = s.num_candidates;
        cached = s.evictable_tokens + s.protected_tokens;
        host = s.host_bytes;
        if (heap0 >= 0) heap_delta = heap1 - heap0;
        if (cached != g.ntok) {
            fprintf(stderr, "radix_bench: %lld tokens cached, generated %lld\n", (long long)cached,
                    (long long)g.ntok);
            exit(1);
        }

        /* match with page ids, then partial match, batch by batch */
        stopwatch mop = {0, 0}, rop = {0, 0}, pop = {0, 0};
        base = (stopwatch){0, 0};
        for (int32_t first = 0; first < g.nreq; first += SP_BATCH) {
            sp_fill(&g, &b, first, NULL, NULL);
            sp_match_batch(&g, &b, t, runs, &mop, &rop, &pop);
            sp_memcmp(&b, g.maxlen, &base);
        }
        sp_record(&mat, mop, base, g.nreq);
        sp_record(&mruns, rop, base, g.nreq);
        sp_record(&part, pop, base, g.nreq);

        /* evict: one node per call until the tree is empty */
        stopwatch eop = {0, 0};
        int64_t calls = sp_evict_all(t, &eop);
        if (calls != nodes) {
            fprintf(stderr, "radix_bench: %lld evictions for %lld nodes\n", (long long)calls,
                    (long long)nodes);
            exit(1);
        }
        evicted_calls = calls;
        sp_record(&ev, eop, (stopwatch){0, 0}, calls);
        radix_tree_destroy(t);
        page_pool_destroy(&pool);
    }
    char extra[256];
    /* allocator bytes: null where the allocator cannot tell (no jemalloc) */
    char alloc_bpt[32] = "null";
    if (heap_delta >= 0) snprintf(alloc_bpt, sizeof alloc_bpt, "%.3f", (double)heap_delta / (double)cached);
    snprintf(extra, sizeof extra, ",\"host_bytes_per_token\":%.3f,\"allocator_bytes_per_token\":%s",
             (double)host / (double)cached, alloc_bpt);
    sp_print("insert", &g, nodes, leaves, cached, &ins, "request", extra);
    sp_print("match", &g, nodes, leaves, cached, &mat, "request", ",\"page_ids\":\"flat\"");
    sp_print("match_runs", &g, nodes, leaves, cached, &mruns, "request", ",\"page_ids\":\"runs\"");
    sp_print("partial_match", &g, nodes, leaves, cached, &part, "request", "");
    snprintf(extra, sizeof extra, ",\"evictions\":%lld", (long long)evicted_calls);
    sp_print("evict", &g, nodes, leaves, cached, &ev, "eviction", extra);
    fflush(stdout);
    free(b.tok);
    free(b.copy);
    free(b.pages);
    free(seen);
    free(runs);
    free(g.tok);
    free(g.seg);
    free(g.req);
}

/* ---- scenario 6: steady state ---------------------------------------------
 *
 * A cache lives where eviction has freed pages all over the pool. A long
 * replay through the engine's flow (match, lock, evict the shortfall, alloc,
 * insert, unlock) with a budget of a quarter of the stream's unique tokens
 * (the tree evicts whenever its pages, cached and in flight, would pass it)
 * reaches that state in its first three quarters; the last quarter (the
 * window) is timed batch by batch. Each figure gets its own replay, so it is
 * measured first on its batch ("cold": the requests' paths untouched since
 * they were last used) and then once more right after ("warm"); the flow then
 * runs untimed, so every replay goes through the same states.
 *
 * The same tree on two pools: "fresh", a pool of exactly its budget that it
 * has to itself, and "churned", a pool of twice that shared with a second
 * tree of the same budget replaying the stream half a stream later (untimed,
 * one batch after each of the measured tree's), whose evictions and
 * allocations scatter the free pages. Evictions depend on the budget alone,
 * so both replays cache the same tokens in the same nodes (checked: the bench
 * stops if hits or cached tokens differ); what differs is the page layout
 * (runs per allocation, per match, per node) and the time it costs. Memory
 * figures are taken at the end of the window, before the extra evictions of
 * the evict figure; host bytes per token are given for the tree alone and
 * with the pool's own bytes for the tree's budget of pages counted in.
 *
 *   match        flat page ids (radix_tree_match)
 *   match_runs   page runs (radix_tree_match_runs)
 *   insert       radix_tree_insert; cold: a group of 16 requests matched and
 *                given pages, then inserted; warm: each inserted right after
 *                its own match
 *   evict        per evicted leaf: cold as the flow's shortfalls evict; warm:
 *                up to 4096 leaves one per call after the window
 *
 * Sources: the shared-prompt tree's requests drawn with a skew (u^2 over the
 * shuffled requests; page size 1), and, given a trace directory, the Mooncake
 * conversation trace (block h's token j = h * 512 + j; page size 16). */
typedef struct steady_src {
    const char *name;
    int32_t P;
    int32_t nreq;         /* requests in the stream */
    int32_t maxlen;
    int64_t unique_tokens;
    /* request i's tokens into buf; returns the length */
    int32_t (*get)(const void *ctx, int32_t i, int32_t *buf);
    const void *ctx;
} steady_src;

typedef struct sp_stream {
    const sp_tree *g;
    int32_t *pick; /* (nreq) request of the tree at each stream position */
} sp_stream;

static int32_t sp_stream_get(const void *ctx, int32_t i, int32_t *buf)
{
    const sp_stream *s = ctx;
    int32_t path[SP_LEVELS];
    return sp_materialise(s->g, s->pick[i], buf, path);
}

typedef struct mc_trace {
    int32_t nreq;
    int64_t *off; /* (nreq + 1) into ids */
    int32_t *ids; /* hash ids */
    int32_t *len; /* input_length */
} mc_trace;

static int32_t mc_get(const void *ctx, int32_t i, int32_t *buf)
{
    const mc_trace *m = ctx;
    int32_t n = 0;
    for (int64_t k = m->off[i]; k < m->off[i + 1] && n < m->len[i]; k++)
        for (int32_t j = 0; j < 512 && n < m->len[i]; j++) buf[n++] = m->ids[k] * 512 + j;
    return n;
}

/* The Mooncake conversation trace: only "input_length" and "hash_ids" of
 * each line. Returns 0 when the file is missing; exits on malformed lines. */
static int mc_load(const char *dir, mc_trace *m, int32_t limit)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/conversation_trace.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int64_t cap_ids = 1 << 20;
    int32_t cap = 1 << 14;
    memset(m, 0, sizeof *m);
    m->off = xmalloc(sizeof(int64_t) * (size_t)cap);
    m->len = xmalloc(sizeof(int32_t) * (size_t)cap);
    m->ids = xmalloc(sizeof(int32_t) * (size_t)cap_ids);
    m->off[0] = 0;
    char *line = NULL;
    size_t lcap = 0;
    int64_t lineno = 0;
    while (getline(&line, &lcap, f) > 0 && m->nreq < limit) {
        lineno++;
        char *a = strstr(line, "\"input_length\":"), *h = strstr(line, "\"hash_ids\":");
        char *br = h ? strchr(h, '[') : NULL;
        if (!a || !br) {
            fprintf(stderr, "radix_bench: %s:%lld: no input_length or hash_ids\n", path,
                    (long long)lineno);
            exit(1);
        }
        if (m->nreq + 1 >= cap) { /* off holds nreq + 1 entries */
            void **arr[2] = {(void **)&m->off, (void **)&m->len};
            size_t elem[2] = {sizeof *m->off, sizeof *m->len};
            rkv_status st = rkv_grow32_arrays(arr, elem, 2, &cap, (int64_t)m->nreq + 2);
            if (st != RKV_OK) die("mooncake trace", st);
        }
        m->len[m->nreq] = (int32_t)strtol(a + 15, NULL, 10);
        int64_t o = m->off[m->nreq];
        for (char *p = br + 1; *p && *p != ']';) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            if (o == cap_ids) {
                void *ids = m->ids;
                rkv_status st = rkv_grow(&ids, &cap_ids, o + 1, sizeof *m->ids);
                if (st != RKV_OK) die("mooncake trace", st);
                m->ids = ids;
            }
            m->ids[o++] = (int32_t)v;
            p = end;
            while (*p == ',' || *p == ' ') p++;
        }
        m->off[++m->nreq] = o;
    }
    free(line);
    fclose(f);
    return 1;
}

enum { ST_MATCH, ST_RUNS, ST_INSERT, ST_EVICT, ST_FIGS };
static const char *const st_fig_name[ST_FIGS] = {"match", "match_runs", "insert", "evict"};
enum { ST_BATCH = 64, ST_GROUP = 16, ST_WARM_EVICT = 4096 };

/* What one replay measured (its figure's cold and warm time, per unit). */
typedef struct st_res {
    stopwatch cold, warm, base;
    stopwatch alloc; /* evict figure: the flow's allocations (a pool may merge there) */
    int64_t cold_units, warm_units;
    int64_t allocs, alloc_runs, alloc_pages, matches, match_runs, evicted_leaves;
    int64_t cached, nodes, host_bytes, splits, hit_tokens, req_tokens;
    double pool_bytes_per_page; /* page_pool_host_bytes / pages, at the memory figures */
} st_res;

/* One tree replaying the stream within its budget of pages, on a pool it may
 * share. */
typedef struct st_ctx {
    const steady_src *src;
    radix_tree *t;
    page_pool *pool;
    int32_t budget;   /* pages the tree may hold, cached and in flight */
    int32_t shift;    /* replays request (i + shift) % nreq at position i */
    int64_t inflight; /* pages allocated to admitted requests not yet committed */
    int32_t *tok, *copy, *pages, *len; /* (ST_BATCH * maxlen), lengths */
    radix_page_run *runs;
    int32_t node[ST_BATCH], have[ST_BATCH];
    int64_t req_tokens, hit_tokens;
} st_ctx;

static int32_t runs_of(const int32_t *pages, int32_t n)
{
    int32_t r = n > 0;
    for (int32_t i = 1; i < n; i++) r += pages[i] != pages[i - 1] + 1;
    return r;
}

/* Admission of request k of the batch: match (runs, expanded to its page
 * table), lock, evict the shortfall, allocate. Returns 0 when it does not
 * fit (it is then unlocked). */
static int st_admit(st_ctx *x, int32_t k, st_res *r, stopwatch *evict_sw, int64_t *evicted,
                    stopwatch *alloc_sw)
{
    const int32_t P = x->src->P, maxlen = x->src->maxlen;
    int32_t *tok = x->tok + (size_t)k * maxlen, *pages = x->pages + (size_t)k * maxlen;
    int32_t n = x->len[k] - x->len[k] % P, len = 0, nruns = 0;
    rkv_status st = radix_tree_match_runs(x->t, tok, n, 0, x->runs, &nruns, &len, &x->node[k]);
    if (st != RKV_OK) die("radix_tree_match_runs", st);
    radix_page_runs_expand(x->runs, nruns, pages);
    if ((st = radix_tree_lock(x->t, x->node[k])) != RKV_OK) die("radix_tree_lock", st);
    x->have[k] = len / P;
    x->req_tokens += n;
    x->hit_tokens += len;
    if (r) r->matches++, r->match_runs += nruns;
    int32_t need = n / P - x->have[k];
    radix_tree_sizes s0, s1;
    radix_tree_get_sizes(x->t, &s0);
    int64_t room = x->budget - (s0.evictable_tokens + s0.protected_tokens) / P - x->inflight;
    if (need > room) {
        stopwatch t0 = sw_start();
        radix_tree_evict(x->t, (int64_t)(need - room) * P);
        if (evict_sw) sw_stop(evict_sw, t0);
        radix_tree_get_sizes(x->t, &s1);
        if (evicted) *evicted += (int64_t)(s1.evictions - s0.evictions);
        room = x->budget - (s1.evictable_tokens + s1.protected_tokens) / P - x->inflight;
    }
    /* within the budget the pool always has the pages: the budgets of the
     * trees sharing it add up to its size */
    stopwatch ta = sw_start();
    rkv_status ast = need > room ? RKV_ENOSPC : page_pool_alloc(x->pool, need, pages + x->have[k]);
    if (alloc_sw) sw_stop(alloc_sw, ta);
    if (ast != RKV_OK) {
        radix_tree_unlock(x->t, x->node[k]);
        return 0;
    }
    x->inflight += need;
    if (r && need > 0) {
        r->allocs++;
        r->alloc_pages += need;
        r->alloc_runs += runs_of(pages + x->have[k], need);
    }
    return 1;
}

/* Insert request k (admitted), free the pages the tree did not take, unlock. */
static void st_commit(st_ctx *x, int32_t k, stopwatch *ins_sw)
{
    const int32_t P = x->src->P, maxlen = x->src->maxlen;
    int32_t *tok = x->tok + (size_t)k * maxlen, *pages = x->pages + (size_t)k * maxlen;
    int32_t n = x->len[k] - x->len[k] % P, prefix = 0;
    stopwatch t0 = sw_start();
    rkv_status st = radix_tree_insert(x->t, tok, n, pages, 0, &prefix);
    if (ins_sw) sw_stop(ins_sw, t0);
    if (st != RKV_OK) die("radix_tree_insert", st);
    if (prefix / P > x->have[k])
        page_pool_free(x->pool, pages + x->have[k], prefix / P - x->have[k]);
    x->inflight -= n / P - x->have[k];
    radix_tree_unlock(x->t, x->node[k]);
}

/* Match every request of the batch (flat ids or runs), timed into sw. */
static void st_match_all(st_ctx *x, int32_t count, int runs, stopwatch *sw)
{
    const int32_t P = x->src->P, maxlen = x->src->maxlen;
    int32_t len, node, nruns;
    stopwatch t0 = sw_start();
    for (int32_t k = 0; k < count; k++) {
        const int32_t *tok = x->tok + (size_t)k * maxlen;
        int32_t n = x->len[k] - x->len[k] % P;
        if (runs) radix_tree_match_runs(x->t, tok, n, 0, x->runs, &nruns, &len, &node);
        else radix_tree_match(x->t, tok, n, 0, x->pages + (size_t)k * maxlen, &len, &node);
    }
    sw_stop(sw, t0);
}

static void st_open(st_ctx *x, const steady_src *src, page_pool *pool, int32_t budget,
                    int32_t shift)
{
    memset(x, 0, sizeof *x);
    x->src = src;
    x->pool = pool;
    x->budget = budget;
    x->shift = shift;
    rkv_status st = radix_tree_create(pool, RADIX_LRU, &x->t);
    if (st != RKV_OK) die("radix_tree_create", st);
    size_t room = (size_t)ST_BATCH * (size_t)src->maxlen;
    x->tok = xmalloc(sizeof(int32_t) * room);
    x->copy = xmalloc(sizeof(int32_t) * room);
    x->pages = xmalloc(sizeof(int32_t) * room);
    x->len = xmalloc(sizeof(int32_t) * ST_BATCH);
    x->runs = xmalloc(sizeof(radix_page_run) * (size_t)(src->maxlen / src->P + 1));
}

static void st_close(st_ctx *x)
{
    radix_tree_destroy(x->t);
    free(x->tok);
    free(x->copy);
    free(x->pages);
    free(x->len);
    free(x->runs);
}

/* The batch of count requests from stream position first into x's buffers. */
static void st_load(st_ctx *x, int32_t first, int32_t count)
{
    for (int32_t k = 0; k < count; k++)
        x->len[k] = x->src->get(x->src->ctx, (first + k + x->shift) % x->src->nreq,
                                x->tok + (size_t)k * x->src->maxlen);
}

/* The flow over a loaded batch (each request admitted, then committed);
 * evictions timed into evict_sw and allocations into alloc_sw when given,
 * leaves counted into *evicted. */
static void st_flow(st_ctx *x, int32_t count, st_res *rr, stopwatch *evict_sw, int64_t *evicted,
                    stopwatch *alloc_sw)
{
    for (int32_t k = 0; k < count; k++)
        if (st_admit(x, k, rr, evict_sw, evicted, alloc_sw)) st_commit(x, k, NULL);
}

/* The memcmp floor over the loaded batch's tokens, into base. */
static void st_memcmp(st_ctx *x, int32_t count, stopwatch *base)
{
    const size_t m = (size_t)x->src->maxlen;
    for (int32_t k = 0; k < count; k++)
        memcpy(x->copy + k * m, x->tok + k * m, sizeof(int32_t) * (size_t)x->len[k]);
    stopwatch t0 = sw_start();
    for (int32_t k = 0; k < count; k++)
        sink += memcmp(x->tok + k * m, x->copy + k * m, sizeof(int32_t) * (size_t)x->len[k]);
    sw_stop(base, t0);
}

/* Insert figure over a loaded batch. Cold: groups matched first, then
 * inserted; warm: the same requests again, each inserted after its own match
 * (now mostly cached: the insert walks the whole path). */
static void st_insert_figure(st_ctx *x, int32_t count, st_res *r)
{
    for (int32_t g = 0; g < count; g += ST_GROUP) {
        int32_t ge = g + ST_GROUP < count ? g + ST_GROUP : count;
        int ok[ST_GROUP];
        for (int32_t k = g; k < ge; k++) ok[k - g] = st_admit(x, k, r, NULL, NULL, NULL);
        for (int32_t k = g; k < ge; k++)
            if (ok[k - g]) st_commit(x, k, &r->cold), r->cold_units++;
    }
    for (int32_t k = 0; k < count; k++)
        if (st_admit(x, k, NULL, NULL, NULL, NULL)) st_commit(x, k, &r->warm), r->warm_units++;
}

/* One replay of the whole stream by a tree with a budget of budget pages,
 * timing figure fig over the window [win0, nreq); churned: on a pool of twice
 * the budget shared with a second tree (see scenario 6), else on a pool of
 * the budget alone. */
static void st_replay(const steady_src *src, int32_t budget, int churned, int fig, st_res *r)
{
    page_pool pool;
    memset(r, 0, sizeof *r);
    rkv_status st = page_pool_init(&pool, churned ? 2 * budget : budget, src->P);
    if (st != RKV_OK) die("page_pool_init", st);
    st_ctx x, u;
    st_open(&x, src, &pool, budget, 0);
    if (churned) st_open(&u, src, &pool, budget, src->nreq / 2);
    int32_t win0 = src->nreq - src->nreq / 4;
    for (int32_t first = 0; first < src->nreq; first += ST_BATCH) {
        int32_t count = src->nreq - first < ST_BATCH ? src->nreq - first : ST_BATCH;
        int timed = first >= win0;
        st_load(&x, first, count);
        if (timed) st_memcmp(&x, count, &r->base);
        if (timed && (fig == ST_MATCH || fig == ST_RUNS)) {
            st_match_all(&x, count, fig == ST_RUNS, &r->cold);
            st_match_all(&x, count, fig == ST_RUNS, &r->warm);
            r->cold_units += count;
            r->warm_units += count;
        }
        if (timed && fig == ST_INSERT) st_insert_figure(&x, count, r);
        else if (timed && fig == ST_EVICT)
            st_flow(&x, count, r, &r->cold, &r->cold_units, &r->alloc);
        else st_flow(&x, count, timed ? r : NULL, NULL, NULL, NULL);
        if (churned) {
            st_load(&u, first, count);
            st_flow(&u, count, NULL, NULL, NULL, NULL);
        }
    }
    /* memory figures at the end of the window, before the extra evictions */
    radix_tree_sizes s;
    radix_tree_get_sizes(x.t, &s);
    r->cached = s.evictable_tokens + s.protected_tokens;
    r->nodes = s.num_nodes;
    r->host_bytes = s.host_bytes;
    r->splits = (int64_t)s.splits;
    r->hit_tokens = x.hit_tokens;
    r->req_tokens = x.req_tokens;
    r->pool_bytes_per_page = (double)page_pool_host_bytes(&pool) / (double)pool.num_pages;
    /* radix_tree_check counts the pool's cached pages as the tree's own, so
     * a shared pool is checked by its sum instead */
    char err[256];
    if ((!churned && (st = radix_tree_check(x.t, err, sizeof err)) != RKV_OK) ||
        (st = page_pool_check(&pool, err, sizeof err)) != RKV_OK) {
        fprintf(stderr, "radix_bench: steady state: %s\n", err);
        exit(1);
    }
    if (churned) {
        radix_tree_sizes su;
        radix_tree_get_sizes(u.t, &su);
        if ((int64_t)pool.num_cached * src->P != r->cached + su.evictable_tokens + su.protected_tokens) {
            fprintf(stderr, "radix_bench: steady state: the shared pool holds %d cached pages, "
                    "the trees %lld + %lld tokens\n", pool.num_cached, (long long)r->cached,
                    (long long)(su.evictable_tokens + su.protected_tokens));
            exit(1);
        }
    }
    if (fig == ST_EVICT) { /* warm: leaves one per call, back to back */
        for (int32_t i = 0; i < ST_WARM_EVICT; i++) {
            stopwatch t0 = sw_start();
            int64_t got = radix_tree_evict(x.t, 1);
            sw_stop(&r->warm, t0);
            if (!got) break;
            r->warm_units++;
        }
    }
    st_close(&x);
    if (churned) st_close(&u);
    page_pool_destroy(&pool);
}

/* ,"key":a/b, or null when b is 0 (nothing to divide by: no data) */
static void put_ratio(const char *key, double a, double b, const char *fmt)
{
    printf(",\"%s\":", key);
    if (b) printf(fmt, a / b);
    else printf("null");
}

static void bench_steady(const steady_src *src)
{
    int32_t budget = (int32_t)(src->unique_tokens / 4 / src->P);
    const char *pool_name[2] = {"fresh", "churned"};
    for (int fig = 0; fig < ST_FIGS; fig++) {
        series cold[2] = {{0}}, warm[2] = {{0}}, rcold[2] = {{0}}, rwarm[2] = {{0}};
        series wcold[2] = {{0}}, walloc[2] = {{0}};
        st_res last[2];
        /* the two pools alternate, so both see the same load */
        for (int round = 0; round < repeats; round++)
            for (int p = 0; p < 2; p++) {
                st_res r;
                st_replay(src, budget, p, fig, &r);
                if (r.cold_units) {
                    series_add(&cold[p], 1e9 * r.cold.cpu / (double)r.cold_units);
                    if (fig == ST_EVICT)
                        series_add(&walloc[p],
                                   1e9 * (r.cold.cpu + r.alloc.cpu) / (double)r.cold_units);
                    series_add(&wcold[p], 1e9 * r.cold.wall / (double)r.cold_units);
                }
                if (r.warm_units) series_add(&warm[p], 1e9 * r.warm.cpu / (double)r.warm_units);
                if (fig != ST_EVICT && r.base.cpu > 0 && r.cold.cpu > 0 && r.warm.cpu > 0) {
                    series_add(&rcold[p], r.base.cpu / r.cold.cpu);
                    series_add(&rwarm[p], r.base.cpu / r.warm.cpu);
                }
                last[p] = r;
            }
        /* the same tree on both pools: evictions follow the budget alone */
        if (last[0].hit_tokens != last[1].hit_tokens || last[0].cached != last[1].cached) {
            fprintf(stderr, "radix_bench: steady %s: the tree differs between the pools "
                    "(hits %lld / %lld, cached %lld / %lld)\n", src->name,
                    (long long)last[0].hit_tokens, (long long)last[1].hit_tokens,
                    (long long)last[0].cached, (long long)last[1].cached);
            exit(1);
        }
        for (int p = 0; p < 2; p++) {
            const st_res *r = &last[p];
            const char *unit = fig == ST_EVICT ? "leaf" : "request";
            /* the tree's share of the pool: its budget of pages */
            double pool_bytes = (double)budget * r->pool_bytes_per_page;
            printf("{\"scenario\":\"steady_%s_%s\",\"pool\":\"%s\",\"page_size\":%d,\"requests\":%d,"
                   "\"window_requests\":%d,\"unique_tokens\":%lld,\"budget_pages\":%d,"
                   "\"pool_pages\":%d,\"cached_tokens\":%lld,\"nodes\":%lld,\"repeats\":%d,"
                   "\"pool_bytes_per_page\":%.3f",
                   src->name, st_fig_name[fig], pool_name[p], src->P, src->nreq, src->nreq / 4,
                   (long long)src->unique_tokens, budget, p ? 2 * budget : budget,
                   (long long)r->cached, (long long)r->nodes, repeats, r->pool_bytes_per_page);
            put_ratio("hit_rate", (double)r->hit_tokens, (double)r->req_tokens, "%.4f");
            put_ratio("host_bytes_per_token", (double)r->host_bytes, (double)r->cached, "%.3f");
            put_ratio("host_bytes_per_token_with_pool", (double)r->host_bytes + pool_bytes,
                      (double)r->cached, "%.3f");
            put_ratio("runs_per_alloc", (double)r->alloc_runs, (double)r->allocs, "%.3f");
            put_ratio("pages_per_alloc", (double)r->alloc_pages, (double)r->allocs, "%.1f");
            put_ratio("runs_per_match", (double)r->match_runs, (double)r->matches, "%.3f");
            char key[64];
            snprintf(key, sizeof key, "cpu_ns_per_%s_cold", unit);
            put_range(key, &cold[p]);
            snprintf(key, sizeof key, "wall_ns_per_%s_cold", unit);
            put_range(key, &wcold[p]);
            snprintf(key, sizeof key, "cpu_ns_per_%s_warm", unit);
            put_range(key, &warm[p]);
            /* what a pool defers from its frees to its allocations shows here */
            if (walloc[p].n) put_range("cpu_ns_per_leaf_cold_with_allocs", &walloc[p]);
            if (rcold[p].n) {
                printf(",\"baseline\":\"memcmp of the request's tokens\"");
                put_range("ratio_cold", &rcold[p]);
                put_range("ratio_warm", &rwarm[p]);
            }
            printf("}\n");
        }
        fflush(stdout);
    }
}

static void bench_steady_sources(double scale, const char *mooncake_dir)
{
    sp_tree g;
    int32_t nsys = (int32_t)(SP_SYS * scale + 0.5);
    uint64_t saved = rng_state;
    rng_state = mix64(bench_seed ^ 0x5a5a5a5aULL); /* the same tree as shared_prompt_tree */
    sp_make(&g, nsys < 1 ? 1 : nsys);
    sp_stream s = {&g, xmalloc(sizeof(int32_t) * (size_t)g.nreq)};
    for (int32_t i = 0; i < g.nreq; i++) { /* skewed: u^2 over the shuffled requests */
        double u = (double)(rnd64() >> 11) * 0x1.0p-53;
        s.pick[i] = (int32_t)(u * u * g.nreq);
    }
    rng_state = saved;
    steady_src src = {"shared_prompt", 1, g.nreq, g.maxlen, g.ntok, sp_stream_get, &s};
    bench_steady(&src);
    free(s.pick);
    free(g.tok);
    free(g.seg);
    free(g.req);

    if (!mooncake_dir) return;
    mc_trace m;
    if (!mc_load(mooncake_dir, &m, (int32_t)(12031 * scale) + 1)) {
        fprintf(stderr, "radix_bench: no %s/conversation_trace.jsonl: Mooncake scenarios skipped\n",
                mooncake_dir);
        return;
    }
    int32_t maxid = 0, maxlen = 0;
    for (int64_t k = 0; k < m.off[m.nreq]; k++) if (m.ids[k] > maxid) maxid = m.ids[k];
    uint8_t *seen = calloc((size_t)maxid + 1, 1);
    int64_t unique = 0;
    for (int32_t i = 0; i < m.nreq; i++) {
        if (m.len[i] > maxlen) maxlen = m.len[i];
        for (int64_t k = m.off[i]; k < m.off[i + 1]; k++)
            if (!seen[m.ids[k]]) seen[m.ids[k]] = 1, unique += 512;
    }
    free(seen);
    steady_src mc = {"mooncake", 16, m.nreq, maxlen, unique, mc_get, &m};
    bench_steady(&mc);
    free(m.off);
    free(m.ids);
    free(m.len);
}

/* ---- scenario 4: eviction cost against tree size ------------------------- */

/* A flat tree of n leaves of 8 tokens, shuffled by n/2 matches; then evicted
 * one leaf per call. Returns the time per leaf; *steps = heap levels per leaf. */
/* Evict all n leaves of a flat tree one per call; returns the time per leaf,
 * and in *with_alloc the time per leaf of the evictions and one allocation
 * after them (where a pool that defers merging merges). */
static stopwatch evict_all(int32_t n, double *steps, stopwatch *with_alloc)
{
    page_pool pool;
    radix_tree *t;
    rkv_status st = page_pool_init(&pool, n * 8, 1);
    if (st != RKV_OK) die("page_pool_init", st);
    if ((st = radix_tree_create(&pool, RADIX_LRU, &t)) != RKV_OK) die("radix_tree_create", st);
    int32_t tok[8], pages[8], len, node;
    for (int32_t i = 0; i < n; i++) {
        tok[0] = i; /* distinct first tokens: every leaf hangs off the root */
        for (int k = 1; k < 8; k++) tok[k] = tail_token(i, k);
        insert_fresh(t, &pool, tok, 8);
    }
    for (int32_t i = 0; i < n / 2; i++) { /* whole leaves: no splits */
        tok[0] = rnd_below(n);
        for (int k = 1; k < 8; k++) tok[k] = tail_token(tok[0], k);
        radix_tree_match(t, tok, 8, 0, pages, &len, &node);
    }
    radix_tree_sizes s0, s1;
    radix_tree_get_sizes(t, &s0);
    stopwatch per = {0, 0}, t0 = sw_start();
    int64_t freed = 0;
    for (int32_t i = 0; i < n; i++) freed += radix_tree_evict(t, 1);
    sw_stop(&per, t0);
    *with_alloc = per;
    stopwatch ta = sw_start();
    st = page_pool_alloc(&pool, 1, pages);
    sw_stop(with_alloc, ta);
    if (st != RKV_OK) die("page_pool_alloc", st);
    per.cpu /= n;
    per.wall /= n;
    with_alloc->cpu /= n;
    with_alloc->wall /= n;
    radix_tree_get_sizes(t, &s1);
    *steps = (double)(s1.heap_steps - s0.heap_steps) / n;
    if (freed != (int64_t)n * 8) {
        fprintf(stderr, "radix_bench: evicted %lld tokens, expected %lld\n", (long long)freed,
                (long long)n * 8);
        exit(1);
    }
    radix_tree_destroy(t);
    page_pool_destroy(&pool);
    return per;
}

static void bench_evict_scaling(double scale)
{
    int32_t small = 8192, large = (int32_t)(131072 * scale);
    if (large < 2 * small) large = 2 * small;
    series cs = {0}, cl = {0}, ws = {0}, wl = {0}, growth = {0}, ratio = {0}, as = {0}, al = {0};
    double steps_small = 0, steps_large = 0;
    for (int round = 0; round < repeats; round++) {
        stopwatch pas, pal;
        stopwatch ps = evict_all(small, &steps_small, &pas);
        stopwatch pl = evict_all(large, &steps_large, &pal);
        series_add(&as, 1e9 * pas.cpu);
        series_add(&al, 1e9 * pal.cpu);
        double scan_large = heapify_seconds(large);
        series_add(&cs, 1e9 * ps.cpu);
        series_add(&cl, 1e9 * pl.cpu);
        series_add(&ws, 1e9 * ps.wall);
        series_add(&wl, 1e9 * pl.wall);
        series_add(&growth, pl.cpu / ps.cpu);
        series_add(&ratio, scan_large / pl.cpu);
    }
    printf("{\"scenario\":\"evict_scaling\",\"page_size\":1,\"leaves_small\":%d,"
           "\"leaves_large\":%d,\"repeats\":%d,\"heap_steps_per_leaf_small\":%.2f,"
           "\"heap_steps_per_leaf_large\":%.2f,\"steps_growth_per_leaf\":%.2f,"
           "\"log_n_growth\":%.2f",
           small, large, repeats, steps_small, steps_large, steps_large / steps_small,
           __builtin_log2((double)large) / __builtin_log2((double)small));
    put_range("cpu_ns_per_leaf_small", &cs);
    put_range("cpu_ns_per_leaf_large", &cl);
    put_range("wall_ns_per_leaf_small", &ws);
    put_range("wall_ns_per_leaf_large", &wl);
    put_range("cpu_time_growth_per_leaf", &growth);
    put_range("cpu_ns_per_leaf_small_with_alloc", &as);
    put_range("cpu_ns_per_leaf_large_with_alloc", &al);
    printf(",\"baseline\":\"heapify all leaves once (rebuild per eviction)\"");
    put_range("ratio", &ratio);
    printf("}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    double scale = 1.0;
    int64_t seed = 42, nrep = repeats;
    const char *only = NULL, *mooncake = getenv("RKV_MOONCAKE_DIR");
    cli_opt table[] = {
        CLI_DOUBLE_OPT("--scale", &scale, 1e-9, 100),
        CLI_INT_OPT("--seed", &seed, 0, INT64_MAX),
        CLI_INT_OPT("--repeats", &nrep, 1, REPEATS_MAX),
        CLI_STR_OPT("--mooncake", &mooncake),
        CLI_STR_OPT("--only", &only),
        CLI_END,
    };
    char err[256];
    cli_args a;
    if (cli_parse("radix_bench", table, argc, argv, &a, err, sizeof err) || a.npos || a.help) {
        if (!a.help) fprintf(stderr, "radix_bench: %s\n", a.npos ? "no positional arguments" : err);
        fprintf(stderr, "usage: radix_bench [--scale S] [--seed N] [--repeats R] [--only SCENARIO] "
                        "[--mooncake DIR]\n");
        return 2;
    }
    rng_state = (uint64_t)seed;
    repeats = (int)nrep;
    bench_seed = rng_state;
    /* scenario groups in the order they run; --only PREFIX runs those whose
     * name starts with it (each draws its data from its own seed) */
    const struct { const char *name; int kind; } groups[] = {
        {"match_cached_100k", 0}, {"shared_prompt_tree", 1}, {"shared_prompts", 2},
        {"evict_scaling", 3}, {"steady", 4},
    };
    int ran = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        if (only && strncmp(groups[g].name, only, strlen(only))) continue;
        ran++;
        switch (groups[g].kind) {
        case 0:
            bench_long_match("match_cached_100k_nopages", 0, 1, LONG_NOPAGES, scale);
            bench_long_match("match_cached_100k", 0, 1, LONG_FLAT, scale);
            bench_long_match("match_cached_100k_runs", 0, 1, LONG_RUNS, scale);
            bench_long_match("match_cached_100k_runs_expanded", 0, 1, LONG_RUNS_EXPANDED, scale);
            bench_long_match("match_cached_100k_chain", 1, 1, LONG_FLAT, scale);
            bench_long_match("match_cached_100k_p16", 0, 16, LONG_FLAT, scale);
            break;
        case 1: bench_shared_prompt_tree(scale); break;
        case 2: bench_shared(scale); break;
        case 3: bench_evict_scaling(scale); break;
        default: bench_steady_sources(scale, mooncake); break;
        }
    }
    if (!ran) {
        fprintf(stderr, "radix_bench: --only '%s' names no scenario (match_cached_100k, "
                "shared_prompt_tree, shared_prompts, evict_scaling, steady)\n", only);
        return 2;
    }
    return sink == 12345 ? 1 : 0;
}
