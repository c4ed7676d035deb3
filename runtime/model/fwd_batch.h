/* fwd_batch.h - one step's batch as the model runs it, and the sampling
 * parameters of a sequence. These types live below the backends (model/) so
 * that the model and the sampler need nothing from the layer above them; the
 * backends (backend.h) hand the same struct down.
 *
 *   seq i:  [ prefix: prefix_lens[i] tokens already in pages ][ this step's rows ]
 *           rows q_starts[i] .. q_starts[i+1] of token_ids / positions / slots
 *
 * A decode step is a sequence with one row. A chunk of a long prompt that does
 * not sample has sample_rows[i] = -1.
 */
#ifndef RKV_FWD_BATCH_H
#define RKV_FWD_BATCH_H

#include <stdint.h>

/* Logit processors of one request (vLLM's order: the allowed ids mask and the
 * biases on the raw logits, then temperature, then min_p, then top-k/top-p).
 * Owned by whoever made the request; it outlives the request's steps. Only
 * the sampler reads it (backends that sample elsewhere must refuse it). */
typedef struct logit_procs {
    const int32_t *allowed;    /* (n_allowed) ids that may be sampled; NULL: all */
    int32_t n_allowed;
    const int32_t *bias_ids;   /* (n_bias) ids whose logit gets bias_vals added */
    const float *bias_vals;    /* (n_bias) */
    int32_t n_bias;
    float min_p;               /* keep ids with p >= min_p * max p; 0: off */
} logit_procs;

typedef struct sampling_params {
    float temperature; /* 0: greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* >= 1: off */
    uint64_t seed;     /* per request */
    const logit_procs *procs; /* NULL: none */
} sampling_params;

typedef struct fwd_batch {
    int32_t num_seqs;            /* B */
    int32_t num_tokens;          /* T = q_starts[B] */
    const int32_t *token_ids;    /* (T) */
    const int32_t *positions;    /* (T) true positions (prefix shifts them) */
    const int32_t *q_starts;     /* (B+1) */
    const int32_t *prefix_lens;  /* (B) tokens already in KV pages */
    const int32_t *page_table;   /* (B, max_pages) pages for prefix + these rows */
    int32_t max_pages;
    const int32_t *slot_mapping; /* (T) page * page_size + offset of each row's K/V */
    const int32_t *sample_rows;  /* (B) absolute row to sample from, or -1 */
    const sampling_params *sampling; /* (B) */
    const int32_t *sample_steps; /* (B) index of the token being sampled (RNG stream position) */
} fwd_batch;

#endif
