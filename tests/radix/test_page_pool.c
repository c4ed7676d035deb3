/* test_page_pool.c - the page pool against a trivially correct model: page
 * states, and for the free extents the maximal runs of free pages the model
 * sees (allocation fit, coalescing, the free log). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "page_pool.h"
#include "rkv_core.h"
#ifdef RKV_FAULT_INJECTION
#include "fault_alloc.h"
#endif

static void pool_ok(const page_pool *p, int step)
{
    char err[256];
    ck_assert_msg(page_pool_check(p, err, sizeof err) == RKV_OK, "step %d: %s", step, err);
}

START_TEST(test_alloc_all_or_nothing)
{
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, 8, 4), RKV_OK);
    int32_t out[16];
    ck_assert_int_eq(page_pool_alloc(&p, 5, out), RKV_OK);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(out[i], i);
    ck_assert_int_eq(page_pool_alloc(&p, 4, out + 5), RKV_ENOSPC);
    ck_assert_int_eq(page_pool_num_free(&p), 3);
    ck_assert_int_eq(p.num_inflight, 5);
    ck_assert_int_eq(page_pool_check(&p, NULL, 0), RKV_OK);
    page_pool_destroy(&p);
}
END_TEST

START_TEST(test_bad_free_changes_nothing)
{
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, 4, 1), RKV_OK);
    int32_t out[4];
    ck_assert_int_eq(page_pool_alloc(&p, 2, out), RKV_OK);
    int32_t bad[3] = {out[0], 3, out[1]}; /* page 3 is free: whole batch rejected */
    ck_assert_int_eq(page_pool_free(&p, bad, 3), RKV_EINVAL);
    ck_assert_int_eq(p.num_inflight, 2);
    int32_t dup[2] = {out[0], out[0]};
    ck_assert_int_eq(page_pool_free(&p, dup, 2), RKV_EINVAL);
    int32_t oob[1] = {7};
    ck_assert_int_eq(page_pool_free(&p, oob, 1), RKV_EINVAL);
    ck_assert_int_eq(page_pool_check(&p, NULL, 0), RKV_OK);
    ck_assert_int_eq(page_pool_free(&p, out, 2), RKV_OK);
    ck_assert_int_eq(page_pool_num_free(&p), 4);
    page_pool_destroy(&p);
    ck_assert_int_eq(page_pool_init(&p, 4, 0), RKV_EINVAL);
    ck_assert_int_eq(page_pool_init(&p, -1, 4), RKV_EINVAL);
}
END_TEST

START_TEST(test_random_against_model)
{
    enum { N = 64 };
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, N, 16), RKV_OK);
    uint8_t model[N] = {0}; /* PAGE_* per page */
    srand(12345);
    for (int it = 0; it < 20000; it++) {
        int op = rand() % 4;
        int32_t buf[N];
        int n = 0;
        if (op == 0) {
            int want = rand() % 9;
            int nfree = 0;
            for (int i = 0; i < N; i++) nfree += model[i] == PAGE_FREE;
            rkv_status st = page_pool_alloc(&p, want, buf);
            if (want > nfree) {
                ck_assert_int_eq(st, RKV_ENOSPC);
            } else {
                ck_assert_int_eq(st, RKV_OK);
                for (int i = 0; i < want; i++) {
                    ck_assert_msg(model[buf[i]] == PAGE_FREE, "step %d: allocated page %d not free", it, buf[i]);
                    model[buf[i]] = PAGE_INFLIGHT;
                }
            }
        } else {
            uint8_t from = op == 2 ? PAGE_CACHED : PAGE_INFLIGHT;
            for (int i = 0; i < N && n < 5; i++)
                if (model[(i * 7 + it) % N] == from || (op == 1 && model[(i * 7 + it) % N] != PAGE_FREE))
                    buf[n++] = (i * 7 + it) % N;
            if (op == 1) {
                ck_assert_int_eq(page_pool_free(&p, buf, n), RKV_OK);
                for (int i = 0; i < n; i++) model[buf[i]] = PAGE_FREE;
            } else if (op == 2) {
                ck_assert_int_eq(page_pool_release(&p, buf, n), RKV_OK);
                for (int i = 0; i < n; i++) model[buf[i]] = PAGE_INFLIGHT;
            } else {
                ck_assert_int_eq(page_pool_adopt(&p, buf, n), RKV_OK);
                for (int i = 0; i < n; i++) model[buf[i]] = PAGE_CACHED;
            }
        }
        char err[256];
        ck_assert_msg(page_pool_check(&p, err, sizeof err) == RKV_OK, "%s", err);
        /* One assertion per step: Check records every assertion, and 64 per
         * step would dominate the run time. */
        int cnt[3] = {0, 0, 0}, first_diff = -1;
        for (int i = 0; i < N; i++) {
            if (page_pool_state(&p, i) != model[i] && first_diff < 0) first_diff = i;
            cnt[model[i]]++;
        }
        ck_assert_msg(first_diff < 0, "step %d: page %d state %d, model %d", it, first_diff,
                      first_diff < 0 ? 0 : page_pool_state(&p, first_diff), first_diff < 0 ? 0 : model[first_diff]);
        ck_assert_int_eq(cnt[0], p.num_free);
        ck_assert_int_eq(cnt[1], p.num_inflight);
        ck_assert_int_eq(cnt[2], p.num_cached);
    }
    page_pool_destroy(&p);
}
END_TEST

/* ---- free extents ------------------------------------------------------ */

/* The model's maximal free runs: longest, and whether one has exactly n pages. */
static void model_runs(const uint8_t *model, int32_t N, int32_t n, int32_t *longest, int *exact,
                       int32_t *nruns)
{
    *longest = 0;
    *exact = 0;
    *nruns = 0;
    for (int32_t i = 0; i < N;) {
        if (model[i] != PAGE_FREE) {
            i++;
            continue;
        }
        int32_t j = i;
        while (j < N && model[j] == PAGE_FREE) j++;
        if (j - i > *longest) *longest = j - i;
        if (j - i == n) *exact = 1;
        (*nruns)++;
        i = j;
    }
}

/* Length of the maximal free run of the model around page pg. */
static int32_t model_run_at(const uint8_t *model, int32_t N, int32_t pg)
{
    int32_t a = pg, b = pg;
    while (a > 0 && model[a - 1] == PAGE_FREE) a--;
    while (b < N && model[b] == PAGE_FREE) b++;
    return b - a;
}

/* The pages of runs[0..n), first to last, into out (room for cap); their
 * number. Fails on a run the log should never hold: empty, or, with no mark
 * taken inside the window read, one that continues the run before it (the
 * log extends that one instead). */
static int32_t runs_pages(const page_run *runs, int32_t n, int32_t *out, int32_t cap)
{
    int32_t np = 0;
    for (int32_t k = 0; k < n; k++) {
        ck_assert_int_ge(runs[k].count, 1);
        ck_assert_msg(k == 0 || runs[k].first != runs[k - 1].first + runs[k - 1].count,
                      "log runs %d and %d: [%d, +%d) continues [%d, +%d)", k - 1, k,
                      runs[k].first, runs[k].count, runs[k - 1].first, runs[k - 1].count);
        for (int32_t i = 0; i < runs[k].count; i++) {
            ck_assert_int_lt(np, cap);
            out[np++] = runs[k].first + i;
        }
    }
    return np;
}

/* Seeded churn: requests of 1..48 pages allocated, some cached, freed whole,
 * as runs or page by page in any order. After every step the pool's check
 * (extents = maximal free runs, tagged, listed once in their class) and:
 *   - an allocation is one ascending run whenever a free extent can hold it,
 *     and an exact fit (up to the exact classes) takes an extent of exactly
 *     its size rather than cutting a longer one;
 *   - it never comes out in more runs than there are free extents;
 *   - the free log since a mark lists exactly the pages freed, in order, and
 *     a mark older than the last allocation is refused. */
START_TEST(test_extents_against_model)
{
    enum { N = 512, MAXREQ = 64, MAXN = 48 };
    for (uint64_t seed = 1; seed <= 4; seed++) {
        page_pool p;
        ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
        uint8_t model[N] = {0};
        int32_t req[MAXREQ][MAXN], req_n[MAXREQ];
        int32_t nreq = 0;
        uint64_t rng = seed * 0x1234567ULL;
        uint64_t mark = page_pool_free_mark(&p);
        int32_t log[N], nlog = 0; /* the model's frees since mark */
        int stale_mark_checked = 0;
        for (int step = 0; step < 6000; step++) {
            uint64_t r = rkv_splitmix64_next(&rng);
            int op = (int)(r % 8);
            if (op < 4 && nreq < MAXREQ) { /* allocate a request */
                int32_t n = 1 + (int32_t)((r >> 8) % MAXN);
                int32_t nfree = 0, longest, nruns;
                int exact;
                for (int32_t i = 0; i < N; i++) nfree += model[i] == PAGE_FREE;
                model_runs(model, N, n, &longest, &exact, &nruns);
                int32_t *out = req[nreq];
                rkv_status st = page_pool_alloc(&p, n, out);
                if (n > nfree) {
                    ck_assert_int_eq(st, RKV_ENOSPC);
                } else {
                    ck_assert_int_eq(st, RKV_OK);
                    int32_t runs = 1;
                    for (int32_t i = 1; i < n; i++) runs += out[i] != out[i - 1] + 1;
                    if (longest >= n) {
                        ck_assert_msg(runs == 1, "seed %llu step %d: %d pages in %d runs, a free "
                                      "extent of %d pages held them", (unsigned long long)seed,
                                      step, n, runs, longest);
                        int32_t from = model_run_at(model, N, out[0]);
                        ck_assert_msg(!(exact && n <= PAGE_CLASS_EXACT) || from == n,
                                      "seed %llu step %d: %d pages cut from an extent of %d, "
                                      "one of exactly %d was free", (unsigned long long)seed, step,
                                      n, from, n);
                    }
                    ck_assert_int_le(runs, nruns);
                    for (int32_t i = 0; i < n; i++) {
                        ck_assert_msg(model[out[i]] == PAGE_FREE, "page %d handed out twice", out[i]);
                        model[out[i]] = PAGE_INFLIGHT;
                    }
                    req_n[nreq++] = n;
                    /* the mark before the allocation is spent */
                    const page_run *got;
                    int32_t ng;
                    if (!stale_mark_checked && mark < page_pool_free_mark(&p)) {
                        ck_assert_int_eq(page_pool_freed_since(&p, mark, &got, &ng), RKV_EINVAL);
                        stale_mark_checked = 1;
                    }
                    mark = page_pool_free_mark(&p);
                    nlog = 0;
                }
            } else if (op < 5 && nreq > 0) { /* a cache adopts a request's pages */
                int32_t k = (int32_t)((r >> 8) % (uint64_t)nreq);
                if (model[req[k][0]] == PAGE_INFLIGHT) {
                    ck_assert_int_eq(page_pool_adopt(&p, req[k], req_n[k]), RKV_OK);
                    for (int32_t i = 0; i < req_n[k]; i++) model[req[k][i]] = PAGE_CACHED;
                }
            } else if (nreq > 0) { /* free a request: whole list, as runs, or shuffled */
                int32_t k = (int32_t)((r >> 8) % (uint64_t)nreq), n = req_n[k];
                int32_t *pg = req[k];
                int how = (int)((r >> 20) % 3);
                if (how == 2) /* any order: a Fisher-Yates shuffle */
                    for (int32_t i = n - 1; i > 0; i--) {
                        int32_t j = (int32_t)(rkv_splitmix64_next(&rng) % (uint64_t)(i + 1));
                        int32_t x = pg[i];
                        pg[i] = pg[j];
                        pg[j] = x;
                    }
                if (how == 1) {
                    for (int32_t i = 0; i < n;) {
                        int32_t j = i + 1;
                        while (j < n && pg[j] == pg[j - 1] + 1) j++;
                        ck_assert_int_eq(page_pool_free_run(&p, pg[i], j - i), RKV_OK);
                        i = j;
                    }
                } else {
                    ck_assert_int_eq(page_pool_free(&p, pg, n), RKV_OK);
                }
                for (int32_t i = 0; i < n; i++) {
                    model[pg[i]] = PAGE_FREE;
                    log[nlog++] = pg[i];
                }
                memcpy(req[k], req[nreq - 1], sizeof req[k]);
                req_n[k] = req_n[nreq - 1];
                nreq--;
            }
            pool_ok(&p, step);
            int cnt[3] = {0, 0, 0}, first_diff = -1;
            for (int32_t i = 0; i < N; i++) {
                if (page_pool_state(&p, i) != model[i] && first_diff < 0) first_diff = i;
                cnt[model[i]]++;
            }
            ck_assert_msg(first_diff < 0, "seed %llu step %d: page %d state differs from the model",
                          (unsigned long long)seed, step, first_diff);
            ck_assert_int_eq(cnt[0], p.num_free);
            const page_run *got;
            int32_t ng, pages[N];
            ck_assert_int_eq(page_pool_freed_since(&p, mark, &got, &ng), RKV_OK);
            ck_assert_int_eq(runs_pages(got, ng, pages, N), nlog);
            ck_assert_msg(!nlog || !memcmp(pages, log, sizeof(int32_t) * (size_t)nlog),
                          "step %d: free log out of order", step);
        }
        ck_assert_int_eq(stale_mark_checked, 1);
        for (int32_t k = 0; k < nreq; k++) ck_assert_int_eq(page_pool_free(&p, req[k], req_n[k]), RKV_OK);
        pool_ok(&p, -1);
        page_pool_fold(&p);
        ck_assert_int_eq(p.num_extents, 1); /* everything merged back into one */
        page_pool_destroy(&p);
    }
}
END_TEST

/* The order pages are handed out in, against a model of the class lists as
 * plain lists kept eagerly (an extent leaving a class is taken out at once,
 * one entering goes first), as page_pool.h states the policy: the pool keeps
 * its lists lazily, and this pins that the laziness never shows. The model:
 *   - a freed run merges with the extents on both sides, which leave their
 *     lists (left first), and the merged extent goes first in its class;
 *   - alloc(n): the first of the first FIT_SCAN extents of n's class that
 *     holds n, else the first extent of the next non-empty class; when none
 *     holds n, the longest of the first FIT_SCAN of the highest class, whole,
 *     and again; a cut extent's rest goes first in its (new) class. */
enum { EQ_N = 4096, EQ_SCAN = 8, EQ_MAXEXT = EQ_N / 2 + 1 };
typedef struct {
    int32_t first[EQ_MAXEXT], count[EQ_MAXEXT]; /* a list, head first */
    int32_t n;
} eq_list;

static int32_t eq_class(int32_t c)
{
    if (c <= PAGE_CLASS_EXACT) return c - 1;
    int b = 31 - __builtin_clz((uint32_t)c);
    return PAGE_CLASS_EXACT + (b - 5) * 4 + ((c >> (b - 2)) & 3);
}

static void eq_push(eq_list *cls, int32_t f, int32_t c)
{
    eq_list *l = &cls[eq_class(c)];
    memmove(l->first + 1, l->first, sizeof(int32_t) * (size_t)l->n);
    memmove(l->count + 1, l->count, sizeof(int32_t) * (size_t)l->n);
    l->first[0] = f;
    l->count[0] = c;
    l->n++;
}

static void eq_take(eq_list *cls, int32_t k, int32_t i)
{
    eq_list *l = &cls[k];
    memmove(l->first + i, l->first + i + 1, sizeof(int32_t) * (size_t)(l->n - i - 1));
    memmove(l->count + i, l->count + i + 1, sizeof(int32_t) * (size_t)(l->n - i - 1));
    l->n--;
}

/* Take the extent whose first (last = 0) or last (last = 1) page is pg out of
 * its list; returns its first page and sets *count, or -1. */
static int32_t eq_unlink(eq_list *cls, int32_t pg, int last, int32_t *count)
{
    for (int32_t k = 0; k < PAGE_CLASSES; k++)
        for (int32_t i = 0; i < cls[k].n; i++) {
            int32_t f = cls[k].first[i], c = cls[k].count[i];
            if ((last ? f + c - 1 : f) != pg) continue;
            eq_take(cls, k, i);
            *count = c;
            return f;
        }
    return -1;
}

static void eq_free(eq_list *cls, int32_t g, int32_t c)
{
    int32_t f = g, end = g + c, lc, rc;
    int32_t lf = g > 0 ? eq_unlink(cls, g - 1, 1, &lc) : -1;
    if (lf >= 0) f = lf;
    if (eq_unlink(cls, g + c, 0, &rc) >= 0) end = g + c + rc;
    eq_push(cls, f, end - f);
}

static void eq_alloc(eq_list *cls, int32_t n, int32_t *out)
{
    for (int32_t got = 0; got < n;) {
        int32_t want = n - got, k = eq_class(want), ek = -1, ei = -1;
        for (int32_t i = 0; i < cls[k].n && i < EQ_SCAN && ei < 0; i++)
            if (cls[k].count[i] >= want) ek = k, ei = i;
        for (int32_t u = k + 1; u < PAGE_CLASSES && ei < 0; u++)
            if (cls[u].n) ek = u, ei = 0;
        int32_t take = want;
        if (ei < 0) {
            for (ek = PAGE_CLASSES - 1; !cls[ek].n; ek--) {}
            ei = 0;
            for (int32_t i = 1; i < cls[ek].n && i < EQ_SCAN; i++)
                if (cls[ek].count[i] > cls[ek].count[ei]) ei = i;
            take = cls[ek].count[ei];
        }
        int32_t f = cls[ek].first[ei], c = cls[ek].count[ei];
        eq_take(cls, ek, ei);
        if (c > take) eq_push(cls, f + take, c - take);
        for (int32_t i = 0; i < take; i++) out[got + i] = f + i;
        got += take;
    }
}

START_TEST(test_order_as_eager_lists)
{
    static eq_list cls[PAGE_CLASSES];
    static int32_t held[EQ_N], got[EQ_N], want[EQ_N];
    for (uint64_t seed = 1; seed <= 3; seed++) {
        memset(cls, 0, sizeof cls);
        page_pool p;
        ck_assert_int_eq(page_pool_init(&p, EQ_N, 1), RKV_OK);
        eq_push(cls, 0, EQ_N);
        int32_t nheld = 0; /* pages in flight, in allocation order */
        uint64_t rng = seed * 0x9e3779b9ULL;
        for (int step = 0; step < 3000; step++) {
            uint64_t r = rkv_splitmix64_next(&rng);
            if (r % 5 < 2 || nheld == 0) { /* allocate: mostly short, now and then long */
                int32_t n = 1 + (int32_t)((r >> 8) % ((r >> 40) % 8 ? 120 : 600));
                if (n > p.num_free) continue;
                ck_assert_int_eq(page_pool_alloc(&p, n, got), RKV_OK);
                eq_alloc(cls, n, want);
                ck_assert_msg(!memcmp(got, want, sizeof(int32_t) * (size_t)n),
                              "seed %llu step %d: alloc(%d) handed out %d.., the eager lists %d..",
                              (unsigned long long)seed, step, n, got[0], want[0]);
                memcpy(held + nheld, got, sizeof(int32_t) * (size_t)n);
                nheld += n;
            } else { /* free a stretch of held pages at a random place, as one
                      * call or (half the time) as one free_run per run */
                int32_t at = (int32_t)((r >> 8) % (uint64_t)nheld);
                int32_t n = 1 + (int32_t)((r >> 24) % 64);
                if (n > nheld - at) n = nheld - at;
                if ((r >> 50) & 1) ck_assert_int_eq(page_pool_free(&p, held + at, n), RKV_OK);
                for (int32_t i = 0; i < n;) { /* as the pool reads a list: stretches */
                    int32_t j = i + 1;
                    while (j < n && held[at + j] == held[at + j - 1] + 1) j++;
                    if (!((r >> 50) & 1))
                        ck_assert_int_eq(page_pool_free_run(&p, held[at + i], j - i), RKV_OK);
                    eq_free(cls, held[at + i], j - i);
                    i = j;
                }
                memmove(held + at, held + at + n, sizeof(int32_t) * (size_t)(nheld - at - n));
                nheld -= n;
            }
            if (step % 64 == 0) pool_ok(&p, step); /* runs pending, if the step freed */
        }
        pool_ok(&p, -1);
        page_pool_destroy(&p);
    }
}
END_TEST

/* Regression: a run freed before other pages must still come back as a run.
 * The free stack this pool replaced handed out the pages freed last first, so
 * a request after an eviction that freed a run and then single pages got the
 * single pages: scattered ids, one stored run per page. */
START_TEST(test_freed_run_survives_later_frees)
{
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, 16, 1), RKV_OK);
    int32_t all[16], got[4];
    ck_assert_int_eq(page_pool_alloc(&p, 16, all), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&p, 4, 4), RKV_OK);
    int32_t singles[3] = {12, 0, 9};
    ck_assert_int_eq(page_pool_free(&p, singles, 3), RKV_OK);
    ck_assert_int_eq(page_pool_alloc(&p, 4, got), RKV_OK);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(got[i], 4 + i);
    /* and a single page takes a single free page, not a piece of a run */
    ck_assert_int_eq(page_pool_free_run(&p, 4, 4), RKV_OK);
    ck_assert_int_eq(page_pool_alloc(&p, 1, got), RKV_OK);
    ck_assert_int_ne(got[0], 4);
    pool_ok(&p, 0);
    page_pool_destroy(&p);
}
END_TEST

/* Freeing merges with the free extents on both sides, in any free order. */
START_TEST(test_coalescing)
{
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, 10, 1), RKV_OK);
    int32_t all[10];
    ck_assert_int_eq(page_pool_alloc(&p, 10, all), RKV_OK);
    ck_assert_int_eq(p.num_extents, 0);
    int32_t a[2] = {3, 2}, b[2] = {6, 7}, mid[2] = {5, 4};
    ck_assert_int_eq(page_pool_free(&p, a, 2), RKV_OK);
    ck_assert_int_eq(page_pool_free(&p, b, 2), RKV_OK);
    page_pool_fold(&p);
    ck_assert_int_eq(p.num_extents, 2);
    ck_assert_int_eq(page_pool_free(&p, mid, 2), RKV_OK); /* bridges [2,4) and [6,8) */
    page_pool_fold(&p);
    ck_assert_int_eq(p.num_extents, 1);
    ck_assert_int_eq(p.ext[p.head[5]].first, 2); /* one extent of 6 pages: class 5 */
    ck_assert_int_eq(p.ext[p.head[5]].count, 6);
    pool_ok(&p, 0);
    int32_t out[6];
    ck_assert_int_eq(page_pool_alloc(&p, 6, out), RKV_OK);
    for (int i = 0; i < 6; i++) ck_assert_int_eq(out[i], 2 + i);
    pool_ok(&p, 1);
    page_pool_destroy(&p);
}
END_TEST

/* The pool's own memory follows its free extents, not its pages: a full
 * pool and an empty one hold the state bits and the first index tables; a
 * burst of scattered frees grows the index, and the allocations after it
 * give the growth back (while handing out the same pages as ever). */
START_TEST(test_memory_follows_extents)
{
    enum { N = 1 << 16 };
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
    uint64_t base = page_pool_host_bytes(&p);
    ck_assert_uint_eq(base, page_pool_init_bytes(N));
    ck_assert_uint_le(base, (uint64_t)N * PAGE_POOL_BITS_PER_PAGE / 8 + 4096);
    int32_t *all = malloc(sizeof(int32_t) * N);
    ck_assert_ptr_nonnull(all);
    ck_assert_int_eq(page_pool_alloc(&p, N, all), RKV_OK);
    /* every other page: N / 2 one-page extents */
    for (int32_t i = 0; i < N; i += 2) ck_assert_int_eq(page_pool_free_run(&p, i, 1), RKV_OK);
    pool_ok(&p, 0); /* with every run pending */
    page_pool_fold(&p);
    ck_assert_int_eq(p.num_extents, N / 2);
    pool_ok(&p, 0);
    ck_assert_uint_gt(page_pool_host_bytes(&p), base + (uint64_t)N / 2 * 16);
    /* take them back a few at a time: the index shrinks as it empties */
    int32_t got[64];
    while (p.num_free > 0) {
        int32_t n = p.num_free < 64 ? p.num_free : 64;
        ck_assert_int_eq(page_pool_alloc(&p, n, got), RKV_OK);
    }
    pool_ok(&p, 1);
    ck_assert_int_eq(p.num_extents, 0);
    ck_assert_uint_le(page_pool_host_bytes(&p), base + 8192);
    free(all);
    page_pool_destroy(&p);
}
END_TEST

/* A run over many state words, its pages' states mixed inside whole middle
 * words: freeing it counts every page from the state it was in, a free page
 * in a middle word makes the free refused with nothing changed, and the run
 * comes back whole from the next allocation. */
START_TEST(test_long_run_states)
{
    enum { N = 320 };
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
    int32_t all[N];
    ck_assert_int_eq(page_pool_alloc(&p, N, all), RKV_OK);
    /* cached: all of word 2 (64..95) and pages 100, 101, 130 */
    for (int32_t i = 64; i < 96; i++) ck_assert_int_eq(page_pool_adopt(&p, &i, 1), RKV_OK);
    ck_assert_int_eq(page_pool_adopt(&p, (const int32_t[]){100, 101, 130}, 3), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&p, 140, 1), RKV_OK); /* a free page in word 4 */
    ck_assert_int_eq(page_pool_free_run(&p, 5, 200), RKV_EINVAL);
    ck_assert_int_eq(p.num_cached, 35);
    ck_assert_int_eq(p.num_free, 1);
    pool_ok(&p, 0);
    ck_assert_int_eq(page_pool_free_run(&p, 5, 135), RKV_OK); /* 5..139: words 0..4 */
    ck_assert_int_eq(p.num_cached, 0);
    ck_assert_int_eq(p.num_inflight, N - 136);
    ck_assert_int_eq(p.num_free, 136);
    for (int32_t i = 0; i < N; i++)
        ck_assert_int_eq(page_pool_state(&p, i), i >= 5 && i <= 140 ? PAGE_FREE : PAGE_INFLIGHT);
    pool_ok(&p, 1);
    int32_t got[136];
    ck_assert_int_eq(page_pool_alloc(&p, 136, got), RKV_OK);
    for (int32_t i = 0; i < 136; i++) ck_assert_int_eq(got[i], 5 + i);
    pool_ok(&p, 2);
    page_pool_destroy(&p);
}
END_TEST

/* The log since mark is exactly want[0..n). */
static void expect_log(const page_pool *p, uint64_t mark, const page_run *want, int32_t n)
{
    const page_run *got;
    int32_t ng;
    ck_assert_int_eq(page_pool_freed_since(p, mark, &got, &ng), RKV_OK);
    ck_assert_int_eq(ng, n);
    for (int32_t k = 0; k < n; k++)
        ck_assert_msg(got[k].first == want[k].first && got[k].count == want[k].count,
                      "mark %llu, run %d: [%d, +%d), expected [%d, +%d)", (unsigned long long)mark,
                      k, got[k].first, got[k].count, want[k].first, want[k].count);
}

/* The free log holds runs, in free order: each free logs its runs (a page
 * list its stretches), a run that continues the log's last one extends it
 * unless a mark was taken in between (a mark stays a run boundary), nothing
 * is logged while no mark is live, and an allocation spends every mark.
 * The frees go through the short path (one state word, one state), the
 * general one (states mixed in a word; a run over two words) and lists. */
START_TEST(test_log_runs_in_order)
{
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, 128, 1), RKV_OK);
    int32_t all[128], one;
    ck_assert_int_eq(page_pool_alloc(&p, 128, all), RKV_OK);
    ck_assert_int_eq(page_pool_adopt(&p, (const int32_t[]){8}, 1), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&p, 100, 2), RKV_OK); /* no mark yet: not logged */
    uint64_t m1 = page_pool_free_mark(&p);
    ck_assert_int_eq(page_pool_free_run(&p, 7, 3), RKV_OK); /* 8 is CACHED: mixed */
    uint64_t m2 = page_pool_free_mark(&p);
    ck_assert_int_eq(page_pool_free_run(&p, 10, 2), RKV_OK); /* continues 7..9, after m2 */
    ck_assert_int_eq(page_pool_free_run(&p, 12, 1), RKV_OK); /* extends 10..11 */
    ck_assert_int_eq(page_pool_free_run(&p, 60, 10), RKV_OK); /* words 1 and 2 */
    ck_assert_int_eq(page_pool_free_run(&p, 70, 0), RKV_OK);  /* no pages, no run */
    ck_assert_int_eq(page_pool_free(&p, (const int32_t[]){4, 30, 31, 20}, 4), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&p, 21, 1), RKV_OK); /* extends 20 */
    ck_assert_int_eq(page_pool_free_run(&p, 20, 1), RKV_EINVAL); /* twice: refused, not logged */
    uint64_t m3 = page_pool_free_mark(&p);
    pool_ok(&p, 0);
    const page_run want[] = {{7, 3}, {10, 3}, {60, 10}, {4, 1}, {30, 2}, {20, 2}};
    expect_log(&p, m1, want, 6);
    expect_log(&p, m2, want + 1, 5);
    expect_log(&p, m3, NULL, 0);
    ck_assert_uint_eq(m3 - m1, 3 + 3 + 10 + 1 + 2 + 2);
    const page_run *got;
    int32_t ng;
    ck_assert_int_eq(page_pool_freed_since(&p, m3 + 1, &got, &ng), RKV_EINVAL); /* not yet */
    ck_assert_int_eq(page_pool_alloc(&p, 1, &one), RKV_OK);
    ck_assert_int_eq(page_pool_freed_since(&p, m1, &got, &ng), RKV_EINVAL);
    ck_assert_int_eq(page_pool_freed_since(&p, m2, &got, &ng), RKV_EINVAL);
    ck_assert_ptr_null(got);
    ck_assert_int_eq(ng, 0);
    uint64_t m4 = page_pool_free_mark(&p);
    expect_log(&p, m4, NULL, 0);
    ck_assert_int_eq(page_pool_free_run(&p, one, 1), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&p, 90, 1), RKV_OK); /* not next to a freed page */
    expect_log(&p, m4, (const page_run[]){{one, 1}, {90, 1}}, 2);
    pool_ok(&p, 1);
    page_pool_destroy(&p);
}
END_TEST

/* Seeded churn with marks taken at random (up to four live at once): after
 * every step each live mark reads exactly the pages the model freed since
 * it, in order; two runs one after the other continue each other only where
 * a mark lies between them (a run logged twice, out of order or split
 * without a mark fails here); a mark an allocation spent is refused once a
 * page was freed after it; and the pool checks out (every logged page free,
 * the runs adding up to the log's count). */
START_TEST(test_log_marks_against_model)
{
    enum { N = 256, MAXREQ = 48, MAXN = 12, MARKS = 4 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        page_pool p;
        ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
        uint8_t model[N] = {0}, boundary[N + 1] = {0};
        int32_t req[MAXREQ][MAXN], req_n[MAXREQ], nreq = 0;
        int32_t log[N], nlog = 0, pages[N];
        int logging = 0;
        uint64_t mark[MARKS], spent[MARKS];
        int32_t mark_at[MARKS], nmark = 0, nspent = 0;
        uint64_t rng = seed * 0x9e3779b9ULL;
        int64_t reads = 0, joins_at_marks = 0;
        for (int step = 0; step < 4000; step++) {
            uint64_t r = rkv_splitmix64_next(&rng);
            int op = (int)(r % 10);
            if (op < 3 && nreq < MAXREQ) { /* allocate: every mark spent */
                int32_t n = 1 + (int32_t)((r >> 8) % MAXN);
                if (page_pool_alloc(&p, n, req[nreq]) == RKV_OK) {
                    for (int32_t i = 0; i < n; i++) model[req[nreq][i]] = PAGE_INFLIGHT;
                    req_n[nreq++] = n;
                    for (int32_t k = 0; k < nmark; k++)
                        if (mark_at[k] < nlog) spent[nspent++ % MARKS] = mark[k];
                    nmark = 0;
                    nlog = 0;
                    logging = 0;
                    memset(boundary, 0, sizeof boundary);
                }
            } else if (op < 5) { /* a mark */
                int32_t k = nmark < MARKS ? nmark++ : (int32_t)((r >> 8) % MARKS);
                mark[k] = page_pool_free_mark(&p);
                mark_at[k] = nlog;
                boundary[nlog] = 1;
                logging = 1;
            } else if (op < 6 && nreq > 0) { /* a cache adopts a request's pages */
                int32_t k = (int32_t)((r >> 8) % (uint64_t)nreq);
                if (model[req[k][0]] == PAGE_INFLIGHT) {
                    ck_assert_int_eq(page_pool_adopt(&p, req[k], req_n[k]), RKV_OK);
                    for (int32_t i = 0; i < req_n[k]; i++) model[req[k][i]] = PAGE_CACHED;
                }
            } else if (nreq > 0) { /* free a request: as runs, a list, or reversed */
                int32_t k = (int32_t)((r >> 8) % (uint64_t)nreq), n = req_n[k];
                int32_t *pg = req[k];
                int how = (int)((r >> 20) % 3);
                if (how == 2)
                    for (int32_t i = 0; i < n / 2; i++) {
                        int32_t x = pg[i];
                        pg[i] = pg[n - 1 - i];
                        pg[n - 1 - i] = x;
                    }
                if (how == 0) {
                    for (int32_t i = 0; i < n;) {
                        int32_t j = i + 1;
                        while (j < n && pg[j] == pg[j - 1] + 1) j++;
                        ck_assert_int_eq(page_pool_free_run(&p, pg[i], j - i), RKV_OK);
                        i = j;
                    }
                } else {
                    ck_assert_int_eq(page_pool_free(&p, pg, n), RKV_OK);
                }
                for (int32_t i = 0; i < n; i++) {
                    model[pg[i]] = PAGE_FREE;
                    if (logging) log[nlog++] = pg[i];
                }
                memcpy(req[k], req[nreq - 1], sizeof req[k]);
                req_n[k] = req_n[--nreq];
            }
            pool_ok(&p, step);
            for (int32_t k = 0; k < nmark; k++) {
                const page_run *got;
                int32_t ng, at = mark_at[k];
                ck_assert_int_eq(page_pool_freed_since(&p, mark[k], &got, &ng), RKV_OK);
                int32_t np = 0;
                for (int32_t j = 0; j < ng; j++) {
                    ck_assert_int_ge(got[j].count, 1);
                    if (j > 0 && got[j].first == got[j - 1].first + got[j - 1].count) {
                        ck_assert_msg(boundary[at + np], "seed %llu step %d: run [%d, +%d) "
                                      "continues the one before, and no mark lies between",
                                      (unsigned long long)seed, step, got[j].first, got[j].count);
                        joins_at_marks++;
                    }
                    for (int32_t i = 0; i < got[j].count; i++) {
                        ck_assert_int_lt(at + np, nlog);
                        pages[np++] = got[j].first + i;
                    }
                }
                ck_assert_int_eq(np, nlog - at);
                ck_assert_msg(!np || !memcmp(pages, log + at, sizeof(int32_t) * (size_t)np),
                              "seed %llu step %d: the log since mark %d is out of order",
                              (unsigned long long)seed, step, k);
                reads++;
            }
            for (int32_t k = 0; k < nspent && k < MARKS; k++) {
                const page_run *got;
                int32_t ng;
                ck_assert_int_eq(page_pool_freed_since(&p, spent[k], &got, &ng), RKV_EINVAL);
            }
        }
        ck_assert_int_gt(reads, 1000);
        ck_assert_int_gt(joins_at_marks, 0); /* the boundary case came up */
        page_pool_destroy(&p);
    }
}
END_TEST

/* page_pool_log_reserve sizes the log for the worst case, a run per page
 * (no free continuing the one before: even pages, then odd ones), counts it
 * in the pool's host bytes, and keeps it through allocations; with it, a
 * free never grows the log (under fault injection, while every allocation
 * fails). */
START_TEST(test_log_reserve_worst_case)
{
    enum { N = 512 };
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
    uint64_t bytes = page_pool_host_bytes(&p);
    ck_assert_int_eq(page_pool_log_reserve(&p), RKV_OK);
    ck_assert_int_eq(p.freed_cap, N);
    ck_assert_uint_eq(page_pool_host_bytes(&p), bytes + (uint64_t)N * sizeof(page_run));
    int32_t all[N];
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(page_pool_alloc(&p, N, all), RKV_OK);
        uint64_t mark = page_pool_free_mark(&p);
#ifdef RKV_FAULT_INJECTION
        fault_alloc_arm_from(1); /* no assertion while armed: Check allocates */
#endif
        rkv_status st = RKV_OK;
        for (int32_t i = 0; i < N && st == RKV_OK; i += 2) st = page_pool_free_run(&p, i, 1);
        int32_t odd[N / 2];
        for (int32_t i = 0; i < N / 2; i++) odd[i] = 2 * i + 1;
        if (st == RKV_OK) st = page_pool_free(&p, odd, N / 2);
        const page_run *got;
        int32_t ng;
        rkv_status rd = page_pool_freed_since(&p, mark, &got, &ng);
#ifdef RKV_FAULT_INJECTION
        fault_alloc_arm(0);
#endif
        ck_assert_int_eq(st, RKV_OK);
        ck_assert_int_eq(rd, RKV_OK);
        ck_assert_int_eq(ng, N);
        for (int32_t k = 0; k < N; k++) {
            ck_assert_int_eq(got[k].first, k < N / 2 ? 2 * k : 2 * (k - N / 2) + 1);
            ck_assert_int_eq(got[k].count, 1);
        }
        ck_assert_int_eq(p.freed_cap, N);
        pool_ok(&p, round);
    }
    page_pool_destroy(&p);
}
END_TEST

/* A freed page waits PENDING until the next allocation folds it in, and is
 * free to every reader meanwhile: its state reads FREE, it counts as free,
 * and a second free, an adopt or a release of it is refused with nothing
 * changed, single-word and list paths alike. */
START_TEST(test_pending_is_free)
{
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, 100, 1), RKV_OK);
    int32_t all[100];
    ck_assert_int_eq(page_pool_alloc(&p, 100, all), RKV_OK);
    ck_assert_int_eq(page_pool_adopt(&p, all + 50, 50), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&p, 10, 3), RKV_OK);  /* in flight, one word */
    ck_assert_int_eq(page_pool_free_run(&p, 60, 10), RKV_OK); /* cached, two words */
    int32_t list[3] = {40, 20, 21};
    ck_assert_int_eq(page_pool_free(&p, list, 3), RKV_OK);
    ck_assert_int_eq(p.num_pend, 4);
    ck_assert_int_eq(p.num_free, 16);
    ck_assert_int_eq(p.num_inflight, 44);
    ck_assert_int_eq(p.num_cached, 40);
    pool_ok(&p, 0);
    const int32_t freed[] = {10, 12, 60, 69, 40, 20, 21};
    for (size_t i = 0; i < sizeof freed / sizeof *freed; i++) {
        ck_assert_int_eq(page_pool_state(&p, freed[i]), PAGE_FREE);
        ck_assert_int_eq(page_pool_free_run(&p, freed[i], 1), RKV_EINVAL);
        ck_assert_int_eq(page_pool_free(&p, &freed[i], 1), RKV_EINVAL);
        ck_assert_int_eq(page_pool_adopt(&p, &freed[i], 1), RKV_EINVAL);
        ck_assert_int_eq(page_pool_release(&p, &freed[i], 1), RKV_EINVAL);
    }
    ck_assert_int_eq(page_pool_free_run(&p, 9, 2), RKV_EINVAL);   /* 9 held, 10 pending */
    ck_assert_int_eq(page_pool_free_run(&p, 55, 40), RKV_EINVAL); /* across words */
    int32_t mixed[4] = {30, 12, 31, 5};                           /* unordered, one pending */
    ck_assert_int_eq(page_pool_free(&p, mixed, 4), RKV_EINVAL);
    ck_assert_int_eq(page_pool_state(&p, 9), PAGE_INFLIGHT);
    ck_assert_int_eq(page_pool_state(&p, 55), PAGE_CACHED);
    ck_assert_int_eq(page_pool_state(&p, 30), PAGE_INFLIGHT);
    ck_assert_int_eq(p.num_pend, 4);
    ck_assert_int_eq(p.num_free, 16);
    pool_ok(&p, 1);
    /* 16 pages, the longest extent 10: the allocation folds first, then takes
     * [60, 70) whole and the rest from the 3-page extents */
    int32_t out[12];
    ck_assert_int_eq(page_pool_alloc(&p, 12, out), RKV_OK);
    ck_assert_int_eq(p.num_pend, 0);
    ck_assert_int_eq(out[0], 60);
    ck_assert_int_eq(out[9], 69);
    ck_assert_int_eq(out[10], 20);
    ck_assert_int_eq(out[11], 21);
    pool_ok(&p, 2);
    page_pool_destroy(&p);
}
END_TEST

/* Duplicates in an unordered list are refused, and the states stay as they
 * were (the two-bit states have one spare value, used as the mark). */
START_TEST(test_unordered_duplicates_refused)
{
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, 8, 1), RKV_OK);
    int32_t all[8];
    ck_assert_int_eq(page_pool_alloc(&p, 8, all), RKV_OK);
    int32_t cached[3] = {5, 6, 7};
    ck_assert_int_eq(page_pool_adopt(&p, cached, 3), RKV_OK);
    int32_t dup[4] = {6, 2, 1, 6}, ok[4] = {6, 2, 1, 5};
    ck_assert_int_eq(page_pool_free(&p, dup, 4), RKV_EINVAL);
    pool_ok(&p, 0);
    for (int32_t i = 0; i < 8; i++)
        ck_assert_int_eq(page_pool_state(&p, i), i >= 5 ? PAGE_CACHED : PAGE_INFLIGHT);
    ck_assert_int_eq(page_pool_free(&p, ok, 4), RKV_OK);
    pool_ok(&p, 1);
    ck_assert_int_eq(p.num_free, 4);
    page_pool_destroy(&p);

    /* The same through both routes a list can take: a few stretches out of
     * order (checked by overlap: here [3, 6) and [4, 5) share page 4), and
     * more stretches than are kept (checked by marking). */
    ck_assert_int_eq(page_pool_init(&p, 64, 1), RKV_OK);
    int32_t many[64];
    ck_assert_int_eq(page_pool_alloc(&p, 64, many), RKV_OK);
    int32_t few_dup[5] = {3, 4, 5, 1, 4}, few_ok[5] = {3, 4, 5, 1, 7};
    ck_assert_int_eq(page_pool_adopt(&p, few_dup, 5), RKV_EINVAL);
    for (int32_t i = 0; i < 64; i++) ck_assert_int_eq(page_pool_state(&p, i), PAGE_INFLIGHT);
    ck_assert_int_eq(page_pool_adopt(&p, few_ok, 5), RKV_OK);
    ck_assert_int_eq(p.num_cached, 5);
    int32_t long_dup[12], long_ok[12]; /* twelve single pages, falling */
    for (int32_t i = 0; i < 12; i++) long_ok[i] = long_dup[i] = 60 - 2 * i;
    long_dup[11] = 60;
    ck_assert_int_eq(page_pool_free(&p, long_dup, 12), RKV_EINVAL);
    pool_ok(&p, 2);
    ck_assert_int_eq(p.num_free, 0);
    ck_assert_int_eq(page_pool_free(&p, long_ok, 12), RKV_OK);
    ck_assert_int_eq(p.num_free, 12);
    pool_ok(&p, 3);
    page_pool_destroy(&p);
}
END_TEST

#ifdef RKV_FAULT_INJECTION
/* One fixed scenario of allocations and run frees; the pages handed out go
 * to out (at most cap). Returns how many, -1 when init ran out of memory, -2
 * when a free or a check failed. No Check assertion inside: Check's own
 * bookkeeping allocates, and would take the armed failure. */
static int32_t fault_scenario(int32_t *out, int32_t cap)
{
    enum { N = 2048 };
    page_pool p;
    if (page_pool_init(&p, N, 1) != RKV_OK) return -1;
    int32_t held[N], nheld = 0, nout = 0;
    uint64_t rng = 42;
    for (int step = 0; step < 3000; step++) {
        uint64_t r = rkv_splitmix64_next(&rng);
        if (r % 2 == 0) {
            int32_t n = 1 + (int32_t)((r >> 8) % 24), pages[24];
            if (page_pool_alloc(&p, n, pages) != RKV_OK) continue;
            for (int32_t i = 0; i < n; i++) {
                held[nheld++] = pages[i];
                if (nout < cap) out[nout++] = pages[i];
            }
        } else if (nheld > 0) {
            int32_t k = (int32_t)((r >> 8) % (uint64_t)nheld);
            if (page_pool_free_run(&p, held[k], 1) != RKV_OK) nout = -2;
            held[k] = held[--nheld];
        }
        if (nout >= 0 && step % 128 == 0 && page_pool_check(&p, NULL, 0) != RKV_OK) nout = -2;
        if (nout < 0) break;
    }
    page_pool_destroy(&p);
    return nout;
}

/* An allocation failing anywhere in the pool's life is absorbed: init
 * reports RKV_ENOMEM and leaks nothing; a failed growth of the index (tried
 * early) or a failed shrink changes nothing a caller sees, so every page
 * comes out as in the run without a failure. */
START_TEST(test_growth_failure_absorbed)
{
    enum { CAP = 40000 };
    int32_t *ref = malloc(sizeof(int32_t) * CAP), *got = malloc(sizeof(int32_t) * CAP);
    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(got);
    fault_alloc_arm(0);
    int32_t nref = fault_scenario(ref, CAP);
    int64_t calls = fault_alloc_calls();
    fault_alloc_arm(0);
    ck_assert_int_gt(nref, 1000);
    ck_assert_int_gt(calls, 4); /* the index grew and shrank */
    for (int64_t k = 1; k <= calls; k++) {
        fault_alloc_arm(k);
        int32_t n = fault_scenario(got, CAP);
        bool fired = fault_alloc_fired();
        fault_alloc_arm(0);
        ck_assert(fired);
        ck_assert_int_ne(n, -2);
        if (n == -1) continue; /* init's own allocations */
        ck_assert_msg(n == nref && !memcmp(got, ref, sizeof(int32_t) * (size_t)n),
                      "allocation %lld failing changed the pages handed out", (long long)k);
    }
    fault_alloc_arm(0);
    free(ref);
    free(got);
}
END_TEST

/* Every allocation of a burst of scattered frees and the allocation after
 * it failing in turn: the pending array's growth (the free falls back to
 * merging at once), the index's growth during the fold (retried on the next
 * run while there is room; a stale index is rebuilt from the state bits).
 * No page is lost, the pool checks out with the runs pending and after, and
 * the allocation hands out the pages it hands out without a failure. */
static int32_t stale_scenario(int64_t arm, int32_t *got, bool *fired, int *stale)
{
    enum { N = 4096 };
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
    int32_t *all = malloc(sizeof(int32_t) * N), odd[N / 2];
    ck_assert_ptr_nonnull(all);
    ck_assert_int_eq(page_pool_alloc(&p, N, all), RKV_OK);
    for (int32_t i = 0; i < N / 2; i++) odd[i] = 2 * i + 1;
    fault_alloc_arm(arm);
    rkv_status st = page_pool_free(&p, odd, N / 2);
    rkv_status fold_st = RKV_OK;
    if (st == RKV_OK) {
        page_pool_fold(&p);
        *stale = p.stale;
        fold_st = page_pool_alloc(&p, 3, got); /* rebuilds a stale index */
    }
    *fired = fault_alloc_fired();
    fault_alloc_arm(0);
    ck_assert_int_eq(st, RKV_OK);
    ck_assert_int_eq(fold_st, RKV_OK);
    ck_assert_int_eq(p.stale, 0);
    ck_assert_int_eq(p.num_free, N / 2 - 3);
    ck_assert_int_eq(p.num_extents, N / 2 - 3);
    pool_ok(&p, 1);
    ck_assert_int_eq(page_pool_free(&p, all, 1), RKV_OK); /* page 0 joins page 1's extent */
    pool_ok(&p, 2);
    page_pool_fold(&p);
    int32_t n = p.num_extents;
    free(all);
    page_pool_destroy(&p);
    return n;
}

/* Free log under allocation failure: a pool with every page in flight takes
 * a mark, frees its pages scattered (single pages through the short path, a
 * page list), the nth allocation from the mark on failing (arm >= 1; 0: none).
 * Returns the status of reading the mark, with the log's pages in got (the
 * pages freed in order into want, nwant of them); after the read, memory is
 * back: the pool must check out with every page counted, an allocation
 * spends the mark, and a fresh mark logs again. -2: something was wrong. */
static rkv_status log_fault_scenario(int64_t arm, int32_t *got, int32_t *ngot, int32_t *want,
                                     int32_t *nwant, bool *fired)
{
    enum { N = 2048 };
    page_pool p;
    ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
    int32_t *all = malloc(sizeof(int32_t) * N), list[N / 4];
    ck_assert_ptr_nonnull(all);
    ck_assert_int_eq(page_pool_alloc(&p, N, all), RKV_OK);
    *nwant = *ngot = 0;
    uint64_t mark = page_pool_free_mark(&p);
    fault_alloc_arm(arm); /* no assertion while armed: Check allocates */
    int bad = 0;
    for (int32_t i = 0; i < N / 2; i += 2) { /* even pages of the first half, one at a time */
        bad |= page_pool_free_run(&p, i, 1) != RKV_OK;
        want[(*nwant)++] = i;
    }
    for (int32_t i = 0; i < N / 4; i++) list[i] = N - 1 - 2 * i; /* odd pages, descending */
    bad |= page_pool_free(&p, list, N / 4) != RKV_OK;
    for (int32_t i = 0; i < N / 4; i++) want[(*nwant)++] = list[i];
    const page_run *runs;
    int32_t nruns;
    rkv_status st = page_pool_freed_since(&p, mark, &runs, &nruns);
    for (int32_t k = 0; st == RKV_OK && k < nruns; k++)
        for (int32_t i = 0; i < runs[k].count && *ngot < N; i++) got[(*ngot)++] = runs[k].first + i;
    *fired = fault_alloc_fired();
    fault_alloc_arm(0);
    ck_assert(!bad);
    ck_assert_int_eq(p.num_free, *nwant);
    pool_ok(&p, 0);
    int32_t one;
    ck_assert_int_eq(page_pool_alloc(&p, 1, &one), RKV_OK);
    ck_assert_int_eq(page_pool_freed_since(&p, mark, &runs, &nruns), RKV_EINVAL);
    uint64_t again = page_pool_free_mark(&p);
    ck_assert_int_eq(page_pool_free_run(&p, one, 1), RKV_OK);
    ck_assert_int_eq(page_pool_freed_since(&p, again, &runs, &nruns), RKV_OK);
    ck_assert_int_eq(nruns, 1);
    ck_assert_int_eq(runs[0].first, one);
    ck_assert_int_eq(runs[0].count, 1);
    pool_ok(&p, 1);
    free(all);
    page_pool_destroy(&p);
    return st;
}

/* Every allocation from a mark on failing in turn (the log's growth, the
 * pending array's, the index's): the mark reads either exactly the pages
 * freed, in order, or RKV_ENOMEM when the log could not grow; no page is
 * lost either way, and the next allocation starts a sound log. */
START_TEST(test_log_growth_failure)
{
    enum { N = 2048 };
    int32_t got[N], want[N], ngot, nwant;
    bool fired;
    ck_assert_int_eq(log_fault_scenario(0, got, &ngot, want, &nwant, &fired), RKV_OK);
    ck_assert_int_eq(ngot, nwant);
    ck_assert(!memcmp(got, want, sizeof(int32_t) * (size_t)nwant));
    int enomem = 0;
    for (int64_t k = 1;; k++) {
        rkv_status st = log_fault_scenario(k, got, &ngot, want, &nwant, &fired);
        if (!fired) break;
        if (st == RKV_ENOMEM) {
            enomem++;
            continue;
        }
        ck_assert_int_eq(st, RKV_OK);
        ck_assert_msg(ngot == nwant && !memcmp(got, want, sizeof(int32_t) * (size_t)nwant),
                      "allocation %lld failing changed the free log", (long long)k);
    }
    ck_assert_int_gt(enomem, 0); /* the log's own growth failed somewhere */
}
END_TEST

START_TEST(test_stale_index_rebuilt)
{
    int32_t ref[3], got[3];
    bool fired;
    int stale;
    int32_t ext_ref = stale_scenario(0, ref, &fired, &stale);
    for (int32_t i = 0; i < 3; i++) ck_assert_int_eq(ref[i] % 2, 1);
    for (int64_t k = 1;; k++) {
        int32_t ext = stale_scenario(k, got, &fired, &stale);
        if (!fired) break;
        ck_assert_int_eq(ext, ext_ref);
        if (!stale) /* a rebuilt index lists extents in page order: other pages */
            ck_assert_msg(!memcmp(got, ref, sizeof got), "allocation %lld failing changed the pages",
                          (long long)k);
    }
}
END_TEST
/* Memory that stays short: every allocation fails from the start of the
 * frees (their pending array cannot grow, so they merge at once) or from the
 * start of the fold, until the index has no room left and goes stale. Each
 * page stays counted, the pool checks out stale, and once memory is back the
 * next allocation rebuilds the index from the state bits and hands out free
 * pages only. */
START_TEST(test_stale_when_memory_stays_short)
{
    enum { N = 8192 };
    for (int during_fold = 0; during_fold < 2; during_fold++) {
        page_pool p;
        ck_assert_int_eq(page_pool_init(&p, N, 1), RKV_OK);
        int32_t *all = malloc(sizeof(int32_t) * N), odd[N / 2], got[3];
        ck_assert_ptr_nonnull(all);
        ck_assert_int_eq(page_pool_alloc(&p, N, all), RKV_OK);
        for (int32_t i = 0; i < N / 2; i++) odd[i] = 2 * i + 1;
        /* no assertion while armed: Check allocates in its own */
        if (!during_fold) fault_alloc_arm_from(1);
        rkv_status st = page_pool_free(&p, odd, N / 2);
        int32_t pend = p.num_pend;
        if (during_fold) fault_alloc_arm_from(1);
        page_pool_fold(&p);
        bool fired = fault_alloc_fired();
        fault_alloc_arm(0);
        ck_assert_int_eq(st, RKV_OK);
        /* deferred: every odd page a run of its own, all pending */
        ck_assert_int_eq(pend, during_fold ? N / 2 : 0);
        ck_assert_msg(fired, "case %d: no allocation was tried", during_fold);
        ck_assert_msg(p.stale, "case %d: the index did not go stale", during_fold);
        ck_assert_int_eq(p.num_pend, 0);
        ck_assert_int_eq(p.num_free, N / 2);
        pool_ok(&p, 1);
        ck_assert_int_eq(page_pool_alloc(&p, 3, got), RKV_OK); /* rebuilds */
        ck_assert_int_eq(p.stale, 0);
        for (int32_t i = 0; i < 3; i++) ck_assert_int_eq(got[i] % 2, 1);
        ck_assert_int_eq(p.num_extents, N / 2 - 3);
        pool_ok(&p, 2);
        free(all);
        page_pool_destroy(&p);
    }
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("page_pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_alloc_all_or_nothing);
    tcase_add_test(tc, test_bad_free_changes_nothing);
    tcase_add_test(tc, test_random_against_model);
    tcase_add_test(tc, test_extents_against_model);
    tcase_add_test(tc, test_order_as_eager_lists);
    tcase_add_test(tc, test_freed_run_survives_later_frees);
    tcase_add_test(tc, test_coalescing);
    tcase_add_test(tc, test_memory_follows_extents);
    tcase_add_test(tc, test_unordered_duplicates_refused);
    tcase_add_test(tc, test_pending_is_free);
    tcase_add_test(tc, test_long_run_states);
    tcase_add_test(tc, test_log_runs_in_order);
    tcase_add_test(tc, test_log_marks_against_model);
    tcase_add_test(tc, test_log_reserve_worst_case);
#ifdef RKV_FAULT_INJECTION
    tcase_add_test(tc, test_growth_failure_absorbed);
    tcase_add_test(tc, test_stale_index_rebuilt);
    tcase_add_test(tc, test_stale_when_memory_stays_short);
    tcase_add_test(tc, test_log_growth_failure);
#endif
    suite_add_tcase(s, tc);
    return check_run(s);
}
