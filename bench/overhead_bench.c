/* overhead_bench.c - what a prefix cache costs the host, per token, for one
 * point of the overhead study's grid (experiments/overhead): every cache kind's
 * match / insert / evict time per token, its host bytes per cached token, and
 * each hash function's time per block, as JSON Lines with ratios to a baseline
 * measured in the same run (radix for the kinds, xxh3 for the hash functions).
 * Never run as a test.
 *
 *   overhead_bench --len L [--requests N | --tokens T] [--page-size P] [--share S] [--groups G]
 *                  [--capacity-frac F] [--reps R] [--seed N] [--kinds a,b,...]
 *                  [--no-hash-fns]
 *
 * Workload: N (default max(2, T / L)) requests of L tokens; request r starts with the
 * shared prefix of group r mod G (floor(S * L) tokens, one random sequence per
 * group) and ends with its own random tokens:
 *
 *     request r:  [ prefix of group r mod G (S*L) | own tokens (L - S*L) ]
 *
 * S = 0: nothing shared (every token a divergence point away from the root);
 * S = 1: G distinct prompts, each repeated. The pool holds F times the
 * workload's distinct full pages (at least one request's), so eviction runs
 * when F < 1. Each request goes through the engine's calls: match all tokens
 * but the last, lock, evict the shortfall, allocate, insert, free what the
 * cache did not take, unlock. Times are the minimum over R replays, each on a
 * fresh cache; bytes are the host heap the cache holds at the end of a replay
 * (jemalloc's per-thread counters, glibc's mallinfo2 without jemalloc),
 * divided by the tokens it holds then.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rkv_config.h"

#if RKV_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include "block_hash.h"
#include "bench_replay.h"
#include "bench_util.h"
#include "cache.h"
#include "cli.h"

typedef struct opts {
    int32_t len, page_size, groups, reps, requests;
    int64_t tokens;
    double share, capacity_frac;
    uint64_t seed;
    const char *kinds;
    bool hash_fns;
} opts;

typedef struct phase {
    replay_cost cost; /* first member: phase and replay_cost share the timings */
    int64_t heap_bytes, cached_tokens, nodes;
    uint64_t hash_computations;
    double cpu_ns; /* thread CPU time of the whole replay (all calls, one read each end) */
} phase;

/* Thread CPU time: what the replay cost this thread, whatever else the
 * machine runs; read around a whole replay, not per call (it is a syscall). */
static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* Live heap bytes allocated by this thread (jemalloc) or the process (glibc). */
static int64_t heap_live(void)
{
#if RKV_HAVE_JEMALLOC
    uint64_t a = 0, d = 0;
    size_t sz = sizeof a;
    if (mallctl("thread.allocated", &a, &sz, NULL, 0) || mallctl("thread.deallocated", &d, &sz, NULL, 0))
        return 0;
    return (int64_t)(a - d);
#else
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)mi.uordblks + (int64_t)mi.hblkhd;
#endif
}

static int usage(void)
{
    fprintf(stderr, "usage: overhead_bench --len L [--requests N | --tokens T] [--page-size P] [--share S] [--groups G]\n"
                    "                      [--capacity-frac F] [--reps R] [--seed N] [--kinds a,b,...]\n"
                    "                      [--no-hash-fns]\n");
    return 2;
}

static int parse_opts(int argc, char **argv, opts *o)
{
    *o = (opts){.len = 0, .tokens = 1 << 20, .page_size = 16, .groups = 1, .reps = 3,
                .share = 0.5, .capacity_frac = 0.5, .seed = 1,
                .kinds = NULL, .hash_fns = true};
    int64_t len = 0, requests = 0, page_size = 16, groups = 1, reps = 3, seed = 1;
    bool no_hash_fns = false;
    cli_opt table[] = {
        CLI_INT_OPT("--len", &len, 2, INT32_MAX / 2),
        CLI_INT_OPT("--tokens", &o->tokens, 1, INT64_MAX / 2),
        CLI_INT_OPT("--requests", &requests, 1, INT32_MAX / 2),
        CLI_INT_OPT("--page-size", &page_size, 1, 1 << 20),
        CLI_DOUBLE_OPT("--share", &o->share, 0, 1),
        CLI_INT_OPT("--groups", &groups, 1, INT32_MAX),
        CLI_DOUBLE_OPT("--capacity-frac", &o->capacity_frac, 1e-9, 1e9),
        CLI_INT_OPT("--reps", &reps, 1, 1000),
        CLI_INT_OPT("--seed", &seed, 0, INT64_MAX),
        CLI_STR_OPT("--kinds", &o->kinds),
        CLI_FLAG_OPT("--no-hash-fns", &no_hash_fns),
        CLI_END,
    };
    char err[256];
    cli_args a;
    if (cli_parse("overhead_bench", table, argc, argv, &a, err, sizeof err) || a.npos) {
        fprintf(stderr, "overhead_bench: %s\n", a.npos ? "no positional arguments" : err);
        return -1;
    }
    if (a.help) return usage(), -1;
    if (!cli_given(table, "--len")) {
        fprintf(stderr, "overhead_bench: --len is required\n");
        return -1;
    }
    o->len = (int32_t)len;
    o->requests = (int32_t)requests;
    o->page_size = (int32_t)page_size;
    o->groups = (int32_t)groups;
    o->reps = (int32_t)reps;
    o->seed = (uint64_t)seed;
    o->hash_fns = !no_hash_fns;
    if (o->requests <= 0) o->requests = (int32_t)(o->tokens / o->len);
    if (o->requests < 2) o->requests = 2;
    return 0;
}

/* (requests, len) token ids. */
static int32_t *make_trace(const opts *o)
{
    return bench_make_trace(o->requests, o->len, (int32_t)(o->share * o->len + 1e-9), o->groups, o->seed, o->seed);
}

static int64_t distinct_pages(const opts *o)
{
    int64_t shared = (int64_t)(o->share * o->len + 1e-9), P = o->page_size;
    int64_t g = o->groups < o->requests ? o->groups : o->requests;
    /* Whole pages only: a page straddling the shared/own boundary is own. */
    int64_t sp = shared / P, lp = o->len / P;
    return g * sp + (int64_t)o->requests * (lp - sp);
}

static int replay(const opts *o, const int32_t *trace, const char *kind, int32_t num_pages,
                  phase *out)
{
    page_pool pool;
    memset(out, 0, sizeof *out);
    if (page_pool_init(&pool, num_pages, o->page_size) != RKV_OK) return -1;
    int64_t heap0 = heap_live();
    const int32_t P = o->page_size, nb = (o->len + P - 1) / P;
    int32_t *pages = malloc(sizeof *pages * (size_t)(nb + 1));
    int64_t heap_pages = heap_live() - heap0;
    cache *c = bench_cache_open("overhead_bench", kind, &pool);
    if (!c) {
        page_pool_destroy(&pool);
        return -1;
    }
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    /* Reserve now, and take it out, so the match buffer is not counted as the
     * cache's (the cache's own tables, made at create, are). */
    int64_t heap_m = heap_live();
    int rc = pages && cache_seq_reserve(&m, nb + 1) == RKV_OK ? 0 : -1;
    int64_t heap_extra = heap_live() - heap_m;
    double cpu0 = thread_cpu_ns();
    if (rc == 0)
        rc = bench_replay_trace("overhead_bench", kind, c, &pool, trace, o->requests, o->len, &m,
                                pages, &out->cost);
    out->cpu_ns = thread_cpu_ns() - cpu0;
    if (rc == 0) rc = bench_replay_check("overhead_bench", kind, c);
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    out->cached_tokens = sz.evictable_tokens + sz.protected_tokens;
    out->nodes = sz.num_nodes;
    out->heap_bytes = heap_live() - heap0 - heap_pages - heap_extra;
    out->hash_computations = c->stats.hash_computations;
    cache_seq_free(&m);
    free(pages);
    cache_destroy(c);
    page_pool_destroy(&pool);
    return rc;
}

static double per(double x, int64_t n) { return n > 0 ? x / (double)n : 0.0; }

/* A JSON number, or null where nothing was measured (no eviction happened). */
static void num_or_null(const char *key, double v, bool have)
{
    if (have) printf(",\"%s\":%.4f", key, v);
    else printf(",\"%s\":null", key);
}

/* "radix,hash,..." of every registered kind (the default of --kinds); caller frees. */
static char *kind_names_joined(void)
{
    size_t n = 1;
    for (int i = 0; cache_kind_names[i]; i++) n += strlen(cache_kind_names[i]) + 1;
    char *s = malloc(n);
    if (!s) return NULL;
    s[0] = 0;
    for (int i = 0; cache_kind_names[i]; i++) {
        if (i) strcat(s, ",");
        strcat(s, cache_kind_names[i]);
    }
    return s;
}

static int bench_kinds(const opts *o, const int32_t *trace)
{
    int64_t np = (int64_t)(o->capacity_frac * (double)distinct_pages(o));
    int64_t floor_pages = (o->len + o->page_size - 1) / o->page_size + 1;
    if (np < floor_pages) np = floor_pages;
    if (np > INT32_MAX) np = INT32_MAX;
    char *list = o->kinds ? strdup(o->kinds) : kind_names_joined();
    if (!list) return -1;
    phase base = {0};
    bool have_base = false;
    int rc = 0;
    for (char *save = NULL, *k = strtok_r(list, ",", &save); k && !rc; k = strtok_r(NULL, ",", &save)) {
        phase best = {0};
        double *cpu = calloc((size_t)o->reps, sizeof *cpu);
        if (!cpu) {
            rc = -1;
            break;
        }
        for (int rep = 0; rep < o->reps && !rc; rep++) {
            phase p;
            if (replay(o, trace, k, (int32_t)np, &p) != 0) {
                rc = -1;
                break;
            }
            cpu[rep] = p.cpu_ns;
            if (rep == 0) best = p;
            if (p.cost.match_ns < best.cost.match_ns) best.cost.match_ns = p.cost.match_ns;
            if (p.cost.insert_ns < best.cost.insert_ns) best.cost.insert_ns = p.cost.insert_ns;
            if (p.cost.evict_ns < best.cost.evict_ns) best.cost.evict_ns = p.cost.evict_ns;
        }
        if (rc) {
            free(cpu);
            break;
        }
        /* Thread CPU time per prompt token of a whole replay (match, lock,
         * evict, allocate, insert, free, unlock): median and range over the
         * repeats, for properties that must not hang on one wall sample. */
        bench_stats cs = bench_stats_of(cpu, o->reps);
        int64_t prompt = (int64_t)o->requests * o->len;
        double cmed = cs.med, cmin = cs.lo, cmax = cs.hi;
        free(cpu);
        if (!strcmp(k, "radix")) {
            base = best;
            have_base = true;
        }
        double mt = per(best.cost.match_ns, best.cost.match_tokens), it = per(best.cost.insert_ns, best.cost.insert_tokens),
               et = per(best.cost.evict_ns, best.cost.evict_tokens);
        printf("{\"bench\":\"overhead_kind\",\"kind\":\"%s\",\"baseline\":\"radix\",\"len\":%d,"
               "\"requests\":%d,\"page_size\":%d,\"share\":%.4f,\"groups\":%d,\"pool_pages\":%lld,"
               "\"reps\":%d,\"hit_rate\":%.6f,\"match_ns_per_token\":%.4f,"
               "\"insert_ns_per_token\":%.4f",
               k, o->len, o->requests, o->page_size, o->share, o->groups, (long long)np, o->reps,
               per((double)best.cost.matched, best.cost.match_tokens), mt, it);
        num_or_null("evict_ns_per_token", et, best.cost.evict_tokens > 0);
        printf(",\"evicted_tokens\":%lld,\"cached_tokens\":%lld,\"nodes\":%lld,\"heap_bytes\":%lld,"
               "\"hash_computations\":%llu",
               (long long)best.cost.evict_tokens, (long long)best.cached_tokens, (long long)best.nodes,
               (long long)best.heap_bytes, (unsigned long long)best.hash_computations);
        num_or_null("bytes_per_cached_token", per((double)best.heap_bytes, best.cached_tokens),
                    best.cached_tokens > 0);
        double bm = per(base.cost.match_ns, base.cost.match_tokens), bi = per(base.cost.insert_ns, base.cost.insert_tokens);
        num_or_null("match_ratio", bm > 0 ? mt / bm : 0, have_base && bm > 0);
        num_or_null("insert_ratio", bi > 0 ? it / bi : 0, have_base && bi > 0);
        printf(",\"cpu_ns_per_token\":%.4f,\"cpu_ns_per_token_min\":%.4f,\"cpu_ns_per_token_max\":%.4f",
               per(cmed, prompt), per(cmin, prompt), per(cmax, prompt));
        printf("}\n");
        fflush(stdout);
    }
    free(list);
    return rc;
}

static int bench_hash_fns(const opts *o, const int32_t *trace)
{
    int nf = 0;
    while (block_hash_fn_names[nf]) nf++;
    double ns[8] = {0};
    const int32_t P = o->page_size;
    int64_t blocks = (int64_t)o->requests * (o->len / P);
    if (blocks == 0) return 0;
    for (int f = 0; f < nf && f < 8; f++) {
        block_hasher h;
        char err[256] = "";
        if (block_hasher_init(&h, block_hash_fn_names[f], P, err, sizeof err) != RKV_OK) {
            fprintf(stderr, "overhead_bench: %s\n", err);
            return -1;
        }
        uint64_t sink = 0;
        for (int rep = 0; rep < o->reps; rep++) {
            double t0 = bench_now_ns();
            for (int32_t r = 0; r < o->requests; r++) {
                const int32_t *t = trace + (size_t)r * (size_t)o->len;
                block_hash d = block_hash_root;
                for (int32_t i = 0; i + P <= o->len; i += P) block_hasher_hash(&h, &d, 0, t + i, P, &d);
                sink ^= d.lo;
            }
            double el = bench_now_ns() - t0;
            if (rep == 0 || el < ns[f]) ns[f] = el;
        }
        block_hasher_destroy(&h);
        /* Using the digests keeps the loop from being optimised away. */
        if (sink == 42) fprintf(stderr, "overhead_bench: improbable fold\n");
    }
    for (int f = 0; f < nf && f < 8; f++)
        printf("{\"bench\":\"overhead_hash\",\"hash_fn\":\"%s\",\"baseline\":\"xxh3\",\"page_size\":%d,"
               "\"len\":%d,\"blocks\":%lld,\"reps\":%d,\"ns_per_block\":%.3f,\"ns_per_token\":%.4f,"
               "\"ratio\":%.4f}\n",
               block_hash_fn_names[f], P, o->len, (long long)blocks, o->reps, per(ns[f], blocks),
               per(ns[f], blocks * P), ns[0] > 0 ? ns[f] / ns[0] : 0);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (argc < 2) return usage();
    if (parse_opts(argc, argv, &o) != 0) return 2;
    int32_t *trace = make_trace(&o);
    if (!trace) {
        fprintf(stderr, "overhead_bench: out of memory for the trace (%d x %d tokens)\n", o.requests,
                o.len);
        return 1;
    }
    int rc = bench_kinds(&o, trace);
    if (!rc && o.hash_fns) rc = bench_hash_fns(&o, trace);
    free(trace);
    return rc ? 1 : 0;
}
