/* test_page_pool.c - the page pool against a trivially correct model. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "page_pool.h"

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
            if (p.state[i] != model[i] && first_diff < 0) first_diff = i;
            cnt[model[i]]++;
        }
        ck_assert_msg(first_diff < 0, "step %d: page %d state %d, model %d", it, first_diff,
                      first_diff < 0 ? 0 : p.state[first_diff], first_diff < 0 ? 0 : model[first_diff]);
        ck_assert_int_eq(cnt[0], p.num_free);
        ck_assert_int_eq(cnt[1], p.num_inflight);
        ck_assert_int_eq(cnt[2], p.num_cached);
    }
    page_pool_destroy(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("page_pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_alloc_all_or_nothing);
    tcase_add_test(tc, test_bad_free_changes_nothing);
    tcase_add_test(tc, test_random_against_model);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
