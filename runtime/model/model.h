/* model.h - a Llama/Qwen2-family decoder in fp32 on the CPU.
 *
 * One step, T rows (the new tokens of all sequences, packed):
 *
 *   x (T, C) = embed[token_ids]
 *   per layer l:
 *     h = rmsnorm(x) * attn_norm
 *     q (T, Hq*D) = h Wq^T (+bq)   k, v (T, Hkv*D) = h Wk^T (+bk), h Wv^T (+bv)
 *     rope(q, k) at positions[t]              <- true positions: prefix shifts them
 *     store k, v into pages at slot_mapping[t]
 *     a (T, Hq*D) = attention(prefix from pages, suffix from k, v)
 *     x += a Wo^T
 *     h = rmsnorm(x) * mlp_norm
 *     x += (silu(h Wg^T) * (h Wu^T)) Wd^T
 *   logits (only the rows that sample) = rmsnorm(x[row]) * final_norm  lm_head^T
 *
 * Weights follow the Hugging Face layout, (out, in) row-major, so a
 * projection is one sgemm with the weight transposed. RoPE is the "rotate
 * half" form: dimension i pairs with i + D/2.
 *
 * KV memory (kv_cache) is separate from the weights: per layer
 * K and V (num_pages, page_size, Hkv, D), the layout attention/ expects.
 *
 * Ownership: model_* own their weights (one allocation); a model_forward call
 * uses the model's grow-only workspace, so one model runs one forward at a time.
 */
#ifndef RKV_MODEL_H
#define RKV_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "fwd_batch.h"
#include "model_config.h"
#include "rkv_status.h"

typedef struct model_layer {
    float *attn_norm;        /* (C) */
    float *wq;               /* (Hq*D, C) */
    float *wk, *wv;          /* (Hkv*D, C) */
    float *bq, *bk, *bv;     /* (Hq*D), (Hkv*D), (Hkv*D); NULL without qkv_bias */
    float *wo;               /* (C, Hq*D) */
    float *mlp_norm;         /* (C) */
    float *w_gate, *w_up;    /* (F, C) */
    float *w_down;           /* (C, F) */
} model_layer;

typedef struct model {
    model_config cfg;
    float *embed;            /* (V, C) */
    float *final_norm;       /* (C) */
    float *lm_head;          /* (V, C); == embed when tied */
    model_layer *layers;     /* (L) */
    float *rope_inv_freq;    /* (D/2) theta^(-2i/D), fp32 like the HF reference */
    float *weights;          /* the one allocation behind every pointer above */
    size_t weights_floats;
    int num_threads;         /* attention threads; OpenBLAS is set at create */
    int use_decode_kernel;   /* 1 (default): pure decode steps use attn_decode_cpu */
    int batch_invariant;     /* 1: a row's bits do not depend on the rest of the batch
                              * (per-row GEMV, prefill kernel only); 0 (default): sgemm */
    int cascade;             /* 1: sequences of a step whose page tables start with the
                              * same pages attend to them as one cascade group
                              * (attention.h); 0 (default): each on its own */
    /* Grow-only workspace for one forward (see model.c for its parts). */
    float *ws;
    size_t ws_floats;
} model;

typedef struct kv_cache {
    int32_t num_layers, num_pages, page_size, num_kv_heads, head_dim;
    size_t layer_floats;     /* num_pages * page_size * Hkv * D */
    float *k;                /* (L, NP, P, Hkv, D) */
    float *v;                /* (L, NP, P, Hkv, D) */
} kv_cache;

/* Allocate weights for cfg. With weights_path NULL they are seeded random
 * (deterministic from seed; scaled so activations stay O(1) and the logits
 * have a spread of a few units); otherwise loaded from a safetensors file or
 * directory with HF names, every tensor's shape checked against cfg.
 * Errors name the tensor / file; RKV_ENOMEM when the fp32 weights would not
 * fit in physical memory (the big presets are for the sim backend). */
rkv_status model_create(const model_config *cfg, const char *weights_path, uint64_t seed,
                        int num_threads, model **out, char *err, size_t errlen);
void model_destroy(model *m);

/* Zeroed KV memory; page_size in 1..256. */
rkv_status kv_cache_init(kv_cache *kv, const model_config *cfg, int32_t num_pages,
                         int32_t page_size);
void kv_cache_destroy(kv_cache *kv);
/* Bytes one page takes over all layers, K and V. */
size_t kv_cache_page_bytes(const kv_cache *kv);
/* Copy page `page` of every layer (K then V per layer) to / from dst. */
rkv_status kv_cache_read_page(const kv_cache *kv, int32_t page, void *dst);
rkv_status kv_cache_write_page(kv_cache *kv, int32_t page, const void *src);

/* One step over a batch (fwd_batch.h's fwd_batch; sampling fields unused).
 * logits (B, V): row i is written for every sequence with sample_rows[i] >= 0,
 * other rows are left alone; b->row_logits, when set, get every row asked. The batch is validated first (token ids,
 * positions, slots, page ids, row ranges): RKV_EINVAL / RKV_ERANGE naming the
 * field, and nothing is written. */
rkv_status model_forward(model *m, kv_cache *kv, const fwd_batch *b, float *logits, char *err,
                         size_t errlen);

#endif
