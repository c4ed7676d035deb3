/* attention_ref.c - the naive prefill in double precision, for tests only.
 *
 * For each (sequence, query head, query row) it materialises the row's scores
 * over all visible keys, takes the max, and sums in double. Deliberately the
 * most direct reading of the contract: no tiles, no online softmax, no merge,
 * so that it shares no mistake with the kernels it checks.
 */
#include <math.h>
#include <stdlib.h>

#include "attention_common.h"

int attn_prefill_ref(const attn_shape *s, const attn_batch *b, const float *q,
                     const float *k_new, const float *v_new, const float *k_cache,
                     const float *v_cache, double *out, double *lse)
{
    static const char fn[] = "attn_prefill_ref";
    int64_t T;
    int any_prefix;
    int rc = attn_batch_check_host(fn, s, b, &T, &any_prefix);
    if (rc) return rc;
    if (T > 0 && (!q || !k_new || !v_new || !out))
        return ATTN_FAIL(ATTN_EARG, fn, "q, k_new, v_new or out is NULL");
    if (any_prefix && (!k_cache || !v_cache))
        return ATTN_FAIL(ATTN_EARG, fn, "k_cache or v_cache is NULL");

    const int64_t Hq = s->num_q_heads, Hkv = s->num_kv_heads, D = s->head_dim;
    const int64_t P = s->page_size, group = Hq / Hkv;
    int32_t longest = 0;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        int32_t n = b->prefix_lens[i] + (b->q_starts[i + 1] - b->q_starts[i]);
        if (n > longest) longest = n;
    }
    double *score = malloc(sizeof(double) * (size_t)(longest > 0 ? longest : 1));
    const float **vrow = malloc(sizeof(*vrow) * (size_t)(longest > 0 ? longest : 1));
    if (!score || !vrow) {
        free(score);
        free(vrow);
        return ATTN_FAIL(ATTN_ENOMEM, fn, "%d keys", (int)longest);
    }

    for (int32_t i = 0; i < b->num_seqs; i++) {
        const int64_t q0 = b->q_starts[i], sl = b->q_starts[i + 1] - q0;
        const int64_t pl = b->prefix_lens[i];
        const int32_t *pages = b->page_table + (int64_t)i * b->max_pages;
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t g = h / group;
            for (int64_t j = 0; j < sl; j++) {
                const float *qr = q + ((q0 + j) * Hq + h) * D;
                const int64_t nk = pl + j + 1; /* prefix, then suffix keys 0..j */
                double mx = -INFINITY;
                for (int64_t t = 0; t < nk; t++) {
                    const float *kr;
                    if (t < pl) {
                        int64_t slot = (int64_t)pages[t / P] * P + t % P;
                        kr = k_cache + (slot * Hkv + g) * D;
                        vrow[t] = v_cache + (slot * Hkv + g) * D;
                    } else {
                        kr = k_new + ((q0 + t - pl) * Hkv + g) * D;
                        vrow[t] = v_new + ((q0 + t - pl) * Hkv + g) * D;
                    }
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++) dot += (double)qr[d] * (double)kr[d];
                    score[t] = dot * (double)s->scale;
                    if (score[t] > mx) mx = score[t];
                }
                double sum = 0.0;
                for (int64_t t = 0; t < nk; t++) {
                    score[t] = exp(score[t] - mx);
                    sum += score[t];
                }
                double *o = out + ((q0 + j) * Hq + h) * D;
                for (int64_t d = 0; d < D; d++) o[d] = 0.0;
                for (int64_t t = 0; t < nk; t++) {
                    double p = score[t] / sum;
                    for (int64_t d = 0; d < D; d++) o[d] += p * (double)vrow[t][d];
                }
                if (lse) lse[(q0 + j) * Hq + h] = mx + log(sum);
            }
        }
    }
    free(score);
    free(vrow);
    return ATTN_OK;
}
