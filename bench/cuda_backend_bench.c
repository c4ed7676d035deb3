/* cuda_backend_bench.c - the cuda backend's step times on one GPU, JSON Lines.
 *
 * usage: cuda_backend_bench [--model PRESET] [--reps N] [--gemm-m M,M,...]
 *
 * Scenarios, each with its baseline measured in the same run:
 *   prefill  one 1024-token prompt; baseline: the same prompt with a
 *            960-token prefix already in pages (what a cache hit saves)
 *   decode   B sequences at 1000 tokens of context, one token each; decode
 *            CUDA graphs against eager launches
 *   overlap  decode steps of two independent groups: submit/collect with two
 *            steps in flight against forward one after the other (wall time)
 *   gemm     the layer's GEMM shapes alone (cuBLAS, bf16 in, fp32 compute) with
 *            the fp32 output the backend uses against a bf16 output, at the
 *            row counts of --gemm-m (default 1,32,1024; at most 16, each
 *            1..1024; bench/gpu_profile.sh asks for more, for the sim's tables)
 * Times are device times from CUDA events (step_seconds) unless "wall".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend.h"
#include "backend_cuda.h"
#include "bench_util.h"
#include "model_config.h"
#include "cli.h"

#define P 16
#define CTX 1024

typedef struct batch {
    int32_t *tok, *pos, *slot, *qs, *pl, *pt, *sr, *steps;
    fwd_batch fb;
} batch;

/* B sequences; sequence i owns pages [i * CTX/P, (i + 1) * CTX/P). Each runs
 * rows [prefix, prefix + rows) of its context. */
static void make_batch(batch *b, int B, int prefix, int rows, int page_base, int vocab)
{
    const int T = B * rows, MP = CTX / P;
    b->tok = malloc(sizeof(int32_t) * T);
    b->pos = malloc(sizeof(int32_t) * T);
    b->slot = malloc(sizeof(int32_t) * T);
    b->qs = malloc(sizeof(int32_t) * (B + 1));
    b->pl = malloc(sizeof(int32_t) * B);
    b->pt = malloc(sizeof(int32_t) * B * MP);
    b->sr = malloc(sizeof(int32_t) * B);
    b->steps = malloc(sizeof(int32_t) * B);
    for (int i = 0; i < B; i++) {
        b->qs[i] = i * rows;
        b->pl[i] = prefix;
        for (int j = 0; j < MP; j++) b->pt[i * MP + j] = page_base + i * MP + j;
        for (int r = 0; r < rows; r++) {
            int t = i * rows + r, p = prefix + r;
            b->tok[t] = (int32_t)((uint32_t)(p * 2654435761u + (uint32_t)i * 40503u) % (uint32_t)vocab);
            b->pos[t] = p;
            b->slot[t] = b->pt[i * MP + p / P] * P + p % P;
        }
        b->sr[i] = i * rows + rows - 1;
        b->steps[i] = prefix + rows;
    }
    b->qs[B] = T;
    b->fb = (fwd_batch){.num_seqs = B, .num_tokens = T, .token_ids = b->tok, .positions = b->pos,
                        .q_starts = b->qs, .prefix_lens = b->pl, .page_table = b->pt,
                        .max_pages = MP, .slot_mapping = b->slot, .sample_rows = b->sr,
                        .sampling = NULL, .sample_steps = b->steps};
}

static void free_batch(batch *b)
{
    free(b->tok); free(b->pos); free(b->slot); free(b->qs); free(b->pl); free(b->pt);
    free(b->sr); free(b->steps);
}

/* Mean device seconds of reps forwards (after two warm-up runs). */
static double time_forward(backend *be, const fwd_batch *fb, int reps)
{
    int32_t out[512];
    double sum = 0, s;
    for (int i = 0; i < reps + 2; i++) {
        if (be->ops->forward(be, fb, out, NULL, &s) != RKV_OK) exit(1);
        if (i >= 2) sum += s;
    }
    return sum / reps;
}

/* Mean ms of one cublasGemmEx y (M, N) = x (M, K) w (N, K)^T, output type ct. */
static double time_gemm(cublasHandle_t h, int M, int N, int K, cudaDataType_t ct, void *x,
                        void *w, void *y, int reps)
{
    const float one = 1.0f, zero = 0.0f;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < reps + 3; i++) {
        if (i == 3) cudaEventRecord(a, 0);
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, CUDA_R_16BF, K, x,
                     CUDA_R_16BF, K, &zero, y, ct, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    cudaEventRecord(b, 0);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / reps;
}

typedef struct gemm_rows {
    int m[16], n;
} gemm_rows;

/* --gemm-m 1,8,32: row counts of the GEMM scenario. */
static int parse_gemm_m(void *ctx, const char *name, const char *v, char *err, size_t errlen)
{
    gemm_rows *g = ctx;
    g->n = 0;
    const char *p = v;
    while (*p) {
        char *end;
        long m = strtol(p, &end, 10);
        if (end == p || m < 1 || m > 1024 || g->n == 16 || (*end && *end != ',')) {
            snprintf(err, errlen, "%s: want up to 16 row counts in 1..1024, comma-separated", name);
            return 1;
        }
        g->m[g->n++] = (int)m;
        p = *end ? end + 1 : end;
    }
    if (!g->n) {
        snprintf(err, errlen, "%s: no row count", name);
        return 1;
    }
    return 0;
}

static void gemm_scenario(const model_config *c, int reps, const gemm_rows *rows)
{
    const int C = c->hidden_size, F = c->intermediate_size;
    const int qkv = (c->num_heads + 2 * c->num_kv_heads) * c->head_dim;
    const int shapes[4][2] = {{qkv, C}, {C, c->num_heads * c->head_dim}, {2 * F, C}, {C, F}};
    const char *names[4] = {"qkv", "o", "gate_up", "down"};
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return;
    void *x, *w, *y;
    size_t maxw = (size_t)2 * F * C * 2;
    if (cudaMalloc(&x, (size_t)1024 * F * 2) || cudaMalloc(&w, maxw) ||
        cudaMalloc(&y, (size_t)1024 * 2 * F * 4))
        return;
    cudaMemset(x, 0, (size_t)1024 * F * 2);
    cudaMemset(w, 0, maxw);
    for (int m = 0; m < rows->n; m++)
        for (int k = 0; k < 4; k++) {
            int N = shapes[k][0], K = shapes[k][1], M = rows->m[m];
            double t32 = time_gemm(h, M, N, K, CUDA_R_32F, x, w, y, reps * 5);
            double t16 = time_gemm(h, M, N, K, CUDA_R_16BF, x, w, y, reps * 5);
            double bytes = 2.0 * N * K;
            printf("{\"bench\":\"cuda_backend\",\"scenario\":\"gemm\",\"gemm\":\"%s\",\"M\":%d,"
                   "\"N\":%d,\"K\":%d,\"ms_f32_out\":%.4f,\"ms_bf16_out\":%.4f,"
                   "\"ratio_f32_vs_bf16\":%.3f,\"weight_gbps_f32_out\":%.1f,\"tflops_f32_out\":%.1f}\n",
                   names[k], M, N, K, t32, t16, t32 / t16, bytes / t32 / 1e6,
                   2.0 * M * N * K / t32 / 1e9);
        }
    cudaFree(x);
    cudaFree(w);
    cudaFree(y);
    cublasDestroy(h);
}

int main(int argc, char **argv)
{
    const char *model = "qwen2.5-3b";
    int64_t reps64 = 20;
    gemm_rows gm = {.m = {1, 32, 1024}, .n = 3};
    cli_opt table[] = {
        CLI_STR_OPT("--model", &model),
        CLI_INT_OPT("--reps", &reps64, 1, 100000),
        CLI_CUSTOM_OPT("--gemm-m", parse_gemm_m, &gm),
        CLI_END,
    };
    char perr[256];
    cli_args a;
    if (cli_parse("cuda_backend_bench", table, argc, argv, &a, perr, sizeof perr) || a.npos
        || a.help) {
        fprintf(stderr, "cuda_backend_bench: %s\nusage: cuda_backend_bench [--model PRESET] "
                "[--reps N] [--gemm-m M,M,...]\n", a.help || a.npos ? "options" : perr);
        return 2;
    }
    int reps = (int)reps64;
    if (!backend_cuda_available()) {
        fprintf(stderr, "cuda_backend_bench: no CUDA device\n");
        return 1;
    }
    backend_config cfg = {.model = model, .seed = 1, .page_size = P, .num_pages = 0,
                          .mem_fraction = 0.9};
    backend *be;
    char err[512];
    if (backend_create("cuda", &cfg, &be, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "cuda_backend_bench: %s\n", err);
        return 1;
    }
    model_config mc;
    model_config_load(model, &mc, err, sizeof err);
    const double params = (double)model_config_num_params(&mc);
    const int V = be->vocab_size;

    /* prefill: whole 1024-token prompt vs 64 new tokens after a 960-token prefix. */
    batch whole, tail;
    make_batch(&whole, 1, 0, CTX, 0, V);
    make_batch(&tail, 1, CTX - 64, 64, 0, V);
    double t_whole = time_forward(be, &whole.fb, reps), t_tail = time_forward(be, &tail.fb, reps);
    printf("{\"bench\":\"cuda_backend\",\"scenario\":\"prefill\",\"model\":\"%s\",\"tokens\":%d,"
           "\"ms\":%.4f,\"tflops_gemm\":%.2f,\"cached_prefix\":%d,\"cached_ms\":%.4f,"
           "\"speedup_cached\":%.3f}\n",
           model, CTX, t_whole * 1e3, 2.0 * params * CTX / t_whole / 1e12, CTX - 64, t_tail * 1e3,
           t_whole / t_tail);
    free_batch(&whole);
    free_batch(&tail);

    /* decode: B sequences at CTX - 1 tokens of context, graphs vs eager. */
    const int bs[] = {1, 8, 32, 128};
    for (size_t k = 0; k < sizeof bs / sizeof bs[0]; k++) {
        if ((int64_t)bs[k] * (CTX / P) > be->num_pages) break;
        batch d;
        make_batch(&d, bs[k], CTX - 1, 1, 0, V);
        backend_cuda_set_graphs(be, 1);
        double tg = time_forward(be, &d.fb, reps);
        backend_cuda_set_graphs(be, 0);
        double te = time_forward(be, &d.fb, reps);
        backend_cuda_set_graphs(be, 1);
        double wbytes = 2.0 * params; /* bf16 weights read once per step */
        printf("{\"bench\":\"cuda_backend\",\"scenario\":\"decode\",\"model\":\"%s\",\"batch\":%d,"
               "\"context\":%d,\"graph_ms\":%.4f,\"eager_ms\":%.4f,\"speedup_graph\":%.3f,"
               "\"weight_gbps_graph\":%.1f,\"tokens_per_s_graph\":%.1f}\n",
               model, bs[k], CTX, tg * 1e3, te * 1e3, te / tg, wbytes / tg / 1e9, bs[k] / tg);
        free_batch(&d);
    }

    /* overlap: two groups of 32 decodes; wall time per step pair. */
    if ((int64_t)64 * (CTX / P) <= be->num_pages) {
        batch g0, g1;
        make_batch(&g0, 32, CTX - 1, 1, 0, V);
        make_batch(&g1, 32, CTX - 1, 1, 32 * (CTX / P), V);
        int32_t out[64];
        double t0 = bench_clock_s(CLOCK_MONOTONIC);
        for (int i = 0; i < reps; i++) {
            be->ops->forward(be, &g0.fb, out, NULL, NULL);
            be->ops->forward(be, &g1.fb, out, NULL, NULL);
        }
        double sync_s = (bench_clock_s(CLOCK_MONOTONIC) - t0) / reps;
        t0 = bench_clock_s(CLOCK_MONOTONIC);
        be->ops->submit(be, &g0.fb);
        for (int i = 0; i < reps; i++) {
            be->ops->submit(be, &g1.fb);
            be->ops->collect(be, out, NULL);
            if (i + 1 < reps) be->ops->submit(be, &g0.fb);
            be->ops->collect(be, out, NULL);
        }
        double ov_s = (bench_clock_s(CLOCK_MONOTONIC) - t0) / reps;
        printf("{\"bench\":\"cuda_backend\",\"scenario\":\"overlap\",\"model\":\"%s\",\"batch\":32,"
               "\"wall_ms_sync\":%.4f,\"wall_ms_overlap\":%.4f,\"speedup_overlap\":%.3f}\n",
               model, sync_s * 1e3 / 2, ov_s * 1e3 / 2, sync_s / ov_s);
        free_batch(&g0);
        free_batch(&g1);
    }
    backend_destroy(be);
    gemm_scenario(&mc, reps, &gm);
    return 0;
}
