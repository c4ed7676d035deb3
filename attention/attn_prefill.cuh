/* attn_prefill.cuh - FlashAttention-2-style prefill over (paged prefix, suffix).
 *
 * One CTA = (query tile of BM suffix rows, one query head, one sequence); WARPS
 * warps each own 16 query rows (Q fragments kept in registers) or 32 (Q re-read
 * from shared memory, each K/V fragment feeding two mma's: half the ldmatrix
 * traffic per mma, which bounds the 16-row kernel). The CTA walks the keys of its sequence in tiles
 * of BN positions, position pos < p read from the pages, pos >= p from k_new /
 * v_new, so prefix pages and suffix form one stream and a tile may straddle the
 * boundary:
 *
 *   keys:  | prefix page 0 | page 1 | .. | partial page | suffix 0 .. s-1 |
 *   tiles: [  BN  ][  BN  ][  BN  ] .. [  BN  ]  (each row gathered on its own)
 *
 *   Q tile  (BM, D)  -> shared (cp.async) -> registers (ldmatrix), kept all along
 *   K, V    (BN, D)  -> shared, KS stages: tiles t+1..t+KS-1 load while t
 *                       computes; one barrier per tile
 *   S = Q K^T, P = exp2(S - m): registers (mma.sync m16n8k16, fp32 accumulators)
 *   O += P V: P reused from the S registers as the A operand, V via ldmatrix.trans
 *
 * Shared rows are D 16-bit values = D/8 chunks of 16 bytes; chunk c of row r is
 * stored at chunk c ^ (r & 7), so the 8 row addresses of one ldmatrix fall in 8
 * different bank groups.
 *
 * Causal mask (bottom right): suffix row i sees positions [0, p + i]. Only tiles
 * with a position beyond p + (first row of the CTA) need it; earlier tiles run
 * unmasked. Rows past s (last tile) compute on zero-filled Q and are not stored.
 * Shared mode (cascade level 1): the rows are the stacked queries of a group's
 * members, the keys only the group's shared pages, no tile masked.
 */
#ifndef RKV_ATTN_PREFILL_CUH
#define RKV_ATTN_PREFILL_CUH

#include "attn_cuda_util.cuh"

struct attn_prefill_params {
    const void *q, *k_new, *v_new, *k_cache, *v_cache; /* see attention.h layouts */
    void *out;
    float *lse;
    const int32_t *q_starts, *prefix_lens, *page_table;
    int32_t max_pages, num_pages, hq, hkv, group, page_size;
    int32_t shared;   /* 1: the shared level of cascade attention: every row sees the
                         whole prefix and no suffix key (no mask, k_new unread) */
    float scale_log2; /* softmax scale * log2(e): the kernel works in exp2 */
};

template <int D> __device__ __forceinline__ int attn_swz(int row, int chunk)
{
    return row * D + ((chunk ^ (row & 7)) << 3);
}

/* Fast 2^x (MUFU.EX2; flushes denormals, which round to 0 in bf16/fp16 anyway). */
__device__ __forceinline__ float attn_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <typename T, int D, int BM, int BN, int WARPS, int KS>
__global__ void __launch_bounds__(WARPS * 32, 1) attn_prefill_kernel(attn_prefill_params prm)
{
    constexpr int MT = BM / (WARPS * 16); /* 16-row m-tiles per warp */
    static_assert(MT == 1 || MT == 2, "a warp owns 16 or 32 query rows");
    static_assert(BM == WARPS * 16 * MT, "rows split evenly over the warps");
    constexpr int NT = WARPS * 32;
    constexpr int CH = D / 8; /* 16-byte chunks per row */
    constexpr int KT = D / 16; /* k-steps of Q K^T */
    constexpr int NS = BN / 8; /* 8-wide key tiles of S */
    constexpr int ND = D / 8;  /* 8-wide column tiles of O */
    static_assert(NT % CH == 0 && (BN * CH) % NT == 0 && (BM * CH) % NT == 0, "tiling");

    const int h = blockIdx.x, seq = blockIdx.z;
    const int tile = gridDim.y - 1 - blockIdx.y; /* the longest (diagonal-most) tiles first */
    const int q0 = prm.q_starts[seq];
    const int s = prm.q_starts[seq + 1] - q0;
    const int m0 = tile * BM;
    if (m0 >= s)
        return;
    /* Never read past the page table row, whatever prefix_lens says. */
    const int p = min(max(prm.prefix_lens[seq], 0), prm.max_pages * prm.page_size);
    const int kvh = h / prm.group;
    /* keys seen by the last row of the tile */
    const int kv_end = prm.shared ? p : p + min(m0 + BM, s);
    const int ntiles = (kv_end + BN - 1) / BN;
    /* tiles >= this hold a pos > p + m0 (none in the shared level) */
    const int first_masked = prm.shared ? ntiles : (p + m0 + 1) / BN;

    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);
    T *sK = sQ + BM * D; /* [KS][BN][D] */
    T *sV = sK + KS * BN * D;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const T *q = static_cast<const T *>(prm.q);
    const T *kc = static_cast<const T *>(prm.k_cache), *vc = static_cast<const T *>(prm.v_cache);
    const T *kn = static_cast<const T *>(prm.k_new), *vn = static_cast<const T *>(prm.v_new);
    const int32_t *pt = prm.page_table + (size_t)seq * prm.max_pages;
    const int P = prm.page_size;

    /* Q tile: (BM, D) rows of this head, zero past s. */
    for (int i = tid; i < BM * CH; i += NT) {
        int r = i / CH, c = i % CH;
        bool ok = m0 + r < s;
        const T *src = q + ((size_t)(q0 + (ok ? m0 + r : 0)) * prm.hq + h) * D + c * 8;
        attn_cp_async16(sQ + attn_swz<D>(r, c), src, ok ? 16 : 0);
    }

    /* K/V tile n into stage st: each thread owns one chunk column and walks rows,
     * resolving position -> (page, offset) once per row. */
    auto load_kv = [&](int n, int st) {
        const int c = tid % CH;
        T *dk = sK + st * BN * D, *dv = sV + st * BN * D;
#pragma unroll
        for (int r = tid / CH; r < BN; r += NT / CH) {
            int pos = n * BN + r;
            const T *ks = kc, *vs = vc;
            int bytes = 0;
            if (pos < kv_end) {
                size_t off;
                if (pos < p) {
                    int page = pt[pos / P];
                    /* An id outside the pool reads as zeros and is recorded. */
                    if ((unsigned)page < (unsigned)prm.num_pages) {
                        off = (((size_t)page * P + pos % P) * prm.hkv + kvh) * D + c * 8;
                        ks = kc + off;
                        vs = vc + off;
                        bytes = 16;
                    } else {
                        attn_flag_bad_page(ATTN_BAD_PREFILL, page);
                    }
                } else {
                    off = ((size_t)(q0 + pos - p) * prm.hkv + kvh) * D + c * 8;
                    ks = kn + off;
                    vs = vn + off;
                    bytes = 16;
                }
            }
            attn_cp_async16(dk + attn_swz<D>(r, c), ks, bytes);
            attn_cp_async16(dv + attn_swz<D>(r, c), vs, bytes);
        }
    };

    /* Groups: 0 = Q and tile 0, then one per tile; KS - 1 tiles in flight. */
    load_kv(0, 0);
    attn_cp_async_commit();
#pragma unroll
    for (int i = 1; i < KS - 1; i++) {
        if (i < ntiles)
            load_kv(i, i);
        attn_cp_async_commit(); /* empty groups keep the count uniform */
    }

    /* QREG: this warp's Q fragments stay in registers (MT = 1); otherwise
     * (MT = 2) they are re-read from shared memory per k-step, and each K/V
     * fragment feeds MT mma's. */
    constexpr bool QREG = MT == 1;
    uint32_t qf[QREG ? KT : 1][4];
    float o[MT][ND][4];
    float mrow[MT][2], lrow[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int j = 0; j < ND; j++)
            o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.f;
        mrow[mt][0] = mrow[mt][1] = -INFINITY;
        lrow[mt][0] = lrow[mt][1] = 0.f;
    }
    const int g = lane / 4, cq = lane % 4;
    const int wrow = warp * 16 * MT;  /* first tile row of this warp */
    const int row_a = m0 + wrow + g; /* suffix index of rows g, g + 8 of m-tile 0 */
    const int qrow = (lane % 8) + 8 * ((lane / 8) % 2), qchunk = lane / 16;

    for (int t = 0; t < ntiles; t++) {
        const int st = t % KS;
        attn_cp_async_wait<KS - 2>(); /* tile t has landed (this thread's part) */
        __syncthreads();              /* ... everyone's; and tile t - 1 is consumed */
        if (t + KS - 1 < ntiles)
            load_kv(t + KS - 1, (t + KS - 1) % KS); /* into tile t - 1's stage */
        attn_cp_async_commit();
        if (QREG && t == 0) {
#pragma unroll
            for (int kk = 0; kk < (QREG ? KT : 0); kk++)
                attn_ldmatrix_x4(qf[kk], sQ + attn_swz<D>(wrow + qrow, kk * 2 + qchunk));
        }
        const T *tK = sK + st * BN * D, *tV = sV + st * BN * D;

        /* S = Q K^T for this warp's 16 MT rows x BN keys. */
        float sc[MT][NS][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int j = 0; j < NS; j++)
                sc[mt][j][0] = sc[mt][j][1] = sc[mt][j][2] = sc[mt][j][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            uint32_t qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (QREG) {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        qa[mt][e] = qf[QREG ? kk : 0][e];
                } else {
                    attn_ldmatrix_x4(qa[mt],
                                     sQ + attn_swz<D>(wrow + mt * 16 + qrow, kk * 2 + qchunk));
                }
            }
#pragma unroll
            for (int nb = 0; nb < BN / 16; nb++) {
                uint32_t b[4];
                int r = nb * 16 + (lane % 8) + 8 * (lane / 16);
                attn_ldmatrix_x4(b, tK + attn_swz<D>(r, kk * 2 + (lane / 8) % 2));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    attn_dt<T>::mma(sc[mt][2 * nb], qa[mt], b[0], b[1]);
                    attn_dt<T>::mma(sc[mt][2 * nb + 1], qa[mt], b[2], b[3]);
                }
            }
        }

        if (t >= first_masked) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int j = 0; j < NS; j++) {
                    int key = t * BN + j * 8 + 2 * cq;
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int lim = p + row_a + mt * 16 + (e >= 2 ? 8 : 0);
                        if (key + (e & 1) > lim)
                            sc[mt][j][e] = -INFINITY;
                    }
                }
        }

        /* Online softmax, rows g (e = 0,1) and g + 8 (e = 2,3) of each m-tile;
         * a row's 4 owners are the lanes of one quad. */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < NS; j++)
                    mx = fmaxf(mx, fmaxf(sc[mt][j][2 * hr], sc[mt][j][2 * hr + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mnew = fmaxf(mrow[mt][hr], mx * prm.scale_log2);
                float msub = mnew == -INFINITY ? 0.f : mnew;
                float alpha = attn_ex2(mrow[mt][hr] - msub);
                mrow[mt][hr] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int j = 0; j < NS; j++) {
#pragma unroll
                    for (int e = 2 * hr; e < 2 * hr + 2; e++) {
                        float pv = attn_ex2(fmaf(sc[mt][j][e], prm.scale_log2, -msub));
                        sc[mt][j][e] = pv;
                        sum += pv;
                    }
                }
                lrow[mt][hr] = lrow[mt][hr] * alpha + sum;
#pragma unroll
                for (int j = 0; j < ND; j++) {
                    o[mt][j][2 * hr] *= alpha;
                    o[mt][j][2 * hr + 1] *= alpha;
                }
            }

        /* O += P V. */
#pragma unroll
        for (int kb = 0; kb < BN / 16; kb++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = attn_dt<T>::pack(sc[mt][2 * kb][0], sc[mt][2 * kb][1]);
                a[mt][1] = attn_dt<T>::pack(sc[mt][2 * kb][2], sc[mt][2 * kb][3]);
                a[mt][2] = attn_dt<T>::pack(sc[mt][2 * kb + 1][0], sc[mt][2 * kb + 1][1]);
                a[mt][3] = attn_dt<T>::pack(sc[mt][2 * kb + 1][2], sc[mt][2 * kb + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t b[4];
                int r = kb * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
                attn_ldmatrix_x4_trans(b, tV + attn_swz<D>(r, dp * 2 + lane / 16));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    attn_dt<T>::mma(o[mt][2 * dp], a[mt], b[0], b[1]);
                    attn_dt<T>::mma(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
                }
            }
        }
    }
    attn_cp_async_wait<0>();

    /* Finish: the quad's partial sums, normalise, store rows < s. */
    T *out = static_cast<T *>(prm.out);
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float l = lrow[mt][hr];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            int row = row_a + mt * 16 + hr * 8;
            if (row >= s)
                continue;
            float inv = l > 0.f ? 1.f / l : 0.f;
            T *dst = out + ((size_t)(q0 + row) * prm.hq + h) * D + 2 * cq;
#pragma unroll
            for (int j = 0; j < ND; j++)
                *reinterpret_cast<uint32_t *>(dst + j * 8) =
                    attn_dt<T>::pack(o[mt][j][2 * hr] * inv, o[mt][j][2 * hr + 1] * inv);
            if (prm.lse && cq == 0)
                prm.lse[(size_t)(q0 + row) * prm.hq + h] =
                    l > 0.f ? (mrow[mt][hr] + log2f(l)) * ATTN_LN2 : -INFINITY;
        }
}

#endif
