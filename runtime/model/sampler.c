/* sampler.c - greedy / temperature / top-k / top-p sampling; see sampler.h. */
#include "sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "rkv_core.h"

typedef struct cand {
    float z;    /* logit / temperature, NaN mapped to -inf */
    int32_t id;
} cand;

size_t sampler_scratch_bytes(int32_t vocab)
{
    return (size_t)(vocab > 0 ? vocab : 1) * (sizeof(cand) + sizeof(double));
}

static inline float clean(float x) { return isnan(x) ? -INFINITY : x; }

int32_t sampler_argmax(const float *logits, int32_t vocab)
{
    int32_t best = 0;
    float bv = clean(logits[0]);
    for (int32_t i = 1; i < vocab; i++) {
        float v = clean(logits[i]);
        if (v > bv) { /* strict: the first (lowest) id wins ties */
            bv = v;
            best = i;
        }
    }
    return best;
}

double sampler_uniform(uint64_t seed, int64_t step)
{
    uint64_t h = rkv_splitmix64(seed ^ rkv_splitmix64((uint64_t)step * 0xd1b54a32d192ed03ULL + 1));
    return (double)(h >> 11) * 0x1.0p-53;
}

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->z > y->z) return -1;
    if (x->z < y->z) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int is_greedy(const sampling_params *sp) { return sp->temperature <= 0 || sp->top_k == 1; }

static rkv_status check_params(int32_t vocab, const sampling_params *sp)
{
    if (vocab < 1 || isnan(sp->temperature) || sp->temperature < 0 || isnan(sp->top_p) ||
        sp->top_p <= 0)
        return RKV_EINVAL;
    return RKV_OK;
}

/* min_p on scaled candidates: drop those whose probability is below min_p
 * times the largest (z < zmax + log(min_p)), as -inf. */
static void min_p_apply(cand *c, int32_t n, float min_p)
{
    if (!(min_p > 0)) return;
    float zmax = -INFINITY;
    for (int32_t i = 0; i < n; i++) zmax = c[i].z > zmax ? c[i].z : zmax;
    if (zmax == -INFINITY) return;
    float cut = zmax + logf(min_p);
    for (int32_t i = 0; i < n; i++)
        if (c[i].z < cut) c[i].z = -INFINITY;
}

/* Fill c[0..n) with the kept candidates in draw order and p[0..n) with their
 * unnormalised probabilities; returns their total mass.
 *   1) scale by 1/T;  2) if top-k or top-p is on, sort by (z desc, id asc) and
 *   keep the first k;  3) top-p: keep the shortest prefix whose normalised mass
 *   reaches top_p (at least one). */
static double build(const float *logits, int32_t vocab, const sampling_params *sp, cand *c,
                    double *p, int32_t *n_out)
{
    float inv_t = 1.0f / sp->temperature;
    for (int32_t i = 0; i < vocab; i++) {
        c[i].z = clean(logits[i]) * inv_t;
        c[i].id = i;
    }
    if (sp->procs) min_p_apply(c, vocab, sp->procs->min_p);
    int32_t n = vocab;
    int sorted = (sp->top_k > 0 && sp->top_k < vocab) || sp->top_p < 1.0f;
    float zmax = -INFINITY;
    if (sorted) {
        qsort(c, (size_t)vocab, sizeof *c, cand_cmp);
        if (sp->top_k > 0 && sp->top_k < vocab) n = sp->top_k;
        zmax = c[0].z;
    } else {
        for (int32_t i = 0; i < n; i++) zmax = c[i].z > zmax ? c[i].z : zmax;
    }
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        p[i] = zmax == -INFINITY ? (i == 0) : exp((double)c[i].z - (double)zmax);
        sum += p[i];
    }
    if (sp->top_p < 1.0f) {
        double cum = 0, target = (double)sp->top_p * sum;
        int32_t keep = n;
        for (int32_t i = 0; i < n; i++) {
            cum += p[i];
            if (cum >= target) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        sum = cum;
    }
    *n_out = n;
    return sum;
}

static rkv_status with_scratch(int32_t vocab, void **scratch, void **owned)
{
    *owned = NULL;
    if (*scratch) return RKV_OK;
    *owned = *scratch = malloc(sampler_scratch_bytes(vocab));
    return *scratch ? RKV_OK : RKV_ENOMEM;
}

static bool has_penalties(const logit_procs *lp)
{
    return (lp->repetition_penalty != 0 && lp->repetition_penalty != 1) ||
           lp->frequency_penalty != 0 || lp->presence_penalty != 0;
}

/* vLLM's penalties (apply_penalties) on row (V), in its order and float32
 * arithmetic:
 *   1) repetition: an id in the prompt or the outputs gets logit * (1/r) when
 *      the logit is > 0, else logit * r;
 *   2) frequency: logit -= f * (times the id occurs in the outputs);
 *   3) presence: logit -= p for an id that occurs in the outputs.
 * counts: (V) scratch, zeroed here. */
static void penalties_apply(float *row, int32_t vocab, const logit_procs *lp,
                            const sampling_params *sp, int32_t *counts)
{
    /* counts[v]: outputs equal to v in the low 30 bits, bit 30 set when v is
     * in the prompt (an output count never reaches 2^30: a request holds
     * fewer tokens than that). */
    const int32_t IN_PROMPT = 1 << 30, COUNT = IN_PROMPT - 1;
    memset(counts, 0, sizeof(int32_t) * (size_t)vocab);
    for (int32_t i = 0; i < sp->n_prompt; i++)
        if (sp->history[i] >= 0 && sp->history[i] < vocab) counts[sp->history[i]] |= IN_PROMPT;
    for (int32_t i = 0; i < sp->n_out; i++) {
        int32_t t = sp->history[sp->n_prompt + i];
        if (t >= 0 && t < vocab) counts[t]++;
    }
    const float r = lp->repetition_penalty, inv_r = 1.0f / r;
    const bool rep = r != 0 && r != 1;
    for (int32_t v = 0; v < vocab; v++) {
        if (!counts[v]) continue;
        if (rep) row[v] *= row[v] > 0 ? inv_r : r;
        int32_t c = counts[v] & COUNT;
        if (c) {
            row[v] -= lp->frequency_penalty * (float)c;
            row[v] -= lp->presence_penalty;
        }
    }
}

/* vLLM's bad words on row (V): a word of k ids bans its last id when the
 * outputs (not the prompt) end with its first k - 1; a word longer than the
 * outputs + 1 bans nothing yet. */
static void bad_words_apply(float *row, int32_t vocab, const logit_procs *lp,
                            const sampling_params *sp)
{
    const int32_t *out = sp->history ? sp->history + sp->n_prompt : NULL;
    for (int32_t w = 0; w < lp->n_bad; w++) {
        const int32_t *word = lp->bad_ids + lp->bad_starts[w];
        const int32_t k = lp->bad_starts[w + 1] - lp->bad_starts[w];
        if (k < 1 || k - 1 > sp->n_out) continue;
        const int32_t *tail = out ? out + sp->n_out - (k - 1) : NULL;
        if (k > 1 && memcmp(tail, word, sizeof(int32_t) * (size_t)(k - 1))) continue;
        if (word[k - 1] >= 0 && word[k - 1] < vocab) row[word[k - 1]] = -INFINITY;
    }
}

/* The processors that change logits themselves (allowed ids, bad words,
 * min_tokens, biases, penalties) into a copy of the row (malloc'd; *out NULL
 * when there are none). RKV_EINVAL: penalties, min_tokens or bad words
 * without a history. */
static rkv_status procs_apply(const float *logits, int32_t vocab, const sampling_params *sp,
                              float **out)
{
    const logit_procs *lp = sp->procs;
    *out = NULL;
    if (!lp) return RKV_OK;
    const bool pen = has_penalties(lp), hold = lp->min_tokens > 0 && lp->n_stop_ids > 0;
    const bool bad = lp->n_bad > 0;
    if (!lp->allowed && !lp->n_bias && !pen && !hold && !bad) return RKV_OK;
    if ((pen || hold || bad) && (!sp->history || sp->n_prompt < 0 || sp->n_out < 0))
        return RKV_EINVAL;
    float *row = malloc(sizeof(float) * (size_t)vocab);
    if (!row) return RKV_ENOMEM;
    if (lp->allowed) {
        for (int32_t v = 0; v < vocab; v++) row[v] = -INFINITY;
        for (int32_t i = 0; i < lp->n_allowed; i++)
            if (lp->allowed[i] >= 0 && lp->allowed[i] < vocab)
                row[lp->allowed[i]] = logits[lp->allowed[i]];
    } else {
        memcpy(row, logits, sizeof(float) * (size_t)vocab);
    }
    if (bad) bad_words_apply(row, vocab, lp, sp);
    if (hold && sp->n_out < lp->min_tokens)
        for (int32_t i = 0; i < lp->n_stop_ids; i++)
            if (lp->stop_ids[i] >= 0 && lp->stop_ids[i] < vocab) row[lp->stop_ids[i]] = -INFINITY;
    for (int32_t i = 0; i < lp->n_bias; i++)
        if (lp->bias_ids[i] >= 0 && lp->bias_ids[i] < vocab) row[lp->bias_ids[i]] += lp->bias_vals[i];
    if (pen) {
        int32_t *counts = malloc(sizeof(int32_t) * (size_t)vocab);
        if (!counts) {
            free(row);
            return RKV_ENOMEM;
        }
        penalties_apply(row, vocab, lp, sp, counts);
        free(counts);
    }
    *out = row;
    return RKV_OK;
}

static rkv_status sample_row(const float *logits, int32_t vocab, const sampling_params *sp,
                             int64_t step, void *scratch, int32_t *out_token);

rkv_status sampler_sample(const float *logits, int32_t vocab, const sampling_params *sp,
                          int64_t step, void *scratch, int32_t *out_token)
{
    rkv_status st = check_params(vocab, sp);
    if (st) return st;
    float *row;
    if ((st = procs_apply(logits, vocab, sp, &row))) return st;
    st = sample_row(row ? row : logits, vocab, sp, step, scratch, out_token);
    free(row);
    return st;
}

static rkv_status sample_row(const float *logits, int32_t vocab, const sampling_params *sp,
                             int64_t step, void *scratch, int32_t *out_token)
{
    rkv_status st;
    if (is_greedy(sp)) {
        *out_token = sampler_argmax(logits, vocab);
        return RKV_OK;
    }
    void *owned;
    if ((st = with_scratch(vocab, &scratch, &owned))) return st;
    cand *c = scratch;
    double *p = (double *)(c + vocab);
    int32_t n;
    double sum = build(logits, vocab, sp, c, p, &n);
    double target = sampler_uniform(sp->seed, step) * sum, cum = 0;
    int32_t tok = c[n - 1].id; /* rounding can leave target at the very end */
    for (int32_t i = 0; i < n; i++) {
        cum += p[i];
        if (target < cum) {
            tok = c[i].id;
            break;
        }
    }
    free(owned);
    *out_token = tok;
    return RKV_OK;
}

rkv_status sampler_distribution(const float *logits, int32_t vocab, const sampling_params *sp,
                                void *scratch, double *probs)
{
    rkv_status st = check_params(vocab, sp);
    if (st) return st;
    float *row;
    if ((st = procs_apply(logits, vocab, sp, &row))) return st;
    if (row) logits = row;
    memset(probs, 0, sizeof(double) * (size_t)vocab);
    if (is_greedy(sp)) {
        probs[sampler_argmax(logits, vocab)] = 1.0;
        free(row);
        return RKV_OK;
    }
    void *owned;
    if ((st = with_scratch(vocab, &scratch, &owned))) {
        free(row);
        return st;
    }
    cand *c = scratch;
    double *p = (double *)(c + vocab);
    int32_t n;
    double sum = build(logits, vocab, sp, c, p, &n);
    for (int32_t i = 0; i < n; i++) probs[c[i].id] = p[i] / sum;
    free(owned);
    free(row);
    return RKV_OK;
}
