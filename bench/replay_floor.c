/* replay_floor.c - the memory floor of the SGLang interface's whole replay:
 * the reads and writes any exact prefix cache makes on the caller's data in
 * bench/sglang_cache_bench.py's replay, with no tree behind them. JSON Lines.
 *
 * usage: replay_floor --keys FILE [--rounds N] [--capacity TOKENS]
 *
 * FILE (written by bench/replay_floor.py): "RKVFLOOR1", then an int32 count
 * of requests, then per request int32 n, int32 matched and n int64 token ids
 * (the request's array('q'), as SGLang's scheduler holds it, and how much of
 * it the cache matched in the replay). Per request, in the replay's order:
 *
 *   match  reads the first matched + 1 ids of the request's array (any
 *          exact match reads every id it matches, and one more to stop);
 *   insert copies the array (the loop's slice, untimed) and reads the copy
 *          whole (any exact insert reads its whole key);
 *   path   writes matched int64 KV indices into a block of its own
 *          (path_device_indices hands the caller a tensor it keeps).
 *
 * What is left out makes this a floor, not an estimate: reading the cache's
 * own copy of the tokens to compare with, any bookkeeping of the cache's
 * (pages, values, LRU order, eviction), the calls themselves. Each request's
 * array is a block of its own, read once a round as the replay reads it, so
 * the arrays (about 19 MB) meet the cache as the replay's do. The path
 * blocks are two, used in turn (an allocator handing back a recently freed
 * block); a fresh block per call would measure page faults.
 *
 * With --capacity, the same requests also go through radixkv's own radix
 * tree, in C and nothing else (no Python, no SGLang objects, no tensors, no
 * KV values): the replay's calls on the C cache (radix_tree.h's int64 walks),
 * with the loop's capacity in tokens and its eviction of the shortfall:
 *
 *   tree_match   cache_radix_match64 of all ids but the last (each request's
 *                matched length must be the file's, else the run fails);
 *   tree_lock    cache_lock and, after the insert, cache_unlock;
 *   tree_evict   cache_evict of the shortfall, when there is one;
 *   tree_insert  cache_radix_insert_hold64 of the loop's slice (copied
 *                outside the clock), pages taken from the pool.
 *
 * It runs twice a round: alone ("tree", right after the floor's pass, which
 * leaves the requests' ids, about 19 MB, in the last-level cache), and
 * "tree_churn", with --churn-kb KB (default 1024) of other memory written
 * between requests, outside the clocks, as a serving process's own work
 * would: the ids then come from memory, as they do for the floor's own pass
 * (each round's follows a churned replay). Most of what churn adds is that
 * read of the key (bench/RESULTS.md, "The tree's walk with its data out of
 * cache"), not the tree's nodes and edges. What the tree
 * costs of an adapter's time, and so what is left to the interface around it
 * (the params and result objects, the tensors, the values), is the adapter's
 * in-call time less these.
 *
 * Each part is timed per call by thread CPU time and by wall time, the clock
 * reads' own cost (the median of empty intervals) taken off every interval,
 * as sglang_cache_bench's CallClock does. One line per round:
 *   {"bench":"replay_floor","round","requests","match_ms","insert_ms","path_ms",
 *    "total_ms","match_wall_ms","insert_wall_ms","path_wall_ms","total_wall_ms"}
 * then a summary line {"bench":"replay_floor","summary":true,...} with the
 * median and [min, max] of each over the rounds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "cache.h"
#include "cli.h"
#include "page_pool.h"
#include "radix_tree.h"
#include "rkv_core.h"

typedef uint64_t u64x4 __attribute__((vector_size(32)));

/* The XOR of k[0..n): every id read, at the width the vectorizer allows. */
RKV_WIDE static uint64_t ids_read(const int64_t *k, int64_t n)
{
    u64x4 a = {0, 0, 0, 0}, b = {0, 0, 0, 0}, c, d;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&c, k + i, sizeof c);
        memcpy(&d, k + i + 4, sizeof d);
        a ^= c;
        b ^= d;
    }
    a ^= b;
    uint64_t r = a[0] ^ a[1] ^ a[2] ^ a[3];
    for (; i < n; i++) r ^= (uint64_t)k[i];
    return r;
}

/* out[i] = start + i, i < n: the cheapest values a path can have (one run). */
RKV_WIDE static void ids_write(int64_t *out, int64_t start, int64_t n)
{
    u64x4 x = {(uint64_t)start, (uint64_t)start + 1, (uint64_t)start + 2, (uint64_t)start + 3};
    const u64x4 step = {4, 4, 4, 4};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        memcpy(out + i, &x, sizeof x);
        x += step;
    }
    for (; i < n; i++) out[i] = start + i;
}

typedef struct {
    int32_t n, matched;
    int64_t *ids;
} floor_req;

/* The requests of path (the format above); NULL with the reason printed. */
static floor_req *keys_read(const char *path, int32_t *count, int64_t *longest)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay_floor: --keys %s: cannot open\n", path);
        return NULL;
    }
    char magic[9];
    int32_t r = 0;
    floor_req *q = NULL;
    if (fread(magic, 1, 9, f) != 9 || memcmp(magic, "RKVFLOOR1", 9) != 0
        || fread(&r, 4, 1, f) != 1 || r <= 0 || r > 10000000) {
        fprintf(stderr, "replay_floor: --keys %s: not a key file (RKVFLOOR1 and a count)\n",
                path);
        goto fail;
    }
    q = calloc((size_t)r, sizeof *q);
    if (!q) goto oom;
    *longest = 0;
    for (int32_t i = 0; i < r; i++) {
        if (fread(&q[i].n, 4, 1, f) != 1 || fread(&q[i].matched, 4, 1, f) != 1 || q[i].n <= 0
            || q[i].matched < 0 || q[i].matched >= q[i].n) {
            fprintf(stderr, "replay_floor: --keys %s: request %" PRId32 ": a bad length or "
                    "match (n > matched >= 0)\n", path, i);
            goto fail;
        }
        if (!(q[i].ids = malloc(sizeof(int64_t) * (size_t)q[i].n))) goto oom;
        if (fread(q[i].ids, 8, (size_t)q[i].n, f) != (size_t)q[i].n) {
            fprintf(stderr, "replay_floor: --keys %s: request %" PRId32 ": the file ends "
                    "inside its ids\n", path, i);
            goto fail;
        }
        if (q[i].n > *longest) *longest = q[i].n;
    }
    fclose(f);
    *count = r;
    return q;
oom:
    fprintf(stderr, "replay_floor: --keys %s: out of memory\n", path);
fail:
    if (q)
        for (int32_t i = 0; i < r; i++) free(q[i].ids);
    free(q);
    fclose(f);
    return NULL;
}

enum { PARTS = 3, CLOCKS = 2, TREE_PARTS = 4, TREE_RUNS = 2 };
static const char *const part_names[PARTS] = {"match", "insert", "path"};
static const char *const tree_names[TREE_PARTS] = {"match", "lock", "evict", "insert"};
/* The tree's two replays a round: alone, and with other memory written
 * between requests (--churn-kb), as a serving process's own work (the
 * scheduler, the tensors, the model) does between two cache calls. */
static const char *const tree_runs[TREE_RUNS] = {"tree", "tree_churn"};

/* The median of 2001 empty intervals of clock id, in seconds. */
static double clock_offset(clockid_t id)
{
    enum { EMPTY = 2001 };
    static double d[EMPTY];
    for (int i = 0; i < EMPTY; i++) {
        double t0 = bench_clock_s(id);
        d[i] = bench_clock_s(id) - t0;
    }
    return bench_stats_of(d, EMPTY).med;
}

enum { CHURN_RING = 256 << 20 };

/* One replay of q[0..r) through a fresh radix cache of capacity tokens,
 * adding each part's time (ms, less the clock's own cost off[]) to
 * sum[part][clock]. slice: room for the longest request. 0, or -1 with the
 * reason printed (a refused call, or a matched length other than the
 * file's). */
static int tree_replay(const floor_req *q, int32_t r, int64_t capacity, int64_t *slice,
                       unsigned char *churn, size_t churn_bytes, const clockid_t *ids,
                       const double *off, double sum[TREE_PARTS][CLOCKS])
{
    int64_t tokens = 0;
    for (int32_t i = 0; i < r; i++) tokens += q[i].n;
    page_pool pool;
    cache *c = NULL;
    char err[256] = "";
    cache_config cfg = {.kind = "radix", .policy = "lru"};
    if (tokens >= INT32_MAX || page_pool_init(&pool, (int32_t)tokens + 1, 1) != RKV_OK) {
        fprintf(stderr, "replay_floor: --capacity: no page pool of %" PRId64 " pages\n", tokens);
        return -1;
    }
    if (cache_create(&cfg, &pool, &c, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "replay_floor: --capacity: %s\n", err);
        page_pool_destroy(&pool);
        return -1;
    }
    cache_seq m, s;
    cache_seq_init(&m, 0, 0);
    cache_seq_init(&s, 0, 0);
    int64_t used = 0, freed = 0;
    size_t churn_at = 0;
    int rc = 0;
    for (int32_t i = 0; i < r && rc == 0; i++) {
        const floor_req *x = &q[i];
        const radix_page_run *runs;
        int32_t nruns, prefix = 0, bad = -1;
        rkv_status st = RKV_OK;
        /* Times stmt into part k: thread CPU and wall, less the clocks' own cost. */
#define TREE_TIMED(k, stmt)                                                              \
    do {                                                                                 \
        double c0_ = bench_clock_s(ids[0]), w0_ = bench_clock_s(ids[1]);                 \
        stmt;                                                                            \
        double w1_ = bench_clock_s(ids[1]), c1_ = bench_clock_s(ids[0]);                 \
        sum[k][0] += c1_ - c0_ - off[0];                                                 \
        sum[k][1] += w1_ - w0_ - off[1];                                                 \
    } while (0)
        TREE_TIMED(0, st = cache_radix_match64(c, &m, x->ids, x->n - 1, &runs, &nruns));
        if (st == RKV_OK && m.len != x->matched) {
            fprintf(stderr, "replay_floor: --capacity: request %" PRId32 ": the tree matched %"
                    PRId32 " tokens, the file says %" PRId32 "\n", i, m.len, x->matched);
            rc = -1;
            break;
        }
        if (st == RKV_OK) TREE_TIMED(1, st = cache_lock(c, &m));
        int64_t need = x->n - m.len, room = capacity - used + freed;
        if (st == RKV_OK && need > room) TREE_TIMED(2, freed += cache_evict(c, need - room));
        used += need;
        memcpy(slice, x->ids, sizeof(int64_t) * (size_t)x->n);
        if (st == RKV_OK)
            TREE_TIMED(3, st = cache_radix_insert_hold64(c, &s, slice, x->n, &prefix, &runs,
                                                         &nruns, &bad));
        if (prefix > m.len) freed += prefix - m.len; /* the duplicates the caller frees */
        if (st == RKV_OK) TREE_TIMED(1, st = cache_unlock(c, &m));
#undef TREE_TIMED
        if (st != RKV_OK) {
            fprintf(stderr, "replay_floor: --capacity: request %" PRId32 ": %s\n", i,
                    rkv_status_str(st));
            rc = -1;
        }
        /* Outside the clocks: a line of each 64 bytes of the next churn_bytes
         * of a ring larger than the last-level cache, so nothing of it is
         * still cached when the ring comes round. */
        for (size_t k = 0; k < churn_bytes; k += 64) {
            churn[churn_at]++;
            churn_at = (churn_at + 64) % CHURN_RING;
        }
    }
    cache_seq_free(&m);
    cache_seq_free(&s);
    cache_destroy(c);
    page_pool_destroy(&pool);
    return rc;
}

/* A round's parts as JSON fields: ",\"<prefix><name>_[wall_]ms\":x" for
 * each of sum[np][CLOCKS] (seconds) and the total ("<prefix>total"), the
 * ms kept in store[(p * CLOCKS + c)] for the summary. */
static void parts_print(const char *prefix, const char *const *names, int np,
                        const double (*sum)[CLOCKS], double *store)
{
    for (int c = 0; c < CLOCKS; c++) {
        double total = 0;
        for (int p = 0; p < np; p++) {
            double v = sum[p][c] * 1e3;
            store[p * CLOCKS + c] = v;
            total += v;
            printf(",\"%s%s_%sms\":%.4f", prefix, names[p], c ? "wall_" : "", v);
        }
        printf(",\"%stotal_%sms\":%.4f", prefix, c ? "wall_" : "", total);
    }
}

/* The summary's fields for parts_print()'s kept ms, all[(k * np + p) *
 * CLOCKS + c] over rounds k: each part's and the total's median and range.
 * col: room for rounds values. */
static void parts_summary(const char *prefix, const char *const *names, int np,
                          const double *all, int64_t rounds, double *col)
{
    for (int c = 0; c < CLOCKS; c++)
        for (int p = 0; p <= np; p++) {
            for (int64_t k = 0; k < rounds; k++) {
                col[k] = 0;
                for (int j = 0; j < np; j++)
                    if (j == p || p == np) col[k] += all[(k * np + j) * CLOCKS + c];
            }
            bench_stats st = bench_stats_of(col, (int)rounds);
            printf(",\"%s%s_%sms\":{\"median\":%.4f,\"range\":[%.4f,%.4f]}", prefix,
                   p < np ? names[p] : "total", c ? "wall_" : "", st.med, st.lo, st.hi);
        }
}

/* One round of the floor's three parts over q[0..r), into sum (seconds). */
static void floor_round(const floor_req *q, int32_t r, int64_t *slice, int64_t *path[2],
                        const clockid_t *ids, const double *off, double sum[PARTS][CLOCKS])
{
    volatile uint64_t sink = 0;
    for (int32_t i = 0; i < r; i++) {
        const floor_req *x = &q[i];
        for (int p = 0; p < PARTS; p++) {
            if (p == 1) memcpy(slice, x->ids, sizeof(int64_t) * (size_t)x->n);
            double c0 = bench_clock_s(ids[0]), w0 = bench_clock_s(ids[1]);
            if (p == 0) sink ^= ids_read(x->ids, x->matched + 1);
            else if (p == 1) sink ^= ids_read(slice, x->n);
            else ids_write(path[i & 1], i, x->matched);
            double w1 = bench_clock_s(ids[1]), c1 = bench_clock_s(ids[0]);
            sum[p][0] += c1 - c0 - off[0];
            sum[p][1] += w1 - w0 - off[1];
        }
        sink ^= (uint64_t)path[i & 1][x->matched / 2];
    }
}

int main(int argc, char **argv)
{
    const char *keys = NULL;
    int64_t rounds = 21, capacity = 0, churn_kb = 1024;
    cli_opt opts[] = {
        CLI_STR_OPT("--keys", &keys),
        CLI_INT_OPT("--rounds", &rounds, 1, 10000),
        CLI_INT_OPT("--capacity", &capacity, 1, INT32_MAX),
        CLI_INT_OPT("--churn-kb", &churn_kb, 0, 1 << 20),
        CLI_END,
    };
    cli_args a;
    char err[256];
    if (cli_parse("replay_floor", opts, argc, argv, &a, err, sizeof err) != 0) {
        fprintf(stderr, "replay_floor: %s\n", err);
        return 2;
    }
    if (a.help || !keys || a.npos) {
        fprintf(a.help ? stdout : stderr, "usage: replay_floor --keys FILE [--rounds N] "
                "[--capacity TOKENS [--churn-kb KB]]\n");
        return a.help ? 0 : 2;
    }
    int32_t r = 0;
    int64_t longest = 0;
    floor_req *q = keys_read(keys, &r, &longest);
    if (!q) return 1;
    int64_t *slice = malloc(sizeof(int64_t) * (size_t)longest);
    int64_t *path[2] = {malloc(sizeof(int64_t) * (size_t)longest),
                        malloc(sizeof(int64_t) * (size_t)longest)};
    double *ms = malloc(sizeof(double) * (size_t)rounds * PARTS * CLOCKS);
    double *tms = malloc(sizeof(double) * (size_t)rounds * TREE_RUNS * TREE_PARTS * CLOCKS);
    unsigned char *churn = capacity ? calloc(1, CHURN_RING) : NULL;
    if (!slice || !path[0] || !path[1] || !ms || !tms || (capacity && !churn)) {
        fprintf(stderr, "replay_floor: out of memory\n");
        return 1;
    }
    memset(path[0], 0, sizeof(int64_t) * (size_t)longest);
    memset(path[1], 0, sizeof(int64_t) * (size_t)longest);
    const clockid_t ids[CLOCKS] = {CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC};
    double off[CLOCKS];
    for (int c = 0; c < CLOCKS; c++) off[c] = clock_offset(ids[c]);
    const size_t per_run = (size_t)rounds * TREE_PARTS * CLOCKS;
    for (int64_t k = 0; k < rounds; k++) {
        double sum[PARTS][CLOCKS] = {{0}};
        floor_round(q, r, slice, path, ids, off, sum);
        double tsum[TREE_RUNS][TREE_PARTS][CLOCKS] = {{{0}}};
        for (int v = 0; v < TREE_RUNS && capacity; v++)
            if (tree_replay(q, r, capacity, slice, churn, v ? (size_t)churn_kb << 10 : 0, ids, off,
                            tsum[v]) < 0)
                return 1;
        printf("{\"bench\":\"replay_floor\",\"round\":%" PRId64 ",\"requests\":%" PRId32, k, r);
        parts_print("", part_names, PARTS, sum, ms + k * PARTS * CLOCKS);
        for (int v = 0; v < TREE_RUNS && capacity; v++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "%s_", tree_runs[v]);
            parts_print(prefix, tree_names, TREE_PARTS, tsum[v],
                        tms + v * per_run + k * TREE_PARTS * CLOCKS);
        }
        printf("}\n");
    }
    /* The summary: each part's median and range, and the totals'. */
    double *col = malloc(sizeof(double) * (size_t)rounds);
    if (!col) return 1;
    printf("{\"bench\":\"replay_floor\",\"summary\":true,\"rounds\":%" PRId64
           ",\"requests\":%" PRId32, rounds, r);
    parts_summary("", part_names, PARTS, ms, rounds, col);
    for (int v = 0; v < TREE_RUNS && capacity; v++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%s_", tree_runs[v]);
        parts_summary(prefix, tree_names, TREE_PARTS, tms + v * per_run, rounds, col);
    }
    printf("}\n");
    free(col);
    free(tms);
    free(churn);
    free(ms);
    free(slice);
    free(path[0]);
    free(path[1]);
    for (int32_t i = 0; i < r; i++) free(q[i].ids);
    free(q);
    return 0;
}
