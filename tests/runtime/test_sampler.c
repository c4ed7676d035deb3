/* test_sampler.c - sampler properties (suite runtime).
 * Seeded random logits; the seed is printed on failure. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "sampler.h"
#include "penalties_ref.h"

enum { V = 200 };

static uint64_t rng_state;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

/* Logits with deliberate exact ties: values on a coarse grid. */
static void random_logits(float *l, int n, uint64_t seed)
{
    rng_state = seed;
    for (int i = 0; i < n; i++) l[i] = (float)floor(urand() * 40.0) / 8.0f - 2.5f;
}

/* The test's own softmax in double, with temperature t. */
static void softmax_ref(const float *l, int n, double t, double *p)
{
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) m = fmax(m, l[i] / t);
    for (int i = 0; i < n; i++) s += p[i] = exp(l[i] / t - m);
    for (int i = 0; i < n; i++) p[i] /= s;
}

START_TEST(greedy_is_argmax)
{
    float l[V];
    for (uint64_t seed = 1; seed <= 50; seed++) {
        random_logits(l, V, seed);
        int best = 0;
        for (int i = 1; i < V; i++) if (l[i] > l[best]) best = i;
        sampling_params sp = {.temperature = 0, .top_k = 0, .top_p = 1, .seed = seed};
        int32_t tok;
        ck_assert_int_eq(sampler_sample(l, V, &sp, 0, NULL, &tok), RKV_OK);
        ck_assert_msg(tok == best, "seed %llu: greedy %d, argmax %d", (unsigned long long)seed,
                      tok, best);
        /* top_k = 1 with any temperature is greedy. */
        sampling_params k1 = {.temperature = 1.7f, .top_k = 1, .top_p = 0.5f, .seed = seed};
        for (int step = 0; step < 5; step++) {
            ck_assert_int_eq(sampler_sample(l, V, &k1, step, NULL, &tok), RKV_OK);
            ck_assert_msg(tok == best, "seed %llu: top-k=1 gave %d", (unsigned long long)seed,
                          tok);
        }
    }
    /* Ties go to the lowest id; NaN never wins. */
    float t[5] = {NAN, 1.0f, 3.0f, 3.0f, 2.0f};
    ck_assert_int_eq(sampler_argmax(t, 5), 2);
}
END_TEST

START_TEST(seeded_reproducible)
{
    float l[V];
    random_logits(l, V, 7);
    double scratch[2 * V + 8]; /* sampler_scratch_bytes(V) = 16 V, aligned for doubles */
    sampling_params sp = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 1234};
    int32_t a[64], b[64];
    for (int s = 0; s < 64; s++) {
        ck_assert_int_eq(sampler_sample(l, V, &sp, s, NULL, &a[s]), RKV_OK);
        ck_assert_int_eq(sampler_sample(l, V, &sp, s, scratch, &b[s]), RKV_OK);
    }
    /* Same (seed, step): same token, in any order of calls. */
    for (int s = 63; s >= 0; s--) {
        int32_t c;
        ck_assert_int_eq(sampler_sample(l, V, &sp, s, scratch, &c), RKV_OK);
        ck_assert_int_eq(c, a[s]);
        ck_assert_int_eq(b[s], a[s]);
    }
    /* Another seed gives another sequence; the steps are not all one token. */
    sampling_params sp2 = sp;
    sp2.seed = 1235;
    int differ = 0, distinct = 0;
    for (int s = 0; s < 64; s++) {
        int32_t c;
        ck_assert_int_eq(sampler_sample(l, V, &sp2, s, NULL, &c), RKV_OK);
        differ += c != a[s];
        distinct += s > 0 && a[s] != a[s - 1];
    }
    ck_assert_int_gt(differ, 10);
    ck_assert_int_gt(distinct, 10);
}
END_TEST

/* The empirical frequency over many steps follows the distribution. */
START_TEST(frequencies_follow_softmax)
{
    enum { N = 8 };
    float l[N] = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -3.0f, 0.0f, 1.5f};
    double p[N], q[N];
    sampling_params sp = {.temperature = 1.3f, .top_k = 0, .top_p = 1.0f, .seed = 99};
    softmax_ref(l, N, 1.3, p);
    ck_assert_int_eq(sampler_distribution(l, N, &sp, NULL, q), RKV_OK);
    for (int i = 0; i < N; i++) ck_assert_double_eq_tol(p[i], q[i], 1e-6);
    int count[N] = {0};
    const int draws = 40000;
    for (int s = 0; s < draws; s++) {
        int32_t t;
        ck_assert_int_eq(sampler_sample(l, N, &sp, s, NULL, &t), RKV_OK);
        count[t]++;
    }
    for (int i = 0; i < N; i++) {
        double f = (double)count[i] / draws, sd = sqrt(p[i] * (1 - p[i]) / draws);
        ck_assert_msg(fabs(f - p[i]) < 5 * sd + 1e-4, "id %d: freq %f, p %f", i, f, p[i]);
    }
}
END_TEST

START_TEST(top_k_support)
{
    float l[V];
    double q[V];
    for (uint64_t seed = 1; seed <= 20; seed++) {
        random_logits(l, V, seed * 31);
        int k = 1 + (int)(seed % 13);
        sampling_params sp = {.temperature = 0.8f, .top_k = k, .top_p = 1.0f, .seed = seed};
        ck_assert_int_eq(sampler_distribution(l, V, &sp, NULL, q), RKV_OK);
        int kept = 0;
        float min_kept = INFINITY, max_cut = -INFINITY;
        for (int i = 0; i < V; i++) {
            if (q[i] > 0) { kept++; min_kept = fminf(min_kept, l[i]); }
            else max_cut = fmaxf(max_cut, l[i]);
        }
        ck_assert_msg(kept == k, "seed %llu: kept %d of top-%d", (unsigned long long)seed, kept,
                      k);
        ck_assert_msg(min_kept >= max_cut, "seed %llu: a cut logit beats a kept one",
                      (unsigned long long)seed);
        for (int s = 0; s < 50; s++) {
            int32_t t;
            ck_assert_int_eq(sampler_sample(l, V, &sp, s, NULL, &t), RKV_OK);
            ck_assert_msg(q[t] > 0, "seed %llu step %d: sampled %d outside top-k",
                          (unsigned long long)seed, s, t);
        }
    }
}
END_TEST

/* Top-p keeps the smallest most-likely set whose mass reaches p: its mass is
 * >= p and without its least likely member it would be < p. */
START_TEST(top_p_mass)
{
    float l[V];
    double p[V], q[V];
    const float tops[] = {0.05f, 0.3f, 0.5f, 0.9f, 0.99f};
    for (uint64_t seed = 1; seed <= 20; seed++) {
        rng_state = seed;
        for (int i = 0; i < V; i++) l[i] = (float)(urand() * 6.0 - 3.0);
        for (size_t j = 0; j < sizeof tops / sizeof tops[0]; j++) {
            sampling_params sp = {.temperature = 0.9f, .top_k = 0, .top_p = tops[j],
                                  .seed = seed};
            softmax_ref(l, V, 0.9, p);
            ck_assert_int_eq(sampler_distribution(l, V, &sp, NULL, q), RKV_OK);
            double mass = 0, least = INFINITY, sumq = 0;
            for (int i = 0; i < V; i++) {
                if (q[i] > 0) { mass += p[i]; least = fmin(least, p[i]); }
                sumq += q[i];
            }
            ck_assert_double_eq_tol(sumq, 1.0, 1e-9);
            ck_assert_msg(mass >= tops[j] - 1e-6, "seed %llu p %.2f: mass %f",
                          (unsigned long long)seed, tops[j], mass);
            ck_assert_msg(mass - least < tops[j] + 1e-6, "seed %llu p %.2f: set not minimal",
                          (unsigned long long)seed, tops[j]);
            /* Every cut token is no more likely than every kept one. */
            for (int i = 0; i < V; i++)
                if (q[i] == 0) ck_assert(p[i] <= least + 1e-12);
            for (int s = 0; s < 30; s++) {
                int32_t t;
                ck_assert_int_eq(sampler_sample(l, V, &sp, s, NULL, &t), RKV_OK);
                ck_assert(q[t] > 0);
            }
        }
    }
}
END_TEST

START_TEST(bad_params)
{
    float l[3] = {0, 1, 2};
    int32_t t;
    sampling_params neg = {.temperature = -1, .top_p = 1};
    sampling_params p0 = {.temperature = 1, .top_p = 0};
    sampling_params pn = {.temperature = 1, .top_p = NAN};
    ck_assert_int_eq(sampler_sample(l, 3, &neg, 0, NULL, &t), RKV_EINVAL);
    ck_assert_int_eq(sampler_sample(l, 3, &p0, 0, NULL, &t), RKV_EINVAL);
    ck_assert_int_eq(sampler_sample(l, 3, &pn, 0, NULL, &t), RKV_EINVAL);
    ck_assert_int_eq(sampler_sample(l, 0, &p0, 0, NULL, &t), RKV_EINVAL);
    /* All -inf: a token is still returned (the lowest id). */
    float ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    sampling_params sp = {.temperature = 1, .top_p = 0.5f};
    ck_assert_int_eq(sampler_sample(ninf, 3, &sp, 0, NULL, &t), RKV_OK);
    ck_assert_int_eq(t, 0);
}
END_TEST

/* The logit processors: the allowed mask and biases act on the raw logits (so
 * greedy follows them), min_p drops what is below min_p times the top
 * probability after temperature, the rest keeps softmax's proportions. */
START_TEST(logit_procs_apply)
{
    float l[V];
    random_logits(l, V, 11);
    int32_t top = sampler_argmax(l, V);
    int32_t other = (top + 5) % V, allowed[2] = {other, (top + 9) % V};
    logit_procs lp = {.allowed = allowed, .n_allowed = 2};
    sampling_params sp = {.temperature = 0, .top_p = 1.0f, .procs = &lp};
    int32_t tok;
    ck_assert_int_eq(sampler_sample(l, V, &sp, 0, NULL, &tok), RKV_OK);
    ck_assert(tok == allowed[0] || tok == allowed[1]);
    ck_assert_int_eq(tok, l[allowed[0]] >= l[allowed[1]] ? allowed[0] : allowed[1]);
    float bias = 100.0f;
    logit_procs lb = {.bias_ids = &other, .bias_vals = &bias, .n_bias = 1};
    sp.procs = &lb;
    ck_assert_int_eq(sampler_sample(l, V, &sp, 0, NULL, &tok), RKV_OK);
    ck_assert_int_eq(tok, other);
    /* min_p 0.5 at T = 1: the kept set is {p >= 0.5 max p}, renormalised. */
    double ref[V], got[V];
    softmax_ref(l, V, 1.0, ref);
    double pmax = 0, kept = 0;
    for (int v = 0; v < V; v++) pmax = ref[v] > pmax ? ref[v] : pmax;
    for (int v = 0; v < V; v++) kept += ref[v] >= 0.5 * pmax ? ref[v] : 0;
    logit_procs lm = {.min_p = 0.5f};
    sampling_params st = {.temperature = 1.0f, .top_p = 1.0f, .seed = 3, .procs = &lm};
    ck_assert_int_eq(sampler_distribution(l, V, &st, NULL, got), RKV_OK);
    for (int v = 0; v < V; v++) {
        double want = ref[v] >= 0.5 * pmax ? ref[v] / kept : 0;
        ck_assert_double_eq_tol(got[v], want, 1e-4);
    }
    for (int s = 0; s < 32; s++) {
        ck_assert_int_eq(sampler_sample(l, V, &st, s, NULL, &tok), RKV_OK);
        ck_assert(ref[tok] >= 0.5 * pmax * (1 - 1e-4));
    }
}
END_TEST

/* The penalties against vLLM's apply_penalties re-derived in numpy float32
 * (penalties_ref.py made penalties_ref.h): the sampler's distribution at
 * T = 1 is the softmax of the expected row, and greedy picks its argmax. */
START_TEST(penalties_match_vllm)
{
    for (int c = 0; c < PEN_NCASES; c++) {
        logit_procs lp = {.repetition_penalty = pen_params[c][0],
                          .frequency_penalty = pen_params[c][1],
                          .presence_penalty = pen_params[c][2]};
        sampling_params sp = {.temperature = 1.0f, .top_p = 1.0f, .seed = 5, .procs = &lp,
                              .history = pen_history, .n_prompt = PEN_NP, .n_out = PEN_NO};
        double got[PEN_V], want[PEN_V], m = -INFINITY, sum = 0;
        ck_assert_int_eq(sampler_distribution(pen_logits, PEN_V, &sp, NULL, got), RKV_OK);
        for (int v = 0; v < PEN_V; v++) m = fmax(m, (double)pen_expected[c][v]);
        for (int v = 0; v < PEN_V; v++) sum += want[v] = exp((double)pen_expected[c][v] - m);
        for (int v = 0; v < PEN_V; v++)
            ck_assert_msg(fabs(got[v] - want[v] / sum) < 1e-12, "case %d id %d: p %.17g, vLLM %.17g",
                          c, v, got[v], want[v] / sum);
        sp.temperature = 0;
        int32_t tok;
        ck_assert_int_eq(sampler_sample(pen_logits, PEN_V, &sp, 0, NULL, &tok), RKV_OK);
        ck_assert_int_eq(tok, sampler_argmax(pen_expected[c], PEN_V));
    }
    /* Outputs count, the prompt does not: the same ids moved into the prompt
     * leave frequency and presence without effect. */
    logit_procs fp = {.frequency_penalty = 2.0f, .presence_penalty = 2.0f};
    sampling_params sp = {.temperature = 0, .top_p = 1.0f, .procs = &fp, .history = pen_history,
                          .n_prompt = PEN_NP + PEN_NO, .n_out = 0};
    int32_t tok;
    ck_assert_int_eq(sampler_sample(pen_logits, PEN_V, &sp, 0, NULL, &tok), RKV_OK);
    ck_assert_int_eq(tok, sampler_argmax(pen_logits, PEN_V));
}
END_TEST

/* min_tokens: the stop ids get -inf while fewer outputs than min_tokens
 * exist, and count again from then on. Penalties or min_tokens without a
 * history are refused, not applied to nothing. */
START_TEST(min_tokens_hold_stop_ids)
{
    float l[V];
    random_logits(l, V, 17);
    int32_t top = sampler_argmax(l, V), hist[4] = {1, 2, 3, 4};
    logit_procs lp = {.min_tokens = 3, .stop_ids = &top, .n_stop_ids = 1};
    sampling_params sp = {.temperature = 0, .top_p = 1.0f, .procs = &lp, .history = hist,
                          .n_prompt = 2};
    float held[V];
    memcpy(held, l, sizeof l);
    held[top] = -INFINITY;
    for (int32_t out = 0; out <= 3; out++) {
        int32_t tok;
        sp.n_out = out < 2 ? out : 2; /* the history holds two outputs */
        lp.min_tokens = out < 3 ? 3 : 2;
        ck_assert_int_eq(sampler_sample(l, V, &sp, out, NULL, &tok), RKV_OK);
        ck_assert_int_eq(tok, out < 3 ? sampler_argmax(held, V) : top);
    }
    double probs[V];
    sampling_params st = {.temperature = 1.0f, .top_p = 1.0f, .seed = 2, .procs = &lp,
                          .history = hist, .n_prompt = 2, .n_out = 1};
    lp.min_tokens = 3;
    ck_assert_int_eq(sampler_distribution(l, V, &st, NULL, probs), RKV_OK);
    ck_assert(probs[top] == 0);
    st.history = NULL;
    int32_t tok;
    ck_assert_int_eq(sampler_sample(l, V, &st, 0, NULL, &tok), RKV_EINVAL);
    logit_procs rp = {.repetition_penalty = 1.5f};
    st.procs = &rp;
    ck_assert_int_eq(sampler_distribution(l, V, &st, NULL, probs), RKV_EINVAL);
    /* Neutral values ask for nothing: no history needed. */
    logit_procs neutral = {.repetition_penalty = 1.0f};
    st.procs = &neutral;
    ck_assert_int_eq(sampler_sample(l, V, &st, 0, NULL, &tok), RKV_OK);
}
END_TEST

/* Bad words (vLLM's apply_bad_words): a one-id word is always banned; a
 * longer word bans its last id only right after its other ids, and only the
 * outputs count, never the prompt. Checked against the row with exactly the
 * expected ids set to -inf. */
START_TEST(bad_words_ban_after_prefix)
{
    float l[V];
    random_logits(l, V, 23);
    int32_t order[V];
    for (int32_t v = 0; v < V; v++) order[v] = v;
    for (int32_t a = 0; a < V; a++) /* ids by logit, descending */
        for (int32_t b = a + 1; b < V; b++)
            if (l[order[b]] > l[order[a]]) {
                int32_t t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
    const int32_t t0 = order[0], t1 = order[1], t2 = order[2];
    /* words: {t0}, {7, t1}, {9, 7, t2}, {8, t2} */
    int32_t ids[] = {t0, 7, t1, 9, 7, t2, 8, t2}, starts[] = {0, 1, 3, 6, 8};
    logit_procs lp = {.bad_ids = ids, .bad_starts = starts, .n_bad = 4};
    /* prompt {8}, then outputs */
    int32_t hist[4] = {8, 9, 7, 3};
    struct { int32_t n_out; int32_t want; } cases[] = {
        {0, t1},  /* no outputs: t0 banned; 8 is in the prompt, so t2 is not */
        {1, t1},  /* outputs {9}: the three-id word needs two outputs */
        {2, order[3]}, /* outputs {9, 7}: t0, t1 and t2 banned */
        {3, t1},  /* outputs {9, 7, 3}: back to t0 alone */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sampling_params sp = {.temperature = 0, .top_p = 1.0f, .procs = &lp, .history = hist,
                              .n_prompt = 1, .n_out = cases[c].n_out};
        int32_t tok;
        ck_assert_int_eq(sampler_sample(l, V, &sp, 0, NULL, &tok), RKV_OK);
        ck_assert_msg(tok == cases[c].want, "case %zu: %d, want %d", c, tok, cases[c].want);
        double probs[V];
        sp.temperature = 1.0f;
        ck_assert_int_eq(sampler_distribution(l, V, &sp, NULL, probs), RKV_OK);
        ck_assert(probs[t0] == 0);
        ck_assert((probs[t1] == 0) == (cases[c].n_out == 2));
        ck_assert((probs[t2] == 0) == (cases[c].n_out == 2));
    }
    /* Without a history bad words are refused, not applied to nothing. */
    sampling_params nh = {.temperature = 0, .top_p = 1.0f, .procs = &lp};
    int32_t tok;
    ck_assert_int_eq(sampler_sample(l, V, &nh, 0, NULL, &tok), RKV_EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, greedy_is_argmax);
    tcase_add_test(tc, seeded_reproducible);
    tcase_add_test(tc, frequencies_follow_softmax);
    tcase_add_test(tc, top_k_support);
    tcase_add_test(tc, top_p_mass);
    tcase_add_test(tc, bad_params);
    tcase_add_test(tc, logit_procs_apply);
    tcase_add_test(tc, bad_words_ban_after_prefix);
    tcase_add_test(tc, penalties_match_vllm);
    tcase_add_test(tc, min_tokens_hold_stop_ids);
    suite_add_tcase(s, tc);
    return check_run(s);
}
