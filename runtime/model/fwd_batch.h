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

/* Logit processors of one request (vLLM's order: the allowed ids mask, the
 * bad words, the min_tokens mask and the biases on the raw logits, then the penalties
 * (repetition, frequency, presence), then temperature, then min_p, then
 * top-k/top-p).
 * Owned by whoever made the request; it outlives the request's steps. Only
 * the sampler reads it (backends that sample elsewhere must refuse it). */
typedef struct logit_procs {
    const int32_t *allowed;    /* (n_allowed) ids that may be sampled; NULL: all */
    int32_t n_allowed;
    const int32_t *bias_ids;   /* (n_bias) ids whose logit gets bias_vals added */
    const float *bias_vals;    /* (n_bias) */
    int32_t n_bias;
    float min_p;               /* keep ids with p >= min_p * max p; 0: off */
    /* Penalties on the sequence's tokens (sampling_params.history): */
    float repetition_penalty;  /* ids in prompt or outputs: logit * (1/r) if > 0, else * r;
                                  0 or 1: off (a zeroed struct asks nothing) */
    float frequency_penalty;   /* minus this times an id's count in the outputs; 0: off */
    float presence_penalty;    /* minus this for an id present in the outputs; 0: off */
    int32_t min_tokens;        /* stop_ids get -inf while fewer outputs; 0: off */
    const int32_t *stop_ids;   /* (n_stop_ids) what min_tokens holds back */
    int32_t n_stop_ids;
    /* Bad words (vLLM's bad_words, already tokenized): word w is
     * bad_ids[bad_starts[w] .. bad_starts[w+1]); its last id gets -inf when
     * the outputs end with the ids before it (always, for a one-id word). */
    const int32_t *bad_ids;    /* (bad_starts[n_bad]) */
    const int32_t *bad_starts; /* (n_bad + 1) */
    int32_t n_bad;
} logit_procs;

typedef struct sampling_params {
    float temperature; /* 0: greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* >= 1: off */
    uint64_t seed;     /* per request */
    const logit_procs *procs; /* NULL: none */
    /* The sequence so far: prompt (n_prompt) then the outputs sampled before
     * this one (n_out). Set by the engine for each step; the sampler reads it
     * only for procs' penalties and min_tokens (NULL: no history, and those
     * are refused with RKV_EINVAL rather than applied to nothing). */
    const int32_t *history;
    int32_t n_prompt;
    int32_t n_out;
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
    /* Every row's logits (vLLM's prompt_logprobs): NULL, or (B) where the
     * first row_logits_n[i] rows of seq i write theirs, (row_logits_n[i], V);
     * row_logits[i] NULL (or row_logits_n[i] 0) for a seq that asks none.
     * Only backends with BACKEND_CAP_ROW_LOGITS (backend.h) write them. */
    float *const *row_logits;
    const int32_t *row_logits_n; /* (B) */
    /* Nonzero: a stable decode step. The same sequences as the previous
     * forward on this backend, in the same order, each one row further; each
     * page table is the one that forward was given, plus at most the page
     * the new row starts (no page replaced). A backend may check only the
     * pages this step's rows touch; the rows, positions and slots are still
     * whole. 0 (a zeroed batch): no promise. */
    int32_t same_pages;
} fwd_batch;

#endif
