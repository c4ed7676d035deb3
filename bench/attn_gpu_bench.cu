/* attn_gpu_bench.cu - times the CUDA attention kernels; one JSON object per line.
 *
 *   attn_gpu_bench [--quick] [--reps N]
 *
 * Baseline measured in the same run: device-to-device copy bandwidth (bytes
 * read + written, as torch's anchor counts it). Prefill work is 4·Hq·D per
 * query-key pair seen, 4·Hq·D·(S·P + S(S+1)/2) per sequence; decode traffic is
 * the real K/V bytes read, 2·B·Hkv·L·D·2. Each figure is the median of N timed
 * launches (CUDA events around each) after warm-up launches. --variants also
 * times each prefill tile shape (RKV_ATTN_PREFILL_TILE) on three shapes.
 * Cascade rows time plain paged attention and the two-level cascade on the
 * same shared-prefix batch (see bench_cascade).
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "attention.h"
#include "cli.h"

#define CK(call)                                                                       \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorString(e_));                                           \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define CKA(call)                                                                      \
    do {                                                                               \
        int r_ = (call);                                                               \
        if (r_ != 0) {                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, r_); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* Random 16-bit values in [-1, 1): bf16 or fp16 by a hash of the index. */
__global__ void fill_random(uint16_t *p, size_t n, uint32_t seed, int bf16)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 15;
        x *= 2246822519u;
        x ^= x >> 13;
        float f = (x >> 8) * (1.f / 16777216.f) * 2.f - 1.f;
        uint32_t u;
        memcpy(&u, &f, 4);
        if (bf16) {
            p[i] = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
        } else {
            __half h = __float2half_rn(f);
            p[i] = __half_raw(h).x;
        }
    }
}

static uint16_t *alloc_random(size_t n, uint32_t seed, attn_dtype dt)
{
    uint16_t *p;
    CK(cudaMalloc(&p, n * 2));
    fill_random<<<1024, 256>>>(p, n, seed, dt == ATTN_BF16);
    CK(cudaGetLastError());
    return p;
}

template <typename F> static double time_median_ms(F fn, int warm, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < warm; i++)
        fn();
    CK(cudaDeviceSynchronize());
    std::vector<float> ts;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        fn();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return ts[ts.size() / 2];
}

static const char *dtn(attn_dtype dt) { return dt == ATTN_BF16 ? "bf16" : "fp16"; }

/* Pages of B sequences of `len` tokens each, scattered over the pool. */
static int32_t *make_table(int B, int pages_per_seq, int total_pages, uint32_t seed)
{
    std::vector<int32_t> perm(total_pages);
    for (int i = 0; i < total_pages; i++)
        perm[i] = i;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = total_pages - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        std::swap(perm[i], perm[s % (uint64_t)(i + 1)]);
    }
    std::vector<int32_t> t((size_t)B * std::max(pages_per_seq, 1), 0);
    for (int b = 0; b < B; b++)
        for (int p = 0; p < pages_per_seq; p++)
            t[(size_t)b * pages_per_seq + p] = perm[(size_t)b * pages_per_seq + p];
    int32_t *d;
    CK(cudaMalloc(&d, t.size() * 4));
    CK(cudaMemcpy(d, t.data(), t.size() * 4, cudaMemcpyHostToDevice));
    return d;
}

static int32_t *upload(const std::vector<int32_t> &v)
{
    int32_t *d;
    CK(cudaMalloc(&d, v.size() * 4));
    CK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return d;
}

static void bench_prefill(attn_dtype dt, int B, int P, int S, int reps, double copy_tbps,
                          int variant = -1)
{
    const int HQ = 32, HKV = 8, D = 128, PS = 16;
    const int ppseq = (P + PS - 1) / PS, NP = std::max(B * ppseq, 1);
    const int T = B * S;
    uint16_t *q = alloc_random((size_t)T * HQ * D, 1, dt);
    uint16_t *kn = alloc_random((size_t)T * HKV * D, 2, dt);
    uint16_t *vn = alloc_random((size_t)T * HKV * D, 3, dt);
    uint16_t *kc = alloc_random((size_t)NP * PS * HKV * D, 4, dt);
    uint16_t *vc = alloc_random((size_t)NP * PS * HKV * D, 5, dt);
    uint16_t *out;
    float *lse;
    CK(cudaMalloc(&out, (size_t)T * HQ * D * 2));
    CK(cudaMalloc(&lse, (size_t)T * HQ * 4));
    std::vector<int32_t> qs(B + 1), pl(B, P);
    for (int i = 0; i <= B; i++)
        qs[i] = i * S;
    int32_t *dqs = upload(qs), *dpl = upload(pl);
    int32_t *dpt = make_table(B, ppseq, NP, 7);
    attn_shape s = {HQ, HKV, D, PS, 0.08838834764831845f};
    attn_batch b = {B, std::max(ppseq, 1), dqs, dpl, dpt, S, NP};
    double ms = time_median_ms(
        [&] { CKA(attn_prefill_cuda(&s, &b, dt, q, kn, vn, kc, vc, out, lse, NULL)); }, 3, reps);
    double flops = 4.0 * HQ * D * B * ((double)S * P + (double)S * (S + 1) / 2);
    printf("{\"bench\":\"attn_prefill_cuda\",\"dtype\":\"%s\",\"B\":%d,\"P\":%d,\"S\":%d,"
           "\"Hq\":%d,\"Hkv\":%d,\"D\":%d,\"page\":%d,\"reps\":%d,\"ms\":%.4f,\"TFLOPs\":%.1f,"
           "\"copy_TBps\":%.3f,\"tile_variant\":%d}\n",
           dtn(dt), B, P, S, HQ, HKV, D, PS, reps, ms, flops / ms / 1e9, copy_tbps, variant);
    fflush(stdout);
    cudaFree(q), cudaFree(kn), cudaFree(vn), cudaFree(kc), cudaFree(vc), cudaFree(out);
    cudaFree(lse), cudaFree(dqs), cudaFree(dpl), cudaFree(dpt);
}

static void bench_decode(attn_dtype dt, int B, int L, int PS, int reps, double copy_tbps)
{
    const int HQ = 32, HKV = 8, D = 128;
    const int ppseq = (L + PS - 1) / PS, NP = B * ppseq;
    uint16_t *q = alloc_random((size_t)B * HQ * D, 1, dt);
    uint16_t *kc = alloc_random((size_t)NP * PS * HKV * D, 4, dt);
    uint16_t *vc = alloc_random((size_t)NP * PS * HKV * D, 5, dt);
    uint16_t *out;
    float *lse;
    void *ws;
    CK(cudaMalloc(&out, (size_t)B * HQ * D * 2));
    CK(cudaMalloc(&lse, (size_t)B * HQ * 4));
    attn_shape s = {HQ, HKV, D, PS, 0.08838834764831845f};
    CK(cudaMalloc(&ws, attn_decode_workspace_bytes(&s, B, 0)));
    std::vector<int32_t> lens(B, L);
    int32_t *dl = upload(lens), *dpt = make_table(B, ppseq, NP, 9);
    double ms = time_median_ms(
        [&] {
            CKA(attn_decode_cuda(&s, dt, B, dl, dpt, ppseq, NP, L, q, kc, vc, out, lse, ws, 0,
                                 NULL));
        },
        5, reps);
    double bytes = 2.0 * B * HKV * (double)L * D * 2;
    double tbps = bytes / ms / 1e9;
    printf("{\"bench\":\"attn_decode_cuda\",\"dtype\":\"%s\",\"B\":%d,\"L\":%d,\"Hq\":%d,"
           "\"Hkv\":%d,\"D\":%d,\"page\":%d,\"reps\":%d,\"ms\":%.4f,\"TBps\":%.3f,"
           "\"copy_TBps\":%.3f,\"ratio_to_copy\":%.3f}\n",
           dtn(dt), B, L, HQ, HKV, D, PS, reps, ms, tbps, copy_tbps, tbps / copy_tbps);
    fflush(stdout);
    cudaFree(q), cudaFree(kc), cudaFree(vc), cudaFree(out), cudaFree(lse), cudaFree(ws);
    cudaFree(dl), cudaFree(dpt);
}

/* Cascade (attention.h): B sequences sharing a `shared`-token prefix (the same
 * pages), each with `own` more tokens in its own pages and S new rows (S = 1:
 * decode). Plain: one paged attention over shared + own. Cascade: the shared
 * level (all B*S rows against the shared pages once), the own level, and the
 * lse merge, all timed together. Both in the same run; the ratio is
 * plain / cascade. */
static void bench_cascade(attn_dtype dt, int B, int shared, int own, int S, int reps,
                          double copy_tbps)
{
    const int HQ = 32, HKV = 8, D = 128, PS = 16;
    const int shp = shared / PS, ownp = (own + PS - 1) / PS, rowp = shp + ownp + (S + PS - 1) / PS;
    const int NP = shp + B * (ownp + (S + PS - 1) / PS);
    const int T = B * S;
    uint16_t *q = alloc_random((size_t)T * HQ * D, 1, dt);
    uint16_t *kn = alloc_random((size_t)T * HKV * D, 2, dt);
    uint16_t *vn = alloc_random((size_t)T * HKV * D, 3, dt);
    uint16_t *kc = alloc_random((size_t)NP * PS * HKV * D, 4, dt);
    uint16_t *vc = alloc_random((size_t)NP * PS * HKV * D, 5, dt);
    uint16_t *out, *out_sh;
    float *lse, *lse_sh;
    CK(cudaMalloc(&out, (size_t)T * HQ * D * 2));
    CK(cudaMalloc(&out_sh, (size_t)T * HQ * D * 2));
    CK(cudaMalloc(&lse, (size_t)T * HQ * 4));
    CK(cudaMalloc(&lse_sh, (size_t)T * HQ * 4));
    /* Full table (shared pages first) and the own table (the rest). */
    std::vector<int32_t> full((size_t)B * rowp, 0), mine((size_t)B * rowp, 0);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < rowp - shp; k++) {
            full[(size_t)b * rowp + shp + k] = shp + b * (rowp - shp) + k;
            mine[(size_t)b * rowp + k] = shp + b * (rowp - shp) + k;
        }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < shp; k++)
            full[(size_t)b * rowp + k] = k;
    std::vector<int32_t> shared_table(std::max(shp, 1));
    for (int k = 0; k < shp; k++)
        shared_table[k] = k;
    attn_shape s = {HQ, HKV, D, PS, 0.08838834764831845f};
    int32_t *dfull = upload(full), *dmine = upload(mine), *dshared = upload(shared_table);
    std::vector<int32_t> qs(B + 1), pfull(B, shared + own), pown(B, own), lfull(B, shared + own),
        lown(B, own), gqs = {0, T}, gpl = {shp * PS};
    for (int i = 0; i <= B; i++)
        qs[i] = i * S;
    int32_t *dqs = upload(qs), *dpfull = upload(pfull), *dpown = upload(pown);
    int32_t *dlfull = upload(lfull), *dlown = upload(lown), *dgqs = upload(gqs), *dgpl = upload(gpl);
    void *ws;
    CK(cudaMalloc(&ws, attn_decode_workspace_bytes(&s, B, 0) + 1));
    attn_batch plain_b = {B, rowp, dqs, dpfull, dfull, S, NP};
    attn_batch own_b = {B, rowp, dqs, dpown, dmine, S, NP};
    attn_batch grp = {1, std::max(shp, 1), dgqs, dgpl, dshared, T, NP};
    auto plain = [&] {
        if (S == 1)
            CKA(attn_decode_cuda(&s, dt, B, dlfull, dfull, rowp, NP, shared + own, q, kc, vc, out,
                                 lse, ws, 0, NULL));
        else
            CKA(attn_prefill_cuda(&s, &plain_b, dt, q, kn, vn, kc, vc, out, lse, NULL));
    };
    auto cascade = [&] {
        CKA(attn_prefill_shared_cuda(&s, &grp, dt, q, kc, vc, out_sh, lse_sh, NULL));
        if (S == 1)
            CKA(attn_decode_cuda(&s, dt, B, dlown, dmine, rowp, NP, own, q, kc, vc, out, lse, ws,
                                 0, NULL));
        else
            CKA(attn_prefill_cuda(&s, &own_b, dt, q, kn, vn, kc, vc, out, lse, NULL));
        CKA(attn_merge_cuda(dt, (int64_t)T * HQ, D, out, lse, out_sh, lse_sh, out, lse, NULL));
    };
    double ms_plain = time_median_ms(plain, 3, reps), ms_cascade = time_median_ms(cascade, 3, reps);
    CKA(attn_cuda_check_error(NULL));
    printf("{\"bench\":\"attn_cascade_cuda\",\"dtype\":\"%s\",\"B\":%d,\"shared\":%d,"
           "\"own\":%d,\"S\":%d,\"Hq\":%d,\"Hkv\":%d,\"D\":%d,\"page\":%d,\"reps\":%d,"
           "\"ms_plain\":%.4f,\"ms_cascade\":%.4f,\"speedup\":%.2f,\"copy_TBps\":%.3f}\n",
           dtn(dt), B, shared, own, S, HQ, HKV, D, PS, reps, ms_plain, ms_cascade,
           ms_plain / ms_cascade, copy_tbps);
    fflush(stdout);
    cudaFree(q), cudaFree(kn), cudaFree(vn), cudaFree(kc), cudaFree(vc), cudaFree(out);
    cudaFree(out_sh), cudaFree(lse), cudaFree(lse_sh), cudaFree(dfull), cudaFree(dmine);
    cudaFree(dshared), cudaFree(dqs), cudaFree(dpfull), cudaFree(dpown), cudaFree(dlfull);
    cudaFree(dlown), cudaFree(dgqs), cudaFree(dgpl), cudaFree(ws);
}

/* One line of cli.h's option table. C++ (before C++20) has no designated
 * initializers, which the CLI_*_OPT macros use. */
static cli_opt table_opt(const char *name, cli_kind kind, void *dst, int64_t lo, int64_t hi)
{
    cli_opt o;
    memset(&o, 0, sizeof o);
    o.name = name;
    o.kind = kind;
    o.dst = dst;
    o.lo = lo;
    o.hi = hi;
    return o;
}

int main(int argc, char **argv)
{
    bool quick_opt = false, variants_opt = false;
    int64_t reps_opt = 30;
    cli_opt table[] = {
        table_opt("--quick", CLI_FLAG, &quick_opt, 0, 0),
        table_opt("--variants", CLI_FLAG, &variants_opt, 0, 0),
        table_opt("--reps", CLI_INT, &reps_opt, 1, 1000000),
        table_opt(NULL, CLI_END_KIND, NULL, 0, 0),
    };
    char perr[256];
    cli_args a;
    if (cli_parse("attn_gpu_bench", table, argc, argv, &a, perr, sizeof perr) || a.npos || a.help) {
        fprintf(stderr, "attn_gpu_bench: %s\n", a.help || a.npos ? "usage: attn_gpu_bench "
                "[--quick] [--variants] [--reps N]" : perr);
        return 2;
    }
    int quick = quick_opt, variants = variants_opt, reps = (int)reps_opt;
    if (!attn_cuda_available()) {
        fprintf(stderr, "attn_gpu_bench: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));

    /* Baseline: copy 1 GiB device to device. */
    size_t n = (size_t)1 << 30;
    void *x, *y;
    CK(cudaMalloc(&x, n));
    CK(cudaMalloc(&y, n));
    CK(cudaMemset(x, 1, n));
    double cms = time_median_ms([&] { CK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice)); },
                                3, 20);
    double copy_tbps = 2.0 * n / cms / 1e9;
    cudaFree(x), cudaFree(y);
    printf("{\"bench\":\"device\",\"name\":\"%s\",\"sms\":%d,\"copy_TBps\":%.3f}\n", prop.name,
           prop.multiProcessorCount, copy_tbps);
    fflush(stdout);

    const int Ps[] = {0, 4096, 16384, 32768};
    const int Ss[] = {512, 2048};
    for (int P : Ps)
        for (int S : Ss)
            bench_prefill(ATTN_BF16, 1, P, S, reps, copy_tbps);
    if (!quick) {
        bench_prefill(ATTN_FP16, 1, 16384, 2048, reps, copy_tbps);
        bench_prefill(ATTN_BF16, 1, 8192, 1024, reps, copy_tbps);
        bench_prefill(ATTN_BF16, 8, 4096, 512, reps, copy_tbps); /* a batch of 8 */
    }
    if (variants) { /* the tile shapes of attention_cuda.cu, for tuning */
        const int vp[][2] = {{4096, 512}, {4096, 2048}, {32768, 2048}};
        for (int v = 0; v < 4; v++) {
            char buf[8];
            snprintf(buf, sizeof buf, "%d", v);
            setenv("RKV_ATTN_PREFILL_TILE", buf, 1);
            for (auto &c : vp)
                bench_prefill(ATTN_BF16, 1, c[0], c[1], reps, copy_tbps, v);
        }
        unsetenv("RKV_ATTN_PREFILL_TILE");
        setenv("RKV_ATTN_DECODE_NT", "128", 1);
        printf("{\"bench\":\"note\",\"text\":\"decode rows below: RKV_ATTN_DECODE_NT=128\"}\n");
        bench_decode(ATTN_BF16, 1, 32768, 16, reps, copy_tbps);
        bench_decode(ATTN_BF16, 64, 4096, 16, reps, copy_tbps);
        unsetenv("RKV_ATTN_DECODE_NT");
    }
    const int dec[][2] = {{1, 32768}, {16, 8192}, {64, 4096}, {128, 2048}};
    for (auto &c : dec)
        bench_decode(ATTN_BF16, c[0], c[1], 16, reps, copy_tbps);
    /* Cascade targets (issue figures): 64 decodes sharing 32k, own 512;
     * 64 prefills of 32 rows over a shared 8k. */
    bench_cascade(ATTN_BF16, 64, 32768, 512, 1, reps, copy_tbps);
    bench_cascade(ATTN_BF16, 64, 8192, 0, 32, reps, copy_tbps);
    if (!quick) {
        bench_cascade(ATTN_BF16, 16, 4096, 256, 1, reps, copy_tbps);
        bench_decode(ATTN_FP16, 64, 4096, 16, reps, copy_tbps);
        bench_decode(ATTN_BF16, 64, 4096, 1, reps, copy_tbps);
        bench_decode(ATTN_BF16, 64, 4096, 64, reps, copy_tbps);
    }
    return 0;
}
