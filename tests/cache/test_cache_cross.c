/* test_cache_cross.c - the kinds agree: with unlimited capacity and the page
 * size as block size, radix, trie and hash report the same matched lengths
 * on a seeded random trace (namespaces included); none always matches 0. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cache_test_util.h"

enum { NKINDS = 4, MAXLEN = 64 };
static const char *const kinds[NKINDS] = {"radix", "trie", "hash", "none"};

START_TEST(same_matches_unlimited)
{
    static const int32_t Ps[] = {1, 4, 16};
    const int32_t P = Ps[_i % 3];
    unsigned seed = 777u + (unsigned)_i;
    srand(seed);
    page_pool pool[NKINDS];
    cache *c[NKINDS];
    for (int k = 0; k < NKINDS; k++) {
        ck_assert_int_eq(page_pool_init(&pool[k], 400 * MAXLEN / P + 1, P), RKV_OK);
        c[k] = tu_create(kinds[k], NULL, &pool[k]);
    }
    int32_t t[MAXLEN], prev[MAXLEN] = {0};
    for (int r = 0; r < 400; r++) {
        int32_t n = 2 + rand() % (MAXLEN - 1), keep = rand() % (n + 1);
        for (int32_t i = 0; i < n; i++) t[i] = i < keep ? prev[i] : rand() % 4;
        memcpy(prev, t, sizeof t);
        uint64_t ns = (uint64_t)(rand() % 3 == 0);
        int32_t matched[NKINDS], prefix[NKINDS];
        for (int k = 0; k < NKINDS; k++) {
            cache_match m;
            cache_match_init(&m);
            /* As the engine does: match all tokens but the last, insert all. */
            ck_assert_int_eq(cache_match_prefix(c[k], t, n - 1, ns, &m), RKV_OK);
            matched[k] = m.len;
            ck_assert_int_eq(cache_lock(c[k], &m), RKV_OK);
            int32_t mm = 0;
            cache_match m2;
            cache_match_init(&m2);
            ck_assert_int_eq(tu_request(c[k], t, n, ns, &m2, &mm, &prefix[k]), RKV_OK);
            ck_assert_int_eq(cache_unlock(c[k], &m2), RKV_OK);
            ck_assert_int_eq(cache_unlock(c[k], &m), RKV_OK);
            cache_match_free(&m);
            cache_match_free(&m2);
            ck_cache_ok(c[k]);
            ck_assert_int_eq(pool[k].num_inflight, 0);
        }
        for (int k = 1; k < NKINDS - 1; k++)
            ck_assert_msg(matched[k] == matched[0] && prefix[k] == prefix[0],
                          "seed %u P %d request %d: %s matched %d prefix %d, radix %d %d", seed,
                          P, r, kinds[k], matched[k], prefix[k], matched[0], prefix[0]);
        ck_assert_msg(matched[NKINDS - 1] == 0, "seed %u: none matched %d", seed,
                      matched[NKINDS - 1]);
    }
    /* Every distinct full page is cached once in each caching kind. */
    for (int k = 1; k < NKINDS - 1; k++) ck_assert_int_eq(pool[k].num_cached, pool[0].num_cached);
    ck_assert_int_eq(pool[NKINDS - 1].num_cached, 0);
    for (int k = 0; k < NKINDS; k++) {
        cache_destroy(c[k]);
        page_pool_destroy(&pool[k]);
    }
}
END_TEST

START_TEST(names_dispatch)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
    static const char *const mine[] = {"hash", "hash-nocache", "trie"};
    for (int i = 0; i < 3; i++) {
        cache *c = tu_create(mine[i], NULL, &pool);
        ck_assert_str_eq(c->ops->name, mine[i]);
        cache_destroy(c);
        int listed = 0;
        for (int k = 0; cache_kind_names[k]; k++) listed += !strcmp(cache_kind_names[k], mine[i]);
        ck_assert_int_eq(listed, 1);
    }
    cache_config cfg = {"hash", NULL, "sha1"};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "sha1") != NULL, "message '%s' names the function", err);
    page_pool_destroy(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache_cross");
    TCase *tc = tcase_create("cross");
    tcase_add_loop_test(tc, same_matches_unlimited, 0, 3);
    tcase_add_test(tc, names_dispatch);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
