/* test_cache_trie.c - the per-token trie: hand cases, and seeded random
 * operations against a page-level reference model with an invariant check
 * after every step. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_test_util.h"

static int32_t look(cache *c, const int32_t *tokens, int32_t n, uint64_t ns)
{
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_prefix(c, tokens, n, ns, &m), RKV_OK);
    int32_t len = m.len;
    cache_match_free(&m);
    return len;
}

static int32_t put(cache *c, const int32_t *tokens, int32_t n, uint64_t ns)
{
    cache_match m;
    cache_match_init(&m);
    int32_t matched = 0, prefix = 0;
    ck_assert_int_eq(tu_request(c, tokens, n, ns, &m, &matched, &prefix), RKV_OK);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    cache_match_free(&m);
    ck_cache_ok(c);
    return prefix;
}

static cache_sizes sizes(const cache *c)
{
    cache_sizes s;
    cache_get_sizes(c, &s);
    return s;
}

START_TEST(tokens_share_nodes)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 32, 1), RKV_OK);
    cache *c = tu_create("trie", NULL, &pool);
    const int32_t a[4] = {1, 2, 3, 4}, b[3] = {1, 2, 5}, q[4] = {1, 2, 5, 9};
    ck_assert_int_eq(put(c, a, 4, 0), 0);
    ck_assert_int_eq(put(c, b, 3, 0), 2);
    ck_assert_int_eq(sizes(c).num_nodes, 5);
    ck_assert_int_eq(sizes(c).evictable_tokens, 5);
    /* Lock 1 2 5: eviction may take only 4, then 3 (childless at once). */
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_prefix(c, q, 4, 0, &m), RKV_OK);
    ck_assert_int_eq(m.len, 3);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
    ck_assert_int_eq(sizes(c).protected_tokens, 3);
    ck_assert_int_eq(sizes(c).evictable_tokens, 2);
    ck_assert_int_eq(cache_evict(c, 1), 1);
    ck_assert_int_eq(look(c, a, 4, 0), 3);
    ck_assert_int_eq(cache_evict(c, 100), 1);
    ck_assert_int_eq(look(c, a, 4, 0), 2);
    ck_assert_int_eq(sizes(c).num_nodes, 3);
    ck_cache_ok(c);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_EINVAL);
    ck_assert_int_eq(cache_evict(c, 100), 3);
    ck_assert_int_eq(sizes(c).num_nodes, 0);
    ck_assert_int_eq(pool.num_free, 32);
    ck_cache_ok(c);
    cache_match_free(&m);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(lru_leaf_order)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 32, 1), RKV_OK);
    cache *c = tu_create("trie", NULL, &pool);
    const int32_t a[3] = {1, 2, 3}, b[2] = {5, 6}, d[2] = {1, 7};
    put(c, a, 3, 0); /* t1..: 1 2 3 */
    put(c, b, 2, 0); /* 5 6 */
    put(c, d, 2, 0); /* 1 re-entered, 7 new */
    /* Leaves by time: 3 (oldest), 6, 7. Evicting 3 leaves 2 childless, and
     * 2 is older than 6. */
    ck_assert_int_eq(cache_evict(c, 1), 1);
    ck_assert_int_eq(look(c, a, 3, 0), 2);
    /* look() entered 1 and 2: now 6 is the oldest leaf. */
    ck_assert_int_eq(cache_evict(c, 1), 1);
    ck_assert_int_eq(look(c, b, 2, 0), 1);
    ck_assert_int_eq(look(c, a, 3, 0), 2);
    ck_assert_int_eq(cache_evict(c, 2), 2); /* 7 (t6), then 5 (childless since 6 went) */
    ck_assert_int_eq(look(c, d, 2, 0), 1);
    ck_assert_int_eq(look(c, a, 3, 0), 2);
    ck_cache_ok(c);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(pages_end_at_their_last_token)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 32, 2), RKV_OK);
    cache *c = tu_create("trie", NULL, &pool);
    const int32_t a[5] = {1, 2, 3, 4, 5}, b[4] = {1, 2, 3, 9};
    ck_assert_int_eq(put(c, a, 5, 0), 0); /* pages (1 2) (3 4); 5 is a partial page */
    ck_assert_int_eq(sizes(c).num_nodes, 4);
    ck_assert_int_eq(look(c, b, 4, 0), 2);
    ck_assert_int_eq(look(c, a, 3, 0), 2);
    /* (3 9) branches inside a page: node 3 is shared by two pages. */
    ck_assert_int_eq(put(c, b, 4, 0), 2);
    ck_assert_int_eq(sizes(c).num_nodes, 5);
    ck_assert_int_eq(sizes(c).evictable_tokens, 6);
    ck_assert_int_eq(pool.num_cached, 3);
    ck_assert_int_eq(cache_evict(c, 1), 2); /* a whole page: (3 4), the older leaf */
    ck_assert_int_eq(look(c, a, 4, 0), 2);
    ck_assert_int_eq(look(c, b, 4, 0), 4);
    ck_assert_int_eq(sizes(c).num_nodes, 4);
    ck_assert_int_eq(cache_evict(c, 2), 2); /* (3 9) goes with node 3 */
    ck_assert_int_eq(sizes(c).num_nodes, 2);
    ck_assert_int_eq(look(c, b, 4, 0), 2);
    ck_cache_ok(c);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_JSON);
    fclose(f);
    ck_assert_msg(strchr(buf, '\n') == buf + len - 1, "one line: %s", buf);
    ck_assert(strstr(buf, "\"kind\":\"trie\"") && strstr(buf, "\"tokens\":[2],\"page\":"));
    free(buf);
    f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_DOT);
    cache_dump(c, f, CACHE_DUMP_TEXT);
    fclose(f);
    ck_assert(strstr(buf, "digraph") && strstr(buf, "2 token nodes"));
    free(buf);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, 32);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(namespaces_apart)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 32, 2), RKV_OK);
    cache *c = tu_create("trie", NULL, &pool);
    const int32_t a[4] = {1, 2, 3, 4};
    ck_assert_int_eq(put(c, a, 4, 0), 0);
    ck_assert_int_eq(look(c, a, 4, 5), 0);
    ck_assert_int_eq(put(c, a, 4, 5), 0);
    ck_assert_int_eq(look(c, a, 4, 5), 4);
    ck_assert_int_eq(pool.num_cached, 4);
    /* Locks stay in their namespace. */
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_prefix(c, a, 4, 5, &m), RKV_OK);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
    ck_assert_int_eq(cache_evict(c, 100), 4);
    ck_assert_int_eq(look(c, a, 4, 0), 0);
    ck_assert_int_eq(look(c, a, 4, 5), 4);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    ck_cache_ok(c);
    /* The emptied namespace is forgotten; the other stays. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_TEXT);
    fclose(f);
    ck_assert_msg(!strstr(buf, "\nns 0\n") && strstr(buf, "\nns 5\n"), "dump: %s", buf);
    free(buf);
    ck_assert_int_eq(put(c, a, 4, 0), 0);
    ck_assert_int_eq(look(c, a, 4, 0), 4);
    ck_assert_int_eq(c->stats.inserted_tokens, 12);
    ck_assert_int_eq(c->stats.evicted_tokens, 4);
    cache_match_free(&m);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(bad_input)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
    cache_config cfg = {"trie", "mru", NULL};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(cache_trie_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "mru") != NULL, "message '%s' names the policy", err);
    c = tu_create("trie", NULL, &pool);
    const int32_t t[4] = {1, 2, 3, 4};
    int32_t pages[2] = {0, 6}, prefix = -1;
    ck_assert_int_eq(page_pool_alloc(&pool, 1, pages), RKV_OK);
    ck_assert_int_eq(cache_insert(c, t, 4, pages, 0, &prefix), RKV_EINVAL);
    ck_assert_int_eq(sizes(c).num_nodes, 0);
    ck_assert_int_eq(pool.num_inflight, 1);
    ck_cache_ok(c);
    ck_assert_int_eq(page_pool_free(&pool, pages, 1), RKV_OK);
    cache_match m;
    cache_match_init(&m);
    m.len = 2;
    m.handle = (void *)(uintptr_t)1000;
    ck_assert_int_eq(cache_lock(c, &m), RKV_EINVAL);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

/* ---- reference model: the set of cached pages, each a whole prefix ------ */

enum { MAXT = 16, MAXE = 256, MAXHELD = 4 };

typedef struct ref_entry {
    uint64_t ns;
    int32_t len;          /* tokens, a multiple of P */
    int32_t tokens[MAXT];
    int32_t page;
    int32_t ref;
    uint64_t time, created;
} ref_entry;

typedef struct ref_model {
    int32_t P;
    ref_entry e[MAXE];
    int32_t n;
    uint64_t clock, seq;
} ref_model;

static int32_t ref_find(const ref_model *r, uint64_t ns, const int32_t *t, int32_t len)
{
    for (int32_t i = 0; i < r->n; i++)
        if (r->e[i].ns == ns && r->e[i].len == len &&
            memcmp(r->e[i].tokens, t, sizeof(int32_t) * (size_t)len) == 0)
            return i;
    return -1;
}

/* Longest cached prefix of t[0..n) in pages; stamps the entries on it. */
static int32_t ref_walk(ref_model *r, uint64_t ns, const int32_t *t, int32_t n, int32_t *pages)
{
    int32_t k = 0;
    for (int32_t len = r->P; len <= n; len += r->P, k++) {
        int32_t i = ref_find(r, ns, t, len);
        if (i < 0) break;
        r->e[i].time = r->clock;
        if (pages) pages[k] = r->e[i].page;
    }
    return k * r->P;
}

static int32_t ref_match(ref_model *r, uint64_t ns, const int32_t *t, int32_t n, int32_t *pages)
{
    r->clock++;
    return ref_walk(r, ns, t, n, pages);
}

static int32_t ref_insert(ref_model *r, uint64_t ns, const int32_t *t, int32_t n,
                          const int32_t *pages)
{
    r->clock++;
    int32_t have = ref_walk(r, ns, t, n, NULL);
    for (int32_t len = have + r->P; len <= n; len += r->P) {
        ck_assert_int_lt(r->n, MAXE);
        ref_entry *e = &r->e[r->n++];
        e->ns = ns;
        e->len = len;
        memcpy(e->tokens, t, sizeof(int32_t) * (size_t)len);
        e->page = pages[len / r->P - 1];
        e->ref = 0;
        e->time = r->clock;
        e->created = r->seq++;
    }
    return have;
}

static void ref_lock(ref_model *r, uint64_t ns, const int32_t *t, int32_t len, int up)
{
    for (int32_t l = r->P; l <= len; l += r->P) r->e[ref_find(r, ns, t, l)].ref += up;
}

static int ref_is_leaf(const ref_model *r, int32_t i)
{
    const ref_entry *e = &r->e[i];
    for (int32_t j = 0; j < r->n; j++)
        if (r->e[j].ns == e->ns && r->e[j].len == e->len + r->P &&
            memcmp(r->e[j].tokens, e->tokens, sizeof(int32_t) * (size_t)e->len) == 0)
            return 0;
    return 1;
}

static int64_t ref_evict(ref_model *r, int64_t n)
{
    int64_t freed = 0;
    while (freed < n) {
        int32_t best = -1;
        for (int32_t i = 0; i < r->n; i++) {
            if (r->e[i].ref || !ref_is_leaf(r, i)) continue;
            if (best < 0 || r->e[i].time < r->e[best].time ||
                (r->e[i].time == r->e[best].time && r->e[i].created < r->e[best].created))
                best = i;
        }
        if (best < 0) break;
        r->e[best] = r->e[--r->n];
        freed += r->P;
    }
    return freed;
}

typedef struct held {
    cache_match m;
    uint64_t ns;
    int32_t tokens[MAXT];
} held;

START_TEST(random_against_reference)
{
    static const int32_t Ps[] = {1, 2, 4};
    const int32_t P = Ps[_i % 3];
    /* A wide alphabet gives nodes more children than the list holds. */
    const int32_t alphabet = _i < 3 ? 3 : 12;
    unsigned seed = 4242u + (unsigned)_i;
    srand(seed);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 24, P), RKV_OK);
    cache *c = tu_create("trie", NULL, &pool);
    static ref_model r;
    memset(&r, 0, sizeof r);
    r.P = P;
    held hold[MAXHELD];
    int nheld = 0;
    int32_t prev[MAXT] = {0}, t[MAXT], pages[MAXT], want[MAXT];
    for (int step = 0; step < 400; step++) {
        int op = rand() % 10;
        if (op < 6) {
            /* A request: match, lock, room, insert, free duplicates. */
            int32_t n = 1 + rand() % MAXT, keep = rand() % (n + 1);
            for (int32_t i = 0; i < n; i++) t[i] = i < keep ? prev[i] : rand() % alphabet;
            memcpy(prev, t, sizeof t);
            uint64_t ns = (uint64_t)(rand() % 2) * 9;
            held *h = nheld < MAXHELD ? &hold[nheld] : NULL;
            cache_match tmp;
            cache_match *m = h ? &h->m : &tmp;
            cache_match_init(m);
            ck_assert_int_eq(cache_match_prefix(c, t, n, ns, m), RKV_OK);
            int32_t rm = ref_match(&r, ns, t, n, want);
            ck_assert_msg(m->len == rm, "seed %u step %d: matched %d, reference %d", seed, step,
                          m->len, rm);
            for (int32_t i = 0; i < m->num_pages; i++)
                ck_assert_msg(m->pages[i] == want[i], "seed %u step %d: page %d", seed, step, i);
            ck_assert_int_eq(cache_lock(c, m), RKV_OK);
            ref_lock(&r, ns, t, m->len, +1);
            int32_t nb = n / P, need = nb - m->num_pages, fr = page_pool_num_free(&pool);
            if (need > fr) {
                int64_t e = cache_evict(c, (int64_t)(need - fr) * P);
                ck_assert_msg(e == ref_evict(&r, (int64_t)(need - fr) * P),
                              "seed %u step %d: evicted %lld", seed, step, (long long)e);
            }
            int ok = need <= page_pool_num_free(&pool);
            if (ok) {
                if (m->num_pages) memcpy(pages, m->pages, sizeof(int32_t) * (size_t)m->num_pages);
                ck_assert_int_eq(page_pool_alloc(&pool, need, pages + m->num_pages), RKV_OK);
                int32_t prefix = -1;
                ck_assert_int_eq(cache_insert(c, t, n, pages, ns, &prefix), RKV_OK);
                int32_t rp = ref_insert(&r, ns, t, n, pages);
                ck_assert_msg(prefix == rp, "seed %u step %d: prefix %d, reference %d", seed,
                              step, prefix, rp);
                ck_assert_int_eq(prefix, m->len); /* locked, so nothing came or went */
            }
            if (h && ok && rand() % 2) {
                h->ns = ns;
                memcpy(h->tokens, t, sizeof t);
                nheld++;
            } else {
                ck_assert_int_eq(cache_unlock(c, m), RKV_OK);
                ref_lock(&r, ns, t, m->len, -1);
                cache_match_free(m);
            }
        } else if (op < 8 && nheld > 0) {
            int k = rand() % nheld;
            held *h = &hold[k];
            ck_assert_int_eq(cache_unlock(c, &h->m), RKV_OK);
            ref_lock(&r, h->ns, h->tokens, h->m.len, -1);
            cache_match_free(&h->m);
            hold[k] = hold[--nheld];
        } else {
            int64_t want_n = rand() % (3 * P + 1);
            int64_t e = cache_evict(c, want_n);
            ck_assert_msg(e == ref_evict(&r, want_n), "seed %u step %d: evicted %lld", seed,
                          step, (long long)e);
        }
        cache_sizes s = sizes(c);
        int64_t ev = 0, pr = 0;
        for (int32_t i = 0; i < r.n; i++) *(r.e[i].ref ? &pr : &ev) += P;
        ck_assert_msg(s.evictable_tokens == ev && s.protected_tokens == pr,
                      "seed %u step %d: sizes %lld/%lld, reference %lld/%lld", seed, step,
                      (long long)s.evictable_tokens, (long long)s.protected_tokens,
                      (long long)ev, (long long)pr);
        ck_assert_int_eq(pool.num_inflight, 0);
        char err[512] = "";
        ck_assert_msg(cache_check(c, err, sizeof err) == RKV_OK, "seed %u step %d: %s", seed,
                      step, err);
    }
    while (nheld > 0) {
        ck_assert_int_eq(cache_unlock(c, &hold[nheld - 1].m), RKV_OK);
        cache_match_free(&hold[--nheld].m);
    }
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, 24);
    page_pool_destroy(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache_trie");
    TCase *tc = tcase_create("trie");
    tcase_add_test(tc, tokens_share_nodes);
    tcase_add_test(tc, lru_leaf_order);
    tcase_add_test(tc, pages_end_at_their_last_token);
    tcase_add_test(tc, namespaces_apart);
    tcase_add_test(tc, bad_input);
    tcase_add_loop_test(tc, random_against_reference, 0, 6);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
