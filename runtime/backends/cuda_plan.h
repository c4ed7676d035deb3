/* cuda_plan.h - host-side planning for the cuda backend, in plain C so that it
 * is tested on machines without a GPU.
 *
 * The backend makes four kinds of decisions before and around its kernels;
 * all of them live here as pure functions of sizes:
 *
 *   1. the weight arena: one device allocation, every tensor at a fixed,
 *      256-byte aligned offset (matrices bf16, norms and biases fp32);
 *   2. the activation workspace for a step of up to max_tokens rows and
 *      max_seqs sequences, plus the RoPE table and the decode workspace;
 *   3. the memory budget: weights + activations + reserve first, the KV pool
 *      gets the rest; what does not fit is named, with the option to change;
 *   4. per-step I/O: the packed layout of the host->device inputs (one copy
 *      from a pinned buffer) and the CUDA-graph bucket of a decode batch.
 *
 * Weight arena (offsets from its base; one layer block repeated L times):
 *
 *   +-------+-------------------------------------------+-----+-------+---------+
 *   | embed | layer 0: attn_norm wqkv [bqkv] wo mlp_norm | ... | final | lm_head |
 *   | (V,C) |          wgate_up wdown                   |     | norm  | (V,C)   |
 *   +-------+-------------------------------------------+-----+-------+---------+
 *                                                                 (absent when tied)
 *
 * wqkv is wq (Hq D, C), wk (Hkv D, C), wv (Hkv D, C) stacked, so one GEMM
 * computes q, k and v; wgate_up is gate (F, C) then up (F, C). All matrices
 * keep the Hugging Face layout (out_features, in_features), row-major.
 *
 * Nothing here allocates: every function fills a caller-owned struct.
 */
#ifndef RKV_CUDA_PLAN_H
#define RKV_CUDA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "model_config.h"
#include "rkv_status.h"

#define CUDA_PLAN_ALIGN 256 /* device offsets: cuBLAS and 16-byte vector loads */
#define CUDA_PLAN_NO_TENSOR ((size_t)-1)

/* ---- 1. weights --------------------------------------------------------- */

typedef struct cuda_weight_plan {
    int32_t qkv_dim;      /* (Hq + 2 Hkv) D: rows of wqkv */
    int32_t q_dim;        /* Hq D */
    int32_t kv_dim;       /* Hkv D */
    size_t embed;         /* (V, C) bf16 */
    size_t layer0;        /* offset of layer 0's block */
    size_t layer_stride;  /* bytes of one layer block */
    /* offsets inside a layer block */
    size_t attn_norm;     /* (C) fp32 */
    size_t wqkv;          /* (qkv_dim, C) bf16 */
    size_t bqkv;          /* (qkv_dim) fp32, CUDA_PLAN_NO_TENSOR without bias */
    size_t wo;            /* (C, Hq D) bf16 */
    size_t mlp_norm;      /* (C) fp32 */
    size_t wgate_up;      /* (2F, C) bf16 */
    size_t wdown;         /* (C, F) bf16 */
    size_t final_norm;    /* (C) fp32 */
    size_t lm_head;       /* (V, C) bf16; equals embed when tied */
    size_t total_bytes;
} cuda_weight_plan;

rkv_status cuda_plan_weights(const model_config *c, cuda_weight_plan *out, char *err,
                             size_t errlen);

/* ---- 2. activations ------------------------------------------------------ */

typedef struct cuda_act_plan {
    int32_t max_tokens;   /* T */
    int32_t max_seqs;     /* B: sequences (and sampled rows) per step */
    size_t resid;         /* (T, C) fp32 residual stream */
    size_t normed;        /* (T, C) bf16 RMSNorm output, GEMM input */
    size_t proj;          /* (T, max(qkv_dim, 2F, C)) fp32 GEMM output */
    size_t q;             /* (T, Hq, D) bf16 after bias + RoPE */
    size_t k;             /* (T, Hkv, D) bf16 */
    size_t v;             /* (T, Hkv, D) bf16 */
    size_t attn_out;      /* (T, Hq, D) bf16 */
    size_t act;           /* (T, F) bf16 SwiGLU output */
    size_t head_in;       /* (B, C) bf16 final-normed rows that sample */
    size_t logits;        /* (B, V) fp32 */
    size_t rope;          /* (max_pos, D/2) float2 (cos, sin) */
    size_t decode_ws;     /* attention's split-K decode workspace */
    size_t total_bytes;
} cuda_act_plan;

/* decode_ws_bytes: what attn_decode_workspace_bytes() asks for max_seqs. */
rkv_status cuda_plan_activations(const model_config *c, int32_t max_tokens, int32_t max_seqs,
                                 int32_t max_position, size_t decode_ws_bytes,
                                 cuda_act_plan *out, char *err, size_t errlen);

/* ---- 3. memory budget ---------------------------------------------------- */

typedef struct cuda_mem_request {
    size_t free_bytes;     /* device memory free at start-up (cudaMemGetInfo) */
    double mem_fraction;   /* (0, 1]: share of free_bytes this backend may use */
    size_t weight_bytes;
    size_t act_bytes;
    int32_t act_tokens;    /* for the message: tokens the activations are sized for */
    size_t reserve_bytes;  /* cuBLAS workspace, graphs, step I/O */
    size_t page_bytes;     /* KV bytes of one page over all layers */
    int64_t num_pages;     /* > 0: exactly this many; <= 0: as many as fit */
    int64_t min_pages;     /* fewer than this is an error */
} cuda_mem_request;

typedef struct cuda_mem_plan {
    size_t budget;         /* free_bytes * mem_fraction */
    size_t fixed_bytes;    /* weights + activations + reserve */
    int64_t num_pages;
    size_t kv_bytes;       /* num_pages * page_bytes */
} cuda_mem_plan;

/* RKV_ENOSPC with a message naming the first part that did not fit (weights,
 * activations, the requested KV pool, or too few pages) and how to shrink it;
 * RKV_EINVAL for a fraction outside (0, 1] or a zero page size. */
rkv_status cuda_plan_memory(const cuda_mem_request *r, cuda_mem_plan *out, char *err,
                            size_t errlen);

/* KV bytes of one page: L layers x (K and V) x P x Hkv x D x elem_bytes. */
size_t cuda_plan_page_bytes(const model_config *c, int32_t page_size, int elem_bytes);

/* "1.50 GiB" style, for messages. */
void cuda_plan_format_bytes(size_t bytes, char *buf, size_t len);

/* ---- 4. per-step I/O and graph buckets ------------------------------------ */

/* One step's inputs, packed at 16-byte aligned offsets in one buffer; the
 * pinned host copy and the device copy share the layout, so one
 * cudaMemcpyAsync of `bytes` moves them all.
 *
 *   token_ids (T) | positions (T) | slots (T) | q_starts (B+1) | prefix_lens (B)
 *   | seq_lens (B) | sample_rows (B) | sample_steps (B) | top_k (B)
 *   | temperature (B) f32 | top_p (B) f32 | seeds (B) u64 | page_table (B, stride)
 */
typedef struct cuda_step_layout {
    int32_t num_tokens, num_seqs, stride;
    size_t token_ids, positions, slots, q_starts, prefix_lens, seq_lens, sample_rows,
        sample_steps, top_k, temperature, top_p, seeds, page_table;
    size_t bytes;
} cuda_step_layout;

/* Layout for T tokens, B sequences and a page-table row stride; RKV_EINVAL
 * for negative sizes, RKV_ENOSPC (naming the size) when it exceeds capacity. */
rkv_status cuda_plan_step_layout(int32_t num_tokens, int32_t num_seqs, int32_t stride,
                                 size_t capacity, cuda_step_layout *out, char *err,
                                 size_t errlen);

/* Decode-graph batch buckets: 1 2 4 8, multiples of 8 to 64, of 16 to 128, of
 * 32 beyond. cuda_plan_graph_bucket() returns the smallest bucket >= bs, or -1
 * when bs < 1 or bs > max_bs (such a step runs without a graph). */
int32_t cuda_plan_graph_bucket(int32_t bs, int32_t max_bs);
/* All buckets up to max_bs, ascending, into out (cap entries); returns the count. */
int32_t cuda_plan_graph_buckets(int32_t max_bs, int32_t *out, int32_t cap);

/* Page-table stride of a captured graph: the next power of two >= max_pages
 * (at least 4), capped at limit; -1 when max_pages > limit. Graphs are keyed
 * by (batch bucket, stride), so the stride takes few values. */
int32_t cuda_plan_stride_bucket(int32_t max_pages, int32_t limit);

/* What the device runs for a step of T rows, B sequences (the longest suffix
 * max_suffix rows, the longest page-table row used_pages):
 *
 *   graph level 0           eager, unpadded
 *   decode step, level >= 1 a graph of `bucket` sequences of one row each
 *   mixed step,  level 2,   a graph of `tokens` rows (a power of two >= 16) and
 *   T <= mixed_max_tokens   `seqs` sequences; padding rows belong to padding
 *                           sequences (so seqs > B whenever tokens > T), and
 *                           the prefill grid covers `suffix_bound` rows per
 *                           sequence, padding ones included
 *
 * Falls back to eager (graph = 0, the batch's own sizes) when a bucket would
 * pass max_seqs, max_tokens or max_stride. */
typedef struct cuda_step_shape {
    int graph;
    int32_t tokens, seqs, stride, suffix_bound;
} cuda_step_shape;

void cuda_plan_step_shape(int graph_level, int decode, int32_t num_tokens, int32_t num_seqs,
                          int32_t max_suffix, int32_t used_pages, int32_t max_tokens,
                          int32_t max_seqs, int32_t max_stride, int32_t mixed_max_tokens,
                          cuda_step_shape *out);

/* q_starts of the padded step: the batch's B+1 offsets, then one padding row
 * per padding sequence while rows remain, the last padding sequence taking
 * the rest; out (Bp+1) ends at Tp. Padding sequences may have no row. */
void cuda_plan_pad_q_starts(const int32_t *q_starts, int32_t num_seqs, int32_t num_tokens,
                            int32_t padded_seqs, int32_t padded_tokens, int32_t *out);

/* ---- 5. mixed steps: decode rows apart from prefill tiles ------------------ *
 *
 * Today a step that mixes prompt chunks with decodes runs every sequence
 * through the prefill kernel on one grid of (heads, ceil(max_suffix / BM), B)
 * query tiles: a decode row takes a whole BM-row tile of its own (1 useful row
 * in BM, its context read once per query head), and every sequence gets
 * max_suffix / BM tiles whether it has rows there or not.
 *
 *   B = 4, BM = 64, suffix lengths 150, 1, 1, 40:
 *
 *   today (grid 3 x 4)            planned
 *   seq 0 [###][###][## ]         tiles   (0,0) (0,64) (0,128) (3,0)
 *   seq 1 [#  ][   ][   ]         decode  seq 1, seq 2  -> the decode kernel
 *   seq 2 [#  ][   ][   ]                 (context read once per KV head,
 *   seq 3 [## ][   ][   ]                  split-K over its length)
 *
 * cuda_plan_mixed() makes the planned form: the sequences with exactly one new
 * row go to the decode kernel; the others are cut into tiles of BM rows that
 * cover only rows that exist, listed sequence by sequence, so the prefill grid
 * is (heads, num_tiles) with no empty CTA. cuda_plan_mixed_gather() builds the
 * two sub-batches the kernels take. Costs of both forms are counted so a
 * caller (and the tests) can compare them: CTAs per query head, and K/V rows
 * read (each CTA reads the context its last row sees; a decode reads its
 * context once per KV head, i.e. Hq / Hkv times less than a per-head tile). */
typedef struct cuda_mixed_plan {
    int32_t num_decode;   /* sequences with one new row */
    int32_t num_prefill;  /* sequences with more than one new row */
    int32_t num_tiles;    /* prefill tiles of the planned grid */
    int32_t tile_rows;    /* BM */
    int64_t today_ctas;   /* B * ceil(max_suffix / BM), per query head */
    int64_t today_kv_rows;   /* K/V rows read per query head by today's grid */
    int64_t planned_kv_rows; /* the same for tiles + decodes, per query head */
} cuda_mixed_plan;

/* Plans a step of B sequences (q_starts (B+1), prefix_lens (B)) for prefill
 * tiles of tile_rows rows and query heads per KV head `group` (Hq / Hkv).
 * Fills decode_seqs (B) with the decode sequences' batch indices and
 * tile_seq / tile_row (cap_tiles each) with each tile's sequence and first
 * suffix row, both ascending. RKV_EINVAL for inconsistent sizes (naming
 * them), RKV_ENOSPC when the tiles exceed cap_tiles. */
rkv_status cuda_plan_mixed(const int32_t *q_starts, const int32_t *prefix_lens, int32_t num_seqs,
                           int32_t tile_rows, int32_t group, int32_t *decode_seqs,
                           int32_t *tile_seq, int32_t *tile_row, int32_t cap_tiles,
                           cuda_mixed_plan *out, char *err, size_t errlen);

/* The two sub-batches of a plan, over the caller's page table (B, stride):
 *   prefill: pq_starts (P+1), pprefix (P), ptable (P, stride), prow (P) the
 *            batch index of each prefill sequence;
 *   decode:  dseq_lens (D) = prefix + 1, dtable (D, stride), drow (D) the row
 *            of q / out each decode reads and writes (q_starts[seq]).
 * P = num_prefill, D = num_decode. Query rows of the prefill sub-batch are
 * those of the batch with the decode rows left out, in order. */
void cuda_plan_mixed_gather(const cuda_mixed_plan *plan, const int32_t *q_starts,
                            const int32_t *prefix_lens, const int32_t *page_table,
                            int32_t stride, int32_t num_seqs, const int32_t *decode_seqs,
                            int32_t *pq_starts, int32_t *pprefix, int32_t *ptable,
                            int32_t *prow, int32_t *dseq_lens, int32_t *dtable, int32_t *drow);

#endif
