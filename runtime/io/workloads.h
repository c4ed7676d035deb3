/* workloads.h - seeded synthetic traces for `radixkv gen` and the tests.
 *
 * Every kind is a pattern of prefix sharing seen in LLM programs (SGLang's
 * evaluation). Token ids are drawn uniformly from [0, vocab) by one seeded
 * generator, so the same config always gives the same trace, and unrelated
 * segments practically never share a page.
 *
 *   sweep             N prompts of L tokens; the first floor(h*L) are the same
 *                     in all of them, the rest unique; output O.
 *                       [ shared h*L ......... | unique ........ ]
 *   multi-turn        N sessions of T turns after one system prompt of S tokens
 *                     shared by all; turn t's prompt is the session so far:
 *                       [ system | user1 | answer1 | user2 | ... | user_t ]
 *                     users L tokens, answers O tokens (what the model "said":
 *                     synthetic, so only the prompt part of a turn is reused).
 *   few-shot          N requests in groups of B; each group picks K of E shared
 *                     examples (S tokens each) after a common instruction:
 *                       [ instruction | ex_a | ex_b | ... | question L ]
 *   long-doc          N documents of S tokens, B questions (L tokens) each:
 *                       [ document | question ]
 *   tree-of-thought   N problems (L tokens), a tree of branching B and depth D;
 *                     each node's prompt is its parent's plus one thought of S
 *                     tokens; one request per node.
 *   self-consistency  N problems (L tokens), each sampled B times with
 *                     temperature 0.7 and distinct seeds: identical prompts.
 *   judge             LLM-as-judge branch-solve-merge: N problems (L tokens);
 *                     B branch prompts [problem | criterion_i (S, shared)] and
 *                     one merge prompt [problem | judgement_1..B (O each) | merge].
 *
 * Arrivals: rate > 0 gives Poisson arrivals at that many requests per second
 * (multi-turn: sessions arrive so, turns follow each other think_s apart);
 * rate = 0 writes no arrival field (everything at t = 0).
 */
#ifndef RKV_WORKLOADS_H
#define RKV_WORKLOADS_H

#include <stdint.h>
#include <stdio.h>

#include "rkv_status.h"

typedef struct wl_request {
    int32_t *tokens;     /* (n_tokens) */
    int32_t n_tokens;
    int32_t max_tokens;
    double arrival;      /* < 0: none */
    double temperature;  /* < 0: none (greedy) */
    int64_t seed;        /* < 0: none */
} wl_request;

typedef struct workload {
    wl_request *reqs;
    int64_t n, cap;
} workload;

typedef struct workload_config {
    const char *kind;    /* see above */
    uint64_t seed;
    int32_t vocab_size;  /* token ids in [0, vocab_size) */
    int32_t num;         /* N */
    int32_t prompt_len;  /* L */
    int32_t output_len;  /* O */
    double hit_rate;     /* h, sweep */
    int32_t turns;       /* T, multi-turn */
    int32_t shared_len;  /* S */
    int32_t branching;   /* B */
    int32_t depth;       /* D, tree-of-thought */
    int32_t examples;    /* E, few-shot pool */
    int32_t shots;       /* K, few-shot */
    double rate;         /* requests per second, 0: no arrivals */
    double think_s;      /* multi-turn: seconds between turns */
} workload_config;

/* Defaults: sweep, seed 1, vocab 4096, N 64, L 1000, O 24, h 0.5, T 4, S 256,
 * B 4, D 2, E 16, K 4, rate 0, think 1 s. */
void workload_config_default(workload_config *c);

/* NULL-terminated kind names. */
extern const char *const workload_kinds[];

/* Generate; bad kind or values: RKV_EINVAL with the field named in err. */
rkv_status workload_generate(const workload_config *c, workload *out, char *err, size_t errlen);
/* One JSON line per request: {"id", "tokens", "max_tokens"[, "arrival",
 * "temperature", "seed"]}. RKV_EIO on a write error. */
rkv_status workload_write_jsonl(const workload *w, FILE *f);
void workload_free(workload *w);

#endif
