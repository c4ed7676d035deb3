/* attn_cpu_bench.c - GFLOP/s of the CPU prefill and decode, against a naive
 * fp32 kernel timed in the same run. One JSON object per line.
 *
 * FLOPs count 4 D per (query row, key) pair the row sees: D multiply-adds for
 * the score, D for the weighted value sum. Each kernel is run until it has
 * used ~0.3 s (at least 2 runs) and the fastest run counts. The naive and
 * the one-thread kernel run on the calling thread: their thread CPU seconds
 * per run (naive_cpu_s, cpu_1t_s: median, min, max over the runs) stand
 * beside, steadier than wall time on a shared machine.
 *
 * Decode lines add kv_gbps: the context's K/V bytes over the multi-thread
 * time, the bound that matters for decode.
 *
 * Usage: attn_cpu_bench [threads]   (default: all cores)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attention.h"
#include "bench_util.h"

static float *frand(int64_t n, unsigned *seed)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!p) {
        fprintf(stderr, "attn_cpu_bench: out of memory (%lld floats)\n", (long long)n);
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
    return p;
}

/* The baseline: the contract read literally in fp32, one row at a time:
 * all scores of the row, max, exponentials, weighted sum of V. Keys are
 * located by the same paging rule as the kernels. */
typedef struct naive_ctx {
    const attn_shape *s;
    const float *k_cache, *v_cache, *k_new, *v_new;
    const int32_t *pages;
    int32_t prefix;
    float *score;
} naive_ctx;

static void naive_row(const naive_ctx *c, const float *qr, int64_t g, int64_t nk, float *o,
                      float *lse)
{
    const int64_t D = c->s->head_dim, P = c->s->page_size, stride = c->s->num_kv_heads * D;
    float mx = -INFINITY;
    for (int64_t t = 0; t < nk; t++) {
        const float *kr = t < c->prefix
                              ? c->k_cache + ((int64_t)c->pages[t / P] * P + t % P) * stride + g * D
                              : c->k_new + (t - c->prefix) * stride + g * D;
        float dot = 0;
        for (int64_t d = 0; d < D; d++) dot += qr[d] * kr[d];
        c->score[t] = dot * c->s->scale;
        if (c->score[t] > mx) mx = c->score[t];
    }
    float sum = 0;
    for (int64_t t = 0; t < nk; t++) {
        c->score[t] = expf(c->score[t] - mx);
        sum += c->score[t];
    }
    for (int64_t d = 0; d < D; d++) o[d] = 0;
    for (int64_t t = 0; t < nk; t++) {
        const float *vr = t < c->prefix
                              ? c->v_cache + ((int64_t)c->pages[t / P] * P + t % P) * stride + g * D
                              : c->v_new + (t - c->prefix) * stride + g * D;
        const float p = c->score[t] / sum;
        for (int64_t d = 0; d < D; d++) o[d] += p * vr[d];
    }
    *lse = mx + logf(sum);
}

/* One sequence of the batch shape (every sequence alike). */
typedef struct shape_case {
    const char *kind; /* "prefill" or "decode" */
    int D, Hq, Hkv, P, batch, prefix, suffix; /* decode: prefix = context, suffix = 1 */
} shape_case;

typedef struct bufs {
    float *q, *k_new, *v_new, *k_cache, *v_cache, *out, *lse;
    int32_t *q_starts, *prefix_lens, *page_table, *seq_lens;
    int32_t max_pages, num_pages; /* table width, pool pages */
    attn_shape s;
    attn_batch b;
} bufs;

static void setup(const shape_case *c, bufs *x)
{
    unsigned seed = 1234;
    memset(x, 0, sizeof *x);
    x->s = (attn_shape){.num_q_heads = c->Hq, .num_kv_heads = c->Hkv, .head_dim = c->D,
                        .page_size = c->P, .scale = 1.0f / sqrtf((float)c->D)};
    const int decode = strcmp(c->kind, "decode") == 0;
    const int64_t T = (int64_t)c->batch * (decode ? 1 : c->suffix);
    x->max_pages = (c->prefix + c->P - 1) / c->P;
    const int64_t np = (int64_t)c->batch * x->max_pages;
    x->num_pages = (int32_t)np;
    const int64_t row = (int64_t)c->Hkv * c->D;
    x->q = frand(T * c->Hq * c->D, &seed);
    x->k_new = frand(T * row, &seed);
    x->v_new = frand(T * row, &seed);
    x->k_cache = frand(np * c->P * row, &seed);
    x->v_cache = frand(np * c->P * row, &seed);
    x->out = frand(T * c->Hq * c->D, &seed);
    x->lse = frand(T * c->Hq, &seed);
    x->q_starts = malloc(sizeof(int32_t) * (size_t)(c->batch + 1));
    x->prefix_lens = malloc(sizeof(int32_t) * (size_t)c->batch);
    x->seq_lens = malloc(sizeof(int32_t) * (size_t)c->batch);
    x->page_table = malloc(sizeof(int32_t) * (size_t)(np > 0 ? np : 1));
    /* Pages of all sequences interleaved, as after a while of serving. */
    for (int64_t k = 0; k < np; k++) {
        int64_t seq = k / (x->max_pages ? x->max_pages : 1), pg = k % (x->max_pages ? x->max_pages : 1);
        x->page_table[k] = (int32_t)(pg * c->batch + seq);
    }
    x->q_starts[0] = 0;
    for (int i = 0; i < c->batch; i++) {
        x->q_starts[i + 1] = x->q_starts[i] + (decode ? 1 : c->suffix);
        x->prefix_lens[i] = c->prefix;
        x->seq_lens[i] = c->prefix;
    }
    x->b = (attn_batch){.num_seqs = c->batch, .max_pages = x->max_pages, .q_starts = x->q_starts,
                        .prefix_lens = x->prefix_lens, .page_table = x->page_table,
                        .max_suffix = decode ? 1 : c->suffix, .num_pages = x->num_pages};
}

static void teardown(bufs *x)
{
    free(x->q);
    free(x->k_new);
    free(x->v_new);
    free(x->k_cache);
    free(x->v_cache);
    free(x->out);
    free(x->lse);
    free(x->q_starts);
    free(x->prefix_lens);
    free(x->seq_lens);
    free(x->page_table);
}

static void run_naive(const shape_case *c, bufs *x)
{
    const int decode = strcmp(c->kind, "decode") == 0;
    const int64_t Hq = c->Hq, D = c->D, group = c->Hq / c->Hkv;
    naive_ctx nc = {.s = &x->s, .k_cache = x->k_cache, .v_cache = x->v_cache,
                    .score = malloc(sizeof(float) * (size_t)(c->prefix + c->suffix + 1))};
    for (int i = 0; i < c->batch; i++) {
        nc.pages = x->page_table + (int64_t)i * x->max_pages;
        nc.prefix = c->prefix;
        nc.k_new = x->k_new + (int64_t)x->q_starts[i] * c->Hkv * D;
        nc.v_new = x->v_new + (int64_t)x->q_starts[i] * c->Hkv * D;
        const int64_t rows = decode ? 1 : c->suffix;
        for (int64_t j = 0; j < rows; j++)
            for (int64_t h = 0; h < Hq; h++) {
                const int64_t r = (x->q_starts[i] + j) * Hq + h;
                naive_row(&nc, x->q + r * D, h / group, decode ? c->prefix : c->prefix + j + 1,
                          x->out + r * D, x->lse + r);
            }
    }
    free(nc.score);
}

static int run_kernel(const shape_case *c, bufs *x, int threads)
{
    if (strcmp(c->kind, "decode") == 0)
        return attn_decode_cpu(&x->s, c->batch, x->seq_lens, x->page_table, x->max_pages,
                               x->num_pages, x->q, x->k_cache, x->v_cache, x->out, x->lse, 0,
                               threads);
    return attn_prefill_cpu(&x->s, &x->b, x->q, x->k_new, x->v_new, x->k_cache, x->v_cache,
                            x->out, x->lse, threads);
}

/* Fastest of at least 2 runs and ~0.3 s; which = -1 runs the naive kernel.
 * *cpu: the calling thread's CPU seconds per run, summarized. */
static double best_time(const shape_case *c, bufs *x, int which, bench_stats *cpu)
{
    enum { MAX_RUNS = 50 };
    double best = INFINITY, spent = 0, cpu_s[MAX_RUNS];
    int it = 0;
    for (; it < 2 || (spent < 0.3 && it < MAX_RUNS); it++) {
        double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = bench_clock_s(CLOCK_MONOTONIC);
        if (which < 0) {
            run_naive(c, x);
        } else if (run_kernel(c, x, which) != ATTN_OK) {
            fprintf(stderr, "attn_cpu_bench: kernel failed on %s D=%d\n", c->kind, c->D);
            exit(1);
        }
        double t = bench_clock_s(CLOCK_MONOTONIC) - t0;
        cpu_s[it] = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        spent += t;
        if (t < best) best = t;
    }
    *cpu = bench_stats_of(cpu_s, it);
    return best;
}

int main(int argc, char **argv)
{
    /* One optional positional, THREADS (0 or none: every online CPU). */
    char perr[256];
    cli_args a;
    int64_t nthreads = 0;
    int rc = bench_args("attn_cpu_bench", "[THREADS]", 0, 1, argc, argv, &a);
    if (rc) return rc;
    if (a.npos && cli_parse_int("THREADS", a.pos[0], 0, 4096, &nthreads, perr, sizeof perr)) {
        fprintf(stderr, "attn_cpu_bench: %s\n", perr);
        return 2;
    }
    int threads = (int)nthreads;
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    static const shape_case cases[] = {
        {"prefill", 128, 16, 4, 16, 1, 0, 512},
        {"prefill", 128, 16, 4, 16, 1, 2048, 256},
        {"prefill", 64, 16, 16, 64, 2, 1024, 128},
        {"prefill", 128, 8, 1, 1, 4, 512, 32},
        {"decode", 128, 32, 8, 16, 8, 2048, 1},
        {"decode", 128, 32, 8, 16, 1, 16384, 1},
        {"decode", 64, 16, 16, 64, 16, 1024, 1},
        /* A small model's decode step: per-call overhead shows here. */
        {"decode", 64, 8, 2, 16, 4, 256, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const shape_case *c = &cases[k];
        bufs x;
        setup(c, &x);
        const int decode = strcmp(c->kind, "decode") == 0;
        /* Pairs (query row, key) seen: causal suffix rows see prefix + j + 1. */
        double pairs = decode ? (double)c->prefix
                              : (double)c->suffix * c->prefix + 0.5 * c->suffix * (c->suffix + 1.0);
        double flops = 4.0 * c->D * pairs * c->Hq * c->batch;
        bench_stats cpu_naive, cpu_one, cpu_all;
        double t_naive = best_time(c, &x, -1, &cpu_naive);
        double t_one = best_time(c, &x, 1, &cpu_one);
        double t_all = best_time(c, &x, threads, &cpu_all);
        double kv_bytes = 2.0 * 4.0 * c->D * c->Hkv * (double)c->prefix * c->batch;
        printf("{\"bench\":\"attn_cpu\",\"kind\":\"%s\",\"head_dim\":%d,\"q_heads\":%d,"
               "\"kv_heads\":%d,\"page_size\":%d,\"batch\":%d,\"prefix\":%d,\"suffix\":%d,"
               "\"threads\":%d,\"gflop\":%.4f,\"naive_gflops\":%.3f,\"gflops_1t\":%.3f,"
               "\"gflops\":%.3f,\"ratio_1t\":%.2f,\"ratio\":%.2f",
               c->kind, c->D, c->Hq, c->Hkv, c->P, c->batch, c->prefix, decode ? 1 : c->suffix,
               threads, flops * 1e-9, flops * 1e-9 / t_naive, flops * 1e-9 / t_one,
               flops * 1e-9 / t_all, t_naive / t_one, t_naive / t_all);
        if (decode) printf(",\"kv_gbps\":%.2f", kv_bytes * 1e-9 / t_all);
        printf(",\"naive_cpu_s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g}"
               ",\"cpu_1t_s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g}",
               cpu_naive.med, cpu_naive.lo, cpu_naive.hi, cpu_one.med, cpu_one.lo, cpu_one.hi);
        printf("}\n");
        fflush(stdout);
        teardown(&x);
    }
    return 0;
}
