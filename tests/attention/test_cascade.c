/* test_cascade.c - cascade attention on the CPU: the planner (groups are the
 * deepest pages shared by their members, a sequence in at most one group,
 * the reads saved as large as any grouping of the batch can save, checked by
 * brute force on small batches) and the cascade results against plain
 * prefill / decode on batches with 1 to 3 levels of sharing.
 *
 * Fresh random inputs each run (seed printed; ATTN_TEST_SEED replays).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "attention.h"

static unsigned long long g_seed;

static unsigned long long rnd(unsigned long long *s)
{
    unsigned long long z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rnd_int(unsigned long long *s, int n) { return (int)(rnd(s) % (unsigned)n); }
static float rnd_unit(unsigned long long *s)
{
    return (float)((double)(rnd(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* ---- batches drawn from a random tree of pages ----------------------------- */

/* B sequences whose page lists walk a random tree `levels` deep: level k has
 * fan-out 1..3 and nodes of 1..3 pages; each sequence ends in 0..2 pages of
 * its own and a partial page (ctx = pages * P - 0..P-1 tokens). Page ids are
 * unique per node. */
typedef struct tree_batch {
    int B, max_pages, NP;
    int32_t *table, *lens;
} tree_batch;

static void tree_batch_make(tree_batch *t, unsigned long long *s, int B, int levels, int P)
{
    t->B = B;
    t->max_pages = levels * 3 + 3;
    t->table = malloc(sizeof(int32_t) * (size_t)(B * t->max_pages));
    t->lens = malloc(sizeof(int32_t) * (size_t)B);
    ck_assert_ptr_nonnull(t->table);
    /* node ids: path[k] chosen among fan-out children; a node's pages are
     * derived from (level, parent's pages, child index) through a small table */
    int next_page = 0;
    int node_pages[4][27][3], node_len[4][27];
    int fan[4];
    for (int k = 0; k < levels; k++) fan[k] = 1 + rnd_int(s, 3);
    int width = 1;
    for (int k = 0; k < levels; k++) {
        width *= fan[k];
        for (int n = 0; n < width; n++) {
            node_len[k][n] = 1 + rnd_int(s, 3);
            for (int j = 0; j < node_len[k][n]; j++) node_pages[k][n][j] = next_page++;
        }
    }
    for (int i = 0; i < B; i++) {
        int32_t *row = t->table + (int64_t)i * t->max_pages;
        int np = 0, node = 0;
        for (int k = 0; k < levels; k++) {
            node = node * fan[k] + rnd_int(s, fan[k]);
            for (int j = 0; j < node_len[k][node]; j++) row[np++] = node_pages[k][node][j];
        }
        int own = rnd_int(s, 3);
        for (int j = 0; j < own; j++) row[np++] = next_page++;
        for (int j = np; j < t->max_pages; j++) row[j] = -1;
        t->lens[i] = np * P - (np > 0 ? rnd_int(s, P) : 0);
    }
    t->NP = next_page;
}

static void tree_batch_free(tree_batch *t)
{
    free(t->table);
    free(t->lens);
}

/* ---- the planner ---------------------------------------------------------- */

static int lcp_of(const tree_batch *t, int P, const int *set, int n)
{
    int L = 1 << 30;
    for (int a = 0; a < n; a++) {
        int full = t->lens[set[a]] / P;
        if (full < L) L = full;
    }
    for (int a = 1; a < n; a++) {
        const int32_t *r0 = t->table + (int64_t)set[0] * t->max_pages;
        const int32_t *ra = t->table + (int64_t)set[a] * t->max_pages;
        int k = 0;
        while (k < L && r0[k] == ra[k]) k++;
        L = k;
    }
    return L;
}

/* Best saving over every partition of the B sequences (restricted growth
 * strings), groups of >= 2 sharing >= min_shared pages. */
static long long brute_best(const tree_batch *t, int P, int min_shared)
{
    int B = t->B, a[8] = {0}, best = 0;
    for (;;) {
        int groups = 0;
        for (int i = 0; i < B; i++)
            if (a[i] + 1 > groups) groups = a[i] + 1;
        int v = 0;
        for (int g = 0; g < groups; g++) {
            int set[8], n = 0;
            for (int i = 0; i < B; i++)
                if (a[i] == g) set[n++] = i;
            if (n < 2) continue;
            int L = lcp_of(t, P, set, n);
            if (L >= min_shared) v += (n - 1) * L;
        }
        if (v > best) best = v;
        /* next restricted growth string */
        int i = B - 1;
        for (; i > 0; i--) {
            int mx = 0;
            for (int j = 0; j < i; j++)
                if (a[j] > mx) mx = a[j];
            if (a[i] <= mx) {
                a[i]++;
                for (int j = i + 1; j < B; j++) a[j] = 0;
                break;
            }
        }
        if (i == 0) break;
    }
    return best;
}

/* Every structural promise of a plan. */
static void check_plan(const attn_cascade_plan *pl, const tree_batch *t, int P, int min_shared)
{
    int seen[64] = {0};
    long long saved = 0;
    ck_assert_int_eq(pl->num_seqs, t->B);
    ck_assert_int_eq(pl->group_starts[0], 0);
    for (int g = 0; g < pl->num_groups; g++) {
        int n = pl->group_starts[g + 1] - pl->group_starts[g];
        const int *set = pl->members + pl->group_starts[g];
        ck_assert_int_ge(n, 2);
        for (int k = 0; k < n; k++) {
            ck_assert_int_eq(seen[set[k]]++, 0); /* never in two groups */
            ck_assert_int_eq(pl->seq_shared[set[k]], pl->shared_pages[g]);
            if (k > 0) ck_assert_int_lt(set[k - 1], set[k]);
        }
        /* the group's shared pages are exactly its members' common pages */
        ck_assert_int_eq(pl->shared_pages[g], lcp_of(t, P, set, n));
        ck_assert_int_ge(pl->shared_pages[g], min_shared);
        saved += (long long)(n - 1) * pl->shared_pages[g];
    }
    for (int i = 0; i < t->B; i++)
        if (!seen[i]) ck_assert_int_eq(pl->seq_shared[i], 0);
    ck_assert_int_eq(saved, pl->pages_saved);
}

START_TEST(test_plan_hand_case)
{
    /* P = 4. Full pages: s0 4, s1 4, s2 3 (14 tokens), s3 2, s4 2, s5 4. */
    const int P = 4, MP = 4;
    int32_t table[6][4] = {{5, 6, 7, 8}, {5, 6, 7, 9}, {5, 6, 7, 10}, {5, 11, -1, -1},
                           {12, 13, -1, -1}, {5, 6, 7, 8}};
    int32_t lens[6] = {16, 16, 14, 8, 8, 16};
    attn_cascade_plan pl;
    ck_assert_int_eq(attn_cascade_plan_build(6, lens, &table[0][0], MP, P, 1, &pl), ATTN_OK);
    /* {0, 1, 2, 5} share a b c: 3 x 3 saved beats {0, 5} alone (4) or adding s3 (4 x 1) */
    ck_assert_int_eq(pl.num_groups, 1);
    ck_assert_int_eq(pl.group_starts[1], 4);
    const int want[4] = {0, 1, 2, 5};
    for (int k = 0; k < 4; k++) ck_assert_int_eq(pl.members[k], want[k]);
    ck_assert_int_eq(pl.shared_pages[0], 3);
    ck_assert_int_eq(pl.pages_saved, 9);
    ck_assert_int_eq(pl.seq_shared[3], 0);
    ck_assert_int_eq(pl.seq_shared[4], 0);
    attn_cascade_plan_free(&pl);

    /* At least 4 shared pages: only the two identical tables qualify. */
    ck_assert_int_eq(attn_cascade_plan_build(6, lens, &table[0][0], MP, P, 4, &pl), ATTN_OK);
    ck_assert_int_eq(pl.num_groups, 1);
    ck_assert_int_eq(pl.members[0], 0);
    ck_assert_int_eq(pl.members[1], 5);
    ck_assert_int_eq(pl.shared_pages[0], 4);
    attn_cascade_plan_free(&pl);

    /* Errors name the argument and leave an empty plan. */
    int32_t bad[1] = {-1};
    ck_assert_int_eq(attn_cascade_plan_build(1, bad, &table[0][0], MP, P, 1, &pl), ATTN_EARG);
    ck_assert_int_eq(pl.num_groups, 0);
    ck_assert_ptr_null(pl.members);
    int32_t too_long[1] = {17};
    ck_assert_int_eq(attn_cascade_plan_build(1, too_long, &table[0][0], MP, P, 1, &pl), ATTN_EARG);
    ck_assert_int_eq(attn_cascade_plan_build(0, NULL, NULL, 0, P, 1, &pl), ATTN_OK);
    ck_assert_int_eq(pl.num_groups, 0);
    attn_cascade_plan_free(&pl);
}
END_TEST

START_TEST(test_plan_random_vs_brute_force)
{
    unsigned long long s = g_seed * 31 + 7;
    for (int rep = 0; rep < 300; rep++) {
        tree_batch t;
        int P = 1 + rnd_int(&s, 4), B = 1 + rnd_int(&s, 7), levels = 1 + rnd_int(&s, 3);
        int min_shared = 1 + rnd_int(&s, 3);
        tree_batch_make(&t, &s, B, levels, P);
        attn_cascade_plan pl;
        ck_assert_int_eq(attn_cascade_plan_build(B, t.lens, t.table, t.max_pages, P, min_shared, &pl),
                         ATTN_OK);
        check_plan(&pl, &t, P, min_shared);
        long long best = brute_best(&t, P, min_shared);
        if (pl.pages_saved != best)
            ck_abort_msg("seed %llu rep %d: plan saves %lld pages, best partition %lld", g_seed, rep,
                         (long long)pl.pages_saved, best);
        attn_cascade_plan_free(&pl);
        tree_batch_free(&t);
    }
}
END_TEST

/* ---- results against plain attention ---------------------------------------- */

static double max_rel(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= num)) num = d; /* NaN propagates */
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / (den > 0 ? den : 1);
}

static float *rnd_buf(unsigned long long *s, int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = rnd_unit(s);
    return p;
}

static float *nan_buf(int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static const int shapes[][4] = {{4, 4, 64, 4}, {8, 2, 128, 16}, {8, 1, 64, 1}, {4, 2, 64, 3}};

START_TEST(test_prefill_cascade_equals_plain)
{
    unsigned long long s = g_seed * 131 + (unsigned)_i;
    const int *sh = shapes[_i % 4];
    const int levels = 1 + _i % 3, P = sh[3];
    attn_shape shape = {sh[0], sh[1], sh[2], P, 1.0f / sqrtf((float)sh[2])};
    tree_batch t;
    const int B = 2 + rnd_int(&s, 10);
    tree_batch_make(&t, &s, B, levels, P);
    int32_t *qs = malloc(sizeof(int32_t) * (size_t)(B + 1));
    qs[0] = 0;
    for (int i = 0; i < B; i++) qs[i + 1] = qs[i] + 1 + rnd_int(&s, 40);
    const int64_t T = qs[B], Hq = sh[0], D = sh[2], row = (int64_t)sh[1] * D;
    float *q = rnd_buf(&s, T * Hq * D), *kn = rnd_buf(&s, T * row), *vn = rnd_buf(&s, T * row);
    float *kc = rnd_buf(&s, (int64_t)t.NP * P * row), *vc = rnd_buf(&s, (int64_t)t.NP * P * row);
    attn_batch b = {.num_seqs = B, .max_pages = t.max_pages, .q_starts = qs,
                    .prefix_lens = t.lens, .page_table = t.table, .max_suffix = 0,
                    .num_pages = t.NP};
    float *o_ref = nan_buf(T * Hq * D), *l_ref = nan_buf(T * Hq);
    float *o = nan_buf(T * Hq * D), *l = nan_buf(T * Hq);
    ck_assert_int_eq(attn_prefill_cpu(&shape, &b, q, kn, vn, kc, vc, o_ref, l_ref, 2), ATTN_OK);
    attn_cascade_plan pl;
    ck_assert_int_eq(attn_cascade_plan_build(B, t.lens, t.table, t.max_pages, P, 1, &pl), ATTN_OK);
    check_plan(&pl, &t, P, 1);
    ck_assert_int_eq(attn_prefill_cascade_cpu(&shape, &b, &pl, q, kn, vn, kc, vc, o, l, 2), ATTN_OK);
    double eo = max_rel(o, o_ref, T * Hq * D), el = max_rel(l, l_ref, T * Hq);
    if (!(eo <= 1e-5 && el <= 1e-5))
        ck_abort_msg("seed %llu case %d (%d groups): out err %.3g, lse err %.3g", g_seed, _i,
                     pl.num_groups, eo, el);
    /* lse = NULL works too and gives the same rows */
    float *o2 = nan_buf(T * Hq * D);
    ck_assert_int_eq(attn_prefill_cascade_cpu(&shape, &b, &pl, q, kn, vn, kc, vc, o2, NULL, 1),
                     ATTN_OK);
    ck_assert(max_rel(o2, o, T * Hq * D) <= 1e-6);
    /* a plan for another batch is refused */
    attn_batch b1 = b;
    b1.num_seqs = B - 1;
    ck_assert_int_eq(attn_prefill_cascade_cpu(&shape, &b1, &pl, q, kn, vn, kc, vc, o, l, 1),
                     ATTN_EARG);
    attn_cascade_plan_free(&pl);
    free(o2);
    free(o);
    free(l);
    free(o_ref);
    free(l_ref);
    free(q);
    free(kn);
    free(vn);
    free(kc);
    free(vc);
    free(qs);
    tree_batch_free(&t);
}
END_TEST

START_TEST(test_decode_cascade_equals_plain)
{
    unsigned long long s = g_seed * 257 + (unsigned)_i;
    const int *sh = shapes[_i % 4];
    const int levels = 1 + _i % 3, P = sh[3];
    attn_shape shape = {sh[0], sh[1], sh[2], P, 1.0f / sqrtf((float)sh[2])};
    tree_batch t;
    const int B = 2 + rnd_int(&s, 16);
    tree_batch_make(&t, &s, B, levels, P);
    for (int i = 0; i < B; i++)
        if (t.lens[i] == 0) t.lens[i] = 1; /* decode: the current token is in pages */
    const int64_t Hq = sh[0], D = sh[2], row = (int64_t)sh[1] * D;
    float *q = rnd_buf(&s, B * Hq * D);
    float *kc = rnd_buf(&s, (int64_t)t.NP * P * row), *vc = rnd_buf(&s, (int64_t)t.NP * P * row);
    float *o_ref = nan_buf(B * Hq * D), *l_ref = nan_buf(B * Hq);
    float *o = nan_buf(B * Hq * D), *l = nan_buf(B * Hq);
    ck_assert_int_eq(attn_decode_cpu(&shape, B, t.lens, t.table, t.max_pages, t.NP, q, kc, vc,
                                     o_ref, l_ref, 0, 2), ATTN_OK);
    attn_cascade_plan pl;
    ck_assert_int_eq(attn_cascade_plan_build(B, t.lens, t.table, t.max_pages, P, 1, &pl), ATTN_OK);
    ck_assert_int_eq(attn_decode_cascade_cpu(&shape, B, t.lens, t.table, t.max_pages, t.NP, &pl, q,
                                             kc, vc, o, l, 2), ATTN_OK);
    double eo = max_rel(o, o_ref, B * Hq * D), el = max_rel(l, l_ref, B * Hq);
    if (!(eo <= 1e-5 && el <= 1e-5))
        ck_abort_msg("seed %llu case %d (%d groups): out err %.3g, lse err %.3g", g_seed, _i,
                     pl.num_groups, eo, el);
    attn_cascade_plan_free(&pl);
    free(o);
    free(l);
    free(o_ref);
    free(l_ref);
    free(q);
    free(kc);
    free(vc);
    tree_batch_free(&t);
}
END_TEST

/* Level 1 alone: each stacked row sees the whole shared prefix, nothing else,
 * the same as a decode of that row over the same pages. */
START_TEST(test_shared_level_is_unmasked)
{
    unsigned long long s = g_seed * 977;
    attn_shape shape = {8, 2, 64, 4, 0.125f};
    const int rows = 37, np = 9, len = np * 4 - 1, NP = 12;
    const int64_t Hq = 8, D = 64, row = 2 * 64;
    int32_t pages[9], qs[2] = {0, rows}, plen[1] = {len};
    for (int k = 0; k < np; k++) pages[k] = (k * 5) % NP;
    float *q = rnd_buf(&s, rows * Hq * D);
    float *kc = rnd_buf(&s, (int64_t)NP * 4 * row), *vc = rnd_buf(&s, (int64_t)NP * 4 * row);
    attn_batch g = {.num_seqs = 1, .max_pages = np, .q_starts = qs, .prefix_lens = plen,
                    .page_table = pages, .num_pages = NP};
    float *o = nan_buf(rows * Hq * D), *l = nan_buf(rows * Hq);
    ck_assert_int_eq(attn_prefill_shared_cpu(&shape, &g, q, kc, vc, o, l, 2), ATTN_OK);
    int32_t *table = malloc(sizeof(int32_t) * rows * np), lens[37];
    for (int r = 0; r < rows; r++) {
        memcpy(table + r * np, pages, sizeof pages);
        lens[r] = len;
    }
    float *o_ref = nan_buf(rows * Hq * D), *l_ref = nan_buf(rows * Hq);
    ck_assert_int_eq(attn_decode_cpu(&shape, rows, lens, table, np, NP, q, kc, vc, o_ref, l_ref, 1, 1),
                     ATTN_OK);
    ck_assert(max_rel(o, o_ref, rows * Hq * D) <= 1e-5);
    ck_assert(max_rel(l, l_ref, rows * Hq) <= 1e-5);
    /* a page outside the pool is refused before any work */
    pages[3] = NP;
    ck_assert_int_eq(attn_prefill_shared_cpu(&shape, &g, q, kc, vc, o, l, 1), ATTN_EARG);
    free(table);
    free(o);
    free(l);
    free(o_ref);
    free(l_ref);
    free(q);
    free(kc);
    free(vc);
}
END_TEST

static Suite *cascade_suite(void)
{
    Suite *su = suite_create("cascade");
    TCase *tc = tcase_create("cascade");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_plan_hand_case);
    tcase_add_test(tc, test_plan_random_vs_brute_force);
    tcase_add_loop_test(tc, test_prefill_cascade_equals_plain, 0, 12);
    tcase_add_loop_test(tc, test_decode_cascade_equals_plain, 0, 12);
    tcase_add_test(tc, test_shared_level_is_unmasked);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    const char *env = getenv("ATTN_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 10) : (unsigned long long)time(NULL);
    printf("cascade tests: seed %llu (ATTN_TEST_SEED to replay)\n", g_seed);
    return check_run(cascade_suite());
}
