/* test_cache_client.c - the admit/commit/release protocol (cache_client.h),
 * the capability flags and the node hooks of cache.h, on every kind. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cache_client.h"
#include "cache_test_util.h"
#include "cache_tier.h"

enum { P = 4, PAGES = 8 };

static const char *const kinds[] = {"radix", "hash", "hash-nocache", "trie", "none"};

/* Pool accounting: free + cached + in flight = pool. */
static void ck_pool(const page_pool *p)
{
    char err[256] = "";
    ck_assert_msg(page_pool_check(p, err, sizeof err) == RKV_OK, "%s", err);
}

START_TEST(admit_commit_release_leaves_no_page_behind)
{
    const char *kind = kinds[_i];
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *c = tu_create(kind, NULL, &pool);
    int32_t a[10], b[10], pages[3];
    for (int i = 0; i < 10; i++) a[i] = b[i] = i + 1;
    b[9] = 99;
    cache_match m;
    cache_match_init(&m);
    /* 10 tokens: 3 pages, the last one partial; commit frees it. */
    ck_assert_int_eq(cache_client_admit(c, a, 9, 0, 3, &m, pages, NULL), RKV_OK);
    ck_assert_int_eq(m.len, 0);
    ck_assert_int_eq(pool.num_inflight, 3);
    ck_assert_int_eq(cache_client_commit(c, a, 10, 0, pages, 0, 3, NULL), RKV_OK);
    ck_assert_int_eq(pool.num_inflight, 0);
    ck_assert_int_eq(cache_client_release(c, &m, NULL, 0), RKV_OK);
    ck_assert_int_eq(m.len, 0);
    bool reuse = cache_can(c, CACHE_CAP_REUSE);
    ck_assert_int_eq(reuse, strcmp(kind, "none") && strcmp(kind, "hash-nocache"));
    ck_assert_int_eq(pool.num_free, reuse ? PAGES - 2 : PAGES);
    /* The same prefix again: two cached pages come back locked. */
    ck_assert_int_eq(cache_client_admit(c, b, 9, 0, 3, &m, pages, NULL), RKV_OK);
    ck_assert_int_eq(m.len, reuse ? 8 : 0);
    ck_assert_int_eq(pool.num_inflight, reuse ? 1 : 3);
    /* Released without a commit: its own pages go back too. */
    ck_assert_int_eq(cache_client_release(c, &m, pages + m.num_pages, 3 - m.num_pages), RKV_OK);
    ck_assert_int_eq(pool.num_inflight, 0);
    ck_cache_ok(c);
    ck_pool(&pool);
    cache_match_free(&m);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(reserve_evicts_the_shortfall_and_stops_at_locks)
{
    const char *kind = kinds[_i];
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *c = tu_create(kind, NULL, &pool);
    int32_t t[PAGES * P], pages[PAGES];
    for (int i = 0; i < PAGES * P; i++) t[i] = 1000 + i;
    cache_match m, held;
    cache_match_init(&m);
    cache_match_init(&held);
    /* Fill the pool with one cached sequence of 6 pages. */
    ck_assert_int_eq(cache_client_admit(c, t, 6 * P, 0, 6, &m, pages, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_commit(c, t, 6 * P, 0, pages, 0, 6, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_release(c, &m, NULL, 0), RKV_OK);
    int64_t evicted = 0;
    bool reuse = cache_can(c, CACHE_CAP_REUSE);
    ck_assert_int_eq(cache_client_reserve(c, 5, pages, &evicted), RKV_OK);
    ck_assert_int_eq(evicted >= (reuse ? 3 * P : 0), 1);
    ck_assert_int_eq(page_pool_free(&pool, pages, 5), RKV_OK);
    /* Everything cached locked: a reserve beyond the free pages fails clean. */
    if (reuse) {
        ck_assert_int_eq(cache_client_admit(c, t, 8 * P, 0, 8, &m, pages, NULL), RKV_OK);
        ck_assert_int_eq(cache_client_commit(c, t, 8 * P, 0, pages, m.num_pages, 8, NULL), RKV_OK);
        ck_assert_int_eq(cache_client_release(c, &m, NULL, 0), RKV_OK);
        ck_assert_int_eq(cache_client_match(c, t, 8 * P, 0, &held), RKV_OK);
        ck_assert_int_eq(held.len, 8 * P);
        int32_t free0 = pool.num_free;
        ck_assert_int_eq(cache_client_reserve(c, 1, pages, NULL), RKV_ENOSPC);
        ck_assert_int_eq(pool.num_free, free0);
        ck_assert_int_eq(cache_client_release(c, &held, NULL, 0), RKV_OK);
    }
    ck_cache_ok(c);
    ck_pool(&pool);
    cache_match_free(&m);
    cache_match_free(&held);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

typedef struct seen {
    int evicted, visited;
    int32_t evicted_tokens;
} seen;

static void count_evict(void *ctx, const cache_node_info *n)
{
    seen *s = ctx;
    s->evicted++;
    s->evicted_tokens += n->len;
}

static void count_visit(void *ctx, const cache_node_info *n)
{
    seen *s = ctx;
    (void)n;
    s->visited++;
}

/* The node hooks exist for radix (also through a spill tier) and nowhere else. */
START_TEST(node_hooks_report_evictions_through_a_tier)
{
    const char *kind = kinds[_i];
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *inner = tu_create(kind, NULL, &pool), *c = NULL;
    tier_config tc;
    tier_config_default(&tc);
    tc.host_pages = 4;
    char err[256] = "";
    ck_assert_msg(cache_tier_wrap(inner, &tc, NULL, &c, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_int_eq(c->caps, inner->caps);
    bool radix = !strcmp(kind, "radix");
    seen s = {0, 0, 0};
    ck_assert_int_eq(cache_set_evict_hook(c, count_evict, &s), radix);
    uint64_t clock = 0;
    ck_assert_int_eq(cache_clock(c, &clock), radix);
    ck_assert_int_eq(cache_visit(c, count_visit, &s), radix);
    int32_t t[3 * P], pages[3];
    for (int i = 0; i < 3 * P; i++) t[i] = 7 + i;
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_client_admit(c, t, 3 * P, 0, 3, &m, pages, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_commit(c, t, 3 * P, 0, pages, 0, 3, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_release(c, &m, NULL, 0), RKV_OK);
    int64_t freed = cache_evict(c, 3 * P);
    if (radix) {
        uint64_t clock2 = 0;
        ck_assert(cache_clock(c, &clock2) && clock2 > clock);
        ck_assert_int_eq(s.evicted, 1);
        ck_assert_int_eq(s.evicted_tokens, freed);
        ck_assert_int_eq(freed, 3 * P);
        s.visited = 0;
        cache_visit(c, count_visit, &s);
        ck_assert_int_eq(s.visited, 1); /* the root alone */
        ck_assert(cache_set_evict_hook(c, NULL, NULL));
    } else {
        ck_assert_int_eq(s.evicted + s.visited, 0);
    }
    cache_match_free(&m);
    cache_destroy(c); /* the tier destroys its kind */
    page_pool_destroy(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache_client");
    TCase *tc = tcase_create("protocol");
    int n = (int)(sizeof kinds / sizeof kinds[0]);
    tcase_add_loop_test(tc, admit_commit_release_leaves_no_page_behind, 0, n);
    tcase_add_loop_test(tc, reserve_evicts_the_shortfall_and_stops_at_locks, 0, n);
    tcase_add_loop_test(tc, node_hooks_report_evictions_through_a_tier, 0, n);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
