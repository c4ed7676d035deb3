/* attn_decode.cuh - split-K paged decode, its combine, the merge and the K/V
 * store kernels.
 *
 * Decode: one query token per sequence, its whole context in pages. A CTA takes
 * one chunk of one sequence's context for one KV head and up to G of the query
 * heads that share it, so each K/V row is read once for the whole group:
 *
 *   grid (splits, Hkv * head_blocks, B)
 *   context  [ chunk 0 | chunk 1 | ... | chunk splits-1 ]     chunk = CTA
 *   CTA: stages of TOK rows of K and V copied to shared memory with 16-byte
 *        cp.async, STAGES - 1 stages in flight while one is consumed; token
 *        groups of D/8 lanes (8 values per lane) read their rows from there
 *   partial (o, lse) per (sequence, head, split) -> workspace -> combine kernel
 *
 * Chunks past a sequence's length write lse = -inf, which the combine weighs 0.
 */
#ifndef RKV_ATTN_DECODE_CUH
#define RKV_ATTN_DECODE_CUH

#include <type_traits>

#include "attn_cuda_util.cuh"

struct attn_decode_params {
    const void *q, *k_cache, *v_cache; /* q (B, Hq, D); pages (NP, P, Hkv, D) */
    void *out;                         /* (B, Hq, D) */
    float *lse;                        /* (B, Hq) or NULL */
    float *ws_o, *ws_lse;              /* (B, Hq, splits, D), (B, Hq, splits) log2 units */
    const int32_t *seq_lens, *page_table;
    int32_t max_pages, num_pages, hq, hkv, group, page_size, chunk, head_blocks;
    float scale_log2;
};

__device__ __forceinline__ void attn_unpack8(float f[8], uint4 u, bool bf16)
{
    uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 v = bf16 ? attn_dt<__nv_bfloat16>::unpack(w[i]) : attn_dt<__half>::unpack(w[i]);
        f[2 * i] = v.x;
        f[2 * i + 1] = v.y;
    }
}

/* Shared bytes of the split kernel: the K/V stages, which the final reduction
 * over token groups reuses (it needs (D + 2) floats per group and head). */
template <typename T, int D, int G, int NT, int TOK, int STAGES>
constexpr size_t attn_decode_smem_bytes()
{
    return (size_t)STAGES * TOK * D * 2 * sizeof(T) > (size_t)(NT / (D / 8)) * G * (D + 2) * 4
               ? (size_t)STAGES * TOK * D * 2 * sizeof(T)
               : (size_t)(NT / (D / 8)) * G * (D + 2) * 4;
}

template <typename T, int D, int G, int NT, int TOK, int STAGES>
__global__ void __launch_bounds__(NT) attn_decode_split_kernel(attn_decode_params prm)
{
    constexpr int CH = D / 8;        /* 16-byte chunks per row = lanes per token */
    constexpr int NTG = NT / CH;     /* token groups per CTA */
    constexpr int U = TOK / NTG;     /* tokens per group per stage */
    constexpr int RPT = TOK / (NT / CH); /* rows each thread copies per stage */
    static_assert(U >= 1 && TOK % NTG == 0 && RPT >= 1, "decode tiling");
    constexpr bool BF = !std::is_same<T, __half>::value;
    const int split = blockIdx.x, seq = blockIdx.z;
    const int kvh = blockIdx.y / prm.head_blocks, hb = blockIdx.y % prm.head_blocks;
    const int h0 = kvh * prm.group + hb * G;
    const int ng = min(G, prm.group - hb * G);
    const int len = min(max(prm.seq_lens[seq], 0), prm.max_pages * prm.page_size);
    const int t0 = split * prm.chunk, t1 = min(len, t0 + prm.chunk);
    const int nst = t1 > t0 ? (t1 - t0 + TOK - 1) / TOK : 0;
    const int tid = threadIdx.x, tg = tid / CH, li = tid % CH;
    const int P = prm.page_size;
    const T *kc = static_cast<const T *>(prm.k_cache), *vc = static_cast<const T *>(prm.v_cache);
    const int32_t *pt = prm.page_table + (size_t)seq * prm.max_pages;

    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *sK = reinterpret_cast<T *>(smem_raw); /* [STAGES][TOK][D] */
    T *sV = sK + STAGES * TOK * D;

    /* Stage n: rows t0 + n*TOK .. +TOK; this thread copies chunk li of RPT rows. */
    auto load = [&](int n) {
        const int buf = n % STAGES;
#pragma unroll
        for (int k = 0; k < RPT; k++) {
            int r = tg + k * NTG;
            int tok = t0 + n * TOK + r;
            int page = tok < t1 ? pt[tok / P] : 0;
            /* An id outside the pool reads as zeros and is recorded. */
            bool in = tok < t1 && (unsigned)page < (unsigned)prm.num_pages;
            if (tok < t1 && !in)
                attn_flag_bad_page(ATTN_BAD_DECODE, page);
            size_t off = in ? (((size_t)page * P + tok % P) * prm.hkv + kvh) * D + li * 8 : 0;
            int bytes = in ? 16 : 0;
            attn_cp_async16(sK + (buf * TOK + r) * D + li * 8, kc + off, bytes);
            attn_cp_async16(sV + (buf * TOK + r) * D + li * 8, vc + off, bytes);
        }
    };
#pragma unroll
    for (int n = 0; n < STAGES - 1; n++) {
        if (n < nst)
            load(n);
        attn_cp_async_commit(); /* empty groups keep the count uniform */
    }

    float qv[G][8], acc[G][8], m[G], l[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[g][i] = 0.f;
        if (g < ng) {
            uint4 u = *reinterpret_cast<const uint4 *>(
                static_cast<const T *>(prm.q) + ((size_t)seq * prm.hq + h0 + g) * D + li * 8);
            attn_unpack8(qv[g], u, BF);
#pragma unroll
            for (int i = 0; i < 8; i++)
                qv[g][i] *= prm.scale_log2;
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++)
                qv[g][i] = 0.f;
        }
    }

    /* nst is uniform over the CTA, so every lane reaches the barriers and the
     * shuffles. Group tg takes rows tg*U .. tg*U+U-1 of each stage: one
     * softmax update per U scores. */
    for (int n = 0; n < nst; n++) {
        attn_cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (n + STAGES - 1 < nst)
            load(n + STAGES - 1);
        attn_cp_async_commit();
        const int buf = n % STAGES;
        float sc[G][U];
        bool ok[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int r = tg * U + u;
            ok[u] = t0 + n * TOK + r < t1;
            float kf[8];
            attn_unpack8(kf, *reinterpret_cast<const uint4 *>(sK + (buf * TOK + r) * D + li * 8), BF);
#pragma unroll
            for (int g = 0; g < G; g++) {
                float sdot = 0.f;
#pragma unroll
                for (int i = 0; i < 8; i++)
                    sdot = fmaf(qv[g][i], kf[i], sdot);
                sc[g][u] = sdot;
            }
        }
#pragma unroll
        for (int g = 0; g < G; g++) {
            float mx = -INFINITY;
#pragma unroll
            for (int u = 0; u < U; u++) {
#pragma unroll
                for (int o = CH / 2; o > 0; o /= 2)
                    sc[g][u] += __shfl_xor_sync(0xffffffffu, sc[g][u], o);
                sc[g][u] = ok[u] ? sc[g][u] : -INFINITY;
                mx = fmaxf(mx, sc[g][u]);
            }
            float mnew = fmaxf(m[g], mx);
            float msub = mnew == -INFINITY ? 0.f : mnew;
            float alpha = exp2f(m[g] - msub), sum = 0.f;
            m[g] = mnew;
#pragma unroll
            for (int u = 0; u < U; u++) {
                sc[g][u] = exp2f(sc[g][u] - msub);
                sum += sc[g][u];
            }
            l[g] = l[g] * alpha + sum;
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[g][i] *= alpha;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            float vf[8];
            attn_unpack8(vf, *reinterpret_cast<const uint4 *>(sV + (buf * TOK + tg * U + u) * D + li * 8), BF);
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    acc[g][i] = fmaf(sc[g][u], vf[i], acc[g][i]);
        }
    }
    attn_cp_async_wait<0>();
    __syncthreads(); /* the stage buffers become the reduction buffers */

    /* Merge the CTA's token groups through shared memory. */
    float *red_m = reinterpret_cast<float *>(smem_raw); /* [NTG][G] */
    float *red_l = red_m + NTG * G;                     /* [NTG][G] */
    float *red_o = red_l + NTG * G;                     /* [NTG][G][D] */
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (li == 0) {
            red_m[tg * G + g] = m[g];
            red_l[tg * G + g] = l[g];
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            red_o[(tg * G + g) * D + li * 8 + i] = acc[g][i];
    }
    __syncthreads();
    const bool direct = gridDim.x == 1;
    for (int idx = tid; idx < ng * D; idx += NT) {
        int g = idx / D, d = idx % D;
        float mm = -INFINITY;
        for (int k = 0; k < NTG; k++)
            mm = fmaxf(mm, red_m[k * G + g]);
        float ls = 0.f, os = 0.f;
        if (mm != -INFINITY) {
            for (int k = 0; k < NTG; k++) {
                float w = exp2f(red_m[k * G + g] - mm);
                ls += red_l[k * G + g] * w;
                os += red_o[(k * G + g) * D + d] * w;
            }
        }
        float ov = ls > 0.f ? os / ls : 0.f;
        float lse2 = ls > 0.f ? mm + log2f(ls) : -INFINITY;
        size_t row = (size_t)seq * prm.hq + h0 + g;
        if (direct) {
            static_cast<T *>(prm.out)[row * D + d] = (T)ov;
            if (prm.lse && d == 0)
                prm.lse[row] = lse2 == -INFINITY ? -INFINITY : lse2 * ATTN_LN2;
        } else {
            prm.ws_o[(row * gridDim.x + split) * D + d] = ov;
            if (d == 0)
                prm.ws_lse[row * gridDim.x + split] = lse2;
        }
    }
}

/* Combine: one warp per (sequence, head) row, D/32 values per lane. */
template <typename T, int D>
__global__ void attn_decode_combine_kernel(const float *ws_o, const float *ws_lse, int splits,
                                           int64_t rows, T *out, float *lse)
{
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows)
        return;
    const float *ls = ws_lse + row * splits;
    float mm = -INFINITY;
    for (int k = lane; k < splits; k += 32)
        mm = fmaxf(mm, ls[k]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2)
        mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, off));
    constexpr int PER = D / 32;
    float acc[PER];
#pragma unroll
    for (int i = 0; i < PER; i++)
        acc[i] = 0.f;
    float wsum = 0.f;
    if (mm != -INFINITY) {
        for (int k = 0; k < splits; k++) {
            float w = exp2f(ls[k] - mm); /* -inf splits weigh 0 */
            wsum += w;
            const float *o = ws_o + (row * splits + k) * D;
#pragma unroll
            for (int i = 0; i < PER; i++)
                acc[i] = fmaf(w, o[lane + 32 * i], acc[i]);
        }
    }
    float inv = wsum > 0.f ? 1.f / wsum : 0.f;
#pragma unroll
    for (int i = 0; i < PER; i++)
        out[row * D + lane + 32 * i] = (T)(acc[i] * inv);
    if (lse && lane == 0)
        lse[row] = wsum > 0.f ? (mm + log2f(wsum)) * ATTN_LN2 : -INFINITY;
}

/* Merge: a group of D/8 lanes per row, 8 values per lane. Only the group's
 * first lane reads and writes the row's lse, so out/lse_out may alias o1/lse1. */
template <typename T, int D>
__global__ void attn_merge_kernel(int64_t rows, const T *o1, const float *lse1, const T *o2,
                                  const float *lse2, T *out, float *lse_out)
{
    constexpr int TPR = D / 8;
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    int li = threadIdx.x % TPR;
    int lead = (threadIdx.x % 32) / TPR * TPR;
    bool live = row < rows;
    float l1 = -INFINITY, l2 = -INFINITY;
    if (live && li == 0) {
        l1 = lse1[row];
        l2 = lse2[row];
    }
    l1 = __shfl_sync(0xffffffffu, l1, lead);
    l2 = __shfl_sync(0xffffffffu, l2, lead);
    if (!live)
        return;
    float w1, w2;
    float m = attn_merge_weights_dev(l1 * ATTN_LOG2E, l2 * ATTN_LOG2E, &w1, &w2);
    uint4 a = *reinterpret_cast<const uint4 *>(o1 + row * D + li * 8);
    uint4 b = *reinterpret_cast<const uint4 *>(o2 + row * D + li * 8);
    uint32_t wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w}, wr[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 x = attn_dt<T>::unpack(wa[i]), y = attn_dt<T>::unpack(wb[i]);
        /* A weight-0 side contributes nothing even if it holds garbage. */
        float rx = (w1 > 0.f ? w1 * x.x : 0.f) + (w2 > 0.f ? w2 * y.x : 0.f);
        float ry = (w1 > 0.f ? w1 * x.y : 0.f) + (w2 > 0.f ? w2 * y.y : 0.f);
        wr[i] = attn_dt<T>::pack(rx, ry);
    }
    *reinterpret_cast<uint4 *>(out + row * D + li * 8) = make_uint4(wr[0], wr[1], wr[2], wr[3]);
    if (li == 0)
        lse_out[row] = m == -INFINITY ? -INFINITY : m * ATTN_LN2;
}

/* Store: one thread per 16-byte chunk of one (token, kv head) row, K and V.
 * num_slots = NP * P; a slot past it is skipped and recorded. */
__global__ void attn_store_kv_kernel(int64_t chunks, int hkv, int cpr, int64_t num_slots,
                                     const int32_t *slots, const uint4 *k_new, const uint4 *v_new,
                                     uint4 *k_cache, uint4 *v_cache)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t tok = i / ((int64_t)hkv * cpr);
        int64_t rest = i % ((int64_t)hkv * cpr);
        int slot = slots[tok];
        if (slot < 0)
            continue;
        if (slot >= num_slots) {
            attn_flag_bad_page(ATTN_BAD_STORE, slot);
            continue;
        }
        int64_t dst = (int64_t)slot * hkv * cpr + rest;
        k_cache[dst] = k_new[i];
        v_cache[dst] = v_new[i];
    }
}

#endif
