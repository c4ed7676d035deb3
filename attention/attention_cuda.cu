/* attention_cuda.cu - the CUDA half of attention.h: argument checks, launch
 * geometry and dtype/head-dim dispatch. The kernels live in attn_prefill.cuh
 * (prefill) and attn_decode.cuh (decode, combine, merge, K/V store).
 *
 * Device-resident arguments (q_starts, prefix_lens, seq_lens, page tables,
 * slot mappings) are not read on the host, which would need a
 * synchronisation; the kernels clamp them instead: a prefix or context longer
 * than max_pages * page_size is cut there, so a bad length never reads outside
 * the table row, and a page id outside [0, num_pages) reads as zeros (a slot
 * past num_pages * page_size is not written), so a bad table never touches
 * memory outside the pool. Such ids are recorded on the device
 * (attn_bad_page_word) for attn_cuda_check_error().
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

#include "attention_common.h"
#include "attn_cuda_util.cuh"
#include "attn_decode.cuh"
#include "attn_prefill.cuh"

/* Default split cap when the caller passes max_splits <= 0 (must agree between
 * attn_decode_workspace_bytes and attn_decode_cuda). */
#define ATTN_DECODE_DEFAULT_SPLITS 64

/* attention_common.c's shape rules, plus scale > 0: the kernels take the row
 * maximum of the raw scores, which is the maximum of the scaled ones only then. */
static int cuda_shape_check(const attn_shape *s, const char *where)
{
    int rc = attn_shape_check_in(where, s);
    if (rc)
        return rc;
    if (!(s->scale > 0.f))
        return ATTN_FAIL(ATTN_EARG, where, "scale = %g must be > 0", (double)s->scale);
    return ATTN_OK;
}

#define ATTN_REQUIRE(cond, where)                                                      \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s (%s:%d): bad argument: %s\n", where, __FILE__, __LINE__, \
                    #cond);                                                            \
            return ATTN_EARG;                                                          \
        }                                                                              \
    } while (0)

extern "C" int attn_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n > 0;
}

/* ---- prefill ------------------------------------------------------------ */

template <typename T, int D, int BM, int BN, int WARPS, int KS = 3>
static int prefill_launch(const attn_prefill_params &prm, int num_seqs, int max_suffix,
                          cudaStream_t st)
{
    auto kern = attn_prefill_kernel<T, D, BM, BN, WARPS, KS>;
    size_t smem = (size_t)(BM + 2 * KS * BN) * D * sizeof(T);
    ATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem));
    dim3 grid(prm.hq, (max_suffix + BM - 1) / BM, num_seqs);
    kern<<<grid, WARPS * 32, smem, st>>>(prm);
    ATTN_CUDA_CHECK_LAUNCH();
    return ATTN_OK;
}

/* Tile shape (BM query rows x BN keys, warps, KV stages): RKV_ATTN_PREFILL_TILE=0..3 picks
 * one for tuning runs (bench/attn_gpu_bench --variants); unset, the default. */
template <typename T>
static int prefill_dispatch(const attn_prefill_params &prm, int d, int num_seqs,
                            int max_suffix, cudaStream_t st)
{
    const char *env = getenv("RKV_ATTN_PREFILL_TILE");
    int v = env ? atoi(env) : -1;
    if (v < 0 || v > 3)
        v = max_suffix > 64 ? 0 : 1; /* short suffixes waste less of a 64-row tile */
    if (d == 128) {
        switch (v) {
        case 0: return prefill_launch<T, 128, 128, 64, 8>(prm, num_seqs, max_suffix, st);
        case 1: return prefill_launch<T, 128, 64, 64, 4>(prm, num_seqs, max_suffix, st);
        case 2: return prefill_launch<T, 128, 128, 32, 4, 3>(prm, num_seqs, max_suffix, st);
        default: return prefill_launch<T, 128, 128, 64, 4, 2>(prm, num_seqs, max_suffix, st);
        }
    }
    return v == 0 || v == 2 ? prefill_launch<T, 64, 128, 64, 8>(prm, num_seqs, max_suffix, st)
                            : prefill_launch<T, 64, 64, 64, 4>(prm, num_seqs, max_suffix, st);
}

/* max_suffix = 0 means "not known" (attention.h): read q_starts back once and
 * take the longest sequence, so the CPU and CUDA paths accept the same batch. */
static int max_suffix_of(const attn_batch *b, cudaStream_t st, const char *where, int32_t *out)
{
    if (b->max_suffix > 0) {
        *out = b->max_suffix;
        return ATTN_OK;
    }
    int32_t *h = (int32_t *)malloc(sizeof(int32_t) * ((size_t)b->num_seqs + 1));
    if (!h)
        return ATTN_ENOMEM;
    int rc = ATTN_OK;
    if (cudaMemcpyAsync(h, b->q_starts, sizeof(int32_t) * ((size_t)b->num_seqs + 1),
                        cudaMemcpyDeviceToHost, st) != cudaSuccess ||
        cudaStreamSynchronize(st) != cudaSuccess) {
        fprintf(stderr, "attention: %s: reading q_starts back: %s\n", where,
                cudaGetErrorString(cudaGetLastError()));
        rc = ATTN_ECUDA;
    }
    int32_t m = 0;
    for (int32_t i = 0; rc == ATTN_OK && i < b->num_seqs; i++) {
        if (h[i + 1] < h[i]) {
            fprintf(stderr, "attention: %s: q_starts[%d] = %d < q_starts[%d] = %d\n", where,
                    (int)i + 1, (int)h[i + 1], (int)i, (int)h[i]);
            rc = ATTN_EARG;
        } else if (h[i + 1] - h[i] > m) {
            m = h[i + 1] - h[i];
        }
    }
    free(h);
    *out = m;
    return rc;
}

static int prefill_run(const char *where, int shared, const attn_shape *s, const attn_batch *b,
                       attn_dtype dt, const void *q, const void *k_new, const void *v_new,
                       const void *k_cache, const void *v_cache, void *out, float *lse,
                       void *stream)
{
    int rc = cuda_shape_check(s, where);
    if (rc)
        return rc;
    ATTN_REQUIRE(b != NULL, where);
    ATTN_REQUIRE(dt == ATTN_BF16 || dt == ATTN_FP16, where);
    ATTN_REQUIRE(b->num_seqs >= 0 && b->max_pages >= 0 && b->max_suffix >= 0, where);
    ATTN_REQUIRE(b->num_pages >= 0, where);
    if (b->num_seqs == 0)
        return ATTN_OK;
    ATTN_REQUIRE(b->q_starts && b->prefix_lens, where);
    cudaStream_t st = (cudaStream_t)stream;
    int32_t max_suffix;
    if ((rc = max_suffix_of(b, st, where, &max_suffix)))
        return rc;
    if (max_suffix == 0)
        return ATTN_OK; /* no query row anywhere */
    ATTN_REQUIRE(b->max_pages == 0 || b->page_table, where);
    ATTN_REQUIRE(q && out && (shared || (k_new && v_new)), where);
    ATTN_REQUIRE(b->max_pages == 0 || (k_cache && v_cache), where);
    ATTN_REQUIRE(b->num_seqs <= 65535, where);

    attn_prefill_params prm;
    prm.q = q;
    /* The shared level never reads k_new/v_new (its keys end at the prefix). */
    prm.k_new = shared ? q : k_new;
    prm.v_new = shared ? q : v_new;
    /* With no pages the gather never reads the cache; keep the pointers valid. */
    prm.k_cache = k_cache ? k_cache : prm.k_new;
    prm.v_cache = v_cache ? v_cache : prm.v_new;
    prm.out = out;
    prm.lse = lse;
    prm.q_starts = b->q_starts;
    prm.prefix_lens = b->prefix_lens;
    prm.page_table = b->page_table ? b->page_table : b->q_starts;
    prm.max_pages = b->max_pages;
    prm.num_pages = b->num_pages;
    prm.hq = s->num_q_heads;
    prm.hkv = s->num_kv_heads;
    prm.group = s->num_q_heads / s->num_kv_heads;
    prm.page_size = s->page_size;
    prm.shared = shared;
    prm.scale_log2 = s->scale * ATTN_LOG2E;
    if (dt == ATTN_BF16)
        return prefill_dispatch<__nv_bfloat16>(prm, s->head_dim, b->num_seqs, max_suffix, st);
    return prefill_dispatch<__half>(prm, s->head_dim, b->num_seqs, max_suffix, st);
}

extern "C" int attn_prefill_cuda(const attn_shape *s, const attn_batch *b, attn_dtype dt,
                                 const void *q, const void *k_new, const void *v_new,
                                 const void *k_cache, const void *v_cache, void *out, float *lse,
                                 void *stream)
{
    return prefill_run("attn_prefill_cuda", 0, s, b, dt, q, k_new, v_new, k_cache, v_cache, out,
                       lse, stream);
}

extern "C" int attn_prefill_shared_cuda(const attn_shape *s, const attn_batch *groups,
                                        attn_dtype dt, const void *q, const void *k_cache,
                                        const void *v_cache, void *out, float *lse, void *stream)
{
    return prefill_run("attn_prefill_shared_cuda", 1, s, groups, dt, q, NULL, NULL, k_cache,
                       v_cache, out, lse, stream);
}

/* ---- decode ------------------------------------------------------------- */

static int decode_splits(int32_t max_splits)
{
    return max_splits > 0 ? max_splits : ATTN_DECODE_DEFAULT_SPLITS;
}

extern "C" size_t attn_decode_workspace_bytes(const attn_shape *s, int32_t num_seqs,
                                              int32_t max_splits)
{
    if (!s || num_seqs <= 0 || s->head_dim <= 0 || s->num_q_heads <= 0)
        return 0;
    size_t rows = (size_t)num_seqs * s->num_q_heads * decode_splits(max_splits);
    return rows * ((size_t)s->head_dim + 1) * sizeof(float);
}

/* Decode CTA: NT threads (256; RKV_ATTN_DECODE_NT=128 picks 128 for tuning);
 * stages of 32 K/V rows, 4 stages (3 in flight). */
#define DECODE_TOK 32
#define DECODE_STAGES 4

/* Splits of each context: the grid (ctas x splits CTAs) should fill whole
 * waves of the resident slots (SMs x CTAs per SM), since a CTA streams its
 * chunk at a fixed rate and a partial last wave leaves bandwidth unused.
 * The fewest splits whose last wave is >= 90 % full (else the fullest), with
 * chunks of >= 256 tokens and at most cap splits. */
static void decode_plan(int64_t ctas, int64_t slots, int32_t max_seq_len, int cap, int *splits,
                        int *chunk)
{
    int64_t by_len = ((int64_t)max_seq_len + 255) / 256;
    int64_t hi = by_len < cap ? by_len : cap;
    if (hi < 1)
        hi = 1;
    int64_t best = 1;
    double best_eff = 0.0;
    for (int64_t sp = 1; sp <= hi; sp++) {
        double waves = (double)(ctas * sp) / (double)slots;
        double eff = waves / ceil(waves);
        if (eff >= 0.9) {
            best = sp;
            break;
        }
        if (eff > best_eff + 1e-9) {
            best_eff = eff;
            best = sp;
        }
    }
    int64_t c = ((int64_t)max_seq_len + best - 1) / best;
    if (c < 1)
        c = 1;
    *chunk = (int)c;
    int64_t n = ((int64_t)max_seq_len + c - 1) / c; /* no empty trailing split */
    *splits = (int)(n < 1 ? 1 : n);
}

template <typename T, int D, int G, int NT>
static int decode_launch(attn_decode_params prm, int num_seqs, int32_t max_seq_len, int cap,
                         void *workspace, cudaStream_t st)
{
    auto kern = attn_decode_split_kernel<T, D, G, NT, DECODE_TOK, DECODE_STAGES>;
    size_t smem = attn_decode_smem_bytes<T, D, G, NT, DECODE_TOK, DECODE_STAGES>();
    ATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem));
    int dev = 0, sms = 132, per_sm = 1;
    ATTN_CUDA_CHECK(cudaGetDevice(&dev));
    ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, NT, smem));
    if (per_sm < 1)
        per_sm = 1;
    prm.head_blocks = (prm.group + G - 1) / G;
    int64_t ctas = (int64_t)num_seqs * prm.hkv * prm.head_blocks;
    int splits, chunk;
    decode_plan(ctas, (int64_t)sms * per_sm, max_seq_len, cap, &splits, &chunk);
    if (splits > 65535) {
        fprintf(stderr, "attn_decode_cuda: %d splits exceed the grid\n", splits);
        return ATTN_EARG;
    }
    prm.chunk = chunk;
    void *owned = NULL;
    if (splits > 1) {
        size_t rows = (size_t)num_seqs * prm.hq * splits;
        if (!workspace) {
            ATTN_CUDA_CHECK(cudaMallocAsync(&owned, rows * (D + 1) * sizeof(float), st));
            workspace = owned;
        }
        prm.ws_o = static_cast<float *>(workspace);
        prm.ws_lse = prm.ws_o + rows * D;
    }
    dim3 grid(splits, prm.hkv * prm.head_blocks, num_seqs);
    kern<<<grid, NT, smem, st>>>(prm);
    ATTN_CUDA_CHECK_LAUNCH();
    if (splits > 1) {
        int64_t rows = (int64_t)num_seqs * prm.hq;
        int per = 4; /* warps per block */
        attn_decode_combine_kernel<T, D><<<(unsigned)((rows + per - 1) / per), 32 * per, 0, st>>>(
            prm.ws_o, prm.ws_lse, splits, rows, static_cast<T *>(prm.out), prm.lse);
        ATTN_CUDA_CHECK_LAUNCH();
    }
    if (owned)
        ATTN_CUDA_CHECK(cudaFreeAsync(owned, st));
    return ATTN_OK;
}

template <typename T, int D, int NT>
static int decode_dispatch_g(const attn_decode_params &prm, int num_seqs, int32_t max_seq_len,
                             int cap, void *ws, cudaStream_t st)
{
    /* Register arrays are sized by G: pick the smallest that holds the group;
     * groups above 8 are cut into blocks of 8 heads. */
    if (prm.group == 1)
        return decode_launch<T, D, 1, NT>(prm, num_seqs, max_seq_len, cap, ws, st);
    if (prm.group == 2)
        return decode_launch<T, D, 2, NT>(prm, num_seqs, max_seq_len, cap, ws, st);
    if (prm.group <= 4)
        return decode_launch<T, D, 4, NT>(prm, num_seqs, max_seq_len, cap, ws, st);
    return decode_launch<T, D, 8, NT>(prm, num_seqs, max_seq_len, cap, ws, st);
}

template <typename T>
static int decode_dispatch(const attn_decode_params &prm, int d, int num_seqs,
                           int32_t max_seq_len, int cap, void *ws, cudaStream_t st)
{
    const char *env = getenv("RKV_ATTN_DECODE_NT");
    if (env && atoi(env) == 128)
        return d == 128 ? decode_dispatch_g<T, 128, 128>(prm, num_seqs, max_seq_len, cap, ws, st)
                        : decode_dispatch_g<T, 64, 128>(prm, num_seqs, max_seq_len, cap, ws, st);
    return d == 128 ? decode_dispatch_g<T, 128, 256>(prm, num_seqs, max_seq_len, cap, ws, st)
                    : decode_dispatch_g<T, 64, 256>(prm, num_seqs, max_seq_len, cap, ws, st);
}

extern "C" int attn_decode_cuda(const attn_shape *s, attn_dtype dt, int32_t num_seqs,
                                const int32_t *seq_lens, const int32_t *page_table,
                                int32_t max_pages, int32_t num_pages, int32_t max_seq_len,
                                const void *q, const void *k_cache, const void *v_cache,
                                void *out, float *lse, void *workspace, int32_t max_splits,
                                void *stream)
{
    const char *where = "attn_decode_cuda";
    int rc = cuda_shape_check(s, where);
    if (rc)
        return rc;
    ATTN_REQUIRE(dt == ATTN_BF16 || dt == ATTN_FP16, where);
    ATTN_REQUIRE(num_seqs >= 0 && max_pages >= 0 && max_seq_len >= 0, where);
    ATTN_REQUIRE(num_pages >= 0, where);
    if (num_seqs == 0)
        return ATTN_OK;
    ATTN_REQUIRE(num_seqs <= 65535, where);
    ATTN_REQUIRE(seq_lens && q && out, where);
    ATTN_REQUIRE(max_pages == 0 || (page_table && k_cache && v_cache), where);
    ATTN_REQUIRE((int64_t)max_seq_len <= (int64_t)max_pages * s->page_size, where);
    cudaStream_t st = (cudaStream_t)stream;

    attn_decode_params prm;
    prm.q = q;
    prm.k_cache = k_cache ? k_cache : q;
    prm.v_cache = v_cache ? v_cache : q;
    prm.out = out;
    prm.lse = lse;
    prm.seq_lens = seq_lens;
    prm.page_table = page_table ? page_table : seq_lens;
    prm.max_pages = max_pages;
    prm.num_pages = num_pages;
    prm.hq = s->num_q_heads;
    prm.hkv = s->num_kv_heads;
    prm.group = s->num_q_heads / s->num_kv_heads;
    prm.page_size = s->page_size;
    prm.chunk = 1;
    prm.head_blocks = 1;
    prm.scale_log2 = s->scale * ATTN_LOG2E;
    prm.ws_o = prm.ws_lse = NULL;
    int cap = decode_splits(max_splits);
    if (dt == ATTN_BF16)
        return decode_dispatch<__nv_bfloat16>(prm, s->head_dim, num_seqs, max_seq_len, cap,
                                              workspace, st);
    return decode_dispatch<__half>(prm, s->head_dim, num_seqs, max_seq_len, cap, workspace, st);
}

/* ---- the record of bad page ids ---------------------------------------- */

static_assert(sizeof(attn_cuda_error_record) == sizeof(attn_bad_page_word),
              "the host record mirrors the device word");

extern "C" int attn_cuda_error_capture(attn_cuda_error_record *rec, void *stream)
{
    const char *where = "attn_cuda_error_capture";
    ATTN_REQUIRE(rec != NULL, where);
    cudaStream_t st = (cudaStream_t)stream;
    void *dev = NULL;
    ATTN_CUDA_CHECK(cudaGetSymbolAddress(&dev, attn_bad_page_word));
    /* On the stream, after its kernels: no device-wide sync needed. */
    ATTN_CUDA_CHECK(cudaMemcpyAsync(rec->word, dev, sizeof rec->word, cudaMemcpyDeviceToHost, st));
    ATTN_CUDA_CHECK(cudaMemsetAsync(dev, 0, sizeof rec->word, st));
    return ATTN_OK;
}

extern "C" void attn_cuda_error_first(const attn_cuda_error_record *rec, int32_t *prefill_page,
                                      int32_t *decode_page, int32_t *store_slot)
{
    int32_t *dst[ATTN_BAD_KINDS] = {prefill_page, decode_page, store_slot};
    for (int k = 0; k < ATTN_BAD_KINDS; k++)
        if (dst[k])
            *dst[k] = rec && (rec->word[0] & (1u << k)) ? (int32_t)rec->word[1 + k] : -1;
}

extern "C" int attn_cuda_error_report(const attn_cuda_error_record *rec, const char *context)
{
    /* What each kind did with the value instead of touching memory. */
    static const char *const kind_name[ATTN_BAD_KINDS] = {
        "attn_prefill_cuda read zeros for page id", "attn_decode_cuda read zeros for page id",
        "attn_store_kv_cuda skipped slot"};
    if (!rec || !rec->word[0])
        return ATTN_OK;
    for (int k = 0; k < ATTN_BAD_KINDS; k++)
        if (rec->word[0] & (1u << k))
            fprintf(stderr, "%s: bad argument: %s %d, outside the pool (the first seen)\n",
                    context ? context : "attention", kind_name[k], (int)rec->word[1 + k]);
    return ATTN_EARG;
}

extern "C" int attn_cuda_check_error(void *stream)
{
    attn_cuda_error_record rec;
    int rc = attn_cuda_error_capture(&rec, stream);
    if (rc)
        return rc;
    ATTN_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return attn_cuda_error_report(&rec, "attn_cuda_check_error");
}

/* ---- store and merge ---------------------------------------------------- */

extern "C" int attn_store_kv_cuda(const attn_shape *s, attn_dtype dt, int32_t num_tokens,
                                  int32_t num_pages, const int32_t *slot_mapping,
                                  const void *k_new, const void *v_new, void *k_cache,
                                  void *v_cache, void *stream)
{
    const char *where = "attn_store_kv_cuda";
    int rc = cuda_shape_check(s, where);
    if (rc)
        return rc;
    ATTN_REQUIRE(dt == ATTN_BF16 || dt == ATTN_FP16, where);
    ATTN_REQUIRE(num_tokens >= 0 && num_pages >= 0, where);
    if (num_tokens == 0)
        return ATTN_OK;
    ATTN_REQUIRE(slot_mapping && k_new && v_new && k_cache && v_cache, where);
    int cpr = s->head_dim / 8; /* 16-byte chunks per row (both dtypes are 2 bytes) */
    int64_t chunks = (int64_t)num_tokens * s->num_kv_heads * cpr;
    int64_t blocks = (chunks + 255) / 256;
    if (blocks > 65535)
        blocks = 65535;
    attn_store_kv_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
        chunks, s->num_kv_heads, cpr, (int64_t)num_pages * s->page_size, slot_mapping,
        static_cast<const uint4 *>(k_new), static_cast<const uint4 *>(v_new),
        static_cast<uint4 *>(k_cache), static_cast<uint4 *>(v_cache));
    ATTN_CUDA_CHECK_LAUNCH();
    return ATTN_OK;
}

template <typename T, int D>
static int merge_launch(int64_t rows, const void *o1, const float *lse1, const void *o2,
                        const float *lse2, void *out, float *lse_out, cudaStream_t st)
{
    int64_t threads = rows * (D / 8);
    attn_merge_kernel<T, D><<<(unsigned)((threads + 255) / 256), 256, 0, st>>>(
        rows, static_cast<const T *>(o1), lse1, static_cast<const T *>(o2), lse2,
        static_cast<T *>(out), lse_out);
    ATTN_CUDA_CHECK_LAUNCH();
    return ATTN_OK;
}

extern "C" int attn_merge_cuda(attn_dtype dt, int64_t rows, int32_t head_dim, const void *o1,
                               const float *lse1, const void *o2, const float *lse2, void *out,
                               float *lse_out, void *stream)
{
    const char *where = "attn_merge_cuda";
    if (head_dim != 64 && head_dim != 128) {
        fprintf(stderr, "%s: head_dim %d not supported (64 or 128)\n", where, head_dim);
        return ATTN_EHEADDIM;
    }
    ATTN_REQUIRE(dt == ATTN_BF16 || dt == ATTN_FP16, where);
    ATTN_REQUIRE(rows >= 0, where);
    if (rows == 0)
        return ATTN_OK;
    ATTN_REQUIRE(o1 && lse1 && o2 && lse2 && out && lse_out, where);
    cudaStream_t st = (cudaStream_t)stream;
    if (dt == ATTN_BF16)
        return head_dim == 128
                   ? merge_launch<__nv_bfloat16, 128>(rows, o1, lse1, o2, lse2, out, lse_out, st)
                   : merge_launch<__nv_bfloat16, 64>(rows, o1, lse1, o2, lse2, out, lse_out, st);
    return head_dim == 128 ? merge_launch<__half, 128>(rows, o1, lse1, o2, lse2, out, lse_out, st)
                           : merge_launch<__half, 64>(rows, o1, lse1, o2, lse2, out, lse_out, st);
}
