/* attention_cpu.c - the production fp32 CPU attention: prefill over
 * (prefix pages, suffix), split-K paged decode, K/V store and state merge.
 *
 * One algorithm does all the attending, in two builds of it: attend_tile()
 * (portable C, vectorised by the compiler) and attend_avx2() (AVX2 + FMA
 * micro-kernels, picked at run time on x86-64). Each runs a block of query rows
 * (a few query positions x the query heads sharing one KV head) over a range
 * of keys in tiles of BK keys, keeping for each row a normalised output and
 * its log-sum-exp, and folding each key tile in with attn_merge_weights() --
 * the same merge that combines decode splits and that attn_merge_cpu exposes.
 *
 *   key index t:  0 ........ prefix-1 | prefix ........ prefix+s-1
 *                 pages via page_table | k_new / v_new rows of the sequence
 *                 [tile][tile][tile]...[tile][tile]  (a tile may straddle)
 *
 *   query row r (position j of the suffix) sees keys t <= prefix + j: the
 *   causal mask only cuts the tiles on the diagonal.
 *
 * Work is split into items -- prefill: (sequence, KV head, query heads of the
 * group, query tile); decode: (sequence, KV head, query heads, context chunk)
 * -- taken by a persistent team of pthreads from a shared counter, heaviest
 * first. A KV tile
 * is gathered once per item and used by every query head of the GQA group.
 *
 * Bitwise invariance: a row's arithmetic depends only on its query and the
 * keys it sees -- key tiles start at key 0 every BK keys, each row reduces
 * its scores, softmax and P V alone, and partial key tiles are padded so every
 * score takes the same reduction. So a row's output and lse are the same bits
 * whatever the batch around it, the rows it shares a tile with, whether its
 * keys come from pages or the suffix, and the thread count; decode with
 * num_splits = 1 gives the bits of prefill with s = 1. (Different splits, or
 * the portable path versus AVX2, differ in the last bits.)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention_common.h"

enum {
    BK = 64,            /* keys per tile */
    DMAX = 128,         /* largest head dim */
    TILE_FLOATS = 8192, /* rows x D of a query tile: 128 x 64 or 64 x 128 (32 KiB) */
    MAX_ROWS = TILE_FLOATS / 64,
    DECODE_CHUNK = 512, /* keys per decode split when the caller leaves it to us */
    MAX_SPLITS = 256,
};

#define ATTN_INLINE static inline __attribute__((always_inline))

/* Where one sequence's keys and values live, for one KV head. */
typedef struct kv_view {
    const float *k_cache, *v_cache; /* (NP, P, Hkv, D), already offset to the head */
    const int32_t *pages;           /* the sequence's page table row */
    const float *k_new, *v_new;     /* (s, Hkv, D) from the sequence's first suffix token */
    int64_t stride;                 /* Hkv * D: floats between two tokens */
    int32_t page_size, prefix;      /* keys [0, prefix) are in pages */
} kv_view;

/* Per-thread working set of the attend kernels (160 KiB, 64-byte aligned). */
typedef struct scratch {
    float q[TILE_FLOATS];     /* (R, D) query rows, pre-multiplied by the scale */
    float o[TILE_FLOATS];     /* (R, D) running output, normalised */
    float s[MAX_ROWS * BK];   /* (R, BK) scores, then probabilities */
    float kt[DMAX * BK];      /* (D, BK) the key tile transposed (portable path) */
    float vpk[DMAX * BK];     /* (D / 32, BK, 32) the value tile packed (AVX2 path) */
    float lse[MAX_ROWS];      /* (R) running log-sum-exp */
    float alpha[MAX_ROWS];    /* (R) weight of the old state in this tile's merge */
    int32_t lim[MAX_ROWS];    /* (R) last key index the row may see */
    int32_t valid[MAX_ROWS];  /* (R) keys of the current tile the row sees */
    const float *kp[2][BK];   /* key row of each key: this tile, next tile */
    const float *vp[2][BK];   /* value row of each key: this tile, next tile */
} scratch;

/* Row pointers of keys [kb, kb + n): prefix keys walk the page table (one
 * division per tile, not per key), the rest are suffix rows. */
ATTN_INLINE void gather_tile(const kv_view *kv, int32_t kb, int n, const float **kp,
                             const float **vp)
{
    int j = 0;
    int32_t t = kb;
    if (t < kv->prefix) {
        const int32_t P = kv->page_size;
        int32_t pg = t / P, off = t % P;
        while (j < n && t < kv->prefix) {
            int32_t run = P - off;
            if (run > kv->prefix - t) run = kv->prefix - t;
            if (run > n - j) run = n - j;
            int64_t base = ((int64_t)kv->pages[pg] * P + off) * kv->stride;
            for (int32_t x = 0; x < run; x++, j++, base += kv->stride) {
                kp[j] = kv->k_cache + base;
                vp[j] = kv->v_cache + base;
            }
            t += run;
            pg++;
            off = 0;
        }
    }
    int64_t base = (int64_t)(t - kv->prefix) * kv->stride;
    for (; j < n; j++, base += kv->stride) {
        kp[j] = kv->k_new + base;
        vp[j] = kv->v_new + base;
    }
}

/* Ask for the next tile's K and V rows while this one is computed: rows of
 * one head are Hkv * D floats apart (often exactly 4 KiB), which the
 * hardware stride prefetchers do not follow across pages. (The AVX2 path
 * spreads the same prefetches over its score loop instead.) */
ATTN_INLINE void prefetch_tile(const float *const *kp, const float *const *vp, int n, const int D)
{
    for (int j = 0; j < n; j++)
        for (int d = 0; d < D; d += 16) {
            __builtin_prefetch(kp[j] + d, 0, 2);
            __builtin_prefetch(vp[j] + d, 0, 2);
        }
}

/* Tiles alternate between the two pointer slots of w. At tile kb (whose
 * pointers are already in its slot unless it is the first), gather the next
 * tile into the other slot and, if asked, prefetch its rows. Returns kb's
 * slot. */
ATTN_INLINE int tile_advance(const kv_view *kv, int32_t kbeg, int32_t kend, int32_t kb,
                             scratch *w, const int D, const int prefetch)
{
    const int cur = ((kb - kbeg) / BK) & 1;
    if (kb == kbeg) gather_tile(kv, kb, kend - kb < BK ? kend - kb : BK, w->kp[cur], w->vp[cur]);
    const int32_t nb = kb + BK;
    if (nb < kend) {
        const int nn = kend - nb < BK ? kend - nb : BK;
        gather_tile(kv, nb, nn, w->kp[cur ^ 1], w->vp[cur ^ 1]);
        if (prefetch) prefetch_tile(w->kp[cur ^ 1], w->vp[cur ^ 1], nn, D);
    }
    return cur;
}

/* y += a x over n floats. A function so that restrict holds (GCC ignores it
 * on block-scope pointers) and the loop vectorises at -O2 without a runtime
 * alias check, which -O2's cost model refuses. n is a literal at each call. */
ATTN_INLINE void axpy(float *restrict y, float a, const float *restrict x, const int n)
{
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* Fold keys [kbeg, kend) into the R rows of w (w->q, w->lim set; w->o, w->lse
 * hold the state so far): the portable path. D is a literal at each call so
 * the loops over D and BK have constant trip counts and vectorise at -O2. */
ATTN_INLINE void attend_tile(const kv_view *kv, int32_t kbeg, int32_t kend, scratch *w, int R,
                             const int D)
{
    for (int32_t kb = kbeg; kb < kend; kb += BK) {
        const int n = kend - kb < BK ? kend - kb : BK;
        /* 1: gather the tile: K transposed (so scores are axpys over keys),
         * V by pointer; unused columns are zero and masked below. */
        const int slot = tile_advance(kv, kbeg, kend, kb, w, D, 1);
        const float *const *vp = w->vp[slot];
        for (int j = 0; j < n; j++) {
            const float *kr = w->kp[slot][j];
            for (int d = 0; d < D; d++) w->kt[d * BK + j] = kr[d];
        }
        for (int j = n; j < BK; j++)
            for (int d = 0; d < D; d++) w->kt[d * BK + j] = 0.0f;
        for (int r = 0; r < R; r++) {
            const int valid = w->lim[r] - kb + 1 < n ? w->lim[r] - kb + 1 : n;
            if (valid <= 0) continue; /* the whole tile is in this row's future */
            /* 2: scores of the row against the tile. */
            float *sr = w->s + r * BK;
            const float *qr = w->q + r * D;
            for (int j = 0; j < BK; j++) sr[j] = 0.0f;
            for (int d = 0; d < D; d++) axpy(sr, qr[d], w->kt + d * BK, BK);
            /* 3: the tile's own softmax state (lse_t, probabilities / sum). */
            float m = -INFINITY;
            for (int j = 0; j < valid; j++) m = sr[j] > m ? sr[j] : m;
            float sum = 0.0f;
            for (int j = 0; j < valid; j++) {
                sr[j] = expf(sr[j] - m);
                sum += sr[j];
            }
            /* 4: merge it into the running state: o = o w1 + o_tile w2. */
            float w1, w2;
            w->lse[r] = attn_merge_weights(w->lse[r], m + logf(sum), &w1, &w2);
            float *orow = w->o + r * D;
            for (int d = 0; d < D; d++) orow[d] *= w1;
            const float c = w2 / sum;
            for (int j = 0; j < valid; j++) axpy(orow, sr[j] * c, vp[j], D);
        }
    }
}

static void attend_tile_d64(const kv_view *kv, int32_t kbeg, int32_t kend, scratch *w, int R)
{
    attend_tile(kv, kbeg, kend, w, R, 64);
}

static void attend_tile_d128(const kv_view *kv, int32_t kbeg, int32_t kend, scratch *w, int R)
{
    attend_tile(kv, kbeg, kend, w, R, 128);
}

/* ---- x86-64 with AVX2 + FMA ------------------------------------------------
 *
 * The same tile algorithm with register-blocked micro-kernels, chosen at run
 * time when the CPU has AVX2 and FMA (the build targets baseline x86-64):
 *   scores  2 rows x 4 keys per step, dot products over D in 8 lanes, one
 *           horizontal reduction per 4 keys (no transposed copy of K, so a
 *           single decode row costs no more than its dot products);
 *   softmax whole 64-key rows: max, a polynomial e^x, sum;
 *   P V     2 rows x 32 output floats per step, the old state's weight
 *           applied when the accumulators are loaded.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* e^x for x <= 0 (scores minus the row max), ~1 ulp: x = n ln2 + r with
 * |r| <= ln2 / 2, e^r by a degree-7 polynomial (Taylor-like minimax
 * coefficients, as in Cephes' expf), times 2^n built in the exponent bits.
 * Below -87 (where 2^n would be subnormal) and at -inf the result is 0, so
 * masked keys get exactly zero weight. */
AVX2_INLINE __m256 exp_avx2(__m256 x)
{
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                         _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}

/* [sum a, sum b, sum c, sum d] */
AVX2_INLINE __m128 hsum4_avx2(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

AVX2_INLINE float hsum_avx2(__m256 a)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* s[r][j] = q_r . k_j for r < R, j < n (a multiple of 4). Key quads outer, row pairs inner:
 * the four K rows stay in L1 while the Q tile (16 KiB at most) sweeps past
 * them, instead of the whole K tile streaming from L2 once per row pair. */
AVX2_INLINE void scores_avx2(scratch *w, const float *const *kp, int R, int n, const int D,
                             const float *const *kp_next, const float *const *vp_next, int nn)
{
    for (int j = 0; j < n; j += 4) {
        /* Spread the next tile's prefetches over this tile's work: a burst
         * of them all at once fills the miss queues and stalls. */
        for (int x = j; x < j + 4 && x < nn; x++)
            for (int d = 0; d < D; d += 16) {
                _mm_prefetch((const char *)(kp_next[x] + d), _MM_HINT_T0);
                _mm_prefetch((const char *)(vp_next[x] + d), _MM_HINT_T0);
            }
        const float *k0 = kp[j], *k1 = kp[j + 1], *k2 = kp[j + 2], *k3 = kp[j + 3];
        int r = 0;
        for (; r + 2 <= R; r += 2) {
            const float *q0 = w->q + r * D, *q1 = q0 + D;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (int d = 0; d < D; d += 8) {
                const __m256 x = _mm256_load_ps(q0 + d), y = _mm256_load_ps(q1 + d);
                __m256 k = _mm256_loadu_ps(k0 + d);
                a0 = _mm256_fmadd_ps(x, k, a0);
                b0 = _mm256_fmadd_ps(y, k, b0);
                k = _mm256_loadu_ps(k1 + d);
                a1 = _mm256_fmadd_ps(x, k, a1);
                b1 = _mm256_fmadd_ps(y, k, b1);
                k = _mm256_loadu_ps(k2 + d);
                a2 = _mm256_fmadd_ps(x, k, a2);
                b2 = _mm256_fmadd_ps(y, k, b2);
                k = _mm256_loadu_ps(k3 + d);
                a3 = _mm256_fmadd_ps(x, k, a3);
                b3 = _mm256_fmadd_ps(y, k, b3);
            }
            _mm_storeu_ps(w->s + r * BK + j, hsum4_avx2(a0, a1, a2, a3));
            _mm_storeu_ps(w->s + (r + 1) * BK + j, hsum4_avx2(b0, b1, b2, b3));
        }
        if (r < R) {
            const float *q0 = w->q + r * D;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < D; d += 8) {
                const __m256 x = _mm256_load_ps(q0 + d);
                a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k0 + d), a0);
                a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k1 + d), a1);
                a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k2 + d), a2);
                a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k3 + d), a3);
            }
            _mm_storeu_ps(w->s + r * BK + j, hsum4_avx2(a0, a1, a2, a3));
        }
    }
}

/* Row r of s becomes its weights in the merged state: e^(s - m) * w2 / sum,
 * 0 past the row's valid keys; alpha[r] = w1, the old state's weight. */
AVX2_INLINE void softmax_avx2(scratch *w, int R, int kb, int n)
{
    for (int r = 0; r < R; r++) {
        float *sr = w->s + r * BK;
        int valid = w->lim[r] - kb + 1 < n ? w->lim[r] - kb + 1 : n;
        if (valid <= 0) { /* the tile is in this row's future: state unchanged */
            w->valid[r] = 0;
            w->alpha[r] = 1.0f;
            for (int j = 0; j < BK; j++) sr[j] = 0.0f; /* its pair row may still run */
            continue;
        }
        w->valid[r] = valid;
        for (int j = valid; j < BK; j++) sr[j] = -INFINITY;
        __m256 mv = _mm256_load_ps(sr);
        for (int j = 8; j < BK; j += 8) mv = _mm256_max_ps(mv, _mm256_load_ps(sr + j));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float m = _mm_cvtss_f32(m4);
        const __m256 mb = _mm256_set1_ps(m);
        __m256 sum = _mm256_setzero_ps();
        for (int j = 0; j < BK; j += 8) {
            const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_load_ps(sr + j), mb));
            _mm256_store_ps(sr + j, e);
            sum = _mm256_add_ps(sum, e);
        }
        const float total = hsum_avx2(sum);
        float w1, w2;
        w->lse[r] = attn_merge_weights(w->lse[r], m + logf(total), &w1, &w2);
        w->alpha[r] = w1;
        const __m256 c = _mm256_set1_ps(w2 / total);
        for (int j = 0; j < BK; j += 8) _mm256_store_ps(sr + j, _mm256_mul_ps(_mm256_load_ps(sr + j), c));
    }
}

/* o_r = o_r alpha_r + sum_j s[r][j] v_j, over each row's valid keys. Output
 * column chunks of 32 floats outer, row pairs inner: the chunk's slice of the
 * V tile (8 KiB) stays in L1 for all rows. */
AVX2_INLINE void pv_avx2(scratch *w, const float *const *vp, int R, const int D, const int packed)
{
    for (int c = 0; c < D; c += 32) {
        /* Value j's 32 floats of this chunk: packed contiguously, or in place. */
#define VCHUNK(j) (packed ? w->vpk + c * BK + (j) * 32 : vp[(j)] + c)
        int r = 0;
        for (; r + 2 <= R; r += 2) {
            const int nv = w->valid[r] > w->valid[r + 1] ? w->valid[r] : w->valid[r + 1];
            if (nv == 0) continue;
            const float *p0 = w->s + r * BK, *p1 = p0 + BK;
            float *o0 = w->o + r * D + c, *o1 = o0 + D;
            const __m256 al0 = _mm256_set1_ps(w->alpha[r]), al1 = _mm256_set1_ps(w->alpha[r + 1]);
            __m256 a0 = _mm256_mul_ps(_mm256_load_ps(o0), al0);
            __m256 a1 = _mm256_mul_ps(_mm256_load_ps(o0 + 8), al0);
            __m256 a2 = _mm256_mul_ps(_mm256_load_ps(o0 + 16), al0);
            __m256 a3 = _mm256_mul_ps(_mm256_load_ps(o0 + 24), al0);
            __m256 b0 = _mm256_mul_ps(_mm256_load_ps(o1), al1);
            __m256 b1 = _mm256_mul_ps(_mm256_load_ps(o1 + 8), al1);
            __m256 b2 = _mm256_mul_ps(_mm256_load_ps(o1 + 16), al1);
            __m256 b3 = _mm256_mul_ps(_mm256_load_ps(o1 + 24), al1);
            for (int j = 0; j < nv; j++) {
                const float *v = VCHUNK(j);
                const __m256 x = _mm256_broadcast_ss(p0 + j), y = _mm256_broadcast_ss(p1 + j);
                __m256 t = _mm256_loadu_ps(v);
                a0 = _mm256_fmadd_ps(x, t, a0);
                b0 = _mm256_fmadd_ps(y, t, b0);
                t = _mm256_loadu_ps(v + 8);
                a1 = _mm256_fmadd_ps(x, t, a1);
                b1 = _mm256_fmadd_ps(y, t, b1);
                t = _mm256_loadu_ps(v + 16);
                a2 = _mm256_fmadd_ps(x, t, a2);
                b2 = _mm256_fmadd_ps(y, t, b2);
                t = _mm256_loadu_ps(v + 24);
                a3 = _mm256_fmadd_ps(x, t, a3);
                b3 = _mm256_fmadd_ps(y, t, b3);
            }
            _mm256_store_ps(o0, a0);
            _mm256_store_ps(o0 + 8, a1);
            _mm256_store_ps(o0 + 16, a2);
            _mm256_store_ps(o0 + 24, a3);
            _mm256_store_ps(o1, b0);
            _mm256_store_ps(o1 + 8, b1);
            _mm256_store_ps(o1 + 16, b2);
            _mm256_store_ps(o1 + 24, b3);
        }
        if (r < R && w->valid[r] > 0) {
            const int nv = w->valid[r];
            const float *p0 = w->s + r * BK;
            float *o0 = w->o + r * D + c;
            const __m256 al0 = _mm256_set1_ps(w->alpha[r]);
            __m256 a0 = _mm256_mul_ps(_mm256_load_ps(o0), al0);
            __m256 a1 = _mm256_mul_ps(_mm256_load_ps(o0 + 8), al0);
            __m256 a2 = _mm256_mul_ps(_mm256_load_ps(o0 + 16), al0);
            __m256 a3 = _mm256_mul_ps(_mm256_load_ps(o0 + 24), al0);
            for (int j = 0; j < nv; j++) {
                const float *v = VCHUNK(j);
                const __m256 x = _mm256_broadcast_ss(p0 + j);
                a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(v), a0);
                a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(v + 8), a1);
                a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(v + 16), a2);
                a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(v + 24), a3);
            }
            _mm256_store_ps(o0, a0);
            _mm256_store_ps(o0 + 8, a1);
            _mm256_store_ps(o0 + 16, a2);
            _mm256_store_ps(o0 + 24, a3);
        }
    }
}

#undef VCHUNK

AVX2_INLINE void attend_avx2(const kv_view *kv, int32_t kbeg, int32_t kend, scratch *w, int R,
                             const int D)
{
    for (int32_t kb = kbeg; kb < kend; kb += BK) {
        const int n = kend - kb < BK ? kend - kb : BK;
        const int slot = tile_advance(kv, kbeg, kend, kb, w, D, 0);
        const int nn = kend - kb - BK < BK ? kend - kb - BK : BK; /* next tile's keys */
        /* Pad the tile to whole key quads by repeating its last key (those
         * scores are masked): every score then takes the same reduction,
         * whatever the item's extent, so a row's result never depends on
         * which rows it was tiled with. */
        const int n4 = (n + 3) & ~3;
        for (int j = n; j < n4; j++) w->kp[slot][j] = w->kp[slot][n - 1];
        scores_avx2(w, w->kp[slot], R, n4, D, w->kp[slot ^ 1], w->vp[slot ^ 1], nn);
        softmax_avx2(w, R, kb, n);
        /* Value rows sit Hkv * D floats apart, a power of two that maps a
         * column chunk of all 64 rows onto a few L1 sets; with more than two
         * row pairs to serve, copying the tile chunk-major first pays off. */
        if (R > 4) {
            for (int j = 0; j < n; j++)
                for (int c = 0; c < D; c += 8)
                    _mm256_store_ps(w->vpk + (c / 32 * 32) * BK + j * 32 + c % 32,
                                    _mm256_loadu_ps(w->vp[slot][j] + c));
            pv_avx2(w, w->vp[slot], R, D, 1);
        } else {
            pv_avx2(w, w->vp[slot], R, D, 0);
        }
    }
}

AVX2_FN static void attend_avx2_d64(const kv_view *kv, int32_t kbeg, int32_t kend, scratch *w,
                                    int R)
{
    attend_avx2(kv, kbeg, kend, w, R, 64);
}

AVX2_FN static void attend_avx2_d128(const kv_view *kv, int32_t kbeg, int32_t kend, scratch *w,
                                     int R)
{
    attend_avx2(kv, kbeg, kend, w, R, 128);
}
#endif

/* Which kernels run: 0 = generic C, 1 = AVX2 + FMA. Decided once from the
 * CPU; attn_cpu_set_generic() lets the tests exercise the generic path. */
static atomic_int g_isa = -1;

void attn_cpu_set_generic(int generic)
{
    int isa = 0;
#ifdef HAVE_AVX2_PATH
    __builtin_cpu_init();
    isa = !generic && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    (void)generic;
    atomic_store(&g_isa, isa);
}

static void attend(const kv_view *kv, int32_t kbeg, int32_t kend, scratch *w, int R, int D)
{
    int isa = atomic_load(&g_isa);
    if (isa < 0) {
        attn_cpu_set_generic(0);
        isa = atomic_load(&g_isa);
    }
#ifdef HAVE_AVX2_PATH
    if (isa == 1) {
        if (D == 64)
            attend_avx2_d64(kv, kbeg, kend, w, R);
        else
            attend_avx2_d128(kv, kbeg, kend, w, R);
        return;
    }
#endif
    if (D == 64)
        attend_tile_d64(kv, kbeg, kend, w, R);
    else
        attend_tile_d128(kv, kbeg, kend, w, R);
}

/* ---- work items and the thread team ------------------------------------ */

/* One unit of work: rows = npos positions x nh query heads (h0.. of KV head
 * g's group) of sequence seq, over keys [kbeg, kend). For decode, split is
 * the chunk index (its partial state's slot), -1 when unsplit. */
typedef struct work_item {
    int64_t cost;
    int32_t seq, g, h0, nh, pos0, npos, kbeg, kend, split;
} work_item;

/* The items of rows (its seq, positions and keys set) for each KV head g
 * and each tile of at most nh query heads of g's group, written from
 * items[k] on; returns the next free index. cost: the scores an item
 * computes, (kend - kbeg) keys x npos rows x nh heads. */
static int64_t items_add_heads(work_item *items, int64_t k, const work_item *rows, int32_t Hkv,
                               int32_t group, int32_t nh)
{
    for (int32_t g = 0; g < Hkv; g++)
        for (int32_t h0 = 0; h0 < group; h0 += nh) {
            work_item *it = &items[k++];
            *it = *rows;
            it->g = g;
            it->h0 = h0;
            it->nh = group - h0 < nh ? group - h0 : nh;
            it->cost = (int64_t)(it->kend - it->kbeg) * it->npos * it->nh;
        }
    return k;
}

typedef struct job {
    const attn_shape *s;
    int decode;
    /* prefill; shared = 1: rows see the whole prefix and no suffix key (the
     * shared level of cascade attention) */
    int shared;
    const attn_batch *b;
    const float *q, *k_new, *v_new, *k_cache, *v_cache;
    float *out, *lse;
    /* decode */
    const int32_t *seq_lens, *page_table;
    int32_t max_pages;
    float *part_o, *part_lse; /* (splits, Hq, D), (splits, Hq) */
    const int64_t *part_base; /* first partial slot of each sequence */
    work_item *items;
    int64_t num_items;
    atomic_llong next;
} job;

static void run_item(const job *jb, const work_item *it, scratch *w)
{
    const attn_shape *s = jb->s;
    const int64_t Hq = s->num_q_heads, Hkv = s->num_kv_heads, D = s->head_dim;
    const int64_t group = Hq / Hkv, h_first = it->g * group + it->h0;
    const int R = it->npos * it->nh;
    kv_view kv = {
        .k_cache = jb->k_cache ? jb->k_cache + it->g * D : NULL,
        .v_cache = jb->v_cache ? jb->v_cache + it->g * D : NULL,
        .stride = Hkv * D,
        .page_size = s->page_size,
    };
    int64_t q_row0; /* token index of the item's first query position */
    if (jb->decode) {
        q_row0 = it->seq;
        kv.pages = jb->page_table + (int64_t)it->seq * jb->max_pages;
        kv.prefix = jb->seq_lens[it->seq];
    } else {
        const int64_t q0 = jb->b->q_starts[it->seq];
        q_row0 = q0 + it->pos0;
        kv.pages = jb->b->page_table ? jb->b->page_table + (int64_t)it->seq * jb->b->max_pages
                                     : NULL;
        kv.prefix = jb->b->prefix_lens[it->seq];
        if (!jb->shared) { /* the shared level reads no suffix key */
            kv.k_new = jb->k_new + (q0 * Hkv + it->g) * D;
            kv.v_new = jb->v_new + (q0 * Hkv + it->g) * D;
        }
    }
    /* Rows: r = position * nh + head, so each position's heads are one
     * contiguous run of q and out. */
    for (int pi = 0; pi < it->npos; pi++) {
        const float *qp = jb->q + ((q_row0 + pi) * Hq + h_first) * D;
        for (int64_t x = 0; x < it->nh * D; x++) w->q[pi * it->nh * D + x] = qp[x] * s->scale;
        for (int hh = 0; hh < it->nh; hh++)
            w->lim[pi * it->nh + hh] = jb->decode || jb->shared ? it->kend - 1
                                                                : kv.prefix + it->pos0 + pi;
    }
    memset(w->o, 0, sizeof(float) * (size_t)(R * D));
    for (int r = 0; r < R; r++) w->lse[r] = -INFINITY;
    attend(&kv, it->kbeg, it->kend, w, R, (int)D);

    float *out = jb->out, *lse = jb->lse;
    int64_t row0 = q_row0 * Hq + h_first; /* (token, head) row of the item's first row */
    int64_t pos_stride = Hq;
    if (jb->decode && it->split >= 0) {
        out = jb->part_o;
        lse = jb->part_lse;
        row0 = (jb->part_base[it->seq] + it->split) * Hq + h_first;
    }
    for (int pi = 0; pi < it->npos; pi++) {
        const int64_t row = row0 + pi * pos_stride;
        memcpy(out + row * D, w->o + (int64_t)pi * it->nh * D, sizeof(float) * (size_t)(it->nh * D));
        if (lse)
            for (int hh = 0; hh < it->nh; hh++) lse[row + hh] = w->lse[pi * it->nh + hh];
    }
}

/* Take items from the shared counter until none are left. */
static void job_work(job *jb, scratch *w)
{
    for (;;) {
        long long i = atomic_fetch_add(&jb->next, 1);
        if (i >= jb->num_items) break;
        run_item(jb, &jb->items[i], w);
    }
}

static int cmp_cost_desc(const void *x, const void *y)
{
    const work_item *a = x, *b = y;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    return 0;
}

enum { MAX_THREADS = 256 };

/* num_threads, or all online cores when <= 0 (looked up once: sysconf reads
 * a file under /sys on every call). */
static int threads_wanted(int num_threads)
{
    static atomic_long cores;
    long n = num_threads;
    if (n <= 0) {
        n = atomic_load(&cores);
        if (n <= 0) {
            n = sysconf(_SC_NPROCESSORS_ONLN);
            atomic_store(&cores, n > 0 ? n : 1);
        }
    }
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static scratch *scratch_new(void)
{
    /* aligned_alloc wants a multiple of the alignment; the AVX2 path uses
     * aligned loads on the q, o, s and vpk rows. */
    return aligned_alloc(64, (sizeof(scratch) + 63) / 64 * 64);
}

/* The thread team. Workers and their scratch persist between calls: starting
 * threads and faulting in fresh scratch pages cost ~100 us a call, more than
 * the attention of a small decode step.
 *
 *   caller:   publish job, gen++, wake all -> work -> wait for active == 0
 *   worker i: sleep until gen changes -> if i < nt: work, active-- -> sleep
 *
 * The team runs one job at a time; a caller that finds it busy (another
 * thread mid-call) runs its job alone. A child after fork() has no workers:
 * an atfork handler resets the team there, and the next call starts new
 * ones. Workers live until exit. */
static struct team {
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t wake, done;
    int nworkers;       /* workers 1..nworkers are running */
    unsigned long gen;  /* bumped for each job */
    job *jb;
    int nt, active;     /* workers 1..nt-1 take part; how many are still busy */
    unsigned long start_gen[MAX_THREADS];
    scratch *scr[MAX_THREADS]; /* [0] the caller's, [i] worker i's */
} g_team = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
            .done = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t g_team_busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_team_once = PTHREAD_ONCE_INIT;

/* In a forked child only the forking thread exists: no workers, and locks or
 * condition variables the parent's workers held must start afresh. The
 * scratch buffers were copied and stay in use. */
static void team_reset_in_child(void)
{
    pthread_mutex_init(&g_team.mu, NULL);
    pthread_cond_init(&g_team.wake, NULL);
    pthread_cond_init(&g_team.done, NULL);
    pthread_mutex_init(&g_team_busy, NULL);
    g_team.nworkers = 0;
    g_team.active = 0;
    g_team.jb = NULL;
}

static void team_init(void)
{
    pthread_atfork(NULL, NULL, team_reset_in_child);
}

static void *team_worker(void *arg)
{
    const int i = (int)(intptr_t)arg;
    pthread_mutex_lock(&g_team.mu);
    unsigned long seen = g_team.start_gen[i];
    for (;;) {
        while (g_team.gen == seen) pthread_cond_wait(&g_team.wake, &g_team.mu);
        seen = g_team.gen;
        if (i >= g_team.nt) continue;
        job *jb = g_team.jb;
        scratch *w = g_team.scr[i];
        pthread_mutex_unlock(&g_team.mu);
        job_work(jb, w);
        pthread_mutex_lock(&g_team.mu);
        if (--g_team.active == 0) pthread_cond_signal(&g_team.done);
    }
    return NULL;
}

/* Run every item of jb on up to num_threads threads (the caller's included).
 * If a worker cannot be started the others do its share. */
static int job_run(const char *fn, job *jb, int num_threads)
{
    if (jb->num_items == 0) return ATTN_OK;
    qsort(jb->items, (size_t)jb->num_items, sizeof(work_item), cmp_cost_desc);
    int nt = threads_wanted(num_threads);
    if (nt > jb->num_items) nt = (int)jb->num_items;
    atomic_init(&jb->next, 0);

    pthread_once(&g_team_once, team_init);
    if (pthread_mutex_trylock(&g_team_busy) != 0) { /* the team is busy: alone */
        scratch *w = scratch_new();
        if (!w) return ATTN_FAIL(ATTN_ENOMEM, fn, "scratch");
        job_work(jb, w);
        free(w);
        return ATTN_OK;
    }
    pthread_mutex_lock(&g_team.mu);
    if (!g_team.scr[0] && !(g_team.scr[0] = scratch_new())) {
        pthread_mutex_unlock(&g_team.mu);
        pthread_mutex_unlock(&g_team_busy);
        return ATTN_FAIL(ATTN_ENOMEM, fn, "scratch");
    }
    while (g_team.nworkers < nt - 1) {
        const int i = g_team.nworkers + 1;
        if (!g_team.scr[i] && !(g_team.scr[i] = scratch_new())) break;
        g_team.start_gen[i] = g_team.gen;
        pthread_t tid;
        if (pthread_create(&tid, NULL, team_worker, (void *)(intptr_t)i) != 0) break;
        pthread_detach(tid);
        g_team.nworkers = i;
    }
    if (nt > g_team.nworkers + 1) nt = g_team.nworkers + 1;
    g_team.jb = jb;
    g_team.nt = nt;
    g_team.active = nt - 1;
    g_team.gen++;
    pthread_cond_broadcast(&g_team.wake);
    scratch *w = g_team.scr[0];
    pthread_mutex_unlock(&g_team.mu);

    job_work(jb, w);

    pthread_mutex_lock(&g_team.mu);
    while (g_team.active > 0) pthread_cond_wait(&g_team.done, &g_team.mu);
    g_team.jb = NULL;
    pthread_mutex_unlock(&g_team.mu);
    pthread_mutex_unlock(&g_team_busy);
    return ATTN_OK;
}

/* Query heads per item and positions per item: a tile holds at most
 * tile_floats / D rows, all heads of the group first (so a KV tile serves all
 * of them), then as many positions as fit. */
static void tile_dims(const attn_shape *s, int32_t tile_floats, int32_t *nh, int32_t *npos)
{
    const int32_t group = s->num_q_heads / s->num_kv_heads;
    const int32_t rows = tile_floats / s->head_dim;
    *nh = group < rows ? group : rows;
    *npos = rows / *nh;
}

/* Prefill items of the batch with the given tile size. */
static int64_t prefill_items(const attn_shape *s, const attn_batch *b, int32_t tile_floats)
{
    int32_t nh, npos;
    tile_dims(s, tile_floats, &nh, &npos);
    const int64_t per_pos = (int64_t)s->num_kv_heads * ((s->num_q_heads / s->num_kv_heads + nh - 1) / nh);
    int64_t n = 0;
    for (int32_t i = 0; i < b->num_seqs; i++)
        n += (int64_t)((b->q_starts[i + 1] - b->q_starts[i] + npos - 1) / npos) * per_pos;
    return n;
}

/* ---- public entry points ----------------------------------------------- */

/* Prefill and the shared level of cascade attention: the same items, only
 * the keys a row sees differ (shared: the whole prefix, no suffix). */
static int prefill_run(const char *fn, int shared, const attn_shape *s, const attn_batch *b,
                       const float *q, const float *k_new, const float *v_new,
                       const float *k_cache, const float *v_cache, float *out, float *lse,
                       int num_threads)
{
    int64_t T;
    int any_prefix;
    int rc = attn_batch_check_host(fn, s, b, &T, &any_prefix);
    if (rc) return rc;
    if (T > 0 && (!q || !out || (!shared && (!k_new || !v_new))))
        return ATTN_FAIL(ATTN_EARG, fn, shared ? "q or out is NULL"
                                               : "q, k_new, v_new or out is NULL");
    if (any_prefix && (!k_cache || !v_cache))
        return ATTN_FAIL(ATTN_EARG, fn, "k_cache or v_cache is NULL");

    /* Full tiles read each KV tile for the most rows; half tiles when full
     * ones would leave threads idle. A row's arithmetic does not depend on
     * the tile it shares, so neither choice changes any result bit. */
    const int32_t Hkv = s->num_kv_heads, group = s->num_q_heads / Hkv;
    int32_t tile_floats = TILE_FLOATS;
    int64_t n = prefill_items(s, b, tile_floats);
    if (n < 2 * (int64_t)threads_wanted(num_threads)) {
        tile_floats = TILE_FLOATS / 2;
        n = prefill_items(s, b, tile_floats);
    }
    int32_t nh, npos;
    tile_dims(s, tile_floats, &nh, &npos);
    work_item *items = malloc(sizeof(work_item) * (size_t)(n > 0 ? n : 1));
    if (!items) return ATTN_FAIL(ATTN_ENOMEM, fn, "%lld work items", (long long)n);
    int64_t k = 0;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        const int32_t sl = b->q_starts[i + 1] - b->q_starts[i], pl = b->prefix_lens[i];
        for (int32_t pos0 = 0; pos0 < sl; pos0 += npos) {
            const int32_t rows = sl - pos0 < npos ? sl - pos0 : npos;
            work_item rows_item = {.seq = i, .pos0 = pos0, .npos = rows, .kbeg = 0,
                                   .kend = shared ? pl : pl + pos0 + rows, .split = -1};
            k = items_add_heads(items, k, &rows_item, Hkv, group, nh);
        }
    }
    job jb = {.s = s, .shared = shared, .b = b, .q = q, .k_new = k_new, .v_new = v_new,
              .k_cache = k_cache, .v_cache = v_cache, .out = out, .lse = lse, .items = items,
              .num_items = n};
    rc = job_run(fn, &jb, num_threads);
    free(items);
    return rc;
}

int attn_prefill_cpu(const attn_shape *s, const attn_batch *b, const float *q,
                     const float *k_new, const float *v_new, const float *k_cache,
                     const float *v_cache, float *out, float *lse, int num_threads)
{
    return prefill_run("attn_prefill_cpu", 0, s, b, q, k_new, v_new, k_cache, v_cache, out, lse,
                       num_threads);
}

int attn_prefill_shared_cpu(const attn_shape *s, const attn_batch *groups, const float *q,
                            const float *k_cache, const float *v_cache, float *out, float *lse,
                            int num_threads)
{
    return prefill_run("attn_prefill_shared_cpu", 1, s, groups, q, NULL, NULL, k_cache, v_cache,
                       out, lse, num_threads);
}

int attn_decode_cpu(const attn_shape *s, int32_t num_seqs, const int32_t *seq_lens,
                    const int32_t *page_table, int32_t max_pages, int32_t num_pages,
                    const float *q, const float *k_cache, const float *v_cache, float *out,
                    float *lse, int num_splits, int num_threads)
{
    static const char fn[] = "attn_decode_cpu";
    int32_t longest;
    int rc = attn_decode_check_host(fn, s, num_seqs, seq_lens, page_table, max_pages, num_pages,
                                    &longest);
    if (rc) return rc;
    if (num_seqs > 0 && (!q || !out)) return ATTN_FAIL(ATTN_EARG, fn, "q or out is NULL");
    if (longest > 0 && (!k_cache || !v_cache))
        return ATTN_FAIL(ATTN_EARG, fn, "k_cache or v_cache is NULL");

    const int64_t Hq = s->num_q_heads, D = s->head_dim;
    const int32_t Hkv = s->num_kv_heads, group = (int32_t)(Hq / Hkv);
    int32_t nh, npos;
    tile_dims(s, TILE_FLOATS, &nh, &npos);
    const int32_t hchunks = (group + nh - 1) / nh;

    /* Splits per sequence depend only on the lengths and num_splits (not on
     * the threads), and every chunk holds at least one key. */
    int32_t *splits = malloc(sizeof(int32_t) * (size_t)(num_seqs > 0 ? num_seqs : 1));
    int64_t *base = malloc(sizeof(int64_t) * (size_t)(num_seqs > 0 ? num_seqs : 1));
    if (!splits || !base) {
        free(splits);
        free(base);
        return ATTN_FAIL(ATTN_ENOMEM, fn, "%d sequences", (int)num_seqs);
    }
    int64_t total_splits = 0, n = 0;
    for (int32_t i = 0; i < num_seqs; i++) {
        int64_t want = num_splits > 0 ? num_splits
                                      : ((int64_t)seq_lens[i] + DECODE_CHUNK - 1) / DECODE_CHUNK;
        if (want > seq_lens[i]) want = seq_lens[i];
        if (want > MAX_SPLITS) want = MAX_SPLITS;
        splits[i] = want < 1 ? 1 : (int32_t)want;
        base[i] = total_splits;
        if (splits[i] > 1) total_splits += splits[i];
        n += (int64_t)splits[i] * Hkv * hchunks;
    }
    float *part_o = NULL, *part_lse = NULL;
    work_item *items = malloc(sizeof(work_item) * (size_t)(n > 0 ? n : 1));
    if (total_splits > 0) {
        part_o = malloc(sizeof(float) * (size_t)(total_splits * Hq * D));
        part_lse = malloc(sizeof(float) * (size_t)(total_splits * Hq));
    }
    if (!items || (total_splits > 0 && (!part_o || !part_lse))) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "%lld partial states", (long long)total_splits);
        goto done;
    }
    int64_t k = 0;
    for (int32_t i = 0; i < num_seqs; i++)
        for (int32_t c = 0; c < splits[i]; c++) {
            work_item chunk = {.seq = i, .pos0 = 0, .npos = 1,
                               .kbeg = (int32_t)((int64_t)seq_lens[i] * c / splits[i]),
                               .kend = (int32_t)((int64_t)seq_lens[i] * (c + 1) / splits[i]),
                               .split = splits[i] > 1 ? c : -1};
            k = items_add_heads(items, k, &chunk, Hkv, group, nh);
        }
    /* With splits the rows' lse are needed even if the caller wants none. */
    job jb = {.s = s, .decode = 1, .q = q, .k_cache = k_cache, .v_cache = v_cache, .out = out,
              .lse = lse, .seq_lens = seq_lens, .page_table = page_table, .max_pages = max_pages,
              .part_o = part_o, .part_lse = part_lse, .part_base = base, .items = items,
              .num_items = n};
    rc = job_run(fn, &jb, num_threads);
    if (rc) goto done;
    /* Split-K combine: fold the chunks of each row in order with the merge. */
    for (int32_t i = 0; i < num_seqs; i++) {
        if (splits[i] == 1) continue;
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t row = i * Hq + h;
            float *o = out + row * D;
            float l = part_lse[base[i] * Hq + h];
            memcpy(o, part_o + (base[i] * Hq + h) * D, sizeof(float) * (size_t)D);
            for (int32_t c = 1; c < splits[i]; c++) {
                const int64_t prow = (base[i] + c) * Hq + h;
                /* Arguments built here, all valid: the status is always ATTN_OK. */
                (void)attn_merge_cpu(1, (int32_t)D, o, &l, part_o + prow * D, &part_lse[prow], o, &l);
            }
            if (lse) lse[row] = l;
        }
    }
done:
    free(items);
    free(part_o);
    free(part_lse);
    free(splits);
    free(base);
    return rc;
}

int attn_store_kv_cpu(const attn_shape *s, int32_t num_tokens, int32_t num_pages,
                      const int32_t *slot_mapping, const float *k_new, const float *v_new,
                      float *k_cache, float *v_cache)
{
    static const char fn[] = "attn_store_kv_cpu";
    int rc = attn_shape_check_in(fn, s);
    if (rc) return rc;
    if (num_tokens < 0) return ATTN_FAIL(ATTN_EARG, fn, "num_tokens = %d", (int)num_tokens);
    if (num_tokens > 0 && (!slot_mapping || !k_new || !v_new || !k_cache || !v_cache))
        return ATTN_FAIL(ATTN_EARG, fn, "slot_mapping, k_new, v_new, k_cache or v_cache is NULL");
    /* Every slot before the first write, so a bad one leaves the cache as it was. */
    rc = attn_slots_check_host(fn, s, num_tokens, num_pages, slot_mapping);
    if (rc) return rc;
    /* (NP, P, Hkv, D) is (NP * P slots, Hkv * D): a slot is one token's row. */
    const int64_t row = (int64_t)s->num_kv_heads * s->head_dim;
    for (int32_t t = 0; t < num_tokens; t++) {
        if (slot_mapping[t] < 0) continue;
        memcpy(k_cache + slot_mapping[t] * row, k_new + t * row, sizeof(float) * (size_t)row);
        memcpy(v_cache + slot_mapping[t] * row, v_new + t * row, sizeof(float) * (size_t)row);
    }
    return ATTN_OK;
}

int attn_merge_cpu(int64_t rows, int32_t head_dim, const float *o1, const float *lse1,
                   const float *o2, const float *lse2, float *out, float *lse_out)
{
    static const char fn[] = "attn_merge_cpu";
    if (rows < 0 || head_dim < 1)
        return ATTN_FAIL(ATTN_EARG, fn, "rows = %lld, head_dim = %d", (long long)rows, (int)head_dim);
    if (rows > 0 && (!o1 || !lse1 || !o2 || !lse2 || !out || !lse_out))
        return ATTN_FAIL(ATTN_EARG, fn, "o1, lse1, o2, lse2, out or lse_out is NULL");
    const int64_t D = head_dim;
    for (int64_t r = 0; r < rows; r++) {
        float w1, w2;
        const float l = attn_merge_weights(lse1[r], lse2[r], &w1, &w2);
        const float *a = o1 + r * D, *b = o2 + r * D;
        float *o = out + r * D;
        /* A side of weight 0 (an empty state) is skipped, not multiplied, so
         * whatever its o holds cannot leak into the result. */
        if (w2 == 0.0f)
            for (int64_t d = 0; d < D; d++) o[d] = w1 == 0.0f ? 0.0f : a[d] * w1;
        else if (w1 == 0.0f)
            for (int64_t d = 0; d < D; d++) o[d] = b[d] * w2;
        else
            for (int64_t d = 0; d < D; d++) o[d] = a[d] * w1 + b[d] * w2;
        lse_out[r] = l;
    }
    return ATTN_OK;
}
