/* attention_common.h - internal helpers shared by the CPU and CUDA attention
 * code: argument validation with messages that name the place, and the one
 * merge of two partial attention states.
 *
 * Not part of the public API (that is attention.h); include only from
 * the .c and .cu files of attention/.
 */
#ifndef RKV_ATTENTION_COMMON_H
#define RKV_ATTENTION_COMMON_H

#include <math.h>
#include <stdint.h>

#include "attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Print "attention: FILE:LINE: FN: message" to stderr and return code. Every
 * rejected argument goes through here so the caller learns which one. */
int attn_fail_at(int code, const char *file, int line, const char *fn, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
#define ATTN_FAIL(code, fn, ...) attn_fail_at((code), __FILE__, __LINE__, (fn), __VA_ARGS__)

/* attn_shape_check with a message naming fn and the bad field. */
int attn_shape_check_in(const char *fn, const attn_shape *s);

/* Validate a prefill batch whose arrays are in host memory: q_starts[0] = 0
 * and non-decreasing, prefix lengths >= 0, the page table wide enough for
 * every prefix, every page id a sequence uses in [0, num_pages) (ids beyond a
 * prefix's last page are never read and may hold anything, e.g. -1),
 * num_pages >= 0, max_suffix 0 or >= every s_i. On success *num_tokens = T
 * and *any_prefix says whether any sequence reads pages. */
int attn_batch_check_host(const char *fn, const attn_shape *s, const attn_batch *b,
                          int64_t *num_tokens, int *any_prefix);

/* The same for a decode batch: seq_lens >= 0, pages fit max_pages, used page
 * ids in [0, num_pages). *max_len = the longest context (0 for an empty batch). */
int attn_decode_check_host(const char *fn, const attn_shape *s, int32_t num_seqs,
                           const int32_t *seq_lens, const int32_t *page_table,
                           int32_t max_pages, int32_t num_pages, int32_t *max_len);

/* A slot mapping of num_tokens entries: each slot < 0 (skipped) or
 * < num_pages * page_size; num_pages >= 0. */
int attn_slots_check_host(const char *fn, const attn_shape *s, int32_t num_tokens,
                          int32_t num_pages, const int32_t *slot_mapping);

/* The merge of two partial states, written once (docs/ARCHITECTURE.md, attention
 * contract):
 *   m = max(l1, l2); l = m + log(e^(l1-m) + e^(l2-m));
 *   o = o1 w1 + o2 w2  with  w1 = e^(l1-l), w2 = e^(l2-l).
 * Returns l and the two weights. Both states empty (l1 = l2 = -inf) gives
 * l = -inf, w1 = w2 = 0, so the merged row is the empty row (o = 0). One empty
 * side gives the other side exactly (weight e^0 = 1). The online softmax of
 * the kernels, the split-K combine of decode and attn_merge_cpu all call it. */
static inline float attn_merge_weights(float l1, float l2, float *w1, float *w2)
{
    float m = l1 > l2 ? l1 : l2;
    if (m == -INFINITY) {
        *w1 = 0.0f;
        *w2 = 0.0f;
        return -INFINITY;
    }
    float l = m + logf(expf(l1 - m) + expf(l2 - m));
    *w1 = expf(l1 - l);
    *w2 = expf(l2 - l);
    return l;
}

/* CPU kernels: 1 forces the portable C path even where AVX2 + FMA kernels
 * exist (tests cover both paths), 0 picks by the CPU again. Not thread-safe
 * against calls in flight; set it between calls. */
void attn_cpu_set_generic(int generic);

#ifdef __cplusplus
}
#endif
#endif
