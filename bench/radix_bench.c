/* radix_bench.c - micro-benchmarks of the compressed radix tree. Prints one
 * JSON object per scenario on stdout (JSON Lines); every scenario carries a
 * baseline measured in the same run and the ratio against it.
 *
 * Scenarios:
 *   match_cached_100k        a 100k-token prompt cached as one node, matched
 *                            in full again and again; baseline memcmp of the
 *                            same tokens (target >= 1 G tokens/s)
 *   match_cached_100k_chain  the same prompt split into 100 nodes
 *   match_cached_100k_p16    one node at page size 16 (the engine's default):
 *                            the compare alone, page ids are 1/16 of the copy
 *   shared_prompts_insert    requests that share 64 system prompts and earlier
 *                            conversations (~1M cached tokens, ~50k nodes),
 *                            each one match + lock + alloc + insert + unlock;
 *                            baseline memcmp over the same tokens
 *   shared_prompts_match     every request matched again, fully cached
 *   evict_pressure           the same requests with a pool of a quarter of the
 *                            tokens, evicting on every shortage; baseline: one
 *                            heapify of all candidates (a lower bound of what a
 *                            rebuild per eviction costs), ratio = that time /
 *                            time per evicted leaf
 *   evict_scaling            evict all leaves one by one from flat trees of 8k
 *                            and 128k leaves; ratio of the cost per leaf (O(log n)
 *                            keeps it near 1, a rebuild would make it ~16)
 *
 * Usage: radix_bench [--scale S] [--seed N]   (S multiplies the sizes, default 1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "radix_tree.h"
#include "rkv_config.h"

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rng_state;
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

static void bench_long_match(int chain, int32_t P, double scale)
{
    const int32_t n = 100000;
    int reps = (int)(200 * scale) + 1;
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
    radix_tree_match(t, copy, n, 0, pages, &len, &node);
    sink += memcmp(tok, copy, sizeof(int32_t) * n);

    /* best of three rounds each, alternating, against noise from other jobs */
    double t_tree = 1e30, t_base = 1e30;
    for (int round = 0; round < 3; round++) {
        double t0 = now_s();
        for (int r = 0; r < reps; r++) {
            radix_tree_match(t, copy, n, 0, pages, &len, &node);
            if (len != n) {
                fprintf(stderr, "radix_bench: matched %d of %d tokens\n", len, n);
                exit(1);
            }
        }
        double dt = now_s() - t0;
        if (dt < t_tree) t_tree = dt;
        t0 = now_s();
        for (int r = 0; r < reps; r++) {
            copy[r % 7] ^= 0; /* keep the loop from being hoisted */
            sink += memcmp(tok, copy, sizeof(int32_t) * n);
        }
        dt = now_s() - t0;
        if (dt < t_base) t_base = dt;
    }
    radix_tree_sizes s;
    radix_tree_get_sizes(t, &s);
    double tps = (double)n * reps / t_tree, bps = (double)n * reps / t_base;
    printf("{\"scenario\":\"%s\",\"page_size\":%d,\"prompt_tokens\":%d,\"nodes\":%lld,"
           "\"ops\":%d,\"ops_per_s\":%.1f,\"tokens_per_s\":%.4g,\"host_bytes_per_token\":%.3f,"
           "\"baseline\":\"memcmp\",\"baseline_tokens_per_s\":%.4g,\"ratio\":%.3f,"
           "\"target_tokens_per_s\":1e9}\n",
           chain ? "match_cached_100k_chain" : P > 1 ? "match_cached_100k_p16" : "match_cached_100k",
           P, n, (long long)s.num_nodes,
           reps, reps / t_tree, tps, bytes_per_token(t), bps, tps / bps);
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
 * Best of three, in seconds. */
static double heapify_seconds(int64_t n)
{
    if (n < 1) n = 1;
    uint64_t *src = xmalloc(sizeof(uint64_t) * (size_t)n), *h = xmalloc(sizeof(uint64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) src[i] = rnd64();
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        double t0 = now_s();
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
        double dt = now_s() - t0;
        sink += (int64_t)h[0];
        if (dt < best) best = dt;
    }
    free(src);
    free(h);
    return best;
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
    double t_total, t_evict;
    int64_t tokens, evicted_leaves, evicted_tokens, shortfalls;
} flow_result;

/* The engine's flow per request: match, lock, alloc the rest (evict on a
 * shortage), insert, free duplicates, unlock. */
static void run_flow(const workload *w, cache *c, batch *b, int32_t *pages, flow_result *res)
{
    cache_match m;
    cache_match_init(&m);
    page_pool *pool = c->pool;
    for (int32_t first = 0; first < w->nreq; first += BATCH) {
        fill_batch(w, b, first);
        double t0 = now_s();
        for (int32_t k = 0; k < b->count; k++) {
            const int32_t *tok = b->tok + b->off[k];
            int32_t n = (int32_t)(b->off[k + 1] - b->off[k]);
            rkv_status st = cache_match_prefix(c, tok, n, 0, &m);
            if (st == RKV_OK) st = cache_lock(c, &m);
            if (st != RKV_OK) die("match/lock", st);
            int32_t P = pool->page_size, have = m.num_pages, need = n / P - have;
            if (need > pool->num_free) {
                double te = now_s();
                res->shortfalls++;
                res->evicted_tokens += cache_evict(c, (int64_t)(need - pool->num_free) * P);
                res->t_evict += now_s() - te;
            }
            memcpy(pages, m.pages, sizeof(int32_t) * (size_t)have);
            if (page_pool_alloc(pool, need, pages + have) == RKV_OK) {
                int32_t prefix = 0;
                if ((st = cache_insert(c, tok, n, pages, 0, &prefix)) != RKV_OK) die("insert", st);
                page_pool_free(pool, pages + have, prefix / P - have);
            }
            cache_unlock(c, &m);
            res->tokens += n;
        }
        res->t_total += now_s() - t0;
    }
    cache_match_free(&m);
}

/* memcmp over the same token streams, batch by batch: the cost floor of
 * reading every request's tokens once. */
static double baseline_memcmp(const workload *w, batch *b, int32_t *scratch)
{
    double t = 0;
    for (int32_t first = 0; first < w->nreq; first += BATCH) {
        fill_batch(w, b, first);
        memcpy(scratch, b->tok, sizeof(int32_t) * (size_t)b->off[b->count]);
        double t0 = now_s();
        for (int32_t k = 0; k < b->count; k++)
            sink += memcmp(b->tok + b->off[k], scratch + b->off[k],
                           sizeof(int32_t) * (size_t)(b->off[k + 1] - b->off[k]));
        t += now_s() - t0;
    }
    return t;
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

    /* 2a: insert flow with room for everything */
    page_pool pool;
    rkv_status st = page_pool_init(&pool, (int32_t)(total < 4000000 ? total : 4000000), 1);
    if (st != RKV_OK) die("page_pool_init", st);
    cache_config cfg = {.kind = "radix", .policy = "lru"};
    cache *c;
    char err[256];
    int64_t heap0 = allocated_bytes();
    if ((st = cache_create(&cfg, &pool, &c, err, sizeof err)) != RKV_OK) die(err, st);
    flow_result ins = {0};
    run_flow(&w, c, &b, pages, &ins);
    int64_t heap1 = allocated_bytes();
    double t_base = baseline_memcmp(&w, &b, scratch);
    radix_tree *t = cache_radix_tree(c);
    radix_tree_sizes s;
    radix_tree_get_sizes(t, &s);
    int64_t cached = s.evictable_tokens + s.protected_tokens;
    printf("{\"scenario\":\"shared_prompts_insert\",\"page_size\":1,\"requests\":%d,"
           "\"request_tokens\":%lld,\"cached_tokens\":%lld,\"nodes\":%lld,\"splits\":%llu,"
           "\"ops_per_s\":%.1f,\"tokens_per_s\":%.4g,\"host_bytes_per_token\":%.3f,"
           "\"allocator_bytes_per_token\":%.3f,"
           "\"baseline\":\"memcmp\",\"baseline_tokens_per_s\":%.4g,\"ratio\":%.3f}\n",
           w.nreq, (long long)ins.tokens, (long long)cached, (long long)s.num_nodes,
           (unsigned long long)s.splits, w.nreq / ins.t_total, ins.tokens / ins.t_total,
           bytes_per_token(t), heap0 >= 0 ? (double)(heap1 - heap0) / (double)cached : -1.0,
           ins.tokens / t_base, (ins.tokens / ins.t_total) / (ins.tokens / t_base));
    fflush(stdout);

    /* 2b: every request again, fully cached */
    double t_match = 0;
    int64_t matched = 0;
    int32_t len = 0, node = 0;
    for (int32_t first = 0; first < w.nreq; first += BATCH) {
        fill_batch(&w, &b, first);
        double t0 = now_s();
        for (int32_t k = 0; k < b.count; k++) {
            radix_tree_match(t, b.tok + b.off[k], (int32_t)(b.off[k + 1] - b.off[k]), 0, pages,
                             &len, &node);
            matched += len;
        }
        t_match += now_s() - t0;
    }
    printf("{\"scenario\":\"shared_prompts_match\",\"page_size\":1,\"requests\":%d,"
           "\"matched_tokens\":%lld,\"hit_rate\":%.4f,\"nodes\":%lld,\"ops_per_s\":%.1f,"
           "\"tokens_per_s\":%.4g,\"host_bytes_per_token\":%.3f,\"baseline\":\"memcmp\","
           "\"baseline_tokens_per_s\":%.4g,\"ratio\":%.3f}\n",
           w.nreq, (long long)matched, (double)matched / (double)ins.tokens,
           (long long)s.num_nodes, w.nreq / t_match, matched / t_match, bytes_per_token(t),
           ins.tokens / t_base, (matched / t_match) / (ins.tokens / t_base));
    fflush(stdout);
    cache_destroy(c);
    page_pool_destroy(&pool);

    /* 3: the same flow with a quarter of the pages */
    if ((st = page_pool_init(&pool, (int32_t)(cached / 4), 1)) != RKV_OK) die("page_pool_init", st);
    if ((st = cache_create(&cfg, &pool, &c, err, sizeof err)) != RKV_OK) die(err, st);
    t = cache_radix_tree(c);
    flow_result ev = {0};
    run_flow(&w, c, &b, pages, &ev);
    radix_tree_get_sizes(t, &s);
    double t_scan = heapify_seconds(s.num_candidates);
    ev.evicted_leaves = (int64_t)s.evictions;
    double per_leaf = ev.evicted_leaves ? ev.t_evict / (double)ev.evicted_leaves : 0;
    printf("{\"scenario\":\"evict_pressure\",\"page_size\":1,\"requests\":%d,\"pool_pages\":%d,"
           "\"shortfalls\":%lld,\"evicted_leaves\":%lld,\"evicted_tokens\":%lld,"
           "\"nodes_at_end\":%lld,\"ops_per_s\":%.1f,\"tokens_per_s\":%.4g,"
           "\"ns_per_evicted_leaf\":%.1f,\"host_bytes_per_token\":%.3f,"
           "\"baseline\":\"heapify all candidates once (rebuild per eviction)\",\"candidates\":%lld,"
           "\"baseline_ns\":%.1f,\"ratio\":%.1f}\n",
           w.nreq, pool.num_pages, (long long)ev.shortfalls, (long long)ev.evicted_leaves,
           (long long)ev.evicted_tokens, (long long)s.num_nodes, w.nreq / ev.t_total,
           ev.tokens / ev.t_total, 1e9 * per_leaf, bytes_per_token(t), (long long)s.num_candidates,
           1e9 * t_scan,
           per_leaf > 0 ? t_scan / per_leaf : 0.0);
    fflush(stdout);
    cache_destroy(c);
    page_pool_destroy(&pool);
    free(b.tok);
    free(b.off);
    free(scratch);
    free(pages);
    free(w.r);
    free(w.sys);
}

/* ---- scenario 4: eviction cost against tree size ------------------------- */

/* A flat tree of n leaves of 8 tokens, shuffled by n/2 matches; then evicted
 * one leaf per call. Returns seconds per leaf; *scan = one full leaf scan. */
static double evict_all(int32_t n, double *scan, double *steps)
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
    *scan = heapify_seconds(n);
    radix_tree_sizes s0, s1;
    radix_tree_get_sizes(t, &s0);
    double t0 = now_s();
    int64_t freed = 0;
    for (int32_t i = 0; i < n; i++) freed += radix_tree_evict(t, 1);
    double per = (now_s() - t0) / n;
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
    double scan_small, scan_large, steps_small, steps_large;
    double ps = evict_all(small, &scan_small, &steps_small);
    double pl = evict_all(large, &scan_large, &steps_large);
    printf("{\"scenario\":\"evict_scaling\",\"page_size\":1,\"leaves_small\":%d,\"leaves_large\":%d,"
           "\"ns_per_leaf_small\":%.1f,\"ns_per_leaf_large\":%.1f,\"ops_per_s\":%.1f,"
           "\"tokens_per_s\":%.4g,\"heap_steps_per_leaf_small\":%.2f,"
           "\"heap_steps_per_leaf_large\":%.2f,\"time_growth_per_leaf\":%.2f,"
           "\"steps_growth_per_leaf\":%.2f,\"log_n_growth\":%.2f,"
           "\"baseline\":\"heapify all leaves once (rebuild per eviction)\",\"baseline_ns\":%.1f,"
           "\"ratio\":%.1f}\n",
           small, large, 1e9 * ps, 1e9 * pl, 1.0 / pl, 8.0 / pl, steps_small, steps_large, pl / ps,
           steps_large / steps_small,
           __builtin_log2((double)large) / __builtin_log2((double)small), 1e9 * scan_large,
           scan_large / pl);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    double scale = 1.0;
    rng_state = 42;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--scale") && i + 1 < argc) {
            scale = strtod(argv[++i], NULL);
            if (!(scale > 0 && scale <= 100)) {
                fprintf(stderr, "radix_bench: --scale must be in (0, 100], got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            rng_state = strtoull(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "radix_bench: unknown option '%s'\nusage: radix_bench [--scale S] [--seed N]\n",
                    argv[i]);
            return 2;
        }
    }
    bench_long_match(0, 1, scale);
    bench_long_match(1, 1, scale);
    bench_long_match(0, 16, scale);
    bench_shared(scale);
    bench_evict_scaling(scale);
    return sink == 12345 ? 1 : 0;
}
