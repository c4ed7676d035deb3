/* attention.h - split prefix/suffix attention over a paged KV cache.
 *
 * Dimension letters: B sequences, T total new (suffix) tokens of the batch,
 * Hq query heads, Hkv KV heads (Hq % Hkv == 0, GQA: query head h reads KV head
 * h / (Hq / Hkv)), D head dim (64 or 128), P page size (1..256), NP pages.
 *
 * Layouts (row-major):
 *   q, out        (T, Hq, D)         suffix queries / outputs, sequences packed
 *   k_new, v_new  (T, Hkv, D)        the suffix's own K/V
 *   k_cache,
 *   v_cache       (NP, P, Hkv, D)    one layer's pages
 *   lse           (T, Hq)            natural-log log-sum-exp of each row
 *   page_table    (B, max_pages)     page ids of each sequence's context
 *   slot_mapping  (T)                slot = page * P + offset of each new token
 *
 * Per sequence i: q_starts[i]..q_starts[i+1] are its suffix rows (s_i tokens);
 * its prefix is prefix_lens[i] tokens in pages page_table[i][0..]. Suffix query j
 * sees prefix keys [0, p_i) and suffix keys [0, j]: causal aligned at the bottom
 * right, so one pass over (prefix pages, then suffix) needs no special mask.
 * A row that saw no key has lse = -inf and out = 0.
 *
 * Merge of two partial states, exactly, in fp32:
 *   m = max(l1, l2); l = m + log(e^(l1-m) + e^(l2-m)); o = o1 e^(l1-l) + o2 e^(l2-l)
 *
 * All functions return 0 on success or a negative ATTN_E* code; attn_strerror()
 * names it. Shapes are validated before any work: head_dim not 64/128, page size
 * outside 1..256, Hq % Hkv != 0 are rejected.
 *
 * Pool bounds: every call that reads or writes pages takes num_pages (NP, the
 * pages of k_cache/v_cache). A page id a sequence uses (the first
 * ceil(len / P) entries of its page_table row, len = its prefix or context)
 * must lie in [0, NP), and a non-negative slot must be < NP * P; so NP >= 1
 * whenever any sequence has a prefix / context or any slot is written. NP < 0
 * is always rejected; NP = 0 is fine for calls that touch no page.
 *   CPU: checked on the host before any work; a bad id or slot returns
 *        ATTN_EARG and nothing is read or written.
 *   CUDA: page tables and slot mappings live on the device and are not read
 *        on the host (that would need a sync). A kernel that meets an id or
 *        slot outside the pool never touches memory through it (the page reads
 *        as zeros, the store skips the token) and records it in a device-side
 *        error word; attn_cuda_check_error() reports and clears that word.
 */
#ifndef RKV_ATTENTION_H
#define RKV_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    ATTN_OK = 0,
    ATTN_EHEADDIM = -1,  /* head_dim not 64 or 128 */
    ATTN_EPAGESIZE = -2, /* page size outside 1..256 */
    ATTN_EHEADS = -3,    /* num_q_heads not a multiple of num_kv_heads, or < 1 */
    ATTN_EARG = -4,      /* other bad argument (negative length, NULL pointer) */
    ATTN_ENOMEM = -5,
    ATTN_ECUDA = -6,     /* a CUDA call failed; message printed with file:line */
    ATTN_ENOTSUP = -7,   /* dtype or path not compiled in */
};
const char *attn_strerror(int code);

typedef struct attn_shape {
    int32_t num_q_heads;  /* Hq */
    int32_t num_kv_heads; /* Hkv */
    int32_t head_dim;     /* D: 64 or 128 */
    int32_t page_size;    /* P: 1..256 */
    float scale;          /* softmax scale, usually 1/sqrt(D) */
} attn_shape;

/* Validate a shape; returns ATTN_OK or the first error. */
int attn_shape_check(const attn_shape *s);

/* A batch of variable-length sequences (host pointers for the CPU functions,
 * device pointers for the CUDA ones). */
typedef struct attn_batch {
    int32_t num_seqs;          /* B */
    int32_t max_pages;         /* row stride of page_table */
    const int32_t *q_starts;   /* (B+1) cumulative suffix offsets, q_starts[0] = 0 */
    const int32_t *prefix_lens;/* (B) cached prefix tokens of each sequence */
    const int32_t *page_table; /* (B, max_pages) */
    int32_t max_suffix;        /* max s_i, or 0: "not known" (CPU: not needed; CUDA: read
                                  back from q_starts with one stream sync to size the grid) */
    int32_t num_pages;         /* NP: pages in the pool; used page ids < NP */
} attn_batch;

/* ---- CPU, fp32 (production) ------------------------------------------- */

/* Prefill: prefix from pages, suffix from k_new/v_new. FlashAttention-style
 * tiles with online softmax; threads split by (sequence, head, query tile).
 * num_threads <= 0 means all cores. lse may be NULL. */
int attn_prefill_cpu(const attn_shape *s, const attn_batch *b, const float *q,
                     const float *k_new, const float *v_new, const float *k_cache,
                     const float *v_cache, float *out, float *lse, int num_threads);

/* Decode: one query per sequence (q, out: (B, Hq, D)); the whole context,
 * seq_lens[i] tokens, is in pages (page ids < num_pages). The context is split
 * into num_splits chunks merged through their lse (num_splits <= 0: chosen
 * from the work). */
int attn_decode_cpu(const attn_shape *s, int32_t num_seqs, const int32_t *seq_lens,
                    const int32_t *page_table, int32_t max_pages, int32_t num_pages,
                    const float *q, const float *k_cache, const float *v_cache, float *out,
                    float *lse, int num_splits, int num_threads);

/* Write T tokens' K/V into their slots: slot_mapping[t] = page * P + offset,
 * < num_pages * P; a negative slot skips the token. Arguments: the counts
 * (tokens, pool pages), then the mapping, then the data. */
int attn_store_kv_cpu(const attn_shape *s, int32_t num_tokens, int32_t num_pages,
                      const int32_t *slot_mapping, const float *k_new, const float *v_new,
                      float *k_cache, float *v_cache);

/* Merge two partial states of `rows` rows of D (rows = tokens * heads) into
 * out/lse_out (which may alias o1/lse1). */
void attn_merge_cpu(int64_t rows, int32_t head_dim, const float *o1, const float *lse1,
                    const float *o2, const float *lse2, float *out, float *lse_out);

/* ---- cascade attention over shared pages -------------------------------- */

/* Cascade attention (two levels). The radix tree gives a shared prefix one
 * owner, so sequences whose page tables begin with the same page ids read the
 * same K/V. A plan groups such sequences; then
 *   level 1 (shared): all queries of a group's members against the group's
 *            shared pages at once: one multi-query pass, no mask (every query
 *            sits after the shared prefix), the shared K/V read once per group;
 *   level 2 (own):    each sequence against the rest of its context, as usual;
 * and the two partial states merge through their lse (the merge above).
 *
 *   seq 0: [ a ][ b ][ c ][ d0 ]..      group {0,1,2}: shared pages a b c
 *   seq 1: [ a ][ b ][ c ][ e1 ]..      own: d0.. / e1.. / f2.. + suffixes
 *   seq 2: [ a ][ b ][ c ][ f2 ]..
 *   seq 3: [ x ]..                      ungrouped: own = everything
 *
 * Shared pages are whole pages inside every member's context. Grouping: the
 * sequences sorted by their page lists; a group is a run of that order sharing
 * >= min_shared_pages pages; runs are chosen to maximise the K/V reads saved,
 * sum over groups of (members - 1) * shared pages (exact dynamic program over
 * the sorted order). A sequence belongs to at most one group. */
typedef struct attn_cascade_plan {
    int32_t num_seqs;      /* B */
    int32_t num_groups;    /* G */
    int32_t *group_starts; /* (G + 1) ranges of members */
    int32_t *members;      /* (B) member sequences, group by group, ascending inside one */
    int32_t *shared_pages; /* (G) pages every member of the group shares */
    int32_t *seq_shared;   /* (B) shared pages of each sequence (0: in no group) */
    int64_t pages_saved;   /* sum over groups of (members - 1) * shared pages */
} attn_cascade_plan;

/* Build a plan from host arrays: ctx_lens[i] tokens of sequence i are in pages
 * page_table[i][0..] (its prefix for prefill, its context for decode). The
 * plan owns its arrays: attn_cascade_plan_free. min_shared_pages < 1 is taken
 * as 1. ATTN_EARG on bad arguments, ATTN_ENOMEM (plan left empty). */
int attn_cascade_plan_build(int32_t num_seqs, const int32_t *ctx_lens, const int32_t *page_table,
                            int32_t max_pages, int32_t page_size, int32_t min_shared_pages,
                            attn_cascade_plan *plan);
void attn_cascade_plan_free(attn_cascade_plan *plan);

/* Level 1 alone: the batch's sequences are groups; every query row of group i
 * sees all prefix_lens[i] tokens of its pages and no other key (no k_new). */
int attn_prefill_shared_cpu(const attn_shape *s, const attn_batch *groups, const float *q,
                            const float *k_cache, const float *v_cache, float *out, float *lse,
                            int num_threads);

/* The whole cascade on the CPU: results equal attn_prefill_cpu /
 * attn_decode_cpu on the same arguments (up to fp32 rounding of the merge);
 * plan built on the same batch. lse may be NULL. */
int attn_prefill_cascade_cpu(const attn_shape *s, const attn_batch *b,
                             const attn_cascade_plan *plan, const float *q, const float *k_new,
                             const float *v_new, const float *k_cache, const float *v_cache,
                             float *out, float *lse, int num_threads);
int attn_decode_cascade_cpu(const attn_shape *s, int32_t num_seqs, const int32_t *seq_lens,
                            const int32_t *page_table, int32_t max_pages, int32_t num_pages,
                            const attn_cascade_plan *plan, const float *q, const float *k_cache,
                            const float *v_cache, float *out, float *lse, int num_threads);

/* ---- reference, double precision (tests only) -------------------------- */

/* Naive: materialises each row's scores. Same contract and layouts, but
 * double accumulation; inputs fp32, outputs double. */
int attn_prefill_ref(const attn_shape *s, const attn_batch *b, const float *q,
                     const float *k_new, const float *v_new, const float *k_cache,
                     const float *v_cache, double *out, double *lse);

/* ---- CUDA, bf16/fp16 with fp32 accumulation ----------------------------- */

typedef enum attn_dtype { ATTN_BF16 = 0, ATTN_FP16 = 1 } attn_dtype;

/* Device pointers; stream is a cudaStream_t (void* keeps this header C-only).
 * out is the same dtype as q; lse is fp32 (may be NULL). Available only when
 * built with CUDA (attn_cuda_available() says so at run time). */
int attn_cuda_available(void);
int attn_prefill_cuda(const attn_shape *s, const attn_batch *b, attn_dtype dt, const void *q,
                      const void *k_new, const void *v_new, const void *k_cache,
                      const void *v_cache, void *out, float *lse, void *stream);
/* Split-K paged decode. workspace: attn_decode_workspace_bytes() bytes of
 * device memory for the partial states (NULL: allocated internally per call). */
size_t attn_decode_workspace_bytes(const attn_shape *s, int32_t num_seqs, int32_t max_splits);
int attn_decode_cuda(const attn_shape *s, attn_dtype dt, int32_t num_seqs,
                     const int32_t *seq_lens, const int32_t *page_table, int32_t max_pages,
                     int32_t num_pages, int32_t max_seq_len, const void *q,
                     const void *k_cache, const void *v_cache, void *out, float *lse,
                     void *workspace, int32_t max_splits, void *stream);
int attn_store_kv_cuda(const attn_shape *s, attn_dtype dt, int32_t num_tokens,
                       int32_t num_pages, const int32_t *slot_mapping, const void *k_new,
                       const void *v_new, void *k_cache, void *v_cache, void *stream);
/* Bad page ids and slots met by the kernels (see "Pool bounds" above):
 * synchronises stream, then returns ATTN_EARG after printing which kernels
 * (prefill, decode, K/V store) saw an id or slot outside the pool and the
 * first such value of each, and clears the record; ATTN_OK when there was
 * none; ATTN_ECUDA if a CUDA call fails. The record is one per device, shared
 * by all streams: call it where no other stream's kernels are in flight if a
 * report must name only this stream's work. */
int attn_cuda_check_error(void *stream);
/* The same record without a stream sync, for engines that overlap steps:
 * attn_cuda_error_capture enqueues on stream a copy of the record into rec
 * (host memory; pinned, or the copy is synchronous) and a reset of it; once
 * the stream has passed that point (an event, a sync), attn_cuda_error_report
 * returns ATTN_OK or, after printing what was seen with context in front,
 * ATTN_EARG. attn_cuda_error_first gives the first bad value of each kind
 * (prefill page id, decode page id, store slot; -1 where none). */
typedef struct attn_cuda_error_record {
    unsigned int word[4]; /* bit mask of kinds, then the first value of each */
} attn_cuda_error_record;
int attn_cuda_error_capture(attn_cuda_error_record *rec, void *stream);
int attn_cuda_error_report(const attn_cuda_error_record *rec, const char *context);
void attn_cuda_error_first(const attn_cuda_error_record *rec, int32_t *prefill_page,
                           int32_t *decode_page, int32_t *store_slot);
/* Level 1 of cascade attention on the GPU (see attn_prefill_shared_cpu): the
 * prefill kernel with the suffix keys and the mask switched off, so a group's
 * stacked queries form the query tiles and its shared pages are read once per
 * tile instead of once per member. Device arrays; max_suffix = the most rows
 * of a group (0: read back from q_starts, one stream sync). */
int attn_prefill_shared_cuda(const attn_shape *s, const attn_batch *groups, attn_dtype dt,
                             const void *q, const void *k_cache, const void *v_cache, void *out,
                             float *lse, void *stream);
/* o1/o2/out in dt, (rows, D); lse fp32. */
int attn_merge_cuda(attn_dtype dt, int64_t rows, int32_t head_dim, const void *o1,
                    const float *lse1, const void *o2, const float *lse2, void *out,
                    float *lse_out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
