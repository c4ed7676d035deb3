/* cache_bench.c - every registered cache kind's match / insert / evict cost per token
 * on one synthetic trace, and each hash function's cost per block, printed as
 * JSON Lines with ratios to a baseline measured in the same run (the radix
 * kind for the caches, xxh3 for the hash functions). Never run as a test.
 *
 *   cache_bench [--requests N] [--len TOKENS] [--page-size P] [--groups G]
 *               [--capacity-frac F] [--reps R] [--seed S]
 *
 * Trace: N requests of TOKENS tokens; request r starts with the shared prefix
 * of group r mod G (half its length) and ends with its own random tokens, so
 * about half of every prompt can be reused. The pool holds F times the
 * trace's distinct full pages, so eviction runs too. Each request goes
 * through the engine's calls: match all tokens but the last, lock, evict the
 * shortfall, allocate, insert, free the duplicates, unlock. Each phase's time
 * is the minimum over R replays, each on a fresh cache; costs are per token
 * given to match / insert and per token evicted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "block_hash.h"
#include "bench_replay.h"
#include "cache.h"
#include "cli.h"

typedef struct opts {
    int32_t requests, len, page_size, groups, reps;
    double capacity_frac;
    unsigned seed;
} opts;

typedef replay_cost phase_ns;

static int parse_opts(int argc, char **argv, opts *o)
{
    int64_t requests = 2000, len = 1024, page_size = 16, groups = 16, reps = 3, seed = 1;
    double capacity_frac = 0.5;
    cli_opt table[] = {
        CLI_INT_OPT("--requests", &requests, 1, INT32_MAX / 2),
        CLI_INT_OPT("--len", &len, 2, INT32_MAX / 2),
        CLI_INT_OPT("--page-size", &page_size, 1, 1 << 20),
        CLI_INT_OPT("--groups", &groups, 1, INT32_MAX),
        CLI_INT_OPT("--reps", &reps, 1, 1000),
        CLI_DOUBLE_OPT("--capacity-frac", &capacity_frac, 1e-9, 1e9),
        CLI_INT_OPT("--seed", &seed, 0, UINT32_MAX),
        CLI_END,
    };
    char err[256];
    cli_args a;
    if (cli_parse("cache_bench", table, argc, argv, &a, err, sizeof err) || a.npos) {
        fprintf(stderr, "cache_bench: %s\n", a.npos ? "no positional arguments" : err);
        return -1;
    }
    if (a.help) {
        fprintf(stderr, "usage: cache_bench [--requests N] [--len TOKENS] [--page-size P] "
                        "[--groups G] [--capacity-frac F] [--reps R] [--seed S]\n");
        return -1;
    }
    *o = (opts){.requests = (int32_t)requests, .len = (int32_t)len, .page_size = (int32_t)page_size,
                .groups = (int32_t)groups, .reps = (int32_t)reps, .capacity_frac = capacity_frac,
                .seed = (unsigned)seed};
    return 0;
}

/* (requests, len) token ids. */
static int32_t *make_trace(const opts *o)
{
    return bench_make_trace(o->requests, o->len, o->len / 2, o->groups, o->seed, 0);
}

/* One replay of the trace through a fresh cache of `kind`. */
static int replay(const opts *o, const int32_t *trace, const char *kind, int32_t num_pages,
                  phase_ns *out)
{
    page_pool pool;
    memset(out, 0, sizeof *out);
    if (page_pool_init(&pool, num_pages, o->page_size) != RKV_OK) return -1;
    cache *c = bench_cache_open("cache_bench", kind, &pool);
    if (!c) {
        page_pool_destroy(&pool);
        return -1;
    }
    const int32_t P = o->page_size, nb = o->len / P;
    int32_t *pages = malloc(sizeof *pages * (size_t)(nb + 1));
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    int rc = pages ? bench_replay_trace("cache_bench", kind, c, &pool, trace, o->requests, o->len,
                                        &m, pages, out)
                   : -1;
    if (rc == 0) rc = bench_replay_check("cache_bench", kind, c);
    cache_seq_free(&m);
    free(pages);
    cache_destroy(c);
    page_pool_destroy(&pool);
    return rc;
}

static double per(double ns, int64_t n) { return n > 0 ? ns / (double)n : 0.0; }
static double ratio(double x, double base) { return base > 0 ? x / base : 0.0; }

static int bench_kinds(const opts *o, const int32_t *trace)
{
    /* Every registered kind; the first (radix) is the baseline. */
    const char *const *kinds = cache_kind_names;
    enum { MAXK = 32 };
    int NK = 0;
    while (kinds[NK]) NK++;
    if (NK > MAXK) {
        fprintf(stderr, "cache_bench: %d kinds registered, room for %d\n", NK, MAXK);
        return -1;
    }
    /* Distinct full pages: each group's shared half once, every private half. */
    int64_t half_pages = (o->len / 2) / o->page_size;
    int64_t distinct = (int64_t)(o->groups < o->requests ? o->groups : o->requests) * half_pages +
                       (int64_t)o->requests * (o->len / o->page_size - half_pages);
    int64_t np = (int64_t)(o->capacity_frac * (double)distinct);
    int64_t floor_pages = o->len / o->page_size + 1;
    if (np < floor_pages) np = floor_pages;
    if (np > INT32_MAX) np = INT32_MAX;
    phase_ns best[MAXK];
    for (int k = 0; k < NK; k++) {
        for (int rep = 0; rep < o->reps; rep++) {
            phase_ns p;
            if (replay(o, trace, kinds[k], (int32_t)np, &p) != 0) return -1;
            if (rep == 0) best[k] = p;
            if (p.match_ns < best[k].match_ns) best[k].match_ns = p.match_ns;
            if (p.insert_ns < best[k].insert_ns) best[k].insert_ns = p.insert_ns;
            if (p.evict_ns < best[k].evict_ns) best[k].evict_ns = p.evict_ns;
        }
        fprintf(stderr, "cache_bench: %s done\n", kinds[k]);
    }
    const phase_ns *b = &best[0];
    for (int k = 0; k < NK; k++) {
        const phase_ns *p = &best[k];
        double mt = per(p->match_ns, p->match_tokens), it = per(p->insert_ns, p->insert_tokens),
               et = per(p->evict_ns, p->evict_tokens);
        printf("{\"bench\":\"cache_kind\",\"kind\":\"%s\",\"baseline\":\"%s\",\"requests\":%d,"
               "\"len\":%d,\"page_size\":%d,\"pool_pages\":%lld,\"hit_rate\":%.4f,"
               "\"match_ns_per_token\":%.3f,\"insert_ns_per_token\":%.3f,"
               "\"evict_ns_per_token\":%.3f,\"evicted_tokens\":%lld,"
               "\"match_ratio\":%.3f,\"insert_ratio\":%.3f,\"evict_ratio\":%.3f}\n",
               kinds[k], kinds[0], o->requests, o->len, o->page_size, (long long)np,
               per((double)p->matched, p->match_tokens), mt, it, et,
               (long long)p->evict_tokens, ratio(mt, per(b->match_ns, b->match_tokens)),
               ratio(it, per(b->insert_ns, b->insert_tokens)),
               ratio(et, per(b->evict_ns, b->evict_tokens)));
    }
    return 0;
}

static int bench_hash_fns(const opts *o, const int32_t *trace)
{
    enum { MAXF = 16 };
    int NF = 0;
    while (block_hash_fn_names[NF] && NF < MAXF) NF++;
    double ns[MAXF];
    int64_t blocks = (int64_t)o->requests * (o->len / o->page_size);
    for (int f = 0; f < NF; f++) {
        block_hasher h;
        char err[256] = "";
        if (block_hasher_init(&h, block_hash_fn_names[f], o->page_size, err, sizeof err) != RKV_OK) {
            fprintf(stderr, "cache_bench: %s\n", err);
            return -1;
        }
        ns[f] = 0;
        uint64_t sink = 0;
        for (int rep = 0; rep < o->reps; rep++) {
            double t0 = bench_now_ns();
            for (int32_t r = 0; r < o->requests; r++) {
                const int32_t *t = trace + (size_t)r * (size_t)o->len;
                block_hash d = block_hash_root;
                for (int32_t i = 0; i + o->page_size <= o->len; i += o->page_size)
                    block_hasher_hash(&h, &d, 0, t + i, o->page_size, &d);
                sink ^= d.lo;
            }
            double el = bench_now_ns() - t0;
            if (rep == 0 || el < ns[f]) ns[f] = el;
        }
        block_hasher_destroy(&h);
        /* Printing the digests' fold keeps the loop from being optimised away. */
        fprintf(stderr, "cache_bench: %s fold %016llx\n", block_hash_fn_names[f],
                (unsigned long long)sink);
    }
    for (int f = 0; f < NF; f++)
        printf("{\"bench\":\"block_hash\",\"hash_fn\":\"%s\",\"baseline\":\"xxh3\",\"page_size\":%d,"
               "\"blocks\":%lld,\"ns_per_block\":%.3f,\"ns_per_token\":%.4f,\"ratio\":%.3f}\n",
               block_hash_fn_names[f], o->page_size, (long long)blocks, per(ns[f], blocks),
               per(ns[f], blocks * o->page_size), ratio(ns[f], ns[0]));
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_opts(argc, argv, &o) != 0) return 2;
    int32_t *trace = make_trace(&o);
    if (!trace) {
        fprintf(stderr, "cache_bench: out of memory for the trace\n");
        return 1;
    }
    int rc = bench_kinds(&o, trace) || bench_hash_fns(&o, trace);
    free(trace);
    return rc ? 1 : 0;
}
