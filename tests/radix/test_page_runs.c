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
    for (int i = 0; i < 16; i++)
        if (page_pool_state(&pool, all[i]) == PAGE_INFLIGHT)
            ck_assert_int_eq(page_pool_free(&pool, &all[i], 1), RKV_OK);
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

int main(void)
{
    Suite *s = suite_create("page_runs");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, split_cuts_a_run_and_match_merges_it);
    tcase_add_test(tc, evicting_part_of_a_run);
    tcase_add_test(tc, scattered_pages_are_several_runs);
    tcase_add_test(tc, pool_runs_fall_back_to_scattered_pages);
    suite_add_tcase(s, tc);
    return check_run(s);
}
