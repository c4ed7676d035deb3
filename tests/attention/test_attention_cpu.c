/* test_attention_cpu.c - the fp32 CPU attention against the double reference.
 *
 * Inputs are fresh random numbers each run (seed printed on failure; set
 * ATTN_TEST_SEED to replay). Outputs are poisoned with NaN before every call,
 * so an element a kernel forgets to write fails the comparison. Cache slots
 * that no sequence may read (other pages, the tail of a partial last page)
 * hold NaN too, so reading one poisons the result.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attention.h"
#include "check_run.h"
#include "attention_common.h" /* attn_cpu_set_generic */

static unsigned long long g_seed;

/* ---- random numbers (splitmix64) ---------------------------------------- */

typedef struct rng {
    unsigned long long s;
} rng;

static unsigned long long rng_next(rng *r)
{
    unsigned long long z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_unit(rng *r) /* uniform in [-1, 1) */
{
    return (float)((double)(rng_next(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static int rng_int(rng *r, int n) { return (int)(rng_next(r) % (unsigned long long)n); }

/* Each test draws from its own stream of the run's seed. */
static rng rng_for(int test_id) { return (rng){g_seed * 1000003ull + (unsigned)test_id}; }

static float *falloc(int64_t n, float fill)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    ck_assert_ptr_nonnull(p);
    for (int64_t i = 0; i < n; i++) p[i] = fill;
    return p;
}

static void fill_random(rng *r, float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = rng_unit(r);
}

/* ---- a random batch with its page pool --------------------------------- */

/* B sequences with the given prefix/suffix lengths. Pages are a random
 * permutation of a pool with spare pages; every slot no sequence reads is
 * NaN, and page_table entries past a sequence's last page are -1. */
typedef struct problem {
    attn_shape s;
    attn_batch b;
    int32_t *q_starts, *prefix_lens, *page_table;
    int64_t T, NP;
    float *q, *k_new, *v_new, *k_cache, *v_cache;
} problem;

static void problem_make(problem *p, rng *r, attn_shape s, int B, const int *pre, const int *suf)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    const int P = s.page_size, Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim;
    p->q_starts = malloc(sizeof(int32_t) * (size_t)(B + 1));
    p->prefix_lens = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1));
    int max_pages = 1, total_pages = 0, max_suffix = 0;
    p->q_starts[0] = 0;
    for (int i = 0; i < B; i++) {
        p->prefix_lens[i] = pre[i];
        p->q_starts[i + 1] = p->q_starts[i] + suf[i];
        int np = (pre[i] + P - 1) / P;
        total_pages += np;
        if (np + 1 > max_pages) max_pages = np + 1;
        if (suf[i] > max_suffix) max_suffix = suf[i];
    }
    p->T = p->q_starts[B];
    p->NP = total_pages + 3;
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)p->NP);
    for (int i = 0; i < p->NP; i++) perm[i] = i;
    for (int i = (int)p->NP - 1; i > 0; i--) {
        int j = rng_int(r, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    p->page_table = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1) * (size_t)max_pages);
    const int64_t row = (int64_t)Hkv * D;
    p->k_cache = falloc(p->NP * P * row, NAN);
    p->v_cache = falloc(p->NP * P * row, NAN);
    int next = 0;
    for (int i = 0; i < B; i++) {
        int np = (pre[i] + P - 1) / P;
        for (int k = 0; k < max_pages; k++)
            p->page_table[(int64_t)i * max_pages + k] = k < np ? perm[next++] : -1;
        for (int t = 0; t < pre[i]; t++) {
            int64_t slot = (int64_t)p->page_table[(int64_t)i * max_pages + t / P] * P + t % P;
            fill_random(r, p->k_cache + slot * row, row);
            fill_random(r, p->v_cache + slot * row, row);
        }
    }
    free(perm);
    p->q = falloc(p->T * Hq * D, 0);
    p->k_new = falloc(p->T * row, 0);
    p->v_new = falloc(p->T * row, 0);
    fill_random(r, p->q, p->T * Hq * D);
    fill_random(r, p->k_new, p->T * row);
    fill_random(r, p->v_new, p->T * row);
    p->b = (attn_batch){.num_seqs = B, .max_pages = max_pages, .q_starts = p->q_starts,
                        .prefix_lens = p->prefix_lens, .page_table = p->page_table,
                        .max_suffix = max_suffix, .num_pages = (int32_t)p->NP};
}

static void problem_free(problem *p)
{
    free(p->q_starts);
    free(p->prefix_lens);
    free(p->page_table);
    free(p->q);
    free(p->k_new);
    free(p->v_new);
    free(p->k_cache);
    free(p->v_cache);
}

static attn_shape shape_of(int Hq, int Hkv, int D, int P)
{
    return (attn_shape){.num_q_heads = Hq, .num_kv_heads = Hkv, .head_dim = D, .page_size = P,
                        .scale = 1.0f / sqrtf((float)D)};
}

/* ---- comparisons --------------------------------------------------------- */

/* ||out - ref|| / ||ref||; NaN anywhere in out makes it NaN, which fails every
 * `<= tol` assertion. */
static double rel_err(const float *out, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)out[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
}

static double rel_err_f(const float *out, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)out[i] - (double)ref[i];
        num += e * e;
        den += (double)ref[i] * (double)ref[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
}

/* Largest |lse - ref| / (1 + |ref|); NaN if any lse is NaN. */
static double lse_err(const float *lse, const double *ref, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)lse[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (!(e <= worst)) worst = e; /* keeps NaN */
    }
    return worst;
}

#define TOL 1e-5

/* Run the CPU prefill on p (outputs poisoned first) and check it against the
 * reference; also that 1 and 3 threads agree bit for bit. */
static void check_prefill(const problem *p, const char *what)
{
    const int64_t n = p->T * p->s.num_q_heads * p->s.head_dim, nl = p->T * p->s.num_q_heads;
    double *ref = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *ref_lse = malloc(sizeof(double) * (size_t)(nl ? nl : 1));
    float *out = falloc(n, NAN), *lse = falloc(nl, NAN);
    float *out3 = falloc(n, NAN), *lse3 = falloc(nl, NAN);
    ck_assert_int_eq(attn_prefill_ref(&p->s, &p->b, p->q, p->k_new, p->v_new, p->k_cache,
                                      p->v_cache, ref, ref_lse), ATTN_OK);
    ck_assert_int_eq(attn_prefill_cpu(&p->s, &p->b, p->q, p->k_new, p->v_new, p->k_cache,
                                      p->v_cache, out, lse, 1), ATTN_OK);
    double e = rel_err(out, ref, n), el = lse_err(lse, ref_lse, nl);
    ck_assert_msg(e <= TOL && el <= TOL, "%s: out err %g, lse err %g (seed %llu)", what, e, el,
                  g_seed);
    ck_assert_int_eq(attn_prefill_cpu(&p->s, &p->b, p->q, p->k_new, p->v_new, p->k_cache,
                                      p->v_cache, out3, lse3, 3), ATTN_OK);
    ck_assert_msg(memcmp(out, out3, sizeof(float) * (size_t)n) == 0 &&
                      memcmp(lse, lse3, sizeof(float) * (size_t)nl) == 0,
                  "%s: 3 threads differ from 1 (seed %llu)", what, g_seed);
    free(ref);
    free(ref_lse);
    free(out);
    free(lse);
    free(out3);
    free(lse3);
}

/* ---- prefill against the reference --------------------------------------- */

/* Every (page size, GQA ratio, head dim); each call is one batch mixing all
 * nine (prefix, suffix) cases in random order. Prefixes: none, short, several
 * pages with a partial last page; suffixes: 1, short, longer than a tile. */
START_TEST(test_prefill_grid)
{
    /* _i = 0: the kernels this CPU picks (AVX2 + FMA on x86-64), 1: portable C. */
    attn_cpu_set_generic(_i);
    rng r = rng_for(1 + 100 * _i);
    static const int pages[] = {1, 16, 64}, ratios[] = {1, 4, 8}, dims[] = {64, 128};
    for (int pi = 0; pi < 3; pi++)
        for (int ri = 0; ri < 3; ri++)
            for (int di = 0; di < 2; di++) {
                const int P = pages[pi], Hkv = ratios[ri] == 8 ? 1 : 2;
                const int pre_cases[3] = {0, 3, 2 * P + P / 2 + 3};
                const int suf_cases[3] = {1, 5, 70};
                int pre[9], suf[9], order[9];
                for (int i = 0; i < 9; i++) order[i] = i;
                for (int i = 8; i > 0; i--) {
                    int j = rng_int(&r, i + 1), t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
                for (int i = 0; i < 9; i++) {
                    pre[i] = pre_cases[order[i] / 3];
                    suf[i] = suf_cases[order[i] % 3];
                }
                problem p;
                problem_make(&p, &r, shape_of(Hkv * ratios[ri], Hkv, dims[di], P), 9, pre, suf);
                char what[96];
                snprintf(what, sizeof what, "%s P=%d ratio=%d D=%d", _i ? "generic" : "native",
                         P, ratios[ri], dims[di]);
                check_prefill(&p, what);
                problem_free(&p);
            }
    attn_cpu_set_generic(0);
}
END_TEST

START_TEST(test_prefill_page256_and_odd_group)
{
    rng r = rng_for(2);
    int pre[3] = {300, 256, 0}, suf[3] = {20, 3, 9};
    problem p;
    problem_make(&p, &r, shape_of(8, 2, 128, 256), 3, pre, suf);
    check_prefill(&p, "P=256");
    problem_free(&p);
    /* A group of 3 heads and one empty sequence in the middle of the batch. */
    int pre2[3] = {17, 5, 40}, suf2[3] = {33, 0, 2};
    problem_make(&p, &r, shape_of(6, 2, 64, 8), 3, pre2, suf2);
    check_prefill(&p, "group of 3");
    problem_free(&p);
}
END_TEST

/* Peaky softmax (large scale): the max subtraction and merges must hold. */
START_TEST(test_prefill_large_scale)
{
    rng r = rng_for(3);
    int pre[2] = {100, 37}, suf[2] = {40, 66};
    problem p;
    problem_make(&p, &r, shape_of(4, 4, 64, 16), 2, pre, suf);
    p.s.scale = 1.5f;
    check_prefill(&p, "scale 1.5");
    problem_free(&p);
}
END_TEST

/* Scores near 150, where e^score overflows fp32: only the running max keeps
 * the softmax finite. All keys share a direction with the queries, so scores
 * are a large common offset plus a small spread; fp32 rounds scores of that
 * size to ~1e-5 absolute (errors ~1e-5 seen), hence 1e-4 here. */
START_TEST(test_prefill_huge_scores)
{
    rng r = rng_for(10);
    int pre[2] = {50, 3}, suf[2] = {30, 70};
    problem p;
    problem_make(&p, &r, shape_of(4, 2, 64, 16), 2, pre, suf);
    p.s.scale = 0.25f;
    for (int64_t i = 0; i < p.T * 4 * 64; i++) p.q[i] += 3.0f;
    for (int64_t i = 0; i < p.T * 2 * 64; i++) p.k_new[i] += 3.0f;
    for (int64_t i = 0; i < p.NP * 16 * 2 * 64; i++) p.k_cache[i] += 3.0f;
    const int64_t n = p.T * 4 * 64, nl = p.T * 4;
    double *ref = malloc(sizeof(double) * (size_t)n), *ref_lse = malloc(sizeof(double) * nl);
    float *out = falloc(n, NAN), *lse = falloc(nl, NAN);
    ck_assert_int_eq(attn_prefill_ref(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      ref, ref_lse), ATTN_OK);
    ck_assert_msg(ref_lse[0] > 100.0, "scores not large: lse %g", ref_lse[0]);
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      out, lse, 2), ATTN_OK);
    double e = rel_err(out, ref, n), el = lse_err(lse, ref_lse, nl);
    ck_assert_msg(e <= 1e-4 && el <= TOL, "out err %g, lse err %g (seed %llu)", e, el, g_seed);
    free(ref);
    free(ref_lse);
    free(out);
    free(lse);
    problem_free(&p);
}
END_TEST

/* lse is optional. */
START_TEST(test_prefill_no_lse)
{
    rng r = rng_for(4);
    int pre[1] = {21}, suf[1] = {12};
    problem p;
    problem_make(&p, &r, shape_of(4, 2, 64, 4), 1, pre, suf);
    const int64_t n = p.T * 4 * 64;
    float *a = falloc(n, NAN), *bb = falloc(n, NAN), *lse = falloc(p.T * 4, NAN);
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache, a,
                                      lse, 2), ATTN_OK);
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      bb, NULL, 2), ATTN_OK);
    ck_assert_msg(memcmp(a, bb, sizeof(float) * (size_t)n) == 0, "seed %llu", g_seed);
    free(a);
    free(bb);
    free(lse);
    problem_free(&p);
}
END_TEST

/* (prefix in pages, suffix) equals the concatenation as one suffix with no
 * prefix: the last s rows must agree. */
START_TEST(test_prefix_suffix_equals_concat)
{
    rng r = rng_for(5);
    const int cases[][3] = {{16, 45, 20}, {1, 7, 9}, {64, 130, 1}, {4, 64, 64}};
    for (int c = 0; c < 4; c++) {
        const int P = cases[c][0], pl = cases[c][1], sl = cases[c][2];
        const int Hq = 8, Hkv = 2, D = c % 2 ? 128 : 64;
        const int64_t row = (int64_t)Hkv * D;
        problem p, w;
        problem_make(&p, &r, shape_of(Hq, Hkv, D, P), 1, &pl, &sl);
        int whole = pl + sl, zero = 0;
        problem_make(&w, &r, shape_of(Hq, Hkv, D, P), 1, &zero, &whole);
        for (int t = 0; t < pl; t++) { /* the prefix's K/V, in order, then the suffix's */
            int64_t slot = (int64_t)p.page_table[t / P] * P + t % P;
            memcpy(w.k_new + t * row, p.k_cache + slot * row, sizeof(float) * (size_t)row);
            memcpy(w.v_new + t * row, p.v_cache + slot * row, sizeof(float) * (size_t)row);
        }
        memcpy(w.k_new + pl * row, p.k_new, sizeof(float) * (size_t)(sl * row));
        memcpy(w.v_new + pl * row, p.v_new, sizeof(float) * (size_t)(sl * row));
        memcpy(w.q + (int64_t)pl * Hq * D, p.q, sizeof(float) * (size_t)(sl * Hq * D));
        float *o1 = falloc((int64_t)sl * Hq * D, NAN), *l1 = falloc((int64_t)sl * Hq, NAN);
        float *o2 = falloc((int64_t)whole * Hq * D, NAN), *l2 = falloc((int64_t)whole * Hq, NAN);
        ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache,
                                          p.v_cache, o1, l1, 2), ATTN_OK);
        ck_assert_int_eq(attn_prefill_cpu(&w.s, &w.b, w.q, w.k_new, w.v_new, w.k_cache,
                                          w.v_cache, o2, l2, 2), ATTN_OK);
        double e = rel_err_f(o1, o2 + (int64_t)pl * Hq * D, (int64_t)sl * Hq * D);
        double el = rel_err_f(l1, l2 + (int64_t)pl * Hq, (int64_t)sl * Hq);
        ck_assert_msg(e <= TOL && el <= TOL, "case %d: out %g lse %g (seed %llu)", c, e, el,
                      g_seed);
        free(o1);
        free(l1);
        free(o2);
        free(l2);
        problem_free(&p);
        problem_free(&w);
    }
}
END_TEST

/* A row's result depends only on its query and the keys it sees, not on the
 * rows it is tiled with, the batch around it, where its keys live (pages or
 * the suffix) or the thread count: prefill of whole sequences, prefill of
 * every row as a one-token sequence over pages, and unsplit decode agree
 * bit for bit. (The runtime's batch-invariant mode can rely on this.) */
START_TEST(test_rows_bitwise_invariant)
{
    attn_cpu_set_generic(_i);
    rng r = rng_for(11 + 100 * _i);
    const int P = 16, Hq = 8, Hkv = 2, D = 64 + 64 * _i, B = 3;
    const int pl[3] = {21, 0, 70}, sl[3] = {45, 67, 3};
    int ctx[3];
    for (int i = 0; i < B; i++) ctx[i] = pl[i] + sl[i];
    int one[3] = {1, 1, 1};
    problem c; /* the whole context of each sequence in pages */
    problem_make(&c, &r, shape_of(Hq, Hkv, D, P), B, ctx, one);
    const int64_t row = (int64_t)Hkv * D;
    int T = 0;
    for (int i = 0; i < B; i++) T += sl[i];
    float *q = falloc((int64_t)T * Hq * D, 0), *kn = falloc(T * row, 0), *vn = falloc(T * row, 0);
    fill_random(&r, q, (int64_t)T * Hq * D);
    int32_t qs[4] = {0}, pre[3];
    int32_t *qs1 = malloc(sizeof(int32_t) * (T + 1)), *pre1 = malloc(sizeof(int32_t) * T);
    int32_t *pt1 = malloc(sizeof(int32_t) * (size_t)(T * c.b.max_pages));
    int32_t *lens1 = malloc(sizeof(int32_t) * T);
    for (int i = 0, t = 0; i < B; i++) {
        qs[i + 1] = qs[i] + sl[i];
        pre[i] = pl[i];
        for (int j = 0; j < sl[i]; j++, t++) { /* suffix K/V = the context's last s tokens */
            int pos = pl[i] + j;
            int64_t slot = (int64_t)c.page_table[i * c.b.max_pages + pos / P] * P + pos % P;
            memcpy(kn + t * row, c.k_cache + slot * row, sizeof(float) * (size_t)row);
            memcpy(vn + t * row, c.v_cache + slot * row, sizeof(float) * (size_t)row);
            qs1[t] = t;
            pre1[t] = pos;
            lens1[t] = pos + 1;
            memcpy(pt1 + t * c.b.max_pages, c.page_table + i * c.b.max_pages,
                   sizeof(int32_t) * (size_t)c.b.max_pages);
        }
    }
    qs1[T] = T;
    attn_batch whole = {.num_seqs = B, .max_pages = c.b.max_pages, .q_starts = qs,
                        .prefix_lens = pre, .page_table = c.page_table,
                        .num_pages = c.b.num_pages};
    attn_batch rows = {.num_seqs = T, .max_pages = c.b.max_pages, .q_starts = qs1,
                       .prefix_lens = pre1, .page_table = pt1, .num_pages = c.b.num_pages};
    const int64_t n = (int64_t)T * Hq * D;
    float *oa = falloc(n, NAN), *ob = falloc(n, NAN), *oc = falloc(n, NAN);
    float *la = falloc((int64_t)T * Hq, NAN), *lb = falloc((int64_t)T * Hq, NAN);
    float *lc = falloc((int64_t)T * Hq, NAN);
    ck_assert_int_eq(attn_prefill_cpu(&c.s, &whole, q, kn, vn, c.k_cache, c.v_cache, oa, la, 1),
                     ATTN_OK);
    ck_assert_int_eq(attn_prefill_cpu(&c.s, &rows, q, kn, vn, c.k_cache, c.v_cache, ob, lb, 3),
                     ATTN_OK);
    ck_assert_int_eq(attn_decode_cpu(&c.s, T, lens1, pt1, c.b.max_pages, c.b.num_pages, q,
                                     c.k_cache, c.v_cache, oc, lc, 1, 2), ATTN_OK);
    ck_assert_msg(memcmp(oa, ob, sizeof(float) * (size_t)n) == 0 &&
                      memcmp(la, lb, sizeof(float) * (size_t)(T * Hq)) == 0,
                  "%s D=%d: prefill per row differs from prefill per sequence (seed %llu)",
                  _i ? "generic" : "native", D, g_seed);
    ck_assert_msg(memcmp(oa, oc, sizeof(float) * (size_t)n) == 0 &&
                      memcmp(la, lc, sizeof(float) * (size_t)(T * Hq)) == 0,
                  "%s D=%d: unsplit decode differs from prefill (seed %llu)",
                  _i ? "generic" : "native", D, g_seed);
    free(q);
    free(kn);
    free(vn);
    free(qs1);
    free(pre1);
    free(pt1);
    free(lens1);
    free(oa);
    free(ob);
    free(oc);
    free(la);
    free(lb);
    free(lc);
    problem_free(&c);
    attn_cpu_set_generic(0);
}
END_TEST

/* ---- merge ----------------------------------------------------------------- */

/* Cascade: each suffix query's attention over the prefix alone (decode, one
 * "sequence" per query row sharing the prefix pages) merged with its attention
 * over the suffix alone (prefill without prefix) is the full prefill. */
START_TEST(test_merge_prefix_and_suffix_states)
{
    rng r = rng_for(6);
    const int P = 16, Hq = 8, Hkv = 2, D = 64, pl = 77, sl = 23;
    problem p;
    problem_make(&p, &r, shape_of(Hq, Hkv, D, P), 1, &pl, &sl);
    const int64_t n = (int64_t)sl * Hq * D, nl = (int64_t)sl * Hq;
    int32_t *lens = malloc(sizeof(int32_t) * sl);
    int32_t *table = malloc(sizeof(int32_t) * (size_t)(sl * p.b.max_pages));
    for (int i = 0; i < sl; i++) {
        lens[i] = pl;
        memcpy(table + i * p.b.max_pages, p.page_table, sizeof(int32_t) * (size_t)p.b.max_pages);
    }
    float *op = falloc(n, NAN), *lp = falloc(nl, NAN), *os = falloc(n, NAN), *ls = falloc(nl, NAN);
    float *om = falloc(n, NAN), *lm = falloc(nl, NAN);
    ck_assert_int_eq(attn_decode_cpu(&p.s, sl, lens, table, p.b.max_pages, p.b.num_pages, p.q,
                                     p.k_cache, p.v_cache, op, lp, 2, 2), ATTN_OK);
    int32_t qs[2] = {0, sl}, zero = 0;
    attn_batch bs = {.num_seqs = 1, .q_starts = qs, .prefix_lens = &zero};
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &bs, p.q, p.k_new, p.v_new, NULL, NULL, os, ls, 2),
                     ATTN_OK);
    attn_merge_cpu(nl, D, op, lp, os, ls, om, lm);
    double *ref = malloc(sizeof(double) * (size_t)n), *ref_lse = malloc(sizeof(double) * nl);
    ck_assert_int_eq(attn_prefill_ref(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      ref, ref_lse), ATTN_OK);
    double e = rel_err(om, ref, n), el = lse_err(lm, ref_lse, nl);
    ck_assert_msg(e <= TOL && el <= TOL, "merged: out %g lse %g (seed %llu)", e, el, g_seed);
    /* In place: out and lse_out aliasing o1 and lse1 give the same bits. */
    attn_merge_cpu(nl, D, op, lp, os, ls, op, lp);
    ck_assert(memcmp(op, om, sizeof(float) * (size_t)n) == 0);
    ck_assert(memcmp(lp, lm, sizeof(float) * (size_t)nl) == 0);
    free(lens);
    free(table);
    free(op);
    free(lp);
    free(os);
    free(ls);
    free(om);
    free(lm);
    free(ref);
    free(ref_lse);
    problem_free(&p);
}
END_TEST

/* Decode over the first half of the pages and over the rest, merged, equals
 * decode over the whole context. */
START_TEST(test_merge_two_halves)
{
    rng r = rng_for(7);
    const int P = 8, Hq = 16, Hkv = 2, D = 128, len = 203, half = 96; /* half: 12 pages */
    int one = 1;
    problem p;
    int pre = len - 1;
    problem_make(&p, &r, shape_of(Hq, Hkv, D, P), 1, &pre, &one);
    /* Put the suffix token into the page table as well, so decode sees all len. */
    int32_t *table = malloc(sizeof(int32_t) * (size_t)p.b.max_pages);
    memcpy(table, p.page_table, sizeof(int32_t) * (size_t)p.b.max_pages);
    ck_assert_int_ge(table[(len - 1) / P], 0); /* the last token's page holds prefix too */
    int32_t slot = table[(len - 1) / P] * P + (len - 1) % P;
    ck_assert_int_eq(attn_store_kv_cpu(&p.s, 1, p.b.num_pages, &slot, p.k_new, p.v_new, p.k_cache,
                                       p.v_cache), ATTN_OK);
    const int64_t n = (int64_t)Hq * D;
    float *oa = falloc(n, NAN), *la = falloc(Hq, NAN), *ob = falloc(n, NAN), *lb = falloc(Hq, NAN);
    float *ow = falloc(n, NAN), *lw = falloc(Hq, NAN);
    int32_t l1 = half, l2 = len - half, lw_len = len;
    const int32_t NP = p.b.num_pages;
    ck_assert_int_eq(attn_decode_cpu(&p.s, 1, &l1, table, p.b.max_pages, NP, p.q, p.k_cache,
                                     p.v_cache, oa, la, 1, 1), ATTN_OK);
    ck_assert_int_eq(attn_decode_cpu(&p.s, 1, &l2, table + half / P, p.b.max_pages - half / P, NP,
                                     p.q, p.k_cache, p.v_cache, ob, lb, 3, 2), ATTN_OK);
    ck_assert_int_eq(attn_decode_cpu(&p.s, 1, &lw_len, table, p.b.max_pages, NP, p.q, p.k_cache,
                                     p.v_cache, ow, lw, 1, 1), ATTN_OK);
    attn_merge_cpu(Hq, D, oa, la, ob, lb, oa, la);
    double e = rel_err_f(oa, ow, n), el = rel_err_f(la, lw, Hq);
    ck_assert_msg(e <= TOL && el <= TOL, "halves: out %g lse %g (seed %llu)", e, el, g_seed);
    /* And the whole equals the reference (prefill of the last token). */
    double *ref = malloc(sizeof(double) * (size_t)n), ref_lse[16];
    ck_assert_int_eq(attn_prefill_ref(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      ref, ref_lse), ATTN_OK);
    e = rel_err(ow, ref, n);
    el = lse_err(lw, ref_lse, Hq);
    ck_assert_msg(e <= TOL && el <= TOL, "whole: out %g lse %g (seed %llu)", e, el, g_seed);
    free(table);
    free(oa);
    free(la);
    free(ob);
    free(lb);
    free(ow);
    free(lw);
    free(ref);
    problem_free(&p);
}
END_TEST

/* Empty states: merging with one gives the other exactly, even if the empty
 * side's output holds NaN; two empty states give the empty state. */
START_TEST(test_merge_empty_states)
{
    const float o1[4] = {1, 2, 3, 4}, o2[4] = {NAN, NAN, NAN, NAN};
    const float l1[1] = {0.75f}, l2[1] = {-INFINITY};
    float out[4], lo[1];
    attn_merge_cpu(1, 4, o1, l1, o2, l2, out, lo);
    ck_assert(memcmp(out, o1, sizeof out) == 0 && lo[0] == l1[0]);
    attn_merge_cpu(1, 4, o2, l2, o1, l1, out, lo);
    ck_assert(memcmp(out, o1, sizeof out) == 0 && lo[0] == l1[0]);
    attn_merge_cpu(1, 4, o2, l2, o2, l2, out, lo);
    for (int d = 0; d < 4; d++) ck_assert(out[d] == 0.0f);
    ck_assert(isinf(lo[0]) && lo[0] < 0);
    /* Equal lse: the average, and lse + log 2. */
    const float l3[1] = {0.75f};
    const float o3[4] = {3, 2, 1, 0};
    attn_merge_cpu(1, 4, o1, l1, o3, l3, out, lo);
    for (int d = 0; d < 4; d++) ck_assert(fabsf(out[d] - 2.0f) < 1e-6f);
    ck_assert(fabsf(lo[0] - (0.75f + logf(2.0f))) < 1e-6f);
    ck_assert_int_eq(attn_merge_cpu(0, 4, NULL, NULL, NULL, NULL, NULL, NULL), ATTN_OK);
}
END_TEST

/* ---- decode ---------------------------------------------------------------- */

/* Decode over context lengths {0, 1, P-1, several pages, long} for several
 * split counts equals the reference and prefill with s = 1, and an empty
 * context gives lse = -inf, out = 0. */
START_TEST(test_decode_splits)
{
    attn_cpu_set_generic(_i);
    rng r = rng_for(8 + 100 * _i);
    static const int dims[] = {64, 128}, ratios[] = {1, 4, 8};
    for (int cfg = 0; cfg < 4; cfg++) {
        static const int page_sizes[] = {16, 16, 1, 64};
        const int P = page_sizes[cfg], D = dims[cfg % 2], ratio = ratios[cfg % 3];
        const int Hkv = 2, Hq = Hkv * ratio, B = 5;
        const int lens[5] = {0, 1, P - 1 > 0 ? P - 1 : 2, 5 * P + 3, 600};
        /* The reference and prefill see context = prefix (len - 1) + the last
         * token as suffix; decode sees it all in pages. */
        int pre[5], suf[5];
        for (int i = 0; i < B; i++) {
            pre[i] = lens[i] > 0 ? lens[i] - 1 : 0;
            suf[i] = lens[i] > 0 ? 1 : 0;
        }
        problem p;
        problem_make(&p, &r, shape_of(Hq, Hkv, D, P), B, pre, suf);
        /* Decode's page table: each prefix's pages plus room for the last token. */
        const int mp = p.b.max_pages + 1;
        int32_t *table = malloc(sizeof(int32_t) * (size_t)(B * mp));
        int32_t seq_lens[5], slots[5];
        float *qd = falloc((int64_t)B * Hq * D, 0);
        int spare = (int)p.NP; /* grow the pool by one page per sequence */
        const int64_t row = (int64_t)Hkv * D;
        p.k_cache = realloc(p.k_cache, sizeof(float) * (size_t)((p.NP + B) * P * row));
        p.v_cache = realloc(p.v_cache, sizeof(float) * (size_t)((p.NP + B) * P * row));
        for (int64_t x = p.NP * P * row; x < (p.NP + B) * P * row; x++)
            p.k_cache[x] = p.v_cache[x] = NAN;
        int tok = 0;
        for (int i = 0; i < B; i++) {
            seq_lens[i] = lens[i];
            for (int k = 0; k < mp; k++)
                table[i * mp + k] = k < p.b.max_pages ? p.page_table[i * p.b.max_pages + k] : -1;
            slots[i] = -1;
            if (lens[i] == 0) continue;
            int last = lens[i] - 1;
            if (table[i * mp + last / P] < 0) table[i * mp + last / P] = spare++;
            slots[i] = table[i * mp + last / P] * P + last % P;
            memcpy(qd + (int64_t)i * Hq * D, p.q + (int64_t)tok * Hq * D,
                   sizeof(float) * (size_t)(Hq * D));
            tok++;
        }
        /* Tokens are packed (T = sequences with len > 0); map them in order. */
        int32_t tslots[5];
        int nt = 0;
        for (int i = 0; i < B; i++)
            if (slots[i] >= 0) tslots[nt++] = slots[i];
        ck_assert_int_eq(nt, p.T);
        const int32_t NP = (int32_t)(p.NP + B); /* the grown pool */
        ck_assert_int_eq(attn_store_kv_cpu(&p.s, nt, NP, tslots, p.k_new, p.v_new, p.k_cache,
                                           p.v_cache), ATTN_OK);

        double *ref = malloc(sizeof(double) * (size_t)(p.T * Hq * D));
        double *ref_lse = malloc(sizeof(double) * (size_t)(p.T * Hq));
        ck_assert_int_eq(attn_prefill_ref(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache,
                                          p.v_cache, ref, ref_lse), ATTN_OK);
        float *pf = falloc(p.T * Hq * D, NAN), *pfl = falloc(p.T * Hq, NAN);
        ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache,
                                          p.v_cache, pf, pfl, 2), ATTN_OK);
        static const int splits[] = {1, 2, 3, 7, 0, 1000};
        for (int si = 0; si < 6; si++) {
            const int64_t n = (int64_t)B * Hq * D;
            float *o = falloc(n, NAN), *l = falloc((int64_t)B * Hq, NAN);
            float *o2 = falloc(n, NAN), *l2 = falloc((int64_t)B * Hq, NAN);
            ck_assert_int_eq(attn_decode_cpu(&p.s, B, seq_lens, table, mp, NP, qd, p.k_cache,
                                             p.v_cache, o, l, splits[si], 1), ATTN_OK);
            ck_assert_int_eq(attn_decode_cpu(&p.s, B, seq_lens, table, mp, NP, qd, p.k_cache,
                                             p.v_cache, o2, l2, splits[si], 3), ATTN_OK);
            ck_assert_msg(memcmp(o, o2, sizeof(float) * (size_t)n) == 0 &&
                              memcmp(l, l2, sizeof(float) * (size_t)(B * Hq)) == 0,
                          "cfg %d splits %d: threads differ (seed %llu)", cfg, splits[si],
                          g_seed);
            /* Empty context: lse = -inf, out = 0. */
            for (int h = 0; h < Hq; h++) {
                ck_assert(isinf(l[h]) && l[h] < 0);
                for (int d = 0; d < D; d++) ck_assert(o[h * D + d] == 0.0f);
            }
            /* Sequences 1..B-1 are tokens 0..T-1. */
            const int64_t off = (int64_t)Hq * D;
            double e = rel_err(o + off, ref, n - off);
            double el = lse_err(l + Hq, ref_lse, (int64_t)(B - 1) * Hq);
            double ep = rel_err_f(o + off, pf, n - off);
            double epl = rel_err_f(l + Hq, pfl, (int64_t)(B - 1) * Hq);
            ck_assert_msg(e <= TOL && el <= TOL && ep <= TOL && epl <= TOL,
                          "%s cfg %d (P=%d D=%d ratio=%d) splits %d: ref %g/%g prefill %g/%g "
                          "(seed %llu)",
                          _i ? "generic" : "native", cfg, P, D, ratio, splits[si], e, el, ep, epl, g_seed);
            free(o);
            free(l);
            free(o2);
            free(l2);
        }
        free(table);
        free(qd);
        free(ref);
        free(ref_lse);
        free(pf);
        free(pfl);
        problem_free(&p);
    }
    attn_cpu_set_generic(0);
}
END_TEST

/* ---- store_kv ---------------------------------------------------------------- */

/* Tokens land in exactly their slots (others untouched, negative slots
 * skipped), and prefill reading them back from pages equals prefill reading
 * them as the suffix's own K/V. */
START_TEST(test_store_kv_round_trip)
{
    rng r = rng_for(9);
    const int P = 4, Hkv = 2, D = 64, NP = 6, T = 13;
    attn_shape s = shape_of(4, Hkv, D, P);
    const int64_t row = (int64_t)Hkv * D, pool = (int64_t)NP * P * row;
    float *kc = falloc(pool, -7.0f), *vc = falloc(pool, -9.0f);
    float *kn = falloc(T * row, 0), *vn = falloc(T * row, 0);
    fill_random(&r, kn, T * row);
    fill_random(&r, vn, T * row);
    int32_t slot[T];
    int32_t perm[NP * P];
    for (int i = 0; i < NP * P; i++) perm[i] = i;
    for (int i = NP * P - 1; i > 0; i--) {
        int j = rng_int(&r, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int t = 0; t < T; t++) slot[t] = t == 4 ? -1 : perm[t];
    ck_assert_int_eq(attn_store_kv_cpu(&s, T, NP, slot, kn, vn, kc, vc), ATTN_OK);
    for (int sl = 0; sl < NP * P; sl++) {
        int src = -1;
        for (int t = 0; t < T; t++)
            if (slot[t] == sl) src = t;
        for (int64_t x = 0; x < row; x++) {
            float ek = src >= 0 ? kn[src * row + x] : -7.0f;
            float ev = src >= 0 ? vn[src * row + x] : -9.0f;
            ck_assert_msg(kc[sl * row + x] == ek && vc[sl * row + x] == ev,
                          "slot %d elem %lld (seed %llu)", sl, (long long)x, g_seed);
        }
    }
    ck_assert_int_eq(attn_store_kv_cpu(&s, 0, 0, NULL, NULL, NULL, NULL, NULL), ATTN_OK);

    /* Store a sequence's first 10 tokens into its pages, then attend. */
    int32_t table[3] = {5, 0, 3}, seq_slot[10];
    for (int t = 0; t < 10; t++) seq_slot[t] = table[t / P] * P + t % P;
    ck_assert_int_eq(attn_store_kv_cpu(&s, 10, NP, seq_slot, kn, vn, kc, vc), ATTN_OK);
    float *q = falloc(3 * 4 * D, 0);
    fill_random(&r, q, 3 * 4 * D);
    int32_t qs_a[2] = {0, 3}, pre_a = 10, qs_b[2] = {0, 13}, pre_b = 0;
    attn_batch ba = {.num_seqs = 1, .max_pages = 3, .q_starts = qs_a, .prefix_lens = &pre_a,
                     .page_table = table, .num_pages = NP};
    attn_batch bb = {.num_seqs = 1, .q_starts = qs_b, .prefix_lens = &pre_b};
    float *qb = falloc(13 * 4 * D, 0);
    memcpy(qb + 10 * 4 * D, q, sizeof(float) * 3 * 4 * D);
    float *oa = falloc(3 * 4 * D, NAN), *ob = falloc(13 * 4 * D, NAN);
    ck_assert_int_eq(attn_prefill_cpu(&s, &ba, q, kn + 10 * row, vn + 10 * row, kc, vc, oa, NULL,
                                      1), ATTN_OK);
    ck_assert_int_eq(attn_prefill_cpu(&s, &bb, qb, kn, vn, NULL, NULL, ob, NULL, 1), ATTN_OK);
    double e = rel_err_f(oa, ob + 10 * 4 * D, 3 * 4 * D);
    ck_assert_msg(e <= TOL, "err %g (seed %llu)", e, g_seed);
    free(kc);
    free(vc);
    free(kn);
    free(vn);
    free(q);
    free(qb);
    free(oa);
    free(ob);
}
END_TEST

/* ---- the thread team ----------------------------------------------------- */

typedef struct caller_arg {
    const problem *p;
    const float *expect;
    int64_t n;
    int mismatches;
} caller_arg;

static void *caller_main(void *x)
{
    caller_arg *a = x;
    float *out = falloc(a->n, NAN);
    for (int it = 0; it < 20; it++) {
        if (attn_prefill_cpu(&a->p->s, &a->p->b, a->p->q, a->p->k_new, a->p->v_new,
                             a->p->k_cache, a->p->v_cache, out, NULL, 2) != ATTN_OK ||
            memcmp(out, a->expect, sizeof(float) * (size_t)a->n) != 0)
            a->mismatches++;
        for (int64_t i = 0; i < a->n; i++) out[i] = NAN;
    }
    free(out);
    return NULL;
}

/* Callers on several threads at once (one gets the team, the others run
 * alone) and a forked child (its parent's workers do not exist there) all get
 * the same bits as a plain call. */
START_TEST(test_team_concurrent_and_fork)
{
    rng r = rng_for(12);
    int pre[2] = {40, 7}, suf[2] = {30, 50};
    problem p;
    problem_make(&p, &r, shape_of(8, 2, 64, 16), 2, pre, suf);
    const int64_t n = p.T * 8 * 64;
    float *expect = falloc(n, NAN);
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      expect, NULL, 2), ATTN_OK);
    caller_arg args[3];
    pthread_t tid[3];
    for (int t = 0; t < 3; t++) {
        args[t] = (caller_arg){.p = &p, .expect = expect, .n = n};
        ck_assert_int_eq(pthread_create(&tid[t], NULL, caller_main, &args[t]), 0);
    }
    for (int t = 0; t < 3; t++) {
        pthread_join(tid[t], NULL);
        ck_assert_msg(args[t].mismatches == 0, "caller %d: %d bad calls (seed %llu)", t,
                      args[t].mismatches, g_seed);
    }
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        alarm(20); /* a hang in the child fails the test instead of stalling it */
        float *out = falloc(n, NAN);
        int ok = attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache, out,
                                  NULL, 3) == ATTN_OK &&
                 memcmp(out, expect, sizeof(float) * (size_t)n) == 0;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "forked child: status %d (seed %llu)", status, g_seed);
    free(expect);
    problem_free(&p);
}
END_TEST

/* ---- bad arguments ------------------------------------------------------------ */

/* Every rejected argument returns its code before any output is written. */
/* Regression (issue 21, defect 8): attn_merge_cpu returned void and read
 * through NULL arguments; it now returns an error code like every entry point. */
START_TEST(test_regress_merge_bad_arguments)
{
    const float o[4] = {1, 2, 3, 4}, l[1] = {0};
    float out[4], lo[1];
    ck_assert_int_eq(attn_merge_cpu(1, 4, o, l, o, l, out, lo), ATTN_OK);
    ck_assert_int_eq(attn_merge_cpu(1, 4, NULL, l, o, l, out, lo), ATTN_EARG);
    ck_assert_int_eq(attn_merge_cpu(1, 4, o, l, o, NULL, out, lo), ATTN_EARG);
    ck_assert_int_eq(attn_merge_cpu(1, 4, o, l, o, l, out, NULL), ATTN_EARG);
    ck_assert_int_eq(attn_merge_cpu(-1, 4, o, l, o, l, out, lo), ATTN_EARG);
    ck_assert_int_eq(attn_merge_cpu(1, 0, o, l, o, l, out, lo), ATTN_EARG);
}
END_TEST

/* Regression (issue 21, defect 8): the q_starts difference was taken before
 * checking order, so a decreasing pair overflowed int32 (UBSan) in the check. */
START_TEST(test_regress_q_starts_overflow)
{
    enum { D = 64 };
    attn_shape sh = shape_of(4, 2, D, 4);
    float buf[4 * D] = {0}, out[4 * D], lse[4];
    int32_t qs[3] = {0, INT32_MAX, -2}, pre[2] = {0, 0};
    attn_batch b = {.num_seqs = 2, .q_starts = qs, .prefix_lens = pre, .num_pages = 1};
    ck_assert_int_eq(attn_prefill_cpu(&sh, &b, buf, buf, buf, buf, buf, out, lse, 1), ATTN_EARG);
    int32_t qs2[3] = {0, 1, INT32_MIN};
    b.q_starts = qs2;
    ck_assert_int_eq(attn_prefill_cpu(&sh, &b, buf, buf, buf, buf, buf, out, lse, 1), ATTN_EARG);
}
END_TEST

START_TEST(test_bad_arguments)
{
    enum { D = 64 };
    attn_shape ok = shape_of(4, 2, D, 4);
    float q[2 * 4 * D] = {0}, kv[2 * 2 * D] = {0}, cache[4 * 4 * 2 * D] = {0};
    float out[2 * 4 * D], lse[8];
    int32_t qs[2] = {0, 2}, pre[1] = {5}, table[2] = {1, 2};
    attn_batch b = {.num_seqs = 1, .max_pages = 2, .q_starts = qs, .prefix_lens = pre,
                    .page_table = table, .num_pages = 4};
#define PREFILL(sh, bt) \
    attn_prefill_cpu((sh), (bt), q, kv, kv, cache, cache, out, lse, 1)
    for (int i = 0; i < 2 * 4 * D; i++) out[i] = NAN;
    ck_assert_int_eq(PREFILL(&ok, &b), ATTN_OK);

    attn_shape sh = ok;
    sh.head_dim = 96;
    ck_assert_int_eq(attn_shape_check(&sh), ATTN_EHEADDIM);
    ck_assert_int_eq(PREFILL(&sh, &b), ATTN_EHEADDIM);
    sh = ok;
    sh.page_size = 0;
    ck_assert_int_eq(PREFILL(&sh, &b), ATTN_EPAGESIZE);
    sh.page_size = 257;
    ck_assert_int_eq(attn_shape_check(&sh), ATTN_EPAGESIZE);
    sh = ok;
    sh.num_q_heads = 5;
    ck_assert_int_eq(PREFILL(&sh, &b), ATTN_EHEADS);
    sh.num_q_heads = 4;
    sh.num_kv_heads = 0;
    ck_assert_int_eq(PREFILL(&sh, &b), ATTN_EHEADS);
    sh = ok;
    sh.scale = NAN;
    ck_assert_int_eq(PREFILL(&sh, &b), ATTN_EARG);
    ck_assert_int_eq(attn_shape_check(NULL), ATTN_EARG);
    ck_assert_int_eq(attn_shape_check(&ok), ATTN_OK);

    /* Batch: each field broken in turn, out untouched afterwards. */
    for (int i = 0; i < 2 * 4 * D; i++) out[i] = NAN;
    attn_batch bad = b;
    bad.num_seqs = -1;
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    int32_t qs_bad[2] = {0, -1};
    bad = b;
    bad.q_starts = qs_bad; /* decreasing */
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    int32_t qs_off[2] = {1, 2};
    bad.q_starts = qs_off; /* q_starts[0] != 0 */
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    int32_t pre_neg[1] = {-3};
    bad = b;
    bad.prefix_lens = pre_neg;
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    int32_t pre_long[1] = {9}; /* needs 3 pages, table is 2 wide */
    bad.prefix_lens = pre_long;
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    int32_t table_neg[2] = {1, -1};
    bad = b;
    bad.page_table = table_neg; /* second page is used by prefix 5 */
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    int32_t pre_one[1] = {4};
    bad.prefix_lens = pre_one; /* only page 0 used: the -1 is never read */
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_OK);
    for (int i = 0; i < 2 * 4 * D; i++) out[i] = NAN;
    bad = b;
    bad.max_suffix = 1; /* disagrees with s = 2 */
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    bad.max_suffix = -1;
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    bad = b;
    bad.max_pages = -2;
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    bad = b;
    bad.page_table = NULL;
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    bad = b;
    bad.q_starts = NULL;
    ck_assert_int_eq(PREFILL(&ok, &bad), ATTN_EARG);
    ck_assert_int_eq(PREFILL(&ok, NULL), ATTN_EARG);
    ck_assert_int_eq(attn_prefill_cpu(&ok, &b, NULL, kv, kv, cache, cache, out, lse, 1), ATTN_EARG);
    ck_assert_int_eq(attn_prefill_cpu(&ok, &b, q, kv, kv, NULL, cache, out, lse, 1), ATTN_EARG);
    for (int i = 0; i < 2 * 4 * D; i++) ck_assert(isnan(out[i]));
    ck_assert_int_eq(attn_prefill_ref(&ok, &bad, q, kv, kv, cache, cache, NULL, NULL), ATTN_EARG);
    sh = ok;
    sh.head_dim = 32;
    ck_assert_int_eq(attn_prefill_ref(&sh, &b, q, kv, kv, cache, cache, NULL, NULL),
                     ATTN_EHEADDIM);

    /* Decode. */
    int32_t lens[1] = {5}, lens_neg[1] = {-1}, lens_long[1] = {9};
#define DECODE(sh, n, ln, tb, qq, kc) \
    attn_decode_cpu((sh), (n), (ln), (tb), 2, 4, (qq), (kc), cache, out, lse, 0, 1)
    ck_assert_int_eq(DECODE(&ok, 1, lens, table, q, cache), ATTN_OK);
    ck_assert_int_eq(DECODE(&ok, 1, lens_neg, table, q, cache), ATTN_EARG);
    ck_assert_int_eq(DECODE(&ok, 1, lens_long, table, q, cache), ATTN_EARG);
    ck_assert_int_eq(DECODE(&ok, 1, lens, table_neg, q, cache), ATTN_EARG);
    ck_assert_int_eq(DECODE(&ok, -1, lens, table, q, cache), ATTN_EARG);
    ck_assert_int_eq(DECODE(&ok, 1, NULL, table, q, cache), ATTN_EARG);
    ck_assert_int_eq(DECODE(&ok, 1, lens, NULL, q, cache), ATTN_EARG);
    ck_assert_int_eq(DECODE(&ok, 1, lens, table, q, NULL), ATTN_EARG);
    ck_assert_int_eq(DECODE(&ok, 1, lens, table, NULL, cache), ATTN_EARG);
    sh = ok;
    sh.page_size = 300;
    ck_assert_int_eq(DECODE(&sh, 1, lens, table, q, cache), ATTN_EPAGESIZE);
#undef DECODE

    /* Store. */
    int32_t slots[2] = {0, 3};
    ck_assert_int_eq(attn_store_kv_cpu(&ok, -1, 4, slots, kv, kv, cache, cache), ATTN_EARG);
    ck_assert_int_eq(attn_store_kv_cpu(&ok, 2, 4, NULL, kv, kv, cache, cache), ATTN_EARG);
    ck_assert_int_eq(attn_store_kv_cpu(&ok, 2, 4, slots, kv, kv, NULL, cache), ATTN_EARG);
    sh = ok;
    sh.head_dim = 0;
    ck_assert_int_eq(attn_store_kv_cpu(&sh, 2, 4, slots, kv, kv, cache, cache), ATTN_EHEADDIM);

    for (int c = ATTN_ENOTSUP; c <= ATTN_OK; c++) ck_assert_ptr_nonnull(attn_strerror(c));
    ck_assert_str_ne(attn_strerror(ATTN_EHEADDIM), attn_strerror(ATTN_EARG));
#undef PREFILL
}
END_TEST

/* ---- page ids and slots outside the pool ---------------------------------- */

/* A page id >= num_pages among the pages one sequence of a batch reads, or a
 * slot past num_pages * P, is rejected before anything is read or written;
 * the same value past the pages a sequence reads is never looked at. */
START_TEST(test_pool_bounds)
{
    rng r = rng_for(13);
    const int P = 16, Hq = 8, Hkv = 2, D = 64, B = 3;
    const int pre[3] = {5, 2 * P + 7, 20}, suf[3] = {3, 4, 2};
    problem p;
    problem_make(&p, &r, shape_of(Hq, Hkv, D, P), B, pre, suf);
    const int32_t NP = p.b.num_pages, MP = p.b.max_pages;
    const int64_t n = p.T * Hq * D, row = (int64_t)Hkv * D, pool = (int64_t)NP * P * row;
    float *out = falloc(n, NAN), *lse = falloc(p.T * Hq, NAN);
    double *ref = malloc(sizeof(double) * (size_t)n);
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      out, lse, 2), ATTN_OK);

    /* Prefill: each page sequence 1 reads set to NP (one past the pool). */
    for (int k = 0; k < (pre[1] + P - 1) / P; k++) {
        int32_t *e = &p.page_table[1 * MP + k], keep = *e;
        *e = NP;
        for (int64_t i = 0; i < n; i++) out[i] = NAN;
        ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache,
                                          p.v_cache, out, lse, 2), ATTN_EARG);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(isnan(out[i]), "page %d: out[%lld] written", k, (long long)i);
        ck_assert_int_eq(attn_prefill_ref(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache,
                                          p.v_cache, ref, NULL), ATTN_EARG);
        *e = INT32_MAX;
        ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache,
                                          p.v_cache, out, lse, 2), ATTN_EARG);
        *e = keep;
    }
    /* Past sequence 1's last page the entry is never read. */
    ck_assert_int_lt((pre[1] + P - 1) / P, MP);
    p.page_table[1 * MP + MP - 1] = NP;
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &p.b, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      out, lse, 2), ATTN_OK);
    /* The pool's size itself: too small for the ids, none, negative. */
    attn_batch bad = p.b;
    int32_t largest = 0;
    for (int i = 0; i < B; i++)
        for (int k = 0; k < (pre[i] + P - 1) / P; k++)
            if (p.page_table[i * MP + k] > largest) largest = p.page_table[i * MP + k];
    bad.num_pages = largest;
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &bad, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      out, lse, 2), ATTN_EARG);
    bad.num_pages = largest + 1;
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &bad, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      out, lse, 2), ATTN_OK);
    bad.num_pages = 0;
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &bad, p.q, p.k_new, p.v_new, p.k_cache, p.v_cache,
                                      out, lse, 2), ATTN_EARG);
    int32_t zeros[3] = {0, 0, 0};
    bad.prefix_lens = zeros; /* no prefix: no page read, an empty pool is fine */
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &bad, p.q, p.k_new, p.v_new, NULL, NULL, out, lse,
                                      2), ATTN_OK);
    bad.num_pages = -1;
    ck_assert_int_eq(attn_prefill_cpu(&p.s, &bad, p.q, p.k_new, p.v_new, NULL, NULL, out, lse,
                                      2), ATTN_EARG);

    /* Decode: the context of sequence 2 on a page id NP. */
    int32_t lens[3] = {pre[0], pre[1], pre[2]};
    float *od = falloc((int64_t)B * Hq * D, NAN);
    ck_assert_int_eq(attn_decode_cpu(&p.s, B, lens, p.page_table, MP, NP, p.q, p.k_cache,
                                     p.v_cache, od, NULL, 0, 2), ATTN_OK);
    int32_t keep = p.page_table[2 * MP + 1];
    p.page_table[2 * MP + 1] = NP;
    for (int64_t i = 0; i < (int64_t)B * Hq * D; i++) od[i] = NAN;
    ck_assert_int_eq(attn_decode_cpu(&p.s, B, lens, p.page_table, MP, NP, p.q, p.k_cache,
                                     p.v_cache, od, NULL, 3, 2), ATTN_EARG);
    for (int64_t i = 0; i < (int64_t)B * Hq * D; i++) ck_assert(isnan(od[i]));
    p.page_table[2 * MP + 1] = keep;
    ck_assert_int_eq(attn_decode_cpu(&p.s, B, lens, p.page_table, MP, -1, p.q, p.k_cache,
                                     p.v_cache, od, NULL, 0, 2), ATTN_EARG);

    /* Store: the last token's slot one past the pool, so a store that wrote
     * while it checked would already have changed the cache. */
    float *kc = malloc(sizeof(float) * (size_t)pool), *vc = malloc(sizeof(float) * (size_t)pool);
    memcpy(kc, p.k_cache, sizeof(float) * (size_t)pool);
    memcpy(vc, p.v_cache, sizeof(float) * (size_t)pool);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)p.T);
    for (int t = 0; t < p.T; t++) slots[t] = rng_int(&r, NP * P);
    slots[1] = -1; /* skipped, not an error */
    slots[p.T - 1] = NP * P;
    ck_assert_int_eq(attn_store_kv_cpu(&p.s, (int32_t)p.T, NP, slots, p.k_new, p.v_new,
                                       p.k_cache, p.v_cache), ATTN_EARG);
    ck_assert(memcmp(kc, p.k_cache, sizeof(float) * (size_t)pool) == 0);
    ck_assert(memcmp(vc, p.v_cache, sizeof(float) * (size_t)pool) == 0);
    slots[p.T - 1] = INT32_MAX;
    ck_assert_int_eq(attn_store_kv_cpu(&p.s, (int32_t)p.T, NP, slots, p.k_new, p.v_new,
                                       p.k_cache, p.v_cache), ATTN_EARG);
    ck_assert(memcmp(kc, p.k_cache, sizeof(float) * (size_t)pool) == 0);
    ck_assert_int_eq(attn_store_kv_cpu(&p.s, (int32_t)p.T, -1, slots, p.k_new, p.v_new,
                                       p.k_cache, p.v_cache), ATTN_EARG);
    slots[p.T - 1] = NP * P - 1; /* the pool's last slot is in */
    ck_assert_int_eq(attn_store_kv_cpu(&p.s, (int32_t)p.T, NP, slots, p.k_new, p.v_new,
                                       p.k_cache, p.v_cache), ATTN_OK);
    ck_assert(memcmp(p.k_cache + (int64_t)(NP * P - 1) * row, p.k_new + (p.T - 1) * row,
                     sizeof(float) * (size_t)row) == 0);
    free(kc);
    free(vc);
    free(slots);
    free(od);
    free(out);
    free(lse);
    free(ref);
    problem_free(&p);
}
END_TEST

static Suite *attention_suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_prefill_grid, 0, 2);
    tcase_add_test(tc, test_prefill_page256_and_odd_group);
    tcase_add_test(tc, test_prefill_large_scale);
    tcase_add_test(tc, test_prefill_huge_scores);
    tcase_add_test(tc, test_prefill_no_lse);
    tcase_add_test(tc, test_prefix_suffix_equals_concat);
    tcase_add_loop_test(tc, test_rows_bitwise_invariant, 0, 2);
    tcase_add_test(tc, test_merge_prefix_and_suffix_states);
    tcase_add_test(tc, test_merge_two_halves);
    tcase_add_test(tc, test_merge_empty_states);
    tcase_add_loop_test(tc, test_decode_splits, 0, 2);
    tcase_add_test(tc, test_store_kv_round_trip);
    tcase_add_test(tc, test_team_concurrent_and_fork);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_regress_merge_bad_arguments);
    tcase_add_test(tc, test_regress_q_starts_overflow);
    tcase_add_test(tc, test_pool_bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *env = getenv("ATTN_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 10)
                 : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
    int rc = check_run(attention_suite());
    if (rc != EXIT_SUCCESS)
        fprintf(stderr, "attention tests failed; replay with ATTN_TEST_SEED=%llu\n", g_seed);
    return rc;
}
