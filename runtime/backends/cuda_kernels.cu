/* cuda_kernels.cu - fused elementwise / row kernels of the cuda backend; see
 * cuda_kernels.cuh. Rows are independent: one CTA per row, fp32 arithmetic. */
#include "cuda_kernels.cuh"

#include <math.h>
#include "rkv_core.h"

/* Sum over the CTA; every thread gets the total. blockDim.x is a multiple of 32,
 * at most 1024. */
__device__ static float block_sum(float v)
{
    __shared__ float part[32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / 32) ? part[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

static int row_threads(int32_t n)
{
    int t = 128;
    while (t < 1024 && t < n / 4) t *= 2;
    return t;
}

__global__ static void embed_kernel(const bf16 *embed, const int32_t *tok, float *resid, int32_t C)
{
    const int64_t t = blockIdx.x;
    const bf16 *src = embed + (int64_t)tok[t] * C;
    float *dst = resid + t * C;
    for (int32_t c = threadIdx.x; c < C; c += blockDim.x) dst[c] = __bfloat162float(src[c]);
}

cudaError_t rkv_embed(const bf16 *embed, const int32_t *token_ids, float *resid, int32_t T,
                      int32_t C, cudaStream_t st)
{
    if (T <= 0) return cudaSuccess;
    embed_kernel<<<T, 256, 0, st>>>(embed, token_ids, resid, C);
    return cudaGetLastError();
}

__global__ static void add_rmsnorm_kernel(float *resid, const float *add, const float *w,
                                          bf16 *out, int32_t C, float eps)
{
    const int64_t t = blockIdx.x;
    float *x = resid + t * C;
    const float *a = add ? add + t * C : nullptr;
    float ss = 0.0f;
    for (int32_t c = threadIdx.x; c < C; c += blockDim.x) {
        float v = x[c];
        if (a) {
            v += a[c];
            x[c] = v;
        }
        ss += v * v;
    }
    const float inv = rsqrtf(block_sum(ss) / (float)C + eps);
    bf16 *o = out + t * C;
    for (int32_t c = threadIdx.x; c < C; c += blockDim.x) o[c] = __float2bfloat16(x[c] * inv * w[c]);
}

cudaError_t rkv_add_rmsnorm(float *resid, const float *add, const float *w, bf16 *out,
                            int32_t T, int32_t C, float eps, cudaStream_t st)
{
    if (T <= 0) return cudaSuccess;
    add_rmsnorm_kernel<<<T, row_threads(C), 0, st>>>(resid, add, w, out, C, eps);
    return cudaGetLastError();
}

/* One CTA per row; thread j handles rotate-half pair j of the row's heads:
 * pairs [0, Hq D/2) are q, then Hkv D/2 of k, then v copied as pairs too. */
__global__ static void qkv_rope_kernel(const float *proj, const float *bias, const float2 *rope,
                                       const int32_t *positions, bf16 *q, bf16 *k, bf16 *v,
                                       int32_t Hq, int32_t Hkv, int32_t D)
{
    const int64_t t = blockIdx.x;
    const int32_t half = D / 2, qd = Hq * D, kvd = Hkv * D, qkv = qd + 2 * kvd;
    const float *row = proj + t * qkv;
    const float2 *cs = rope + (int64_t)positions[t] * half;
    const int32_t pairs = qkv / 2;
    for (int32_t j = threadIdx.x; j < pairs; j += blockDim.x) {
        const int32_t h = j / half, i = j % half; /* head in the stacked qkv, pair index */
        const int32_t c1 = h * D + i, c2 = c1 + half;
        float x1 = row[c1], x2 = row[c2];
        if (bias) {
            x1 += bias[c1];
            x2 += bias[c2];
        }
        if (c1 < qd + kvd) { /* q or k: rotate */
            const float2 r = cs[i];
            const float y1 = x1 * r.x - x2 * r.y, y2 = x2 * r.x + x1 * r.y;
            x1 = y1;
            x2 = y2;
        }
        bf16 *dst;
        int32_t col;
        if (c1 < qd) {
            dst = q + t * qd;
            col = c1;
        } else if (c1 < qd + kvd) {
            dst = k + t * kvd;
            col = c1 - qd;
        } else {
            dst = v + t * kvd;
            col = c1 - qd - kvd;
        }
        dst[col] = __float2bfloat16(x1);
        dst[col + half] = __float2bfloat16(x2);
    }
}

cudaError_t rkv_qkv_rope(const float *proj, const float *bias, const float2 *rope,
                         const int32_t *positions, bf16 *q, bf16 *k, bf16 *v, int32_t T,
                         int32_t Hq, int32_t Hkv, int32_t D, cudaStream_t st)
{
    if (T <= 0) return cudaSuccess;
    qkv_rope_kernel<<<T, 256, 0, st>>>(proj, bias, rope, positions, q, k, v, Hq, Hkv, D);
    return cudaGetLastError();
}

/* grid (x: column blocks, y: rows): no 64-bit division per element, which
 * cost as much as the memory traffic at prefill sizes. */
__global__ static void swiglu_kernel(const float *gu, bf16 *act, int32_t F)
{
    const int64_t t = blockIdx.y;
    const float *g = gu + t * 2 * F, *u = g + F;
    bf16 *o = act + t * F;
    for (int32_t f = blockIdx.x * blockDim.x + threadIdx.x; f < F; f += gridDim.x * blockDim.x) {
        const float x = g[f];
        o[f] = __float2bfloat16(x / (1.0f + expf(-x)) * u[f]);
    }
}

cudaError_t rkv_swiglu(const float *gu, bf16 *act, int32_t T, int32_t F, cudaStream_t st)
{
    if (T <= 0 || F <= 0) return cudaSuccess;
    int32_t bx = (F + 255) / 256;
    if (bx > 64) bx = 64;
    swiglu_kernel<<<dim3((unsigned)bx, (unsigned)T), 256, 0, st>>>(gu, act, F);
    return cudaGetLastError();
}

__global__ static void final_gather_kernel(const float *resid, const float *add,
                                           const int32_t *sample_rows, const float *w, bf16 *out,
                                           int32_t C, float eps)
{
    const int32_t b = blockIdx.x, row = sample_rows[b];
    bf16 *o = out + (int64_t)b * C;
    if (row < 0) {
        for (int32_t c = threadIdx.x; c < C; c += blockDim.x) o[c] = __float2bfloat16(0.0f);
        return;
    }
    const float *x = resid + (int64_t)row * C, *a = add + (int64_t)row * C;
    float ss = 0.0f;
    for (int32_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float v = x[c] + a[c];
        ss += v * v;
    }
    const float inv = rsqrtf(block_sum(ss) / (float)C + eps);
    for (int32_t c = threadIdx.x; c < C; c += blockDim.x)
        o[c] = __float2bfloat16((x[c] + a[c]) * inv * w[c]);
}

cudaError_t rkv_final_gather(const float *resid, const float *add, const int32_t *sample_rows,
                             const float *w, bf16 *out, int32_t B, int32_t C, float eps,
                             cudaStream_t st)
{
    if (B <= 0) return cudaSuccess;
    final_gather_kernel<<<B, row_threads(C), 0, st>>>(resid, add, sample_rows, w, out, C, eps);
    return cudaGetLastError();
}

/* (value, index) pairs reduce by larger value, then smaller index. */
__device__ static inline void arg_better(float &v, int32_t &i, float v2, int32_t i2)
{
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

__global__ static void argmax_kernel(const float *logits, const int32_t *sample_rows,
                                     int32_t *out, int32_t V)
{
    const int32_t b = blockIdx.x;
    if (sample_rows[b] < 0) {
        if (threadIdx.x == 0) out[b] = -1;
        return;
    }
    const float *x = logits + (int64_t)b * V;
    float bv = -INFINITY;
    int32_t bi = INT32_MAX;
    for (int32_t j = threadIdx.x; j < V; j += blockDim.x) {
        float v = x[j];
        if (isnan(v)) v = -INFINITY;
        arg_better(bv, bi, v, j);
    }
    for (int o = 16; o > 0; o >>= 1)
        arg_better(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
    __shared__ float sv[32];
    __shared__ int32_t si[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        bv = lane < (int)(blockDim.x / 32) ? sv[lane] : -INFINITY;
        bi = lane < (int)(blockDim.x / 32) ? si[lane] : INT32_MAX;
        for (int o = 16; o > 0; o >>= 1)
            arg_better(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o),
                       __shfl_xor_sync(0xffffffffu, bi, o));
        /* All -inf (or NaN) rows: id 0, as the CPU sampler. */
        if (lane == 0) out[b] = bi == INT32_MAX ? 0 : bi;
    }
}

cudaError_t rkv_argmax(const float *logits, const int32_t *sample_rows, int32_t *out, int32_t B,
                       int32_t V, cudaStream_t st)
{
    if (B <= 0) return cudaSuccess;
    argmax_kernel<<<B, 1024, 0, st>>>(logits, sample_rows, out, V);
    return cudaGetLastError();
}

__global__ static void init_kernel(void *p, int to_bf16, int64_t n, uint64_t key, double mean,
                                   double a)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const double u = (double)(rkv_splitmix64(key + (uint64_t)i) >> 11) * 0x1.0p-53;
        const float v = (float)(mean + a * (2.0 * u - 1.0));
        if (to_bf16) ((bf16 *)p)[i] = __float2bfloat16(v);
        else ((float *)p)[i] = v;
    }
}

cudaError_t rkv_init_seeded(void *p, int to_bf16, int64_t n, uint64_t key, double mean, double a,
                            cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 8192) blocks = 8192;
    init_kernel<<<(unsigned)blocks, 256, 0, st>>>(p, to_bf16, n, key, mean, a);
    return cudaGetLastError();
}
