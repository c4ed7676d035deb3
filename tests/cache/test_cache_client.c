/* test_cache_client.c - the admit/commit/release protocol (cache_client.h),
 * the capability flags and the node hooks of cache.h, on every kind. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cache_client.h"
#include "cache_test_util.h"
#include "check_run.h"
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
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    /* 10 tokens: 3 pages, the last one partial; commit frees it. */
    ck_assert_int_eq(cache_client_admit(c, &m, a, 9, 3, pages, NULL), RKV_OK);
    ck_assert_int_eq(m.len, 0);
    ck_assert_int_eq(pool.num_inflight, 3);
    ck_assert_int_eq(cache_client_commit(c, &(cache_seq){0}, a, 10, pages, 0, 3, NULL), RKV_OK);
    ck_assert_int_eq(pool.num_inflight, 0);
    ck_assert_int_eq(cache_client_release(c, &m, NULL, 0), RKV_OK);
    ck_assert_int_eq(m.len, 0);
    bool reuse = cache_can(c, CACHE_CAP_REUSE);
    ck_assert_int_eq(reuse, strcmp(kind, "none") && strcmp(kind, "hash-nocache"));
    ck_assert_int_eq(pool.num_free, reuse ? PAGES - 2 : PAGES);
    /* The same prefix again: two cached pages come back locked. */
    ck_assert_int_eq(cache_client_admit(c, &m, b, 9, 3, pages, NULL), RKV_OK);
    ck_assert_int_eq(m.len, reuse ? 8 : 0);
    ck_assert_int_eq(pool.num_inflight, reuse ? 1 : 3);
    /* Released without a commit: its own pages go back too. */
    ck_assert_int_eq(cache_client_release(c, &m, pages + m.num_pages, 3 - m.num_pages), RKV_OK);
    ck_assert_int_eq(pool.num_inflight, 0);
    ck_cache_ok(c);
    ck_pool(&pool);
    cache_seq_free(&m);
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
    cache_seq m, held;
    cache_seq_init(&m, 0, 0);
    cache_seq_init(&held, 0, 0);
    /* Fill the pool with one cached sequence of 6 pages. */
    ck_assert_int_eq(cache_client_admit(c, &m, t, 6 * P, 6, pages, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_commit(c, &(cache_seq){0}, t, 6 * P, pages, 0, 6, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_release(c, &m, NULL, 0), RKV_OK);
    int64_t evicted = 0;
    bool reuse = cache_can(c, CACHE_CAP_REUSE);
    ck_assert_int_eq(cache_client_reserve(c, 5, pages, &evicted), RKV_OK);
    ck_assert_int_eq(evicted >= (reuse ? 3 * P : 0), 1);
    ck_assert_int_eq(page_pool_free(&pool, pages, 5), RKV_OK);
    /* Everything cached locked: a reserve beyond the free pages fails clean. */
    if (reuse) {
        ck_assert_int_eq(cache_client_admit(c, &m, t, 8 * P, 8, pages, NULL), RKV_OK);
        ck_assert_int_eq(cache_client_commit(c, &m, t, 8 * P, pages, m.num_pages, 8, NULL), RKV_OK);
        ck_assert_int_eq(cache_client_release(c, &m, NULL, 0), RKV_OK);
        ck_assert_int_eq(cache_client_match(c, &held, t, 8 * P), RKV_OK);
        ck_assert_int_eq(held.len, 8 * P);
        int32_t free0 = pool.num_free;
        ck_assert_int_eq(cache_client_reserve(c, 1, pages, NULL), RKV_ENOSPC);
        ck_assert_int_eq(pool.num_free, free0);
        ck_assert_int_eq(cache_client_release(c, &held, NULL, 0), RKV_OK);
    }
    ck_cache_ok(c);
    ck_pool(&pool);
    cache_seq_free(&m);
    cache_seq_free(&held);
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
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(cache_client_admit(c, &m, t, 3 * P, 3, pages, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_commit(c, &(cache_seq){0}, t, 3 * P, pages, 0, 3, NULL), RKV_OK);
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
    cache_seq_free(&m);
    cache_destroy(c); /* the tier destroys its kind */
    page_pool_destroy(&pool);
}
END_TEST

/* cache_insert_hold() against its definition, on two caches driven alike:
 * A inserts with insert_hold, B with insert followed by a match of the same
 * tokens (and the held locks moved by hand). Under lru both orders of clock
 * ticks evict alike, so the caches stay equal page for page: the same
 * prefix lengths, the seq's path equal to B's match, the same sizes. */
enum { HP = 2, HPAGES = 24, HMAXT = 24, HSEQS = 3 };

typedef struct twin {
    page_pool pool;
    cache *c;
    cache_seq s[HSEQS]; /* requests in flight, locked or not */
} twin;

static void twin_open(twin *w, const char *kind)
{
    ck_assert_int_eq(page_pool_init(&w->pool, HPAGES, HP), RKV_OK);
    w->c = tu_create(kind, NULL, &w->pool);
    for (int i = 0; i < HSEQS; i++) cache_seq_init(&w->s[i], (uint64_t)(i % 2), 0);
}

static void twin_close(twin *w)
{
    for (int i = 0; i < HSEQS; i++) {
        while (w->s[i].locks) ck_assert_int_eq(cache_unlock(w->c, &w->s[i]), RKV_OK);
        cache_seq_free(&w->s[i]);
    }
    ck_cache_ok(w->c);
    cache_destroy(w->c);
    page_pool_destroy(&w->pool);
}

/* B's route: insert, then match into a fresh seq, lock it as often as s was
 * locked, unlock s as often, and keep the fresh one. */
static rkv_status insert_then_match(cache *c, cache_seq *s, const int32_t *t, int32_t n,
                                    const int32_t *pages, int32_t *prefix)
{
    rkv_status st = cache_insert(c, s, t, n, pages, prefix);
    if (st != RKV_OK) return st;
    cache_seq path;
    cache_seq_init(&path, s->ns, s->priority);
    ck_assert_int_eq(cache_match_prefix(c, &path, t, n), RKV_OK);
    for (int32_t k = 0; k < s->locks; k++) ck_assert_int_eq(cache_lock(c, &path), RKV_OK);
    while (s->locks) ck_assert_int_eq(cache_unlock(c, s), RKV_OK);
    cache_seq_free(s);
    *s = path;
    return RKV_OK;
}

/* Unlocked seqs forget their answer after an evict: its pages may be
 * others' now. */
static void twin_forget_unlocked(twin *w)
{
    for (int k = 0; k < HSEQS; k++)
        if (!w->s[k].locks) w->s[k].len = w->s[k].num_pages = 0;
}

/* Insert t[0..n) for seq i, whose held pages (locked) cover a prefix of t,
 * with fresh pages for the rest; the pages the cache did not adopt go back.
 * Returns the prefix (-1: no room). */
static int32_t twin_insert(twin *w, int i, const int32_t *t, int32_t n, bool hold)
{
    cache_seq *s = &w->s[i];
    int32_t nb = n / HP, pages[HMAXT / HP];
    int32_t k = s->num_pages;
    for (int32_t j = 0; j < k; j++) pages[j] = s->pages[j];
    if (page_pool_num_free(&w->pool) < nb - k) {
        cache_evict(w->c, (nb - k) * HP);
        twin_forget_unlocked(w);
    }
    if (page_pool_num_free(&w->pool) < nb - k) return -1;
    ck_assert_int_eq(page_pool_alloc(&w->pool, nb - k, pages + k), RKV_OK);
    int32_t prefix = -1;
    rkv_status st = hold ? cache_insert_hold(w->c, s, t, n, pages, &prefix)
                         : insert_then_match(w->c, s, t, n, pages, &prefix);
    ck_assert_int_eq(st, RKV_OK);
    for (int32_t j = k; j < nb; j++)
        if (page_pool_state(&w->pool, pages[j]) == PAGE_INFLIGHT)
            ck_assert_int_eq(page_pool_free(&w->pool, &pages[j], 1), RKV_OK);
    return prefix;
}

static void twin_drop(twin *w, int i)
{
    while (w->s[i].locks) ck_assert_int_eq(cache_unlock(w->c, &w->s[i]), RKV_OK);
    w->s[i].len = w->s[i].num_pages = 0;
}

START_TEST(insert_hold_is_insert_then_match)
{
    const char *kind = kinds[_i];
    twin a, b;
    twin_open(&a, kind);
    twin_open(&b, kind);
    uint64_t rng = 0x5eed0000u + (uint64_t)_i;
    int32_t t[HMAXT], prev[HMAXT] = {0}, prev_n = 0, held[HSEQS][HMAXT];
    long steps = tu_diff_steps(3000), holds = 0, moved = 0;
    for (long step = 0; step < steps; step++) {
        int i = tu_rand_below(&rng, HSEQS), op = tu_rand_below(&rng, 8);
        cache_seq *sa = &a.s[i], *sb = &b.s[i];
        if (op < 5) { /* a request: extend what the seq holds, or fresh tokens */
            int32_t n;
            if (sa->locks && sa->len < HMAXT && op < 3) {
                n = sa->len + 1 + tu_rand_below(&rng, HMAXT - sa->len);
                memcpy(t, held[i], sizeof(int32_t) * (size_t)sa->len);
                for (int32_t j = sa->len; j < n; j++) t[j] = tu_rand_below(&rng, 3);
            } else {
                twin_drop(&a, i);
                twin_drop(&b, i);
                n = tu_adversarial(&rng, HP, prev, prev_n, HMAXT, t);
                if (op < 2) {
                    ck_assert_int_eq(cache_client_match(a.c, sa, t, n), RKV_OK);
                    ck_assert_int_eq(cache_client_match(b.c, sb, t, n), RKV_OK);
                    ck_assert_int_eq(sa->len, sb->len);
                }
            }
            memcpy(prev, t, sizeof t);
            prev_n = n;
            moved += sa->locks > 0;
            int32_t pa = twin_insert(&a, i, t, n, true), pb = twin_insert(&b, i, t, n, false);
            ck_assert_msg(pa == pb, "%s step %ld: prefix %d, insert then match %d", kind, step, pa, pb);
            if (pa < 0) {
                twin_drop(&a, i);
                twin_drop(&b, i);
                continue;
            }
            holds++;
            memcpy(held[i], t, sizeof t);
            ck_assert_msg(sa->len == sb->len && sa->locks == sb->locks,
                          "%s step %ld: held %d (%d locks), match finds %d (%d locks)", kind,
                          step, sa->len, sa->locks, sb->len, sb->locks);
            if (cache_can(a.c, CACHE_CAP_REUSE)) ck_assert_int_eq(sa->len, n - n % HP);
            for (int32_t j = 0; j < sa->num_pages; j++)
                ck_assert_msg(sa->pages[j] == sb->pages[j], "%s step %ld: page %d", kind, step, j);
        } else if (op < 6) {
            if (sa->locks && sa->locks < 3) { /* one more hold on the same path */
                ck_assert_int_eq(cache_lock(a.c, sa), RKV_OK);
                ck_assert_int_eq(cache_lock(b.c, sb), RKV_OK);
            }
        } else if (op < 7) {
            twin_drop(&a, i);
            twin_drop(&b, i);
        } else {
            int64_t n = tu_rand_below(&rng, 4 * HP);
            ck_assert_int_eq(cache_evict(a.c, n), cache_evict(b.c, n));
            twin_forget_unlocked(&a);
            twin_forget_unlocked(&b);
        }
        cache_sizes za, zb;
        cache_get_sizes(a.c, &za);
        cache_get_sizes(b.c, &zb);
        ck_assert_msg(za.evictable_tokens == zb.evictable_tokens
                      && za.protected_tokens == zb.protected_tokens,
                      "%s step %ld: sizes %lld/%lld, insert then match %lld/%lld", kind, step,
                      (long long)za.evictable_tokens, (long long)za.protected_tokens,
                      (long long)zb.evictable_tokens, (long long)zb.protected_tokens);
        ck_cache_ok(a.c);
        ck_pool(&a.pool);
    }
    printf("insert_hold %s: %ld steps, %ld holds (%ld of them moving locks), same as insert then "
           "match\n", kind, steps, holds, moved);
    twin_close(&a);
    twin_close(&b);
}
END_TEST

/* A seq that holds locks is not matched again (its locks would be lost), nor
 * reset; an insert_hold that fails leaves it as it was. */
START_TEST(a_locked_seq_keeps_its_answer)
{
    const char *kind = kinds[_i];
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *c = tu_create(kind, NULL, &pool);
    int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8}, pages[2];
    cache_seq s;
    cache_seq_init(&s, 3, 0);
    ck_assert_int_eq(cache_client_admit(c, &s, t, 8, 2, pages, NULL), RKV_OK);
    ck_assert_int_eq(s.locks, 1);
    ck_assert_int_eq(cache_match_prefix(c, &s, t, 8), RKV_EINVAL);
    ck_assert_int_eq(cache_seq_reset(&s, 0, 0), RKV_EINVAL);
    ck_assert_int_eq(s.ns, 3);
    int32_t prefix = -1, bad[2] = {pages[0], PAGES + 5};
    if (cache_can(c, CACHE_CAP_REUSE)) { /* a page id out of the pool is refused */
        ck_assert_int_eq(cache_insert_hold(c, &s, t, 8, bad, &prefix), RKV_EINVAL);
        ck_assert_int_eq(s.len, 0);
        ck_assert_int_eq(s.locks, 1);
    }
    ck_assert_int_eq(cache_client_commit(c, &s, t, 8, pages, 0, 2, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_release(c, &s, NULL, 0), RKV_OK);
    ck_assert_int_eq(s.locks, 0);
    ck_assert_int_eq(cache_seq_reset(&s, 0, 0), RKV_OK);
    ck_cache_ok(c);
    ck_pool(&pool);
    cache_seq_free(&s);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

/* The priority travels with each request's seq: X at priority 5 and Y at 0,
 * their calls interleaved (match X, match Y, insert X, insert Y), as two
 * requests of one step are. The priority policy then evicts Y before X,
 * though X is older; with a priority set on the cache before each match, X's
 * insert would have carried Y's. */
START_TEST(priority_travels_with_the_seq)
{
    static const char *const evicting[] = {"radix", "hash", "trie"};
    const char *kind = evicting[_i];
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 4, P), RKV_OK);
    cache_config cfg = {kind, "priority", NULL, "dedup"};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_msg(cache_create(&cfg, &pool, &c, err, sizeof err) == RKV_OK, "%s", err);
    const int32_t x[P] = {1, 2, 3, 4}, y[P] = {5, 6, 7, 8};
    int32_t px[1], py[1];
    cache_seq sx, sy, probe;
    cache_seq_init(&sx, 0, 5);
    cache_seq_init(&sy, 0, 0);
    cache_seq_init(&probe, 0, 0);
    ck_assert_int_eq(cache_client_admit(c, &sx, x, P, 1, px, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_admit(c, &sy, y, P, 1, py, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_commit(c, &sx, x, P, px, 0, 1, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_commit(c, &sy, y, P, py, 0, 1, NULL), RKV_OK);
    ck_assert_int_eq(cache_client_release(c, &sx, NULL, 0), RKV_OK);
    ck_assert_int_eq(cache_client_release(c, &sy, NULL, 0), RKV_OK);
    ck_assert_int_eq(cache_evict(c, P), P);
    ck_assert_int_eq(cache_match_prefix(c, &probe, x, P), RKV_OK);
    ck_assert_msg(probe.len == P, "%s: X (priority 5) was evicted", kind);
    ck_assert_int_eq(cache_match_prefix(c, &probe, y, P), RKV_OK);
    ck_assert_msg(probe.len == 0, "%s: Y (priority 0) was kept", kind);
    ck_cache_ok(c);
    cache_seq_free(&sx);
    cache_seq_free(&sy);
    cache_seq_free(&probe);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

/* insert_hold with no pages: the cache takes from the pool only the pages it
 * lacks (radix, in its one walk); a short pool is RKV_ENOSPC with nothing new
 * cached and the seq as it was; kinds without their own insert_hold refuse. */
START_TEST(insert_hold_takes_only_the_missing_pages)
{
    const char *kind = kinds[_i];
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *c = tu_create(kind, NULL, &pool);
    int32_t t[6 * P];
    for (int32_t i = 0; i < 6 * P; i++) t[i] = 100 + i;
    cache_seq s, probe;
    cache_seq_init(&s, 0, 0);
    cache_seq_init(&probe, 0, 0);
    int32_t prefix = -1;
    rkv_status st = cache_insert_hold(c, &s, t, 2 * P + 1, NULL, &prefix);
    if (strcmp(kind, "radix")) {
        ck_assert_int_eq(st, RKV_ENOTSUP);
        ck_assert_int_eq(pool.num_free, PAGES);
    } else {
        ck_assert_int_eq(st, RKV_OK);
        ck_assert_int_eq(prefix, 0);
        ck_assert_int_eq(s.len, 2 * P);
        ck_assert_int_eq(pool.num_free, PAGES - 2);
        ck_assert_int_eq(pool.num_inflight, 0);
        ck_assert_int_eq(cache_lock(c, &s), RKV_OK);
        int32_t first[2] = {s.pages[0], s.pages[1]};
        /* The same head and 2 pages more: 2 taken, the held lock moved. */
        ck_assert_int_eq(cache_insert_hold(c, &s, t, 4 * P, NULL, &prefix), RKV_OK);
        ck_assert_int_eq(prefix, 2 * P);
        ck_assert_int_eq(s.len, 4 * P);
        ck_assert_int_eq(s.locks, 1);
        ck_assert_int_eq(pool.num_free, PAGES - 4);
        ck_assert_int_eq(s.pages[0], first[0]);
        ck_assert_int_eq(s.pages[1], first[1]);
        ck_assert_int_eq(cache_match_prefix(c, &probe, t, 6 * P), RKV_OK);
        ck_assert_int_eq(probe.len, 4 * P);
        ck_assert_mem_eq(probe.pages, s.pages, sizeof(int32_t) * 4);
        cache_sizes before, after;
        cache_get_sizes(c, &before);
        ck_assert_int_eq(before.protected_tokens, 4 * P);
        /* 6 more pages with 4 free and all cached ones locked: refused. */
        int32_t u[6 * P];
        for (int32_t i = 0; i < 6 * P; i++) u[i] = 900 + i;
        cache_seq other;
        cache_seq_init(&other, 0, 0);
        ck_assert_int_eq(cache_insert_hold(c, &other, u, 6 * P, NULL, &prefix), RKV_ENOSPC);
        ck_assert_int_eq(other.len, 0);
        cache_get_sizes(c, &after);
        ck_assert_int_eq(after.evictable_tokens + after.protected_tokens,
                         before.evictable_tokens + before.protected_tokens);
        ck_assert_int_eq(pool.num_free, PAGES - 4);
        ck_assert_int_eq(pool.num_inflight, 0);
        cache_seq_free(&other);
        ck_assert_int_eq(cache_unlock(c, &s), RKV_OK);
    }
    ck_cache_ok(c);
    ck_pool(&pool);
    cache_seq_free(&s);
    cache_seq_free(&probe);
    cache_destroy(c);
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
    tcase_add_loop_test(tc, insert_hold_is_insert_then_match, 0, n);
    tcase_add_loop_test(tc, a_locked_seq_keeps_its_answer, 0, n);
    tcase_add_loop_test(tc, insert_hold_takes_only_the_missing_pages, 0, n);
    tcase_add_loop_test(tc, priority_travels_with_the_seq, 0, 3);
    suite_add_tcase(s, tc);
    return check_run(s);
}
