/* test_page_runs.c - page ids stored as runs: runs split when a node splits
 * and merge again in a match, eviction frees part of a run, scattered pages
 * become several runs, and the pool hands freed runs out again as runs (and
 * scattered pages where it has no run). Every tree operation is followed by
 * the invariant check. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "radix_tree.h"
#ifdef RKV_FAULT_INJECTION
#include "fault_alloc.h"
#endif

static page_pool pool;
static radix_tree *t;

static void check_tree(void)
{
    char err[512];
    rkv_status st = radix_tree_check(t, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "%s", err);
    ck_assert_int_eq(page_pool_check(&pool, err, sizeof err), RKV_OK);
}

static void open_tree(int32_t P, int32_t pages)
{
    ck_assert_int_eq(page_pool_init(&pool, pages, P), RKV_OK);
    ck_assert_int_eq(radix_tree_create(&pool, RADIX_LRU, &t), RKV_OK);
}

/* The pages of list[0..n) the tree did not adopt are still the caller's:
 * they go back to the pool. */
static void free_inflight(const int32_t *list, int n)
{
    for (int i = 0; i < n; i++)
        if (page_pool_state(&pool, list[i]) == PAGE_INFLIGHT)
            ck_assert_int_eq(page_pool_free(&pool, &list[i], 1), RKV_OK);
}

static void close_tree(void)
{
    radix_tree_destroy(t);
    ck_assert_int_eq(pool.num_cached, 0);
    page_pool_destroy(&pool);
}

/* Match tokens[0..n) as runs; returns the run count, checks the flat match
 * gives the same ids as the expanded runs. */
static int32_t match_runs(const int32_t *tok, int32_t n, radix_page_run *runs, int32_t *len)
{
    int32_t nr = 0, node = 0, flat[64], exp[64], flen = 0;
    ck_assert_int_eq(radix_tree_match_runs(t, tok, n, 0, runs, &nr, len, &node), RKV_OK);
    check_tree();
    ck_assert_int_eq(radix_tree_match(t, tok, n, 0, flat, &flen, &node), RKV_OK);
    ck_assert_int_eq(flen, *len);
    int32_t np = radix_page_runs_expand(runs, nr, exp);
    ck_assert_int_eq(np, *len / pool.page_size);
    for (int32_t i = 0; i < np; i++) ck_assert_int_eq(exp[i], flat[i]);
    for (int32_t i = 1; i < nr; i++) /* maximal: no run continues the one before */
        ck_assert_int_ne(runs[i - 1].first + runs[i - 1].count, runs[i].first);
    return nr;
}

START_TEST(split_cuts_a_run_and_match_merges_it)
{
    open_tree(1, 16);
    int32_t tok[8] = {11, 12, 13, 14, 15, 16, 17, 18}, pages[8], prefix, len;
    ck_assert_int_eq(page_pool_alloc(&pool, 8, pages), RKV_OK);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(pages[i], i); /* a fresh pool: one run */
    ck_assert_int_eq(radix_tree_insert(t, tok, 8, pages, 0, &prefix), RKV_OK);
    check_tree();
    radix_page_run runs[8];
    ck_assert_int_eq(match_runs(tok, 8, runs, &len), 1);
    ck_assert_int_eq(runs[0].first, 0);
    ck_assert_int_eq(runs[0].count, 8);
    /* a match ending after 3 tokens splits the node and its run: {0,3} + {3,5} */
    ck_assert_int_eq(match_runs(tok, 3, runs, &len), 1);
    ck_assert_int_eq(len, 3);
    ck_assert_int_eq(runs[0].count, 3);
    radix_tree_sizes s;
    radix_tree_get_sizes(t, &s);
    ck_assert_int_eq(s.num_nodes, 2);
    /* the whole path again: the halves' runs merge into one */
    ck_assert_int_eq(match_runs(tok, 8, runs, &len), 1);
    ck_assert_int_eq(runs[0].first, 0);
    ck_assert_int_eq(runs[0].count, 8);
    close_tree();
}
END_TEST

START_TEST(evicting_part_of_a_run)
{
    open_tree(2, 16);
    int32_t tok[12], pages[6], prefix, len;
    for (int i = 0; i < 12; i++) tok[i] = 100 + i;
    ck_assert_int_eq(page_pool_alloc(&pool, 6, pages), RKV_OK);
    ck_assert_int_eq(radix_tree_insert(t, tok, 12, pages, 0, &prefix), RKV_OK);
    radix_page_run runs[6];
    ck_assert_int_eq(match_runs(tok, 4, runs, &len), 1); /* split after two pages */
    /* the suffix (pages 2..5) is the only leaf: evicting it frees the tail of
     * the original run, the prefix keeps its head */
    ck_assert_int_eq(radix_tree_evict(t, 1), 8);
    check_tree();
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(page_pool_state(&pool, i), i < 2 ? PAGE_CACHED : PAGE_FREE);
    ck_assert_int_eq(match_runs(tok, 12, runs, &len), 1);
    ck_assert_int_eq(len, 4);
    ck_assert_int_eq(runs[0].first, 0);
    ck_assert_int_eq(runs[0].count, 2);
    /* the freed run comes back out of the pool as a run, in order */
    int32_t again[4];
    ck_assert_int_eq(page_pool_alloc(&pool, 4, again), RKV_OK);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(again[i], 2 + i);
    ck_assert_int_eq(page_pool_free(&pool, again, 4), RKV_OK);
    close_tree();
}
END_TEST

START_TEST(scattered_pages_are_several_runs)
{
    open_tree(1, 16);
    int32_t all[16], prefix, len;
    ck_assert_int_eq(page_pool_alloc(&pool, 16, all), RKV_OK);
    int32_t tok[5] = {1, 2, 3, 4, 5}, pages[5] = {9, 2, 3, 4, 12};
    ck_assert_int_eq(radix_tree_insert(t, tok, 5, pages, 0, &prefix), RKV_OK);
    check_tree();
    radix_page_run runs[5];
    ck_assert_int_eq(match_runs(tok, 5, runs, &len), 3);
    ck_assert_int_eq(runs[1].first, 2);
    ck_assert_int_eq(runs[1].count, 3);
    /* split inside the middle run: {9}{2,3} | {4}{12}, merged again by a match */
    ck_assert_int_eq(match_runs(tok, 3, runs, &len), 2);
    ck_assert_int_eq(runs[1].count, 2);
    ck_assert_int_eq(match_runs(tok, 5, runs, &len), 3);
    ck_assert_int_eq(runs[1].count, 3);
    /* evicting the suffix frees page 4 of the run {2,3,4} and page 12 */
    ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    check_tree();
    ck_assert_int_eq(page_pool_state(&pool, 4), PAGE_FREE);
    ck_assert_int_eq(page_pool_state(&pool, 12), PAGE_FREE);
    ck_assert_int_eq(page_pool_state(&pool, 3), PAGE_CACHED);
    /* the caller's pages the tree did not adopt are still the caller's */
    free_inflight(all, 16);
    close_tree();
}
END_TEST

START_TEST(pool_runs_fall_back_to_scattered_pages)
{
    ck_assert_int_eq(page_pool_init(&pool, 8, 1), RKV_OK);
    int32_t a[8], b[4];
    ck_assert_int_eq(page_pool_alloc(&pool, 8, a), RKV_OK);
    /* a freed run is handed out again as the same run, ascending */
    ck_assert_int_eq(page_pool_free_run(&pool, 2, 3), RKV_OK);
    ck_assert_int_eq(page_pool_alloc(&pool, 3, b), RKV_OK);
    ck_assert_int_eq(b[0], 2);
    ck_assert_int_eq(b[1], 3);
    ck_assert_int_eq(b[2], 4);
    /* pages freed one by one out of order: the pool falls back to scattered ids */
    int32_t some[3] = {7, 0, 5};
    ck_assert_int_eq(page_pool_free(&pool, some, 3), RKV_OK);
    ck_assert_int_eq(page_pool_alloc(&pool, 3, b), RKV_OK);
    int consecutive = b[1] == b[0] + 1 && b[2] == b[1] + 1;
    ck_assert_int_eq(consecutive, 0);
    ck_assert_int_eq(pool.num_free, 0);
    /* a run holding a free page, or out of range, is rejected whole */
    ck_assert_int_eq(page_pool_free_run(&pool, 6, 3), RKV_EINVAL);
    ck_assert_int_eq(page_pool_free(&pool, &b[0], 1), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&pool, b[0] > 0 ? b[0] - 1 : b[0], 2), RKV_EINVAL);
    ck_assert_int_eq(pool.num_free, 1);
    char err[256];
    ck_assert_int_eq(page_pool_check(&pool, err, sizeof err), RKV_OK);
    /* the tree stores the scattered pages as one run per page */
    radix_tree *tr;
    ck_assert_int_eq(radix_tree_create(&pool, RADIX_LRU, &tr), RKV_OK);
    t = tr;
    int32_t tok[2] = {40, 41}, pages[2] = {b[1], b[2]}, prefix, len;
    ck_assert_int_eq(radix_tree_insert(t, tok, 2, pages, 0, &prefix), RKV_OK);
    check_tree();
    radix_page_run runs[2];
    ck_assert_int_eq(match_runs(tok, 2, runs, &len), b[2] == b[1] + 1 ? 1 : 2);
    radix_tree_destroy(t);
    page_pool_destroy(&pool);
}
END_TEST

/* page_pool_alloc_runs hands out exactly the pages page_pool_alloc lists,
 * as maximal runs, in the state asked for: two pools through the same
 * seeded churn (allocations of any size, frees of runs and of single pages,
 * so that large allocations take several extents). */
START_TEST(alloc_runs_lists_what_alloc_lists)
{
    enum { N = 512, STEPS = 3000 };
    page_pool a, b;
    ck_assert_int_eq(page_pool_init(&a, N, 1), RKV_OK);
    ck_assert_int_eq(page_pool_init(&b, N, 1), RKV_OK);
    static int32_t out[N], flat[N];
    static radix_page_run runs[N];
    uint64_t rng = 0x5eedc0deu;
    int multi = 0; /* allocations that took several runs */
    char err[256];
    for (int step = 0; step < STEPS; step++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t r = (uint32_t)(rng >> 33);
        if (r % 3 != 0) { /* free a run or a page of the used ones, the same on both */
            int32_t pg = (int32_t)(r / 3 % N), len = r % 5 == 0 ? 1 : (int32_t)(r / 7 % 24) + 1;
            int32_t end = pg;
            while (end < N && end - pg < len && page_pool_state(&a, end) != PAGE_FREE) end++;
            if (end > pg) {
                ck_assert_int_eq(page_pool_free_run(&a, pg, end - pg), RKV_OK);
                ck_assert_int_eq(page_pool_free_run(&b, pg, end - pg), RKV_OK);
            }
            continue;
        }
        int32_t n = (int32_t)(r / 3 % 96), nr = -1;
        int to = r & 1 ? PAGE_CACHED : PAGE_INFLIGHT;
        rkv_status sa = page_pool_alloc(&a, n, out);
        rkv_status sb = page_pool_alloc_runs(&b, n, to, runs, &nr);
        ck_assert_int_eq(sa, sb);
        if (sa != RKV_OK) {
            ck_assert_int_eq(nr, 0);
            continue;
        }
        ck_assert_int_eq(radix_page_runs_expand(runs, nr, flat), n);
        ck_assert_msg(memcmp(out, flat, sizeof(int32_t) * (size_t)n) == 0, "step %d", step);
        for (int32_t i = 1; i < nr; i++)
            ck_assert_int_ne(runs[i - 1].first + runs[i - 1].count, runs[i].first);
        for (int32_t i = 0; i < n; i++) ck_assert_int_eq(page_pool_state(&b, flat[i]), to);
        if (to == PAGE_CACHED) ck_assert_int_eq(page_pool_adopt(&a, out, n), RKV_OK);
        multi += nr > 1;
        ck_assert_int_eq(a.num_inflight, b.num_inflight);
        ck_assert_int_eq(a.num_cached, b.num_cached);
        ck_assert_msg(page_pool_check(&b, err, sizeof err) == RKV_OK, "step %d: %s", step, err);
    }
    ck_assert_msg(multi > 10, "only %d allocations took several runs", multi);
    int32_t nr = 0;
    ck_assert_int_eq(page_pool_alloc_runs(&b, 1, PAGE_FREE, runs, &nr), RKV_EINVAL);
    ck_assert_int_eq(page_pool_alloc_runs(&b, N + 1, PAGE_CACHED, runs, &nr), RKV_ENOSPC);
    ck_assert_int_eq(nr, 0);
    page_pool_destroy(&a);
    page_pool_destroy(&b);
}
END_TEST

/* insert_take on a pool whose free pages lie in several extents: the leaf
 * keeps the runs the pool gave (its edge grown for them), the path's runs
 * are the cached part's then the taken ones (merged where they continue),
 * and a refused insert (pool short, an id out of range) takes nothing. */
START_TEST(insert_take_keeps_the_pools_runs)
{
    open_tree(1, 64);
    int32_t hold[64], prefix, nr, node, len, bad;
    ck_assert_int_eq(page_pool_alloc(&pool, 64, hold), RKV_OK);
    /* free pages: [4, 10) and [20, 26) and [40, 64) */
    ck_assert_int_eq(page_pool_free_run(&pool, 4, 6), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&pool, 20, 6), RKV_OK);
    ck_assert_int_eq(page_pool_free_run(&pool, 40, 24), RKV_OK);
    int32_t tok[40];
    int64_t tok64[40];
    for (int i = 0; i < 40; i++) tok64[i] = tok[i] = 500 + i;
    radix_page_run runs[40], m[40];
    /* 30 pages: no extent holds them; the largest (24) whole, then 6 */
    ck_assert_int_eq(radix_tree_insert_take(t, tok, 30, 0, &prefix, runs, &nr, &node), RKV_OK);
    check_tree();
    ck_assert_int_eq(prefix, 0);
    ck_assert_int_eq(nr, 2);
    ck_assert_int_eq(runs[0].first, 40);
    ck_assert_int_eq(runs[0].count, 24);
    ck_assert_int_eq(runs[1].count, 6);
    ck_assert_int_eq(match_runs(tok, 30, m, &len), 2);
    ck_assert_int_eq(len, 30);
    ck_assert_int_eq(memcmp(m, runs, sizeof runs[0] * 2), 0);
    /* the key's next 10 tokens need 10 pages, 6 are free: refused, nothing taken */
    int32_t free_before = page_pool_num_free(&pool);
    ck_assert_int_eq(radix_tree_insert_take(t, tok, 40, 0, &prefix, runs, &nr, &node),
                     RKV_ENOSPC);
    ck_assert_int_eq(page_pool_num_free(&pool), free_before);
    check_tree();
    /* an id out of range past the cached part: refused with its index */
    tok64[35] = -3;
    ck_assert_int_eq(radix_tree_insert_take64(t, tok64, 36, 0, &prefix, runs, &nr, &node, &bad),
                     RKV_EINVAL);
    ck_assert_int_eq(bad, 35);
    ck_assert_int_eq(page_pool_num_free(&pool), free_before);
    check_tree();
    /* 5 more pages from the extent left: the path is the leaf's two runs
     * and the new one, as a match gives it */
    ck_assert_int_eq(radix_tree_insert_take64(t, tok64, 35, 0, &prefix, runs, &nr, &node, &bad),
                     RKV_OK);
    ck_assert_int_eq(bad, -1);
    ck_assert_int_eq(prefix, 30);
    int32_t np = 0;
    for (int32_t i = 0; i < nr; i++) np += runs[i].count;
    ck_assert_int_eq(np, 35);
    ck_assert_int_eq(match_runs(tok, 35, m, &len), nr);
    ck_assert_int_eq(memcmp(m, runs, sizeof runs[0] * (size_t)nr), 0);
    free_inflight(hold, 64);
    close_tree();
}
END_TEST

/* The taken pages' first run continues the cached part's last one: the
 * path's runs merge them (as a match of the path would). */
START_TEST(insert_take_merges_a_continuing_run)
{
    open_tree(2, 8);
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8}, prefix, nr, node, len;
    radix_page_run runs[4], m[4];
    ck_assert_int_eq(radix_tree_insert_take(t, tok, 4, 0, &prefix, runs, &nr, &node), RKV_OK);
    ck_assert_int_eq(nr, 1);
    ck_assert_int_eq(radix_tree_insert_take(t, tok, 8, 0, &prefix, runs, &nr, &node), RKV_OK);
    check_tree();
    ck_assert_int_eq(prefix, 4);
    ck_assert_int_eq(nr, 1);
    ck_assert_int_eq(runs[0].first, 0);
    ck_assert_int_eq(runs[0].count, 4);
    ck_assert_int_eq(match_runs(tok, 8, m, &len), 1);
    ck_assert_int_eq(len, 8);
    close_tree();
}
END_TEST

#ifdef RKV_FAULT_INJECTION
/* The take path with every allocation of one insert failing in turn (the
 * walk's split, the reserves, the leaf's edge, its wider edge for several
 * runs, the node's slot): each failure is RKV_ENOMEM with the pool's pages
 * where they were and the tree intact, and the insert goes through once
 * nothing fails. */
START_TEST(insert_take_allocation_failures)
{
    int32_t tok[40], hold[64], prefix, nr, node;
    for (int i = 0; i < 40; i++) tok[i] = 900 + i;
    radix_page_run runs[40];
    for (int64_t nth = 1;; nth++) {
        open_tree(1, 64);
        ck_assert_int_eq(page_pool_alloc(&pool, 64, hold), RKV_OK);
        ck_assert_int_eq(page_pool_free_run(&pool, 4, 6), RKV_OK);
        ck_assert_int_eq(page_pool_free_run(&pool, 20, 30), RKV_OK);
        ck_assert_int_eq(page_pool_free_run(&pool, 52, 10), RKV_OK);
        /* a cached node whose first 6 tokens the key shares: split there */
        int32_t head[8] = {900, 901, 902, 903, 904, 905, 1, 2};
        ck_assert_int_eq(radix_tree_insert_take(t, head, 8, 0, &prefix, runs, &nr, &node),
                         RKV_OK);
        int32_t free0 = page_pool_num_free(&pool), cached0 = pool.num_cached;
        fault_alloc_arm(nth);
        rkv_status st = radix_tree_insert_take(t, tok, 40, 0, &prefix, runs, &nr, &node);
        bool fired = fault_alloc_fired();
        fault_alloc_arm(0);
        check_tree();
        if (st == RKV_OK) {
            ck_assert_int_eq(page_pool_num_free(&pool), free0 - 34);
            ck_assert_int_gt(nr, 2); /* the cached head's run, then two taken ones */
        } else {
            ck_assert_msg(st == RKV_ENOMEM, "allocation %lld failing: status %d", (long long)nth, st);
            ck_assert_int_eq(page_pool_num_free(&pool), free0);
            ck_assert_int_eq(pool.num_cached, cached0);
        }
        free_inflight(hold, 64);
        close_tree();
        if (!fired) {
            ck_assert_int_eq(st, RKV_OK);
            ck_assert_int_gt(nth, 3); /* split, edge, wider edge at least */
            break;
        }
    }
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("page_runs");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, split_cuts_a_run_and_match_merges_it);
    tcase_add_test(tc, evicting_part_of_a_run);
    tcase_add_test(tc, scattered_pages_are_several_runs);
    tcase_add_test(tc, pool_runs_fall_back_to_scattered_pages);
    tcase_add_test(tc, alloc_runs_lists_what_alloc_lists);
    tcase_add_test(tc, insert_take_keeps_the_pools_runs);
    tcase_add_test(tc, insert_take_merges_a_continuing_run);
#ifdef RKV_FAULT_INJECTION
    tcase_add_test(tc, insert_take_allocation_failures);
#endif
    suite_add_tcase(s, tc);
    return check_run(s);
}
