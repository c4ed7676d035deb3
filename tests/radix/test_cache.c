/* test_cache.c - the cache.h interface: creation by name, the ownership flow
 * of cache.h's picture, the page invariant, kinds radix and none. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "radix_tree.h"

static page_pool pool;

static void check_cache(const cache *c)
{
    char err[512];
    rkv_status st = cache_check(c, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "%s", err);
    /* free + evictable + protected + in-flight = pool, in pages */
    cache_sizes s;
    cache_get_sizes(c, &s);
    int64_t P = pool.page_size;
    ck_assert_int_eq(pool.num_free + (s.evictable_tokens + s.protected_tokens) / P + pool.num_inflight,
                     pool.num_pages);
}

static cache *make(const char *kind, const char *policy, int32_t pages, int32_t P)
{
    ck_assert_int_eq(page_pool_init(&pool, pages, P), RKV_OK);
    cache_config cfg = {.kind = kind, .policy = policy};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_OK);
    ck_assert_ptr_nonnull(c);
    check_cache(c);
    return c;
}

static void done(cache *c)
{
    cache_destroy(c);
    ck_assert_int_eq(pool.num_cached, 0);
    page_pool_destroy(&pool);
}

START_TEST(create_by_name)
{
    ck_assert_int_eq(page_pool_init(&pool, 8, 1), RKV_OK);
    cache *c = NULL;
    char err[256] = "";
    /* NULL config and NULL kind mean radix / lru */
    ck_assert_int_eq(cache_create(NULL, &pool, &c, err, sizeof err), RKV_OK);
    ck_assert_str_eq(c->ops->name, "radix");
    ck_assert_ptr_nonnull(cache_radix_tree(c));
    cache_destroy(c);
    cache_config cfg = {.kind = "radix", .policy = "fifo"};
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_OK);
    cache_destroy(c);
    cfg.policy = "random-ish";
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err, "random-ish"));
    ck_assert_ptr_nonnull(strstr(err, "policy"));
    cfg = (cache_config){.kind = "btree"};
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "'btree'"));
    ck_assert_ptr_nonnull(strstr(err, "radix"));
    cfg.kind = "none";
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_OK);
    ck_assert_ptr_null(cache_radix_tree(c));
    cache_destroy(c);
    /* every listed name is accepted */
    int n = 0, radix = 0, none = 0;
    for (; cache_kind_names[n]; n++) {
        cfg = (cache_config){.kind = cache_kind_names[n]};
        ck_assert_msg(cache_create(&cfg, &pool, &c, err, sizeof err) == RKV_OK, "%s: %s",
                      cache_kind_names[n], err);
        ck_assert_str_eq(c->ops->name, cache_kind_names[n]);
        cache_destroy(c);
        radix += !strcmp(cache_kind_names[n], "radix");
        none += !strcmp(cache_kind_names[n], "none");
    }
    ck_assert_int_eq(radix + none, 2);
    ck_assert_int_eq(n, 5); /* radix, hash, hash-nocache, trie, none */
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(match_storage)
{
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(m.cap, 0);
    ck_assert_int_eq(cache_match_reserve(&m, 100), RKV_OK);
    ck_assert_int_ge(m.cap, 100);
    m.pages[99] = 7; /* writable */
    ck_assert_int_eq(cache_match_reserve(&m, 10), RKV_OK);
    ck_assert_int_eq(m.pages[99], 7);
    ck_assert_int_eq(cache_match_reserve(&m, -1), RKV_EINVAL);
    cache_match_free(&m);
    ck_assert_ptr_null(m.pages);
}
END_TEST

/* cache.h's picture: P = 2, a request of 7 tokens with 4 cached. */
START_TEST(ownership_flow)
{
    cache *c = make("radix", "lru", 16, 2);
    int32_t tok[7] = {10, 11, 12, 13, 14, 15, 16};
    int32_t first[2];
    /* an earlier request cached t0..t3 */
    ck_assert_int_eq(page_pool_alloc(&pool, 2, first), RKV_OK);
    int32_t prefix = -1;
    ck_assert_int_eq(cache_insert(c, tok, 4, first, 0, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 0);
    check_cache(c);

    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_prefix(c, tok, 6, 0, &m), RKV_OK);
    ck_assert_int_eq(m.len, 4);
    ck_assert_int_eq(m.num_pages, 2);
    ck_assert_mem_eq(m.pages, first, sizeof first);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
    cache_sizes s;
    cache_get_sizes(c, &s);
    ck_assert_int_eq(s.protected_tokens, 4);
    /* the request's own pages for t4..t6: p(t4 t5) and the partial page */
    int32_t pages[4] = {m.pages[0], m.pages[1]};
    ck_assert_int_eq(page_pool_alloc(&pool, 2, pages + 2), RKV_OK);
    check_cache(c);
    ck_assert_int_eq(cache_insert(c, tok, 6, pages, 0, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 4);
    ck_assert_int_eq(pool.num_cached, 3);
    ck_assert_int_eq(page_pool_free(&pool, pages + 3, 1), RKV_OK); /* partial page */
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    check_cache(c);
    cache_get_sizes(c, &s);
    ck_assert_int_eq(s.evictable_tokens, 6);
    ck_assert_int_eq(s.protected_tokens, 0);

    /* two requests racing to insert the same tokens: the second frees its
     * pages for [matched, prefix_len) */
    int32_t tok2[4] = {20, 21, 22, 23}, pa[2], pb[2];
    cache_match ma, mb;
    cache_match_init(&ma);
    cache_match_init(&mb);
    ck_assert_int_eq(cache_match_prefix(c, tok2, 4, 0, &ma), RKV_OK);
    ck_assert_int_eq(cache_match_prefix(c, tok2, 4, 0, &mb), RKV_OK);
    ck_assert_int_eq(ma.len + mb.len, 0);
    ck_assert_int_eq(page_pool_alloc(&pool, 2, pa), RKV_OK);
    ck_assert_int_eq(page_pool_alloc(&pool, 2, pb), RKV_OK);
    ck_assert_int_eq(cache_insert(c, tok2, 4, pa, 0, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 0);
    ck_assert_int_eq(cache_insert(c, tok2, 4, pb, 0, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 4);
    ck_assert_int_eq(page_pool_free(&pool, pb, prefix / 2), RKV_OK);
    check_cache(c);
    ck_assert_int_eq(pool.num_inflight, 0);

    /* evict everything, pages go back */
    ck_assert_int_eq(cache_evict(c, 1000), 10);
    check_cache(c);
    ck_assert_int_eq(pool.num_free, 16);
    ck_assert_uint_eq(c->stats.match_calls, 3);
    ck_assert_uint_eq(c->stats.insert_calls, 4);
    ck_assert_uint_eq(c->stats.matched_tokens, 4);
    ck_assert_uint_eq(c->stats.inserted_tokens, 10);
    ck_assert_uint_eq(c->stats.evicted_tokens, 10);
    cache_match_free(&m);
    cache_match_free(&ma);
    cache_match_free(&mb);
    done(c);
}
END_TEST

START_TEST(radix_dump_and_namespaces)
{
    cache *c = make("radix", NULL, 16, 1);
    int32_t tok[3] = {1, 2, 3}, pages[3], prefix;
    ck_assert_int_eq(page_pool_alloc(&pool, 3, pages), RKV_OK);
    ck_assert_int_eq(cache_insert(c, tok, 3, pages, 42, &prefix), RKV_OK);
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_prefix(c, tok, 3, 0, &m), RKV_OK);
    ck_assert_int_eq(m.len, 0);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK); /* nothing matched: a no-op */
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    ck_assert_int_eq(cache_match_prefix(c, tok, 3, 42, &m), RKV_OK);
    ck_assert_int_eq(m.len, 3);
    ck_assert_uint_eq(m.ns, 42);
    check_cache(c);
    char *buf = NULL;
    size_t sz = 0;
    FILE *f = open_memstream(&buf, &sz);
    cache_dump(c, f, CACHE_DUMP_JSON);
    fclose(f);
    json_error_t jerr;
    json_t *doc = json_loads(buf, 0, &jerr);
    ck_assert_msg(doc != NULL, "%s", jerr.text);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "nodes")), 3);
    json_decref(doc);
    free(buf);
    cache_match_free(&m);
    done(c);
}
END_TEST

START_TEST(none_kind)
{
    cache *c = make("none", NULL, 8, 2);
    int32_t tok[6] = {1, 2, 3, 4, 5, 6}, pages[3], prefix = -1;
    cache_match m;
    cache_match_init(&m);
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(cache_match_prefix(c, tok, 6, 0, &m), RKV_OK);
        ck_assert_int_eq(m.len, 0);
        ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
        ck_assert_int_eq(page_pool_alloc(&pool, 3, pages), RKV_OK);
        ck_assert_int_eq(cache_insert(c, tok, 6, pages, 0, &prefix), RKV_OK);
        ck_assert_int_eq(prefix, 0);
        check_cache(c);
        ck_assert_int_eq(pool.num_cached, 0);
        /* the cache took every page past the prefix (all) and freed them */
        ck_assert_int_eq(pool.num_inflight, 0);
        ck_assert_int_eq(pool.num_free, pool.num_pages);
        ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    }
    ck_assert_int_eq(cache_evict(c, 100), 0);
    check_cache(c);
    /* a page wrongly held as cached is caught */
    ck_assert_int_eq(page_pool_alloc(&pool, 1, pages), RKV_OK);
    ck_assert_int_eq(page_pool_adopt(&pool, pages, 1), RKV_OK);
    char err[256];
    ck_assert_int_eq(cache_check(c, err, sizeof err), RKV_ECORRUPT);
    ck_assert_int_eq(page_pool_free(&pool, pages, 1), RKV_OK);
    cache_match_free(&m);
    done(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("interface");
    tcase_add_test(tc, create_by_name);
    tcase_add_test(tc, match_storage);
    tcase_add_test(tc, ownership_flow);
    tcase_add_test(tc, radix_dump_and_namespaces);
    tcase_add_test(tc, none_kind);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
