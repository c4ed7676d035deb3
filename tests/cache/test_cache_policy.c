/* test_cache_policy.c - the eviction-policy table and the policies through
 * every kind that orders its eviction (CACHE_KIND_EVICTS in the registry):
 * hand cases where priority and cost keep what lru would evict. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache_test_util.h"
#include "evict_policy.h"

START_TEST(table_and_keys)
{
    ck_assert_ptr_eq(evict_policy_find(NULL), evict_policies[0]);
    ck_assert_str_eq(evict_policies[0]->name, "lru");
    ck_assert_ptr_null(evict_policy_find("mru"));
    int n = evict_policy_count();
    ck_assert_int_ge(n, 5);
    for (int i = 0; i < n; i++) {
        ck_assert_ptr_eq(evict_policy_find(evict_policy_name_list[i]), evict_policies[i]);
        ck_assert_int_eq(evict_policy_index(evict_policies[i]), i);
        for (int j = 0; j < i; j++) ck_assert_str_ne(evict_policies[i]->name, evict_policies[j]->name);
    }
    ck_assert_ptr_null(evict_policy_name_list[n]);
    char names[256];
    ck_assert_ptr_nonnull(strstr(evict_policy_names(names, sizeof names), "priority"));

    const evict_policy *lru = evict_policy_find("lru"), *lfu = evict_policy_find("lfu"),
                       *fifo = evict_policy_find("fifo"), *pri = evict_policy_find("priority"),
                       *cost = evict_policy_find("cost");
    evict_node old = {.time = 3, .hits = 9, .len = 4}, young = {.time = 7, .hits = 1, .len = 4};
    ck_assert(evict_key_less(lru->key(&old), lru->key(&young)));
    ck_assert(evict_key_less(lfu->key(&young), lfu->key(&old)));
    ck_assert(!evict_key_less(fifo->key(&old), fifo->key(&young)));
    ck_assert(!evict_key_less(fifo->key(&young), fifo->key(&old)));
    /* priority: signed, lower first; equal priorities fall back to time */
    evict_node neg = {.time = 9, .priority = -1}, zero = {.time = 1, .priority = 0},
               high = {.time = 0, .priority = 3}, zero_late = {.time = 5, .priority = 0};
    ck_assert(evict_key_less(pri->key(&neg), pri->key(&zero)));
    ck_assert(evict_key_less(pri->key(&zero), pri->key(&high)));
    ck_assert(evict_key_less(pri->key(&zero), pri->key(&zero_late)));
    ck_assert_uint_eq(pri->needs, EVICT_NEEDS_PRIORITY);
    /* cost: value = hits * (8192 + depth + (len + 1) / 2), exactly */
    evict_node c1 = {.time = 1, .hits = 2, .depth = 100, .len = 16};
    evict_key k = cost->key(&c1);
    double v;
    memcpy(&v, &k.k0, sizeof v);
    ck_assert(v == 2.0 * (8192.0 + 100.0 + 8.5));
    evict_node deep = {.time = 1, .hits = 1, .depth = 4000, .len = 16},
               shallow = {.time = 9, .hits = 1, .depth = 0, .len = 16},
               shallow_hot = {.time = 0, .hits = 2, .depth = 0, .len = 16};
    ck_assert(evict_key_less(cost->key(&shallow), cost->key(&deep)));
    ck_assert(evict_key_less(cost->key(&deep), cost->key(&shallow_hot)));
    ck_assert_uint_eq(cost->needs, EVICT_NEEDS_DEPTH | EVICT_NEEDS_HITS);
    ck_assert_uint_eq(lfu->needs, EVICT_NEEDS_HITS);
    ck_assert_uint_eq(lru->needs, 0);
}
END_TEST

/* The kinds that order eviction, from the registry. */
static const char *evicting_kind(int i)
{
    int seen = 0;
    for (const cache_kind *k = cache_kinds; k->name; k++)
        if ((k->caps & CACHE_KIND_EVICTS) && seen++ == i) return k->name;
    return NULL;
}

static int evicting_kinds(void)
{
    int n = 0;
    while (evicting_kind(n)) n++;
    return n;
}

typedef struct fixture {
    page_pool pool;
    cache *c;
    cache_match m;
} fixture;

static void open_kind(fixture *f, const char *kind, const char *policy)
{
    ck_assert_int_eq(page_pool_init(&f->pool, 64, 2), RKV_OK);
    cache_config cfg = {kind, policy, NULL};
    char err[256] = "";
    ck_assert_msg(cache_create(&cfg, &f->pool, &f->c, err, sizeof err) == RKV_OK, "%s: %s", kind, err);
    cache_match_init(&f->m);
}

static void close_kind(fixture *f)
{
    ck_cache_ok(f->c);
    cache_match_free(&f->m);
    cache_destroy(f->c);
    ck_assert_int_eq(f->pool.num_cached, 0);
    page_pool_destroy(&f->pool);
}

/* One finished request with the given priority: cached, then unlocked. */
static void request(fixture *f, const int32_t *t, int32_t n, int32_t priority)
{
    int32_t matched = 0, prefix = 0;
    cache_set_priority(f->c, priority);
    ck_assert_int_eq(tu_request(f->c, t, n, 0, &f->m, &matched, &prefix), RKV_OK);
    ck_assert_int_eq(cache_unlock(f->c, &f->m), RKV_OK);
    ck_cache_ok(f->c);
}

static int32_t cached_len(fixture *f, const int32_t *t, int32_t n)
{
    ck_assert_int_eq(cache_match_prefix(f->c, t, n, 0, &f->m), RKV_OK);
    return f->m.len;
}

/* X (priority 5) is the oldest; Y and Z (priority 0) follow. lru evicts X
 * first, priority evicts Y (lowest priority, then least recent). */
static void priority_case(const char *kind, const char *policy, int32_t *x_left, int32_t *y_left)
{
    fixture f;
    open_kind(&f, kind, policy);
    const int32_t X[] = {1, 2, 3, 4}, Y[] = {5, 6, 7, 8}, Z[] = {9, 10, 11, 12};
    request(&f, X, 4, 5);
    request(&f, Y, 4, 0);
    request(&f, Z, 4, 0);
    ck_assert_int_ge(cache_evict(f.c, 2), 2);
    ck_cache_ok(f.c);
    cache_set_priority(f.c, 0);
    *x_left = cached_len(&f, X, 4);
    *y_left = cached_len(&f, Y, 4);
    ck_assert_int_eq(cached_len(&f, Z, 4), 4);
    close_kind(&f);
}

START_TEST(priority_keeps_the_important)
{
    const char *kind = evicting_kind(_i);
    int32_t x, y;
    priority_case(kind, "priority", &x, &y);
    ck_assert_msg(x == 4 && y < 4, "%s priority: X %d (kept), Y %d (evicted)", kind, x, y);
    priority_case(kind, "lru", &x, &y);
    ck_assert_msg(x < 4 && y == 4, "%s lru: X %d (evicted), Y %d (kept)", kind, x, y);
}
END_TEST

/* A shared prefix keeps the highest priority that entered it: S+A (priority
 * 9), then S+B and C (priority 0). The priority policy evicts B (0, older than
 * C) and never S's pages, which A needs. */
START_TEST(priority_shared_prefix_keeps_the_highest)
{
    const char *kind = evicting_kind(_i);
    fixture f;
    open_kind(&f, kind, "priority");
    const int32_t SA[] = {20, 21, 22, 23}, SB[] = {20, 21, 30, 31}, C[] = {40, 41};
    request(&f, SA, 4, 9);
    request(&f, SB, 4, 0);
    request(&f, C, 2, 0);
    ck_assert_int_ge(cache_evict(f.c, 2), 2);
    ck_assert_int_eq(cached_len(&f, SA, 4), 4);
    ck_assert_int_eq(cached_len(&f, C, 2), 2);
    ck_assert_int_eq(cached_len(&f, SB, 4), 2);
    close_kind(&f);
}
END_TEST

/* D ends a long prompt (depth 8), E is a short one (depth 0), inserted after
 * D and as often hit. lru evicts D (older), cost evicts E (cheaper to
 * recompute); once E is hit twice more its value passes D's. */
static void cost_case(const char *kind, const char *policy, int32_t e_hits, int32_t *d_left,
                      int32_t *e_left)
{
    fixture f;
    open_kind(&f, kind, policy);
    const int32_t S[] = {1, 2, 3, 4, 5, 6, 7, 8}, SD[] = {1, 2, 3, 4, 5, 6, 7, 8, 50, 51},
                  E[] = {60, 61};
    request(&f, S, 8, 0);
    request(&f, SD, 10, 0);
    request(&f, E, 2, 0);
    for (int32_t i = 0; i < e_hits; i++) ck_assert_int_eq(cached_len(&f, E, 2), 2);
    ck_assert_int_ge(cache_evict(f.c, 2), 2);
    ck_cache_ok(f.c);
    *d_left = cached_len(&f, SD, 10);
    *e_left = cached_len(&f, E, 2);
    close_kind(&f);
}

START_TEST(cost_keeps_the_deep)
{
    const char *kind = evicting_kind(_i);
    int32_t d, e;
    cost_case(kind, "cost", 0, &d, &e);
    ck_assert_msg(d == 10 && e == 0, "%s cost: D %d (kept), E %d (evicted)", kind, d, e);
    cost_case(kind, "lru", 0, &d, &e);
    ck_assert_msg(d == 8 && e == 2, "%s lru: D %d (evicted), E %d (kept)", kind, d, e);
    /* Hits multiply the value: E hit twice more (3 hits) outweighs D's depth. */
    cost_case(kind, "cost", 2, &d, &e);
    ck_assert_msg(d == 8 && e == 2, "%s cost, hot E: D %d (evicted), E %d (kept)", kind, d, e);
}
END_TEST

/* Every registered policy is accepted by every kind, an unknown one by none. */
START_TEST(every_kind_takes_every_policy)
{
    for (const cache_kind *k = cache_kinds; k->name; k++) {
        for (int i = 0; evict_policies[i]; i++) {
            fixture f;
            open_kind(&f, k->name, evict_policies[i]->name);
            const int32_t T[] = {1, 2, 3, 4, 5, 6};
            request(&f, T, 6, i);
            cache_evict(f.c, 64);
            close_kind(&f);
        }
        page_pool pool;
        ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
        cache_config cfg = {k->name, "mru", NULL};
        cache *c = NULL;
        char err[256] = "";
        ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
        ck_assert_msg(strstr(err, "mru") && strstr(err, "cost"), "%s: '%s' names it and the choices",
                      k->name, err);
        page_pool_destroy(&pool);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache_policy");
    TCase *tc = tcase_create("policy");
    int nk = evicting_kinds();
    tcase_add_test(tc, table_and_keys);
    tcase_add_loop_test(tc, priority_keeps_the_important, 0, nk);
    tcase_add_loop_test(tc, priority_shared_prefix_keeps_the_highest, 0, nk);
    tcase_add_loop_test(tc, cost_keeps_the_deep, 0, nk);
    tcase_add_test(tc, every_kind_takes_every_policy);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
