/* test_cache.c - every cache kind behind cache.h, one suite parametrized
 * over the registries (cache_kinds.h, evict_policy.h): a kind or policy added
 * there is tested here without further edits.
 *
 *   registry   creation by name, dispatch, every kind x every policy
 *   contract   cache.h's ownership flow and namespaces for every kind that
 *              keeps pages, under every policy; the kinds agree on matches
 *   policies   the policy keys; priority and cost hand cases for every kind
 *              that evicts in an order
 *   radix, none, hash, trie   what only that kind promises (vLLM's free
 *              queue and collisions, the trie's page owners, ...), with the
 *              hash and trie kinds checked against reference models after
 *              every step of seeded random operations (the trie's under every
 *              policy)
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_hash.h"
#include "cache_hash.h"
#include "cache_test_util.h"
#include "check_run.h"
#include "evict_policy.h"
#include "radix_tree.h"

/* ---- the registry, as the tests walk it --------------------------------- */

static int num_kinds(void)
{
    int n = 0;
    while (cache_kinds[n].name) n++;
    return n;
}

/* The i-th registered kind with all of caps, or NULL past the last. */
static const char *kind_with(unsigned caps, int i)
{
    int seen = 0;
    for (const cache_kind *k = cache_kinds; k->name; k++)
        if ((k->caps & caps) == caps && seen++ == i) return k->name;
    return NULL;
}

static int count_with(unsigned caps)
{
    int n = 0;
    while (kind_with(caps, n)) n++;
    return n;
}

static const char *reusing_kind(int i) { return kind_with(CACHE_CAP_REUSE, i); }
static const char *evicting_kind(int i) { return kind_with(CACHE_CAP_EVICTS, i); }

/* Loop index -> (kind that keeps pages, policy), every pair once. */
static void reusing_kind_policy(int i, const char **kind, const char **policy)
{
    *kind = reusing_kind(i / evict_policy_count());
    *policy = evict_policies[i % evict_policy_count()]->name;
}

/* ---- helpers ------------------------------------------------------------- */

/* Insert tokens[0..n) with fresh pages, nothing matched or locked. */
static int32_t put(cache *c, const int32_t *tokens, int32_t n, uint64_t ns)
{
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    int32_t matched = 0, prefix = 0;
    rkv_status st = tu_request(c, tokens, n, ns, &m, &matched, &prefix);
    ck_assert_int_eq(st, RKV_OK);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    cache_seq_free(&m);
    ck_cache_ok(c);
    return prefix;
}

static int32_t look(cache *c, const int32_t *tokens, int32_t n, uint64_t ns)
{
    cache_seq m;
    cache_seq_init(&m, ns, 0);
    ck_assert_int_eq(cache_match_prefix(c, &m, tokens, n), RKV_OK);
    int32_t len = m.len;
    ck_assert_int_eq(m.num_pages * c->page_size, len);
    cache_seq_free(&m);
    return len;
}

static cache_sizes sizes(const cache *c)
{
    cache_sizes s;
    cache_get_sizes(c, &s);
    return s;
}

/* ---- the interface: creation, ownership, radix and none ------------------ */

static page_pool ipool;

static void check_cache(const cache *c)
{
    char err[512];
    rkv_status st = cache_check(c, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "%s", err);
    /* free + evictable + protected + in-flight = ipool, in pages */
    cache_sizes s;
    cache_get_sizes(c, &s);
    int64_t P = ipool.page_size;
    ck_assert_int_eq(ipool.num_free + (s.evictable_tokens + s.protected_tokens) / P + ipool.num_inflight,
                     ipool.num_pages);
}

static cache *make(const char *kind, const char *policy, int32_t pages, int32_t P)
{
    ck_assert_int_eq(page_pool_init(&ipool, pages, P), RKV_OK);
    /* The contract tests race inserts of equal tokens and expect the second
     * to be freed: the hash kind's dedup rule (keep has its own tests). */
    cache_config cfg = {.kind = kind, .policy = policy, .hash_duplicates = "dedup"};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(cache_create(&cfg, &ipool, &c, err, sizeof err), RKV_OK);
    ck_assert_ptr_nonnull(c);
    check_cache(c);
    return c;
}

static void done(cache *c)
{
    cache_destroy(c);
    ck_assert_int_eq(ipool.num_cached, 0);
    page_pool_destroy(&ipool);
}

START_TEST(create_by_name)
{
    ck_assert_int_eq(page_pool_init(&ipool, 8, 1), RKV_OK);
    cache *c = NULL;
    char err[256] = "";
    /* NULL config and NULL kind mean radix / lru */
    ck_assert_int_eq(cache_create(NULL, &ipool, &c, err, sizeof err), RKV_OK);
    ck_assert_str_eq(c->ops->name, "radix");
    ck_assert_ptr_nonnull(cache_radix_tree(c));
    cache_destroy(c);
    cache_config cfg = {.kind = "radix", .policy = "fifo"};
    ck_assert_int_eq(cache_create(&cfg, &ipool, &c, err, sizeof err), RKV_OK);
    cache_destroy(c);
    cfg.policy = "random-ish";
    ck_assert_int_eq(cache_create(&cfg, &ipool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err, "random-ish"));
    ck_assert_ptr_nonnull(strstr(err, "policy"));
    cfg = (cache_config){.kind = "btree"};
    ck_assert_int_eq(cache_create(&cfg, &ipool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "'btree'"));
    ck_assert_ptr_nonnull(strstr(err, "radix"));
    cfg.kind = "none";
    ck_assert_int_eq(cache_create(&cfg, &ipool, &c, err, sizeof err), RKV_OK);
    ck_assert_ptr_null(cache_radix_tree(c));
    cache_destroy(c);
    /* every listed name is accepted */
    int n = 0, radix = 0, none = 0;
    for (; cache_kind_names[n]; n++) {
        cfg = (cache_config){.kind = cache_kind_names[n]};
        ck_assert_msg(cache_create(&cfg, &ipool, &c, err, sizeof err) == RKV_OK, "%s: %s",
                      cache_kind_names[n], err);
        ck_assert_str_eq(c->ops->name, cache_kind_names[n]);
        cache_destroy(c);
        radix += !strcmp(cache_kind_names[n], "radix");
        none += !strcmp(cache_kind_names[n], "none");
    }
    ck_assert_int_eq(radix + none, 2);
    ck_assert_int_eq(n, num_kinds()); /* one name per registered kind, in order */
    page_pool_destroy(&ipool);
}
END_TEST

START_TEST(match_storage)
{
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(m.cap, 0);
    ck_assert_int_eq(cache_seq_reserve(&m, 100), RKV_OK);
    ck_assert_int_ge(m.cap, 100);
    m.pages[99] = 7; /* writable */
    ck_assert_int_eq(cache_seq_reserve(&m, 10), RKV_OK);
    ck_assert_int_eq(m.pages[99], 7);
    ck_assert_int_eq(cache_seq_reserve(&m, -1), RKV_EINVAL);
    cache_seq_free(&m);
    ck_assert_ptr_null(m.pages);
}
END_TEST

/* cache.h's picture: P = 2, a request of 7 tokens with 4 cached; for every
 * kind that keeps pages, under every eviction policy. */
START_TEST(ownership_flow)
{
    const char *kind, *policy;
    reusing_kind_policy(_i, &kind, &policy);
    cache *c = make(kind, policy, 16, 2);
    int32_t tok[7] = {10, 11, 12, 13, 14, 15, 16};
    int32_t first[2];
    /* an earlier request cached t0..t3 */
    ck_assert_int_eq(page_pool_alloc(&ipool, 2, first), RKV_OK);
    int32_t prefix = -1;
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, tok, 4, first, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 0);
    check_cache(c);

    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &m, tok, 6), RKV_OK);
    ck_assert_int_eq(m.len, 4);
    ck_assert_int_eq(m.num_pages, 2);
    ck_assert_mem_eq(m.pages, first, sizeof first);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
    cache_sizes s;
    cache_get_sizes(c, &s);
    ck_assert_int_eq(s.protected_tokens, 4);
    /* the request's own pages for t4..t6: p(t4 t5) and the partial page */
    int32_t pages[4] = {m.pages[0], m.pages[1]};
    ck_assert_int_eq(page_pool_alloc(&ipool, 2, pages + 2), RKV_OK);
    check_cache(c);
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, tok, 6, pages, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 4);
    ck_assert_int_eq(ipool.num_cached, 3);
    ck_assert_int_eq(page_pool_free(&ipool, pages + 3, 1), RKV_OK); /* partial page */
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    check_cache(c);
    cache_get_sizes(c, &s);
    ck_assert_int_eq(s.evictable_tokens, 6);
    ck_assert_int_eq(s.protected_tokens, 0);

    /* two requests racing to insert the same tokens: the second frees its
     * pages for [matched, prefix_len) */
    int32_t tok2[4] = {20, 21, 22, 23}, pa[2], pb[2];
    cache_seq ma, mb;
    cache_seq_init(&ma, 0, 0);
    cache_seq_init(&mb, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &ma, tok2, 4), RKV_OK);
    ck_assert_int_eq(cache_match_prefix(c, &mb, tok2, 4), RKV_OK);
    ck_assert_int_eq(ma.len + mb.len, 0);
    ck_assert_int_eq(page_pool_alloc(&ipool, 2, pa), RKV_OK);
    ck_assert_int_eq(page_pool_alloc(&ipool, 2, pb), RKV_OK);
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, tok2, 4, pa, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 0);
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, tok2, 4, pb, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 4);
    ck_assert_int_eq(page_pool_free(&ipool, pb, prefix / 2), RKV_OK);
    check_cache(c);
    ck_assert_int_eq(ipool.num_inflight, 0);

    /* evict everything, pages go back */
    ck_assert_int_eq(cache_evict(c, 1000), 10);
    check_cache(c);
    ck_assert_int_eq(ipool.num_free, 16);
    ck_assert_uint_eq(c->stats.match_calls, 3);
    ck_assert_uint_eq(c->stats.insert_calls, 4);
    ck_assert_uint_eq(c->stats.matched_tokens, 4);
    ck_assert_uint_eq(c->stats.inserted_tokens, 10);
    ck_assert_uint_eq(c->stats.evicted_tokens, 10);
    cache_seq_free(&m);
    cache_seq_free(&ma);
    cache_seq_free(&mb);
    done(c);
}
END_TEST

START_TEST(radix_dump_and_namespaces)
{
    cache *c = make("radix", NULL, 16, 1);
    int32_t tok[3] = {1, 2, 3}, pages[3], prefix;
    ck_assert_int_eq(page_pool_alloc(&ipool, 3, pages), RKV_OK);
    ck_assert_int_eq(cache_insert(c, &(cache_seq){.ns = 42}, tok, 3, pages, &prefix), RKV_OK);
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &m, tok, 3), RKV_OK);
    ck_assert_int_eq(m.len, 0);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK); /* nothing matched: a no-op */
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    m.ns = 42;
    ck_assert_int_eq(cache_match_prefix(c, &m, tok, 3), RKV_OK);
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
    cache_seq_free(&m);
    done(c);
}
END_TEST

START_TEST(none_kind)
{
    cache *c = make("none", NULL, 8, 2);
    int32_t tok[6] = {1, 2, 3, 4, 5, 6}, pages[3], prefix = -1;
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(cache_match_prefix(c, &m, tok, 6), RKV_OK);
        ck_assert_int_eq(m.len, 0);
        ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
        ck_assert_int_eq(page_pool_alloc(&ipool, 3, pages), RKV_OK);
        ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, tok, 6, pages, &prefix), RKV_OK);
        ck_assert_int_eq(prefix, 0);
        check_cache(c);
        ck_assert_int_eq(ipool.num_cached, 0);
        /* the cache took every page past the prefix (all) and freed them */
        ck_assert_int_eq(ipool.num_inflight, 0);
        ck_assert_int_eq(ipool.num_free, ipool.num_pages);
        ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    }
    ck_assert_int_eq(cache_evict(c, 100), 0);
    check_cache(c);
    /* a page wrongly held as cached is caught */
    ck_assert_int_eq(page_pool_alloc(&ipool, 1, pages), RKV_OK);
    ck_assert_int_eq(page_pool_adopt(&ipool, pages, 1), RKV_OK);
    char err[256];
    ck_assert_int_eq(cache_check(c, err, sizeof err), RKV_ECORRUPT);
    ck_assert_int_eq(page_pool_free(&ipool, pages, 1), RKV_OK);
    cache_seq_free(&m);
    done(c);
}
END_TEST

/* ---- hash and hash-nocache: vLLM v1 behaviours ------------------------- */

START_TEST(only_full_blocks_hit)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 16, 4), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    const int32_t t[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    ck_assert_int_eq(put(c, t, 10, 0), 0);
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    ck_assert_int_eq(sz.num_nodes, 2); /* the partial block 9 10 is not cached */
    ck_assert_int_eq(sz.evictable_tokens, 8);
    ck_assert_int_eq(sz.protected_tokens, 0);
    ck_assert_int_eq(look(c, t, 10, 0), 8);
    ck_assert_int_eq(look(c, t, 7, 0), 4);
    ck_assert_int_eq(look(c, t, 3, 0), 0);
    const int32_t u[8] = {1, 2, 3, 99, 5, 6, 7, 8}; /* block 0 differs in one token */
    ck_assert_int_eq(look(c, u, 8, 0), 0);
    /* A second insert of the same tokens reports them as cached, adds nothing. */
    ck_assert_int_eq(put(c, t, 9, 0), 8);
    cache_get_sizes(c, &sz);
    ck_assert_int_eq(sz.num_nodes, 2);
    ck_assert_int_eq(pool.num_cached, 2);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, 16);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(chained_hashes_differ)
{
    /* Digests: the same block under another parent or salt differs. */
    block_hasher h;
    ck_assert_int_eq(block_hasher_init(&h, "xxh3", 4, NULL, 0), RKV_OK);
    const int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, x[4] = {9, 9, 9, 9};
    block_hash ha, hb, hxa, hxb, ha1, ha_again;
    block_hasher_hash(&h, &block_hash_root, 0, a, 4, &ha);
    block_hasher_hash(&h, &block_hash_root, 0, b, 4, &hb);
    block_hasher_hash(&h, &ha, 0, x, 4, &hxa);
    block_hasher_hash(&h, &hb, 0, x, 4, &hxb);
    block_hasher_hash(&h, &block_hash_root, 1, a, 4, &ha1);
    block_hasher_hash(&h, &block_hash_root, 0, a, 4, &ha_again);
    ck_assert(!block_hash_equal(&hxa, &hxb));
    ck_assert(!block_hash_equal(&ha, &ha1));
    ck_assert(block_hash_equal(&ha, &ha_again));
    block_hasher_destroy(&h);

    /* In the cache: [a x] cached, [b x] shares block x's tokens but not its
     * chain, and [a x] under another salt shares nothing. */
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 16, 4), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    int32_t ax[8], bx[8];
    memcpy(ax, a, sizeof a), memcpy(ax + 4, x, sizeof x);
    memcpy(bx, b, sizeof b), memcpy(bx + 4, x, sizeof x);
    ck_assert_int_eq(put(c, ax, 8, 0), 0);
    ck_assert_int_eq(look(c, bx, 8, 0), 0);
    ck_assert_int_eq(put(c, bx, 8, 0), 0);
    ck_assert_int_eq(look(c, bx, 8, 0), 8);
    ck_assert_int_eq(look(c, ax, 8, 7), 0);
    ck_assert_int_eq(put(c, ax, 8, 7), 0);
    ck_assert_int_eq(look(c, ax, 8, 7), 8);
    ck_assert_int_eq(pool.num_cached, 6);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

/* Three requests of three blocks each, P = 1: r0 = 10 11 12, r1 = 20 21 22, ... */
static void seq3(int32_t r, int32_t *t)
{
    for (int i = 0; i < 3; i++) t[i] = 10 * (r + 1) + i;
}

START_TEST(free_queue_order)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 16, 1), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    int32_t r0[3], r1[3];
    seq3(0, r0), seq3(1, r1);
    put(c, r0, 3, 0);
    put(c, r1, 3, 0);
    /* Queue, head first: 12 11 10 22 21 20 (each request's tail first). */
    ck_assert_int_eq(cache_evict(c, 1), 1);
    ck_assert_int_eq(look(c, r0, 3, 0), 2); /* r0's tail went first */
    ck_assert_int_eq(look(c, r1, 3, 0), 3);
    ck_assert_int_eq(cache_evict(c, 1), 1);
    ck_assert_int_eq(look(c, r0, 3, 0), 1);
    ck_cache_ok(c);

    /* A hit on a free block revives it: lock r0's head, unlock it; it goes to
     * the tail, behind all of r1, so r1 is evicted first (tail first). */
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &m, r0, 1), RKV_OK);
    ck_assert_int_eq(m.len, 1);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    ck_assert_int_eq(sz.protected_tokens, 1);
    ck_assert_int_eq(sz.evictable_tokens, 3);
    ck_cache_ok(c);
    /* Locked blocks are never evicted: only r1's three go. */
    ck_assert_int_eq(cache_evict(c, 100), 3);
    ck_assert_int_eq(look(c, r1, 3, 0), 0);
    ck_assert_int_eq(look(c, r0, 3, 0), 1);
    put(c, r1, 3, 0); /* queue: 22 21 20 */
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK); /* queue: 22 21 20 10 */
    ck_assert_int_eq(cache_unlock(c, &m), RKV_EINVAL); /* not locked any more */
    ck_assert_int_eq(cache_evict(c, 2), 2);
    ck_assert_int_eq(look(c, r1, 3, 0), 1);
    ck_assert_int_eq(look(c, r0, 3, 0), 1);
    ck_assert_int_eq(cache_evict(c, 1), 1);
    ck_assert_int_eq(look(c, r1, 3, 0), 0);
    ck_assert_int_eq(look(c, r0, 3, 0), 1);
    ck_cache_ok(c);
    ck_assert_int_eq(c->stats.evicted_tokens, 8);
    ck_assert_int_eq(c->stats.inserted_tokens, 9);
    cache_seq_free(&m);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(insert_refreshes_its_chain)
{
    /* Inserting a longer sequence over an unlocked cached prefix "frees" the
     * whole chain again: the new tail is evicted first, the shared head last. */
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 16, 1), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    const int32_t a[2] = {1, 2}, b[2] = {5, 6}, ab[4] = {1, 2, 3, 4};
    put(c, a, 2, 0);
    put(c, b, 2, 0);
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    int32_t *pages = malloc(sizeof *pages * 4);
    ck_assert_int_eq(page_pool_alloc(&pool, 4, pages), RKV_OK);
    int32_t prefix = -1;
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, ab, 4, pages, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 2);
    ck_assert_int_eq(page_pool_free(&pool, pages, 2), RKV_OK); /* the duplicates */
    ck_cache_ok(c);
    /* Queue: 6 5 4 3 2 1. */
    ck_assert_int_eq(cache_evict(c, 2), 2);
    ck_assert_int_eq(look(c, b, 2, 0), 0);
    ck_assert_int_eq(look(c, ab, 4, 0), 4);
    ck_assert_int_eq(cache_evict(c, 1), 1);
    ck_assert_int_eq(look(c, ab, 4, 0), 3);
    free(pages);
    cache_seq_free(&m);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

/* Two distinct first blocks (P = 2) whose digests agree in the low `bits`. */
static void colliding_pair(int bits, int32_t *a, int32_t *b)
{
    block_hasher h;
    ck_assert_int_eq(block_hasher_init(&h, "xxh3", 2, NULL, 0), RKV_OK);
    uint64_t mask = (1ull << bits) - 1;
    for (int32_t i = 0; i < 64; i++)
        for (int32_t j = i + 1; j < 64; j++) {
            int32_t x[2] = {i, 100}, y[2] = {j, 100};
            block_hash hx, hy;
            block_hasher_hash(&h, &block_hash_root, 0, x, 2, &hx);
            block_hasher_hash(&h, &block_hash_root, 0, y, 2, &hy);
            if ((hx.lo & mask) == (hy.lo & mask)) {
                memcpy(a, x, sizeof x), memcpy(b, y, sizeof y);
                block_hasher_destroy(&h);
                return;
            }
        }
    ck_abort_msg("no colliding pair among 64 blocks at %d bits", bits);
}

START_TEST(token_recheck_rejects_collision)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 64, 2), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    ck_assert_int_eq(cache_hash_debug_set_bits(c, 2), RKV_OK);
    int32_t a[2], b[2];
    colliding_pair(2, a, b);
    /* [a x] cached; b's digest is a's, its tokens are not: no hit. */
    int32_t ax[4] = {a[0], a[1], 7, 7}, bx[4] = {b[0], b[1], 7, 7};
    put(c, ax, 4, 0);
    ck_assert_int_eq(look(c, bx, 4, 0), 0);
    ck_assert_int_eq(look(c, ax, 4, 0), 4);
    /* With b cached too, block x under b has the digest of x under a (the
     * parents' digests collide) and the same tokens: the parent check rejects. */
    ck_assert_int_eq(put(c, bx, 2, 0), 0);
    ck_assert_int_eq(look(c, bx, 4, 0), 2);
    ck_assert_int_eq(put(c, bx, 4, 0), 2);
    ck_assert_int_eq(look(c, bx, 4, 0), 4);
    ck_assert_int_eq(look(c, ax, 4, 0), 4);
    /* Many single blocks over 4 digests: each hits only itself. */
    for (int32_t i = 0; i < 40; i++) {
        int32_t t[2] = {1000 + i, 1};
        put(c, t, 2, 0);
    }
    for (int32_t i = 0; i < 60; i++) {
        int32_t t[2] = {1000 + i, 1};
        cache_seq m;
        cache_seq_init(&m, 0, 0);
        ck_assert_int_eq(cache_match_prefix(c, &m, t, 2), RKV_OK);
        ck_assert_int_eq(m.len, i < 40 ? 2 : 0);
        cache_seq_free(&m);
    }
    ck_cache_ok(c);
    ck_assert_int_eq(cache_hash_debug_set_bits(c, 128), RKV_EINVAL); /* not empty */
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

/* A seeded random trace on caches with full and with 2-bit digests: the
 * re-check makes collisions invisible, so every result must agree. */
START_TEST(collisions_change_nothing)
{
    unsigned seed = 1234u + (unsigned)_i;
    srand(seed);
    page_pool pa, pb;
    ck_assert_int_eq(page_pool_init(&pa, 40, 2), RKV_OK);
    ck_assert_int_eq(page_pool_init(&pb, 40, 2), RKV_OK);
    cache *ca = tu_create("hash", NULL, &pa), *cb = tu_create("hash", NULL, &pb);
    ck_assert_int_eq(cache_hash_debug_set_bits(cb, 2), RKV_OK);
    int32_t prev[24] = {0}, t[24];
    for (int step = 0; step < 300; step++) {
        int32_t n = 1 + rand() % 24, keep = rand() % (n + 1);
        for (int32_t i = 0; i < n; i++) t[i] = i < keep ? prev[i] : rand() % 3;
        memcpy(prev, t, sizeof t);
        uint64_t ns = (uint64_t)(rand() % 2);
        cache_seq ma, mb;
        cache_seq_init(&ma, 0, 0), cache_seq_init(&mb, 0, 0);
        int32_t m1 = 0, p1 = 0, m2 = 0, p2 = 0;
        rkv_status s1 = tu_request(ca, t, n, ns, &ma, &m1, &p1);
        rkv_status s2 = tu_request(cb, t, n, ns, &mb, &m2, &p2);
        ck_assert_msg(s1 == s2 && m1 == m2 && p1 == p2,
                      "seed %u step %d: status %d/%d matched %d/%d prefix %d/%d", seed, step, s1,
                      s2, m1, m2, p1, p2);
        if (s1 == RKV_OK) {
            cache_unlock(ca, &ma);
            cache_unlock(cb, &mb);
        }
        if (rand() % 5 == 0) {
            int64_t e = rand() % 8;
            ck_assert_int_eq(cache_evict(ca, e), cache_evict(cb, e));
        }
        cache_sizes sa, sb;
        cache_get_sizes(ca, &sa), cache_get_sizes(cb, &sb);
        ck_assert_msg(sa.evictable_tokens == sb.evictable_tokens && sa.num_nodes == sb.num_nodes,
                      "seed %u step %d: sizes differ", seed, step);
        ck_cache_ok(ca);
        ck_cache_ok(cb);
        cache_seq_free(&ma), cache_seq_free(&mb);
    }
    cache_destroy(ca), cache_destroy(cb);
    page_pool_destroy(&pa), page_pool_destroy(&pb);
}
END_TEST

START_TEST(nocache_hashes_but_never_hits)
{
    page_pool pa, pb;
    ck_assert_int_eq(page_pool_init(&pa, 64, 4), RKV_OK);
    ck_assert_int_eq(page_pool_init(&pb, 64, 4), RKV_OK);
    cache *h = tu_create("hash", NULL, &pa), *nc = tu_create("hash-nocache", NULL, &pb);
    srand(77);
    int32_t t[40];
    for (int r = 0; r < 30; r++) {
        int32_t n = 1 + rand() % 40;
        for (int32_t i = 0; i < n; i++) t[i] = i < 20 ? i : rand() % 5; /* shared head */
        cache_seq m;
        cache_seq_init(&m, 0, 0);
        int32_t matched = -1, prefix = -1;
        ck_assert_int_eq(tu_request(nc, t, n, 0, &m, &matched, &prefix), RKV_OK);
        ck_assert_int_eq(matched, 0);
        ck_assert_int_eq(prefix, 0);
        ck_assert_int_eq(cache_unlock(nc, &m), RKV_OK);
        ck_assert_int_eq(tu_request(h, t, n, 0, &m, &matched, &prefix), RKV_OK);
        ck_assert_int_eq(cache_unlock(h, &m), RKV_OK);
        cache_seq_free(&m);
        ck_assert_int_eq(pb.num_cached, 0); /* pages went straight back */
        ck_assert_int_eq(pb.num_free, 64);
        ck_cache_ok(nc);
    }
    ck_assert(h->stats.matched_tokens > 0);
    ck_assert_int_eq(nc->stats.matched_tokens, 0);
    ck_assert(nc->stats.hash_computations > 0);
    ck_assert_int_eq(nc->stats.hash_computations, h->stats.hash_computations);
    cache_destroy(h), cache_destroy(nc);
    page_pool_destroy(&pa), page_pool_destroy(&pb);
}
END_TEST

/* Every registered hash function (block_hash.h). */
static const char *const *const fns = block_hash_fn_names;

static int num_hash_fns(void)
{
    int n = 0;
    while (block_hash_fn_names[n]) n++;
    return n;
}

START_TEST(each_hash_function)
{
    const char *fn = fns[_i];
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 16, 4), RKV_OK);
    cache *c = tu_create("hash", fn, &pool);
    const int32_t t[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    put(c, t, 12, 0);
    ck_assert_int_eq(look(c, t, 12, 0), 12);
    ck_assert_int_eq(look(c, t, 12, 3), 0);
    ck_assert_int_eq(c->stats.hash_computations, 3 + 3 + 3 + 3); /* match+insert, 2 looks */
    ck_cache_ok(c);
    cache_destroy(c);
    page_pool_destroy(&pool);
    /* Deterministic, sensitive to every input, and unlike the other functions. */
    block_hasher h, g;
    ck_assert_int_eq(block_hasher_init(&h, fn, 4, NULL, 0), RKV_OK);
    ck_assert_str_eq(h.name, fn);
    block_hash d0, d1, d2;
    block_hasher_hash(&h, &block_hash_root, 0, t, 4, &d0);
    block_hasher_hash(&h, &block_hash_root, 0, t, 4, &d1);
    ck_assert(block_hash_equal(&d0, &d1));
    block_hasher_hash(&h, &block_hash_root, 0, t + 1, 4, &d1);
    ck_assert(!block_hash_equal(&d0, &d1));
    ck_assert(d0.lo != 0 || d0.hi != 0);
    for (int k = 0; fns[k]; k++) {
        if (k == _i) continue;
        ck_assert_int_eq(block_hasher_init(&g, fns[k], 4, NULL, 0), RKV_OK);
        block_hasher_hash(&g, &block_hash_root, 0, t, 4, &d2);
        ck_assert(!block_hash_equal(&d0, &d2));
        block_hasher_destroy(&g);
    }
    block_hasher_destroy(&h);
}
END_TEST

START_TEST(bad_names_rejected)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 4, 4), RKV_OK);
    cache_config cfg = {"hash", NULL, "crc32", NULL};
    cache *c = (cache *)&cfg;
    char err[256] = "";
    ck_assert_int_eq(cache_hash_create(&cfg, &pool, false, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "crc32") != NULL, "message '%s' names the function", err);
    cfg.hash_fn = NULL;
    cfg.policy = "no-such-policy";
    err[0] = 0;
    ck_assert_int_eq(cache_hash_create(&cfg, &pool, true, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "no-such-policy") != NULL, "message '%s' names the policy", err);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(bad_calls_change_nothing)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    const int32_t t[4] = {1, 2, 3, 4};
    int32_t pages[2] = {0, 5}, prefix = -1;
    /* Page 5 was never allocated: insert fails, nothing is adopted. */
    ck_assert_int_eq(page_pool_alloc(&pool, 1, pages), RKV_OK);
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, t, 4, pages, &prefix), RKV_EINVAL);
    ck_assert_int_eq(pool.num_cached, 0);
    ck_assert_int_eq(look(c, t, 4, 0), 0);
    ck_assert_int_eq(page_pool_free(&pool, pages, 1), RKV_OK);
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(cache_seq_reserve(&m, 1), RKV_OK);
    m.pages[0] = 3, m.num_pages = 1, m.len = 2;
    ck_assert_int_eq(cache_lock(c, &m), RKV_EINVAL); /* page 3 holds no block */
    ck_cache_ok(c);
    cache_seq_free(&m);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(dump_formats)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
    cache *c = tu_create("hash", "md5", &pool);
    const int32_t t[4] = {11, 12, 13, 14};
    put(c, t, 4, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_JSON);
    fclose(f);
    ck_assert_msg(strchr(buf, '\n') == buf + len - 1, "JSON is one line: %s", buf);
    ck_assert(strstr(buf, "\"kind\":\"hash\"") && strstr(buf, "\"tokens\":[13,14]"));
    ck_assert(strstr(buf, "\"free_queue\":[1,0]"));
    free(buf);
    f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_DOT);
    fclose(f);
    ck_assert(strstr(buf, "digraph") && strstr(buf, "b0 -> b1"));
    free(buf);
    f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_TEXT);
    fclose(f);
    ck_assert(strstr(buf, "2 blocks") != NULL);
    free(buf);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST


/* ---- the differential loop ----------------------------------------------
 * The hash kind (vLLM's rules) and the trie (under every policy) are each
 * compared with a reference model of their own, but through one loop of
 * seeded random operations: a request (match, lock, room, insert, unlock or
 * hold), the unlock of a held request, or an eviction, with the sizes, the
 * pool's in-flight pages and cache_check() compared after each. The model
 * answers each cache call through diff_model. */

enum { RMAXT = 16, MAXT = 64, MAXHELD = 4 };

typedef struct diff_model {
    const char *name; /* in failure messages */
    void *m;
    uint64_t ns_step; /* requests draw namespace 0 or ns_step */
    int32_t alphabet; /* plain requests' new tokens are 0 .. alphabet - 1 */
    int priorities;   /* draw a priority per request (-1, 0 or 1), else 0 */
    /* The model's side of cache_match_prefix (priority: the request's). */
    int32_t (*match)(void *m, uint64_t ns, int32_t priority, const int32_t *t, int32_t n,
                     int32_t *pages);
    /* Of cache_lock (up +1) and cache_unlock (-1) of s, made for t in ns. */
    void (*lock)(void *m, uint64_t ns, const int32_t *t, const cache_seq *s, int up);
    /* Of cache_insert: returns the prefix it found. */
    int32_t (*insert)(void *m, uint64_t ns, const int32_t *t, int32_t n, const int32_t *pages);
    int64_t (*evict)(void *m, int64_t n);
    /* Asserts the cache's sizes against the model's. */
    void (*check_sizes)(const void *m, const cache_sizes *s, unsigned seed, long step);
    /* After the last step, the held requests still locked; NULL: nothing. */
    void (*check_end)(const void *m, cache *c, unsigned seed);
} diff_model;

typedef struct held {
    cache_seq m;
    uint64_t ns;
    int32_t tokens[MAXT];
} held;

/* steps seeded random operations on c (over pool) and d's model, a comparison
 * after each; requests are plain random tokens of up to RMAXT (adv NULL) or
 * tu_adversarial()'s of up to MAXT from *adv. Unlocks what it holds at the
 * end; the caller destroys c. */
static void diff_against_reference(cache *c, page_pool *pool, const diff_model *d, unsigned seed,
                                   long steps, uint64_t *adv)
{
    srand(seed);
    const int32_t P = pool->page_size;
    held hold[MAXHELD];
    int nheld = 0;
    int32_t prev[MAXT] = {0}, t[MAXT], pages[MAXT], want[MAXT];
    int32_t prev_n = 0;
    for (long step = 0; step < steps; step++) {
        int op = rand() % 10;
        if (op < 6) {
            /* A request: match, lock, room, insert, free duplicates. */
            int32_t n;
            if (adv) {
                n = tu_adversarial(adv, P, prev, prev_n, MAXT, t);
            } else {
                n = 1 + rand() % RMAXT;
                int32_t keep = rand() % (n + 1);
                for (int32_t i = 0; i < n; i++) t[i] = i < keep ? prev[i] : rand() % d->alphabet;
            }
            memcpy(prev, t, sizeof t);
            prev_n = n;
            uint64_t ns = (uint64_t)(rand() % 2) * d->ns_step;
            /* Priorities only where the policy reads them, so the other runs
             * draw the same numbers as they always did. */
            int32_t priority = d->priorities ? rand() % 3 - 1 : 0;
            held *h = nheld < MAXHELD ? &hold[nheld] : NULL;
            cache_seq tmp;
            cache_seq *m = h ? &h->m : &tmp;
            cache_seq_init(m, ns, priority);
            ck_assert_int_eq(cache_match_prefix(c, m, t, n), RKV_OK);
            int32_t rm = d->match(d->m, ns, priority, t, n, want);
            ck_assert_msg(m->len == rm, "%s seed %u step %ld: matched %d, reference %d", d->name,
                          seed, step, m->len, rm);
            for (int32_t i = 0; i < m->num_pages; i++)
                ck_assert_msg(m->pages[i] == want[i], "seed %u step %ld: page %d", seed, step, i);
            ck_assert_int_eq(cache_lock(c, m), RKV_OK);
            d->lock(d->m, ns, t, m, +1);
            int32_t nb = n / P, need = nb - m->num_pages, fr = page_pool_num_free(pool);
            if (need > fr) {
                int64_t e = cache_evict(c, (int64_t)(need - fr) * P);
                ck_assert_msg(e == d->evict(d->m, (int64_t)(need - fr) * P),
                              "seed %u step %ld: evicted %lld", seed, step, (long long)e);
            }
            int ok = need <= page_pool_num_free(pool);
            if (ok) {
                if (m->num_pages) memcpy(pages, m->pages, sizeof(int32_t) * (size_t)m->num_pages);
                ck_assert_int_eq(page_pool_alloc(pool, need, pages + m->num_pages), RKV_OK);
                int32_t prefix = -1;
                ck_assert_int_eq(cache_insert(c, m, t, n, pages, &prefix), RKV_OK);
                int32_t rp = d->insert(d->m, ns, t, n, pages);
                ck_assert_msg(prefix == rp, "seed %u step %ld: prefix %d, reference %d", seed,
                              step, prefix, rp);
                ck_assert_int_eq(prefix, m->len); /* locked, so nothing came or went */
            }
            if (h && ok && rand() % 2) {
                h->ns = ns;
                memcpy(h->tokens, t, sizeof t);
                nheld++;
            } else {
                ck_assert_int_eq(cache_unlock(c, m), RKV_OK);
                d->lock(d->m, ns, t, m, -1);
                cache_seq_free(m);
            }
        } else if (op < 8 && nheld > 0) {
            int k = rand() % nheld;
            held *h = &hold[k];
            ck_assert_int_eq(cache_unlock(c, &h->m), RKV_OK);
            d->lock(d->m, h->ns, h->tokens, &h->m, -1);
            cache_seq_free(&h->m);
            hold[k] = hold[--nheld];
        } else {
            int64_t want_n = rand() % (3 * P + 1);
            int64_t e = cache_evict(c, want_n);
            ck_assert_msg(e == d->evict(d->m, want_n), "seed %u step %ld: evicted %lld", seed,
                          step, (long long)e);
        }
        cache_sizes s = sizes(c);
        d->check_sizes(d->m, &s, seed, step);
        ck_assert_int_eq(pool->num_inflight, 0);
        char err[512] = "";
        ck_assert_msg(cache_check(c, err, sizeof err) == RKV_OK, "seed %u step %ld: %s", seed,
                      step, err);
    }
    if (d->check_end) d->check_end(d->m, c, seed);
    while (nheld > 0) {
        ck_assert_int_eq(cache_unlock(c, &hold[nheld - 1].m), RKV_OK);
        cache_seq_free(&hold[--nheld].m);
    }
}

/* ---- reference model: vLLM's rules on plain arrays ------------------------
 * Blocks are found by their whole prefix (no digests); the free queue is an
 * array, head first. */

enum { HMAXE = 256 };

typedef struct ref_block {
    uint64_t ns;
    int32_t nblocks;     /* prefix length in blocks, this one included */
    int32_t tokens[MAXT];
    int32_t page, ref;
} ref_block;

typedef struct href_model {
    int32_t P, n, qn;
    ref_block b[HMAXE];
    int32_t queue[HMAXE]; /* indices into b, head first */
} href_model;

static int32_t rm_find(const href_model *r, uint64_t ns, const int32_t *t, int32_t nblocks)
{
    for (int32_t i = 0; i < r->n; i++)
        if (r->b[i].ns == ns && r->b[i].nblocks == nblocks &&
            memcmp(r->b[i].tokens, t, sizeof(int32_t) * (size_t)(nblocks * r->P)) == 0)
            return i;
    return -1;
}

static int32_t rm_by_page(const href_model *r, int32_t page)
{
    for (int32_t i = 0; i < r->n; i++)
        if (r->b[i].page == page) return i;
    ck_abort_msg("reference: page %d holds no block", page);
    return -1;
}

static void rm_dequeue(href_model *r, int32_t i)
{
    for (int32_t q = 0; q < r->qn; q++)
        if (r->queue[q] == i) {
            memmove(r->queue + q, r->queue + q + 1, sizeof(int32_t) * (size_t)(r->qn - q - 1));
            r->qn--;
            return;
        }
}

static int32_t rm_match(const href_model *r, uint64_t ns, const int32_t *t, int32_t n, int32_t *pages)
{
    int32_t k = 0, i;
    while ((k + 1) * r->P <= n && (i = rm_find(r, ns, t, k + 1)) >= 0) pages[k++] = r->b[i].page;
    return k * r->P;
}

static void rm_lock(href_model *r, const int32_t *pages, int32_t np, int up)
{
    for (int32_t j = 0; j < np; j++) {
        int32_t i = rm_by_page(r, up > 0 ? pages[j] : pages[np - 1 - j]);
        if (up > 0 && r->b[i].ref++ == 0) rm_dequeue(r, i);
        if (up < 0 && --r->b[i].ref == 0) r->queue[r->qn++] = i;
    }
}

static int32_t rm_insert(href_model *r, uint64_t ns, const int32_t *t, int32_t n,
                         const int32_t *pages)
{
    int32_t have[MAXT], nb = n / r->P;
    int32_t k = rm_match(r, ns, t, n, have);
    for (int32_t j = k / r->P + 1; j <= nb; j++) {
        ck_assert_int_lt(r->n, HMAXE);
        ref_block *b = &r->b[r->n++];
        b->ns = ns;
        b->nblocks = j;
        memcpy(b->tokens, t, sizeof(int32_t) * (size_t)(j * r->P));
        b->page = pages[j - 1];
        b->ref = 0;
    }
    for (int32_t j = nb; j >= 1; j--) {
        int32_t i = rm_find(r, ns, t, j);
        if (r->b[i].ref) continue;
        rm_dequeue(r, i);
        r->queue[r->qn++] = i;
    }
    return k;
}

static int64_t rm_evict(href_model *r, int64_t n)
{
    int64_t freed = 0;
    while (freed < n && r->qn > 0) {
        int32_t i = r->queue[0];
        rm_dequeue(r, i);
        /* Move the last block into slot i, renaming it in the queue. */
        int32_t last = --r->n;
        if (i != last) {
            r->b[i] = r->b[last];
            for (int32_t q = 0; q < r->qn; q++)
                if (r->queue[q] == last) r->queue[q] = i;
        }
        freed += r->P;
    }
    return freed;
}

/* href_model behind diff_model. */
static int32_t hm_match(void *m, uint64_t ns, int32_t priority, const int32_t *t, int32_t n,
                        int32_t *pages)
{
    (void)priority; /* the hash kind keeps none */
    return rm_match(m, ns, t, n, pages);
}

static void hm_lock(void *m, uint64_t ns, const int32_t *t, const cache_seq *s, int up)
{
    (void)ns, (void)t; /* blocks are found by their pages */
    rm_lock(m, s->pages, s->num_pages, up);
}

static int32_t hm_insert(void *m, uint64_t ns, const int32_t *t, int32_t n, const int32_t *pages)
{
    return rm_insert(m, ns, t, n, pages);
}

static int64_t hm_evict(void *m, int64_t n) { return rm_evict(m, n); }

/* Every block is a node; the queued ones are evictable. */
static void hm_check_sizes(const void *m, const cache_sizes *s, unsigned seed, long step)
{
    const href_model *r = m;
    int64_t pr = 0;
    for (int32_t i = 0; i < r->n; i++) pr += r->b[i].ref ? r->P : 0;
    ck_assert_msg(s->protected_tokens == pr && s->evictable_tokens == (int64_t)r->qn * r->P &&
                      s->num_nodes == r->n,
                  "seed %u step %ld: sizes %lld/%lld/%lld, reference %lld/%lld/%d", seed, step,
                  (long long)s->evictable_tokens, (long long)s->protected_tokens,
                  (long long)s->num_nodes, (long long)r->qn * r->P, (long long)pr, r->n);
}

/* The queue's order, head first, as the dump shows it. */
static void hm_check_queue(const void *m, cache *c, unsigned seed)
{
    const href_model *r = m;
    char *buf = NULL, exp[4096] = "\"free_queue\":[";
    size_t len = 0;
    for (int32_t q = 0; q < r->qn; q++)
        snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%d", q ? "," : "",
                 r->b[r->queue[q]].page);
    strcat(exp, "]");
    FILE *f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_JSON);
    fclose(f);
    ck_assert_msg(strstr(buf, exp) != NULL, "seed %u: queue %s not in %s", seed, exp, buf);
    free(buf);
}

/* The hash kind (digests of `bits` bits) against vLLM's rules. */
static void hash_against_reference(int32_t P, int bits, unsigned seed, long steps, uint64_t *adv)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 24, P), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    ck_assert_int_eq(cache_hash_debug_set_bits(c, bits), RKV_OK);
    static href_model r;
    memset(&r, 0, sizeof r);
    r.P = P;
    const diff_model d = {"hash", &r, 5, 3, 0, hm_match, hm_lock, hm_insert, hm_evict,
                          hm_check_sizes, hm_check_queue};
    diff_against_reference(c, &pool, &d, seed, steps, adv);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, 24);
    page_pool_destroy(&pool);
}

/* Loop index: P in {1, 2, 4} times digests of 128 or 3 bits. */
START_TEST(hash_random_against_reference)
{
    static const int32_t Ps[] = {1, 2, 4};
    hash_against_reference(Ps[_i % 3], _i < 3 ? 128 : 3, 9090u + (unsigned)_i, 400, NULL);
}
END_TEST

/* Issue 29: the adversarial workload, P in {1, 2, 4, 16} times digests of
 * 128 or 3 bits (3 bits: collisions everywhere, the token re-check at work). */
START_TEST(hash_adversarial_against_reference)
{
    static const int32_t Ps[] = {1, 2, 4, 16};
    const int32_t P = Ps[_i % 4];
    const int bits = _i < 4 ? 128 : 3;
    uint64_t adv = 0xa11ce000u + (uint64_t)_i;
    long steps = tu_diff_steps(4000);
    hash_against_reference(P, bits, 5150u + (unsigned)_i, steps, &adv);
    printf("hash P %d, %d-bit digests: %ld operations against the reference, 0 divergences\n", P,
           bits, steps);
}
END_TEST

/* ---- trie: hand cases; a page-level reference model --------------------- */

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
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &m, q, 4), RKV_OK);
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
    cache_seq_free(&m);
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

/* Issue 29 item 1: the eviction heap was sized by nodes / P, but pages that
 * share their leading tokens share nodes. P = 16 and 40 one-page requests
 * that differ only in their last token: 55 nodes, 40 candidates; the heap
 * held 64 / 16 + 1 = 5 (ASan: heap-buffer-overflow in heap_set). */
START_TEST(pages_sharing_all_but_their_last_token)
{
    enum { P = 16, N = 40 };
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 64, P), RKV_OK);
    cache *c = tu_create("trie", NULL, &pool);
    int32_t t[P];
    for (int32_t i = 0; i < P; i++) t[i] = 7;
    for (int32_t r = 0; r < N; r++) {
        t[P - 1] = 100 + r;
        ck_assert_int_eq(put(c, t, P, 0), 0);
    }
    ck_assert_int_eq(sizes(c).num_nodes, P - 1 + N);
    ck_assert_int_eq(sizes(c).evictable_tokens, N * P);
    /* They go in LRU order, oldest first (a look at a missing page enters
     * only the shared nodes, which own no page). */
    for (int32_t r = 0; r < N; r++) {
        t[P - 1] = 100 + r;
        ck_assert_int_eq(cache_evict(c, 1), P);
        ck_assert_int_eq(look(c, t, P, 0), 0);
        ck_cache_ok(c);
    }
    ck_assert_int_eq(sizes(c).num_nodes, 0);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, 64);
    page_pool_destroy(&pool);
}
END_TEST

/* Every kind that keeps pages. */
START_TEST(namespaces_apart)
{
    const char *kind = reusing_kind(_i);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 32, 2), RKV_OK);
    cache *c = tu_create(kind, NULL, &pool);
    const int32_t a[4] = {1, 2, 3, 4};
    ck_assert_int_eq(put(c, a, 4, 0), 0);
    ck_assert_int_eq(look(c, a, 4, 5), 0);
    ck_assert_int_eq(put(c, a, 4, 5), 0);
    ck_assert_int_eq(look(c, a, 4, 5), 4);
    ck_assert_int_eq(pool.num_cached, 4);
    /* Locks stay in their namespace. */
    cache_seq m;
    cache_seq_init(&m, 5, 0);
    ck_assert_int_eq(cache_match_prefix(c, &m, a, 4), RKV_OK);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
    ck_assert_int_eq(cache_evict(c, 100), 4);
    ck_assert_int_eq(look(c, a, 4, 0), 0);
    ck_assert_int_eq(look(c, a, 4, 5), 4);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    ck_cache_ok(c);
    /* The trie forgets an emptied namespace; the other stays. */
    if (!strcmp(kind, "trie")) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cache_dump(c, f, CACHE_DUMP_TEXT);
        fclose(f);
        ck_assert_msg(!strstr(buf, "\nns 0\n") && strstr(buf, "\nns 5\n"), "dump: %s", buf);
        free(buf);
    }
    ck_assert_int_eq(put(c, a, 4, 0), 0);
    ck_assert_int_eq(look(c, a, 4, 0), 4);
    ck_assert_int_eq(c->stats.inserted_tokens, 12);
    ck_assert_int_eq(c->stats.evicted_tokens, 4);
    cache_seq_free(&m);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(bad_input)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
    cache_config cfg = {"trie", "no-such-policy", NULL, NULL};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(cache_trie_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "no-such-policy") != NULL, "message '%s' names the policy", err);
    c = tu_create("trie", NULL, &pool);
    const int32_t t[4] = {1, 2, 3, 4};
    int32_t pages[2] = {0, 6}, prefix = -1;
    ck_assert_int_eq(page_pool_alloc(&pool, 1, pages), RKV_OK);
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, t, 4, pages, &prefix), RKV_EINVAL);
    ck_assert_int_eq(sizes(c).num_nodes, 0);
    ck_assert_int_eq(pool.num_inflight, 1);
    ck_cache_ok(c);
    ck_assert_int_eq(page_pool_free(&pool, pages, 1), RKV_OK);
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    m.len = 2;
    m.handle = (void *)(uintptr_t)1000;
    ck_assert_int_eq(cache_lock(c, &m), RKV_EINVAL);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

/* ---- reference model: the set of cached pages, each a whole prefix ------ */

enum { MAXE = 256 };

typedef struct ref_entry {
    uint64_t ns;
    int32_t len;          /* tokens, a multiple of P */
    int32_t tokens[MAXT];
    int32_t page;
    int32_t ref;
    uint64_t time, created;
    uint64_t prev_time;   /* the time before the last (0: walked once) */
    uint32_t hits;        /* calls whose walk reached the page's last token */
    int32_t priority;     /* highest request priority of those calls */
} ref_entry;

typedef struct ref_model {
    int32_t P;
    ref_entry e[MAXE];
    int32_t n;
    uint64_t clock, seq;
    const evict_policy *pol;
    int32_t priority;     /* of the current request */
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
        if (r->e[i].time != r->clock) r->e[i].prev_time = r->e[i].time;
        r->e[i].time = r->clock;
        r->e[i].hits++;
        if (r->priority > r->e[i].priority) r->e[i].priority = r->priority;
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
        e->prev_time = 0;
        e->created = r->seq++;
        e->hits = 1;
        e->priority = r->priority;
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

/* A page as the trie shows it to a policy: its owner node, P tokens deep
 * less one page; hits and priority only where the policy reads them. */
static evict_key ref_key(const ref_model *r, int32_t i)
{
    const ref_entry *e = &r->e[i];
    evict_node v = {.time = e->time, .depth = e->len - r->P, .len = r->P};
    if (r->pol->needs & (EVICT_NEEDS_HITS | EVICT_NEEDS_PRIORITY | EVICT_NEEDS_PREV_TIME))
        v.hits = e->hits, v.priority = e->priority, v.prev_time = e->prev_time;
    return r->pol->key(&v);
}

static int64_t ref_evict(ref_model *r, int64_t n)
{
    int64_t freed = 0;
    while (freed < n) {
        int32_t best = -1;
        for (int32_t i = 0; i < r->n; i++) {
            if (r->e[i].ref || !ref_is_leaf(r, i)) continue;
            /* The policy's key of the page's owner, then created first. */
            evict_key ki = ref_key(r, i), kb = best < 0 ? ki : ref_key(r, best);
            if (best < 0 || evict_key_less(ki, kb) ||
                (ki.k0 == kb.k0 && ki.k1 == kb.k1 && r->e[i].created < r->e[best].created))
                best = i;
        }
        if (best < 0) break;
        r->e[best] = r->e[--r->n];
        freed += r->P;
    }
    return freed;
}

/* ref_model behind diff_model. */
static int32_t tm_match(void *m, uint64_t ns, int32_t priority, const int32_t *t, int32_t n,
                        int32_t *pages)
{
    ref_model *r = m;
    r->priority = priority; /* the request's, for its match and insert */
    return ref_match(r, ns, t, n, pages);
}

static void tm_lock(void *m, uint64_t ns, const int32_t *t, const cache_seq *s, int up)
{
    ref_lock(m, ns, t, s->len, up);
}

static int32_t tm_insert(void *m, uint64_t ns, const int32_t *t, int32_t n, const int32_t *pages)
{
    return ref_insert(m, ns, t, n, pages);
}

static int64_t tm_evict(void *m, int64_t n) { return ref_evict(m, n); }

static void tm_check_sizes(const void *m, const cache_sizes *s, unsigned seed, long step)
{
    const ref_model *r = m;
    int64_t ev = 0, pr = 0;
    for (int32_t i = 0; i < r->n; i++) *(r->e[i].ref ? &pr : &ev) += r->P;
    ck_assert_msg(s->evictable_tokens == ev && s->protected_tokens == pr,
                  "seed %u step %ld: sizes %lld/%lld, reference %lld/%lld", seed, step,
                  (long long)s->evictable_tokens, (long long)s->protected_tokens, (long long)ev,
                  (long long)pr);
}

/* The trie under pol against the page-level reference model; alphabet: the
 * plain requests' token values. */
static void trie_against_reference(const evict_policy *pol, int32_t P, int32_t alphabet,
                                   unsigned seed, long steps, uint64_t *adv)
{
    /* 24 pages; 96 at P = 16, so that many one-page leaves can share nodes. */
    const int32_t npages = adv && P == 16 ? 96 : 24;
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, npages, P), RKV_OK);
    cache_config cfg = {"trie", pol->name, NULL, NULL};
    cache *c = NULL;
    char cerr[256] = "";
    ck_assert_msg(cache_create(&cfg, &pool, &c, cerr, sizeof cerr) == RKV_OK, "%s", cerr);
    static ref_model r;
    memset(&r, 0, sizeof r);
    r.P = P;
    r.pol = pol;
    const diff_model d = {pol->name, &r, 9, alphabet, (pol->needs & EVICT_NEEDS_PRIORITY) != 0,
                          tm_match, tm_lock, tm_insert, tm_evict, tm_check_sizes, NULL};
    diff_against_reference(c, &pool, &d, seed, steps, adv);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, npages);
    page_pool_destroy(&pool);
}

/* Runs 0..5 under each policy in turn (lru first, as before the policies). */
START_TEST(trie_random_against_reference)
{
    static const int32_t Ps[] = {1, 2, 4};
    /* A wide alphabet gives nodes more children than the list holds. */
    trie_against_reference(evict_policies[_i / 6], Ps[_i % 3], _i % 6 < 3 ? 3 : 12,
                           4242u + (unsigned)(_i % 6), 400, NULL);
}
END_TEST

/* Issue 29: the adversarial workload (tu_adversarial) under every policy and
 * page size 1, 2, 4 and 16. */
START_TEST(trie_adversarial_against_reference)
{
    static const int32_t Ps[] = {1, 2, 4, 16};
    const evict_policy *pol = evict_policies[_i / 4];
    const int32_t P = Ps[_i % 4];
    uint64_t adv = 0x5eed0000u + (uint64_t)_i;
    long steps = tu_diff_steps(4000);
    trie_against_reference(pol, P, 3, 777u + (unsigned)_i, steps, &adv);
    printf("trie %s P %d: %ld operations against the reference, 0 divergences\n", pol->name, P, steps);
}
END_TEST

/* ---- the kinds agree ----------------------------------------------------
 * With unlimited capacity and the page size as block size, every kind that
 * keeps pages reports the matched lengths of the first (radix) on a seeded
 * random trace (namespaces included); the others always match 0. */

enum { MAXLEN = 64, MAXKINDS = 16 };

static void same_matches(int32_t P, unsigned seed, int requests, uint64_t *adv)
{
    srand(seed);
    const int nk = num_kinds();
    ck_assert_int_le(nk, MAXKINDS);
    ck_assert(cache_kinds[0].caps & CACHE_CAP_REUSE);
    page_pool pool[MAXKINDS];
    cache *c[MAXKINDS];
    for (int k = 0; k < nk; k++) {
        ck_assert_int_eq(page_pool_init(&pool[k], requests * MAXLEN / P + 1, P), RKV_OK);
        c[k] = tu_create(cache_kinds[k].name, NULL, &pool[k]);
    }
    int32_t t[MAXLEN], prev[MAXLEN] = {0}, prev_n = 0;
    for (int r = 0; r < requests; r++) {
        int32_t n;
        if (adv) {
            n = tu_adversarial(adv, P, prev, prev_n, MAXLEN, t);
        } else {
            n = 2 + rand() % (MAXLEN - 1);
            int32_t keep = rand() % (n + 1);
            for (int32_t i = 0; i < n; i++) t[i] = i < keep ? prev[i] : rand() % 4;
        }
        memcpy(prev, t, sizeof t);
        prev_n = n;
        uint64_t ns = (uint64_t)(rand() % 3 == 0);
        int32_t matched[MAXKINDS], prefix[MAXKINDS];
        for (int k = 0; k < nk; k++) {
            cache_seq m;
            cache_seq_init(&m, 0, 0);
            /* As the engine does: match all tokens but the last, insert all. */
            m.ns = ns;
            ck_assert_int_eq(cache_match_prefix(c[k], &m, t, n - 1), RKV_OK);
            matched[k] = m.len;
            ck_assert_int_eq(cache_lock(c[k], &m), RKV_OK);
            int32_t mm = 0;
            cache_seq m2;
            cache_seq_init(&m2, 0, 0);
            ck_assert_int_eq(tu_request(c[k], t, n, ns, &m2, &mm, &prefix[k]), RKV_OK);
            ck_assert_int_eq(cache_unlock(c[k], &m2), RKV_OK);
            ck_assert_int_eq(cache_unlock(c[k], &m), RKV_OK);
            cache_seq_free(&m);
            cache_seq_free(&m2);
            ck_cache_ok(c[k]);
            ck_assert_int_eq(pool[k].num_inflight, 0);
        }
        for (int k = 1; k < nk; k++) {
            if (cache_kinds[k].caps & CACHE_CAP_REUSE)
                ck_assert_msg(matched[k] == matched[0] && prefix[k] == prefix[0],
                              "seed %u P %d request %d: %s matched %d prefix %d, %s %d %d", seed,
                              P, r, cache_kinds[k].name, matched[k], prefix[k], cache_kinds[0].name,
                              matched[0], prefix[0]);
            else
                ck_assert_msg(matched[k] == 0, "seed %u: %s matched %d", seed, cache_kinds[k].name,
                              matched[k]);
        }
    }
    /* Every distinct full page is cached once in each kind that keeps pages. */
    for (int k = 1; k < nk; k++)
        ck_assert_int_eq(pool[k].num_cached,
                         cache_kinds[k].caps & CACHE_CAP_REUSE ? pool[0].num_cached : 0);
    for (int k = 0; k < nk; k++) {
        cache_destroy(c[k]);
        page_pool_destroy(&pool[k]);
    }
}

START_TEST(same_matches_unlimited)
{
    static const int32_t Ps[] = {1, 4, 16};
    same_matches(Ps[_i % 3], 777u + (unsigned)_i, 400, NULL);
}
END_TEST

/* Issue 29: the same on the adversarial workload, P in {1, 2, 4, 16}. */
START_TEST(same_matches_adversarial)
{
    static const int32_t Ps[] = {1, 2, 4, 16};
    uint64_t adv = 0xbadcafe0u + (uint64_t)_i;
    same_matches(Ps[_i % 4], 31u + (unsigned)_i, 400, &adv);
    printf("every kind, P %d: 400 adversarial requests match as the radix kind does\n", Ps[_i % 4]);
}
END_TEST

START_TEST(names_dispatch)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
    for (const cache_kind *k = cache_kinds; k->name; k++) {
        cache *c = tu_create(k->name, NULL, &pool);
        ck_assert_str_eq(c->ops->name, k->name);
        cache_destroy(c);
        int listed = 0;
        for (int i = 0; cache_kind_names[i]; i++) listed += !strcmp(cache_kind_names[i], k->name);
        ck_assert_int_eq(listed, 1);
        ck_assert_ptr_eq(cache_kind_find(k->name), k);
    }
    ck_assert_ptr_eq(cache_kind_find(NULL), &cache_kinds[0]);
    ck_assert_ptr_null(cache_kind_find("btree"));
    cache_config cfg = {"hash", NULL, "sha1", NULL};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "sha1") != NULL, "message '%s' names the function", err);
    page_pool_destroy(&pool);
}
END_TEST

/* ---- eviction policies ---------------------------------------------------- */

/* A policy's order (fields compared in place) must sort nodes as its key does. */
static uint64_t field_of(const evict_node *n, uint8_t f)
{
    switch (f) {
    case EVICT_FIELD_TIME: return n->time;
    case EVICT_FIELD_HITS: return n->hits;
    default: return evict_key_of_signed(n->priority);
    }
}

START_TEST(orders_agree_with_keys)
{
    srand(5);
    for (int i = 0; evict_policies[i]; i++) {
        const evict_policy *p = evict_policies[i];
        if (!p->order) continue;
        for (const uint8_t *f = p->order; *f != EVICT_FIELD_END; f++)
            if (*f == EVICT_FIELD_PRIORITY) ck_assert(p->needs & EVICT_NEEDS_PRIORITY);
            else if (*f == EVICT_FIELD_HITS) ck_assert(p->needs & EVICT_NEEDS_HITS);
        for (int k = 0; k < 2000; k++) {
            evict_node a = {.time = (uint64_t)(rand() % 4), .hits = (uint64_t)(rand() % 4),
                            .depth = rand() % 4, .len = 1 + rand() % 3, .priority = rand() % 5 - 2};
            evict_node b = {.time = (uint64_t)(rand() % 4), .hits = (uint64_t)(rand() % 4),
                            .depth = rand() % 4, .len = 1 + rand() % 3, .priority = rand() % 5 - 2};
            int by_order = 0;
            for (const uint8_t *f = p->order; *f != EVICT_FIELD_END && !by_order; f++) {
                uint64_t u = field_of(&a, *f), v = field_of(&b, *f);
                by_order = u < v ? -1 : u > v;
            }
            evict_key ka = p->key(&a), kb = p->key(&b);
            int by_key = evict_key_less(ka, kb) ? -1 : evict_key_less(kb, ka);
            ck_assert_msg(by_order == by_key, "%s: order says %d, key %d", p->name, by_order, by_key);
        }
    }
}
END_TEST

START_TEST(table_and_keys)
{
    ck_assert_ptr_eq(evict_policy_find(NULL), evict_policies[0]);
    ck_assert_str_eq(evict_policies[0]->name, "lru");
    ck_assert_ptr_null(evict_policy_find("no-such-policy"));
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

typedef struct fixture {
    page_pool pool;
    cache *c;
    cache_seq m;
} fixture;

static void open_kind(fixture *f, const char *kind, const char *policy)
{
    ck_assert_int_eq(page_pool_init(&f->pool, 64, 2), RKV_OK);
    cache_config cfg = {kind, policy, NULL, NULL};
    char err[256] = "";
    ck_assert_msg(cache_create(&cfg, &f->pool, &f->c, err, sizeof err) == RKV_OK, "%s: %s", kind, err);
    cache_seq_init(&f->m, 0, 0);
}

static void close_kind(fixture *f)
{
    ck_cache_ok(f->c);
    cache_seq_free(&f->m);
    cache_destroy(f->c);
    ck_assert_int_eq(f->pool.num_cached, 0);
    page_pool_destroy(&f->pool);
}

/* One finished request with the given priority: cached, then unlocked. */
static void request(fixture *f, const int32_t *t, int32_t n, int32_t priority)
{
    int32_t matched = 0, prefix = 0;
    f->m.priority = priority;
    ck_assert_int_eq(tu_request(f->c, t, n, 0, &f->m, &matched, &prefix), RKV_OK);
    ck_assert_int_eq(cache_unlock(f->c, &f->m), RKV_OK);
    ck_cache_ok(f->c);
}

static int32_t cached_len(fixture *f, const int32_t *t, int32_t n)
{
    ck_assert_int_eq(cache_match_prefix(f->c, &f->m, t, n), RKV_OK);
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
    f.m.priority = 0;
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

/* A priority rises when a more important request reuses the pages: X and Y
 * (priority 0), X matched by a priority-5 request, then Y by a priority-0 one.
 * lru evicts X (older), priority evicts Y. */
START_TEST(priority_rises_on_reuse)
{
    const char *kind = evicting_kind(_i);
    const char *const policies[] = {"priority", "lru"};
    for (int p = 0; p < 2; p++) {
        fixture f;
        open_kind(&f, kind, policies[p]);
        const int32_t X[] = {1, 2, 3, 4}, Y[] = {5, 6, 7, 8};
        request(&f, X, 4, 0);
        request(&f, Y, 4, 0);
        f.m.priority = 5;
        ck_assert_int_eq(cached_len(&f, X, 4), 4);
        f.m.priority = 0;
        ck_assert_int_eq(cached_len(&f, Y, 4), 4);
        ck_assert_int_ge(cache_evict(f.c, 2), 2);
        int32_t x = cached_len(&f, X, 4), y = cached_len(&f, Y, 4);
        if (p == 0) ck_assert_msg(x == 4 && y < 4, "%s priority: X %d (kept), Y %d", kind, x, y);
        else ck_assert_msg(x < 4 && y == 4, "%s lru: X %d, Y %d (kept)", kind, x, y);
        close_kind(&f);
    }
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

/* LRU-2: A requested twice (two accesses), then B once, later.
 * lru evicts A (its last access is older); lru2 evicts B (no access before
 * its last, while A has one), for every kind that evicts in an order. */
static void lru2_case(const char *kind, const char *policy, int32_t *a_left, int32_t *b_left)
{
    fixture f;
    open_kind(&f, kind, policy);
    const int32_t A[] = {70, 71}, B[] = {80, 81};
    request(&f, A, 2, 0);
    request(&f, A, 2, 0); /* a request, not a bare match: hash counts releases */
    request(&f, B, 2, 0);
    ck_assert_int_ge(cache_evict(f.c, 2), 2);
    ck_cache_ok(f.c);
    *a_left = cached_len(&f, A, 2);
    *b_left = cached_len(&f, B, 2);
    close_kind(&f);
}

START_TEST(lru2_keeps_the_returning)
{
    const char *kind = evicting_kind(_i);
    int32_t a, b;
    lru2_case(kind, "lru2", &a, &b);
    ck_assert_msg(a == 2 && b == 0, "%s lru2: A %d (kept), B %d (evicted)", kind, a, b);
    lru2_case(kind, "lru", &a, &b);
    ck_assert_msg(a == 0 && b == 2, "%s lru: A %d (evicted), B %d (kept)", kind, a, b);
}
END_TEST

/* Seeded random requests with random priorities into a small cache, for every
 * kind that evicts in an order under every policy: cache_check after each one
 * (the kinds verify their heap order and that no stored key is stale), and a
 * request's pages always come back in full. */
START_TEST(random_pressure_every_policy)
{
    const int npol = evict_policy_count();
    const char *kind = evicting_kind(_i / npol);
    const char *policy = evict_policies[_i % npol]->name;
    unsigned seed = 99u + (unsigned)_i;
    srand(seed);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 24, 2), RKV_OK);
    cache_config cfg = {kind, policy, NULL, NULL};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_msg(cache_create(&cfg, &pool, &c, err, sizeof err) == RKV_OK, "%s", err);
    int32_t t[16], prev[16] = {0};
    for (int r = 0; r < 300; r++) {
        int32_t n = 2 + rand() % 15, keep = rand() % (n + 1);
        for (int32_t i = 0; i < n; i++) t[i] = i < keep ? prev[i] : rand() % 5;
        memcpy(prev, t, sizeof t);
        int32_t priority = rand() % 4 - 1;
        cache_seq m;
        cache_seq_init(&m, 0, priority);
        int32_t matched = 0, prefix = 0;
        rkv_status st = tu_request(c, t, n, (uint64_t)(rand() % 2), &m, &matched, &prefix);
        ck_assert_msg(st == RKV_OK, "%s %s seed %u request %d: %s", kind, policy, seed, r,
                      rkv_status_str(st));
        ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
        cache_seq_free(&m);
        char e[512] = "";
        ck_assert_msg(cache_check(c, e, sizeof e) == RKV_OK, "%s %s seed %u request %d: %s", kind,
                      policy, seed, r, e);
        ck_assert_int_eq(pool.num_inflight, 0);
        if (rand() % 8 == 0) cache_evict(c, rand() % 8);
    }
    /* Nothing is locked: everything can go, and goes. */
    int64_t left = sizes(c).evictable_tokens;
    ck_assert_int_eq(cache_evict(c, 1 << 20), left);
    ck_assert_int_eq(pool.num_cached, 0);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, 24);
    page_pool_destroy(&pool);
}
END_TEST

/* Issue 29: the adversarial workload into a small cache for every kind x
 * policy x page size (1, 2, 4, 16), cache_check after each request (heap
 * order, stale keys, page ownership, the pool's sum). */
START_TEST(adversarial_pressure_every_kind)
{
    static const int32_t Ps[] = {1, 2, 4, 16};
    const int npol = evict_policy_count();
    const char *kind = cache_kinds[_i / (4 * npol)].name;
    const char *policy = evict_policies[_i / 4 % npol]->name;
    const int32_t P = Ps[_i % 4];
    uint64_t rng = 0xfeed0000u + (uint64_t)_i;
    /* Room for the longest request (64 tokens) and a few pages more. */
    const int32_t npages = 64 / P + 8;
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, npages, P), RKV_OK);
    cache_config cfg = {kind, policy, NULL, NULL};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_msg(cache_create(&cfg, &pool, &c, err, sizeof err) == RKV_OK, "%s", err);
    int32_t t[64], prev[64] = {0}, prev_n = 0;
    long steps = tu_diff_steps(1500);
    for (long r = 0; r < steps; r++) {
        int32_t n = tu_adversarial(&rng, P, prev, prev_n, 64, t);
        memcpy(prev, t, sizeof t);
        prev_n = n;
        int32_t priority = tu_rand_below(&rng, 4) - 1;
        cache_seq m;
        cache_seq_init(&m, 0, priority);
        int32_t matched = 0, prefix = 0;
        rkv_status st = tu_request(c, t, n, (uint64_t)tu_rand_below(&rng, 2), &m, &matched, &prefix);
        ck_assert_msg(st == RKV_OK, "%s %s P %d request %ld: %s", kind, policy, P, r,
                      rkv_status_str(st));
        ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
        cache_seq_free(&m);
        char e[512] = "";
        ck_assert_msg(cache_check(c, e, sizeof e) == RKV_OK, "%s %s P %d request %ld: %s", kind,
                      policy, P, r, e);
        ck_assert_int_eq(pool.num_inflight, 0);
        ck_assert_int_eq(pool.num_free + pool.num_cached, pool.num_pages);
        if (tu_rand_below(&rng, 8) == 0) cache_evict(c, tu_rand_below(&rng, 4 * P));
    }
    int64_t left = sizes(c).evictable_tokens;
    ck_assert_int_eq(cache_evict(c, 1 << 20), left);
    ck_assert_int_eq(pool.num_cached, 0);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, npages);
    page_pool_destroy(&pool);
    printf("%s %s P %d: %ld adversarial requests, every check passed\n", kind, policy, P, steps);
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
        cache_config cfg = {k->name, "no-such-policy", NULL, NULL};
        cache *c = NULL;
        char err[256] = "";
        ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
        ck_assert_msg(strstr(err, "no-such-policy") && strstr(err, "cost"),
                      "%s: '%s' names it and the choices", k->name, err);
        page_pool_destroy(&pool);
    }
}
END_TEST

/* --hash-duplicates (issue 28): two requests compute the same full blocks
 * before either caches them. keep (vLLM) caches both copies; a lookup takes
 * the copy cached first, and when that one is evicted the other copy serves,
 * even under the first copy's parent (blocks name their parent by prefix).
 * dedup frees the second copy. */
START_TEST(hash_duplicates_keep_and_dedup)
{
    for (int keep = 0; keep < 2; keep++) {
        page_pool pool;
        ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
        cache_config cfg = {.kind = "hash", .hash_duplicates = keep ? "keep" : "dedup"};
        cache *c = NULL;
        char err[256] = "";
        ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_OK);
        int32_t t[5] = {1, 2, 3, 4, 5}, a[2], b[2], prefix = -1;
        ck_assert_int_eq(page_pool_alloc(&pool, 2, a), RKV_OK);
        ck_assert_int_eq(page_pool_alloc(&pool, 2, b), RKV_OK);
        ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, t, 4, a, &prefix), RKV_OK);
        ck_assert_int_eq(prefix, 0);
        ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, t, 4, b, &prefix), RKV_OK);
        ck_assert_int_eq(prefix, keep ? 0 : 4);
        if (!keep) ck_assert_int_eq(page_pool_free(&pool, b, 2), RKV_OK);
        ck_cache_ok(c);
        ck_assert_int_eq(sizes(c).num_nodes, keep ? 4 : 2);
        cache_seq m;
        cache_seq_init(&m, 0, 0);
        ck_assert_int_eq(cache_match_prefix(c, &m, t, 5), RKV_OK);
        ck_assert_int_eq(m.len, 4);
        ck_assert_int_eq(m.pages[0], a[0]); /* the copy cached first */
        ck_assert_int_eq(m.pages[1], a[1]);
        /* The free queue holds a1 a0 (b1 b0): the head, a1, goes first. */
        ck_assert_int_eq(cache_evict(c, 2), 2);
        ck_cache_ok(c);
        ck_assert_int_eq(cache_match_prefix(c, &m, t, 5), RKV_OK);
        ck_assert_int_eq(m.len, keep ? 4 : 2);
        ck_assert_int_eq(m.pages[0], a[0]);
        if (keep) ck_assert_int_eq(m.pages[1], b[1]); /* b's copy, under a's first block */
        ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
        ck_cache_ok(c);
        ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
        cache_seq_free(&m);
        cache_destroy(c);
        ck_assert_int_eq(pool.num_free, pool.num_pages);
        page_pool_destroy(&pool);
    }
}
END_TEST

/* keep needs lru (vLLM's free queue); a bad value is refused, naming it. */
START_TEST(hash_duplicates_refused)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 2), RKV_OK);
    cache *c = NULL;
    char err[256] = "";
    cache_config cfg = {.kind = "hash", .policy = "lfu", .hash_duplicates = "keep"};
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "lru") && strstr(err, "lfu"), "%s", err);
    cfg = (cache_config){.kind = "hash", .hash_duplicates = "twice"};
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "'twice'") != NULL, "%s", err);
    cfg = (cache_config){.kind = "hash", .policy = "lfu"}; /* default: dedup */
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_OK);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

int main(void)
{
    const int npol = evict_policy_count();
    Suite *s = suite_create("cache");

    TCase *reg = tcase_create("registry");
    tcase_add_test(reg, create_by_name);
    tcase_add_test(reg, names_dispatch);
    tcase_add_test(reg, every_kind_takes_every_policy);
    tcase_add_test(reg, match_storage);
    suite_add_tcase(s, reg);

    TCase *contract = tcase_create("contract");
    tcase_add_loop_test(contract, ownership_flow, 0, count_with(CACHE_CAP_REUSE) * npol);
    tcase_add_loop_test(contract, namespaces_apart, 0, count_with(CACHE_CAP_REUSE));
    tcase_add_loop_test(contract, same_matches_unlimited, 0, 3);
    tcase_add_loop_test(contract, same_matches_adversarial, 0, 4);
    suite_add_tcase(s, contract);

    TCase *pol = tcase_create("policies");
    tcase_add_test(pol, table_and_keys);
    tcase_add_test(pol, orders_agree_with_keys);
    tcase_add_loop_test(pol, priority_keeps_the_important, 0, count_with(CACHE_CAP_EVICTS));
    tcase_add_loop_test(pol, priority_shared_prefix_keeps_the_highest, 0, count_with(CACHE_CAP_EVICTS));
    tcase_add_loop_test(pol, priority_rises_on_reuse, 0, count_with(CACHE_CAP_EVICTS));
    tcase_add_loop_test(pol, cost_keeps_the_deep, 0, count_with(CACHE_CAP_EVICTS));
    tcase_add_loop_test(pol, lru2_keeps_the_returning, 0, count_with(CACHE_CAP_EVICTS));
    tcase_add_loop_test(pol, random_pressure_every_policy, 0, count_with(CACHE_CAP_EVICTS) * npol);
    tcase_add_loop_test(pol, adversarial_pressure_every_kind, 0, num_kinds() * npol * 4);
    suite_add_tcase(s, pol);

    TCase *radix = tcase_create("radix_none");
    tcase_add_test(radix, radix_dump_and_namespaces);
    tcase_add_test(radix, none_kind);
    suite_add_tcase(s, radix);

    TCase *hash = tcase_create("hash");
    tcase_add_test(hash, only_full_blocks_hit);
    tcase_add_test(hash, hash_duplicates_keep_and_dedup);
    tcase_add_test(hash, hash_duplicates_refused);
    tcase_add_test(hash, chained_hashes_differ);
    tcase_add_test(hash, free_queue_order);
    tcase_add_test(hash, insert_refreshes_its_chain);
    tcase_add_test(hash, token_recheck_rejects_collision);
    tcase_add_loop_test(hash, collisions_change_nothing, 0, 3);
    tcase_add_test(hash, nocache_hashes_but_never_hits);
    tcase_add_loop_test(hash, each_hash_function, 0, num_hash_fns());
    tcase_add_test(hash, bad_names_rejected);
    tcase_add_test(hash, bad_calls_change_nothing);
    tcase_add_test(hash, dump_formats);
    tcase_add_loop_test(hash, hash_random_against_reference, 0, 6);
    tcase_add_loop_test(hash, hash_adversarial_against_reference, 0, 8);
    suite_add_tcase(s, hash);

    TCase *trie = tcase_create("trie");
    tcase_add_test(trie, tokens_share_nodes);
    tcase_add_test(trie, lru_leaf_order);
    tcase_add_test(trie, pages_end_at_their_last_token);
    tcase_add_test(trie, bad_input);
    tcase_add_test(trie, pages_sharing_all_but_their_last_token);
    tcase_add_loop_test(trie, trie_random_against_reference, 0, 6 * npol);
    tcase_add_loop_test(trie, trie_adversarial_against_reference, 0, 4 * npol);
    suite_add_tcase(s, trie);

    return check_run(s);
}
