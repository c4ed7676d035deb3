/* cascade_cpu_bench.c - cascade attention against plain paged attention on the
 * CPU, on batches whose sequences share a prefix in the same pages (as the
 * radix tree hands them out). One JSON object per case.
 *
 *   cascade_cpu_bench [--repeat N] [--quick]
 *
 * One thread, so the thread CPU time is all the work; plain and cascade run
 * interleaved, N repeats each (default 5), and each side reports the median
 * with min and max of thread CPU time and of wall time. speedup_cpu and
 * speedup_wall are plain / cascade of the medians. The cascade side includes
 * building its plan (an engine builds one per step).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "bench_util.h"
#include "cli.h"

static float *frand(int64_t n, uint64_t *s)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!p) {
        fprintf(stderr, "cascade_cpu_bench: out of memory (%lld floats)\n", (long long)n);
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(*s >> 40) / 16777216.0 * 2.0 - 1.0);
    }
    return p;
}

/* B sequences: `shared` tokens in pages 0.., then `own` tokens in their own
 * pages, then S new rows (S = 1: decode, the row's K/V already in pages). */
static void run_case(int B, int shared, int own, int S, int repeat)
{
    const int Hq = 8, Hkv = 2, D = 128, P = 16;
    const attn_shape shape = {Hq, Hkv, D, P, 1.0f / sqrtf((float)D)};
    const int decode = S == 1;
    const int ctx = shared + own + (decode ? 1 : 0); /* tokens in pages */
    const int shp = shared / P, rowp = (ctx + P - 1) / P + 1;
    const int NP = shp + B * (rowp - shp);
    const int64_t T = (int64_t)B * S, row = (int64_t)Hkv * D;
    uint64_t seed = 12345;
    float *q = frand(T * Hq * D, &seed), *kn = frand(T * row, &seed), *vn = frand(T * row, &seed);
    float *kc = frand((int64_t)NP * P * row, &seed), *vc = frand((int64_t)NP * P * row, &seed);
    float *out = malloc(sizeof(float) * (size_t)(T * Hq * D));
    int32_t *table = malloc(sizeof(int32_t) * (size_t)(B * rowp));
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)B), *qs = malloc(sizeof(int32_t) * (size_t)(B + 1));
    if (!out || !table || !lens || !qs) {
        fprintf(stderr, "cascade_cpu_bench: out of memory\n");
        exit(1);
    }
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < rowp; k++)
            table[b * rowp + k] = k < shp ? k : shp + b * (rowp - shp) + (k - shp);
        lens[b] = decode ? ctx : shared + own;
        qs[b] = b * S;
    }
    qs[B] = (int32_t)T;
    attn_batch ab = {B, rowp, qs, lens, table, S, NP};
    double *cpu[2], *wall[2];
    for (int w = 0; w < 2; w++) {
        cpu[w] = malloc(sizeof(double) * (size_t)repeat);
        wall[w] = malloc(sizeof(double) * (size_t)repeat);
    }
    int groups = 0;
    for (int r = 0; r < repeat; r++)
        for (int w = 0; w < 2; w++) { /* interleaved: plain, cascade, plain, ... */
            double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = bench_clock_s(CLOCK_MONOTONIC);
            int rc;
            if (w == 0) {
                rc = decode ? attn_decode_cpu(&shape, B, lens, table, rowp, NP, q, kc, vc, out,
                                              NULL, 0, 1)
                            : attn_prefill_cpu(&shape, &ab, q, kn, vn, kc, vc, out, NULL, 1);
            } else {
                attn_cascade_plan plan;
                rc = attn_cascade_plan_build(B, lens, table, rowp, P, 1, &plan);
                if (!rc)
                    rc = decode ? attn_decode_cascade_cpu(&shape, B, lens, table, rowp, NP, &plan,
                                                          q, kc, vc, out, NULL, 1)
                                : attn_prefill_cascade_cpu(&shape, &ab, &plan, q, kn, vn, kc, vc,
                                                           out, NULL, 1);
                groups = plan.num_groups;
                attn_cascade_plan_free(&plan);
            }
            if (rc) {
                fprintf(stderr, "cascade_cpu_bench: %s\n", attn_strerror(rc));
                exit(1);
            }
            cpu[w][r] = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
            wall[w][r] = bench_clock_s(CLOCK_MONOTONIC) - w0;
        }
    bench_stats pc = bench_stats_of(cpu[0], repeat), cc = bench_stats_of(cpu[1], repeat);
    bench_stats pw = bench_stats_of(wall[0], repeat), cw = bench_stats_of(wall[1], repeat);
    printf("{\"bench\":\"cascade_cpu\",\"mode\":\"%s\",\"B\":%d,\"shared\":%d,\"own\":%d,"
           "\"S\":%d,\"Hq\":%d,\"Hkv\":%d,\"D\":%d,\"page\":%d,\"threads\":1,\"repeat\":%d,"
           "\"groups\":%d,"
           "\"plain_cpu_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"cascade_cpu_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"plain_wall_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"cascade_wall_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"speedup_cpu\":%.3f,\"speedup_wall\":%.3f}\n",
           decode ? "decode" : "prefill", B, shared, own, S, Hq, Hkv, D, P, repeat, groups,
           pc.med, pc.lo, pc.hi, cc.med, cc.lo, cc.hi, pw.med, pw.lo, pw.hi, cw.med, cw.lo, cw.hi,
           pc.med / cc.med, pw.med / cw.med);
    fflush(stdout);
    for (int w = 0; w < 2; w++) {
        free(cpu[w]);
        free(wall[w]);
    }
    free(q), free(kn), free(vn), free(kc), free(vc), free(out), free(table), free(lens), free(qs);
}

int main(int argc, char **argv)
{
    int64_t repeat = 5;
    bool quick = false;
    cli_opt table[] = {
        CLI_INT_OPT("--repeat", &repeat, 1, 1000),
        CLI_FLAG_OPT("--quick", &quick),
        CLI_END,
    };
    char err[256];
    cli_args a;
    if (cli_parse("cascade_cpu_bench", table, argc, argv, &a, err, sizeof err) || a.npos || a.help) {
        if (!a.help) fprintf(stderr, "cascade_cpu_bench: %s\n", a.npos ? "no positional arguments" : err);
        fprintf(stderr, "usage: cascade_cpu_bench [--repeat N] [--quick]\n");
        return 2;
    }
    run_case(64, quick ? 1024 : 4096, 128, 1, (int)repeat);   /* decode, one shared prompt */
    run_case(16, quick ? 512 : 2048, 0, 16, (int)repeat);     /* short prefills over a shared prompt */
    if (!quick) run_case(8, 1024, 512, 1, (int)repeat);       /* little sharing: the overhead */
    return 0;
}
