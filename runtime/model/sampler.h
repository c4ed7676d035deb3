/* sampler.h - pick the next token from one row of logits.
 *
 * Modes (sampling_params in fwd_batch.h):
 *   temperature <= 0 or top_k == 1   greedy: argmax, ties to the lowest id
 *   otherwise                        softmax(logits / T), then top-k, then top-p,
 *                                    one uniform draw
 * Before either, sp->procs (fwd_batch.h) edit a copy of the row in vLLM's
 * order: allowed ids, bad words, min_tokens, biases,
 * repetition/frequency/presence penalties over sp->history.
 *
 * Determinism: the draw for a request depends only on (seed, step), where step
 * is the index of the token being sampled in that request's output. So a
 * request samples the same tokens whatever it was batched with, chunked or
 * preempted. Candidates are ordered by (probability desc, id asc), so equal
 * logits resolve to the lowest id; with neither top-k nor top-p active the
 * draw walks ids in ascending order.
 *
 * The sampler keeps no state; callers may share nothing. Scratch memory is
 * the caller's (sampler_scratch_bytes) or allocated per call when NULL.
 */
#ifndef RKV_SAMPLER_H
#define RKV_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "fwd_batch.h"
#include "rkv_status.h"

/* Bytes of scratch sampler_sample/sampler_distribution need for a vocabulary. */
size_t sampler_scratch_bytes(int32_t vocab);

/* Argmax of logits (V); NaN counts as -inf; ties to the lowest id. */
int32_t sampler_argmax(const float *logits, int32_t vocab);

/* Uniform double in [0, 1) for (seed, step): splitmix64 of both. */
double sampler_uniform(uint64_t seed, int64_t step);

/* Sample one token. RKV_EINVAL for temperature < 0 or NaN, top_p <= 0 or NaN,
 * vocab < 1, or procs asking for penalties, min_tokens or bad words without
 * sp->history. scratch: sampler_scratch_bytes(vocab) bytes or NULL. */
rkv_status sampler_sample(const float *logits, int32_t vocab, const sampling_params *sp,
                          int64_t step, void *scratch, int32_t *out_token);

/* The distribution sampler_sample draws from, written to probs (V): zero for
 * ids cut by top-k/top-p, one-hot for greedy. For tests and diagnostics. */
rkv_status sampler_distribution(const float *logits, int32_t vocab, const sampling_params *sp,
                                void *scratch, double *probs);

#endif
