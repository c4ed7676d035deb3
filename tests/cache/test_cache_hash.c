/* test_cache_hash.c - the hash and hash-nocache kinds: vLLM v1 behaviours. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_hash.h"
#include "cache_hash.h"
#include "cache_test_util.h"

/* Insert tokens[0..n) with fresh pages, nothing matched or locked. */
static int32_t put(cache *c, const int32_t *tokens, int32_t n, uint64_t ns)
{
    cache_match m;
    cache_match_init(&m);
    int32_t matched = 0, prefix = 0;
    rkv_status st = tu_request(c, tokens, n, ns, &m, &matched, &prefix);
    ck_assert_int_eq(st, RKV_OK);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    cache_match_free(&m);
    ck_cache_ok(c);
    return prefix;
}

static int32_t look(cache *c, const int32_t *tokens, int32_t n, uint64_t ns)
{
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_prefix(c, tokens, n, ns, &m), RKV_OK);
    int32_t len = m.len;
    ck_assert_int_eq(m.num_pages * c->page_size, len);
    cache_match_free(&m);
    return len;
}

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
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_prefix(c, r0, 1, 0, &m), RKV_OK);
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
    cache_match_free(&m);
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
    cache_match m;
    cache_match_init(&m);
    int32_t *pages = malloc(sizeof *pages * 4);
    ck_assert_int_eq(page_pool_alloc(&pool, 4, pages), RKV_OK);
    int32_t prefix = -1;
    ck_assert_int_eq(cache_insert(c, ab, 4, pages, 0, &prefix), RKV_OK);
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
    cache_match_free(&m);
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
        cache_match m;
        cache_match_init(&m);
        ck_assert_int_eq(cache_match_prefix(c, t, 2, 0, &m), RKV_OK);
        ck_assert_int_eq(m.len, i < 40 ? 2 : 0);
        cache_match_free(&m);
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
        cache_match ma, mb;
        cache_match_init(&ma), cache_match_init(&mb);
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
        cache_match_free(&ma), cache_match_free(&mb);
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
        cache_match m;
        cache_match_init(&m);
        int32_t matched = -1, prefix = -1;
        ck_assert_int_eq(tu_request(nc, t, n, 0, &m, &matched, &prefix), RKV_OK);
        ck_assert_int_eq(matched, 0);
        ck_assert_int_eq(prefix, 0);
        ck_assert_int_eq(cache_unlock(nc, &m), RKV_OK);
        ck_assert_int_eq(tu_request(h, t, n, 0, &m, &matched, &prefix), RKV_OK);
        ck_assert_int_eq(cache_unlock(h, &m), RKV_OK);
        cache_match_free(&m);
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

static const char *const fns[] = {"xxh3", "sha256", "md5"};

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
    for (int k = 0; k < 3; k++) {
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
    cache_config cfg = {"hash", NULL, "crc32"};
    cache *c = (cache *)&cfg;
    char err[256] = "";
    ck_assert_int_eq(cache_hash_create(&cfg, &pool, false, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "crc32") != NULL, "message '%s' names the function", err);
    cfg.hash_fn = NULL;
    cfg.policy = "mru";
    err[0] = 0;
    ck_assert_int_eq(cache_hash_create(&cfg, &pool, true, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "mru") != NULL, "message '%s' names the policy", err);
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
    ck_assert_int_eq(cache_insert(c, t, 4, pages, 0, &prefix), RKV_EINVAL);
    ck_assert_int_eq(pool.num_cached, 0);
    ck_assert_int_eq(look(c, t, 4, 0), 0);
    ck_assert_int_eq(page_pool_free(&pool, pages, 1), RKV_OK);
    cache_match m;
    cache_match_init(&m);
    ck_assert_int_eq(cache_match_reserve(&m, 1), RKV_OK);
    m.pages[0] = 3, m.num_pages = 1, m.len = 2;
    ck_assert_int_eq(cache_lock(c, &m), RKV_EINVAL); /* page 3 holds no block */
    ck_cache_ok(c);
    cache_match_free(&m);
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


/* ---- reference model: vLLM's rules on plain arrays ------------------------
 * Blocks are found by their whole prefix (no digests); the free queue is an
 * array, head first. */

enum { MAXT = 16, MAXE = 256, MAXHELD = 4 };

typedef struct ref_block {
    uint64_t ns;
    int32_t nblocks;     /* prefix length in blocks, this one included */
    int32_t tokens[MAXT];
    int32_t page, ref;
} ref_block;

typedef struct ref_model {
    int32_t P, n, qn;
    ref_block b[MAXE];
    int32_t queue[MAXE]; /* indices into b, head first */
} ref_model;

static int32_t rm_find(const ref_model *r, uint64_t ns, const int32_t *t, int32_t nblocks)
{
    for (int32_t i = 0; i < r->n; i++)
        if (r->b[i].ns == ns && r->b[i].nblocks == nblocks &&
            memcmp(r->b[i].tokens, t, sizeof(int32_t) * (size_t)(nblocks * r->P)) == 0)
            return i;
    return -1;
}

static int32_t rm_by_page(const ref_model *r, int32_t page)
{
    for (int32_t i = 0; i < r->n; i++)
        if (r->b[i].page == page) return i;
    ck_abort_msg("reference: page %d holds no block", page);
    return -1;
}

static void rm_dequeue(ref_model *r, int32_t i)
{
    for (int32_t q = 0; q < r->qn; q++)
        if (r->queue[q] == i) {
            memmove(r->queue + q, r->queue + q + 1, sizeof(int32_t) * (size_t)(r->qn - q - 1));
            r->qn--;
            return;
        }
}

static int32_t rm_match(const ref_model *r, uint64_t ns, const int32_t *t, int32_t n, int32_t *pages)
{
    int32_t k = 0, i;
    while ((k + 1) * r->P <= n && (i = rm_find(r, ns, t, k + 1)) >= 0) pages[k++] = r->b[i].page;
    return k * r->P;
}

static void rm_lock(ref_model *r, const int32_t *pages, int32_t np, int up)
{
    for (int32_t j = 0; j < np; j++) {
        int32_t i = rm_by_page(r, up > 0 ? pages[j] : pages[np - 1 - j]);
        if (up > 0 && r->b[i].ref++ == 0) rm_dequeue(r, i);
        if (up < 0 && --r->b[i].ref == 0) r->queue[r->qn++] = i;
    }
}

static int32_t rm_insert(ref_model *r, uint64_t ns, const int32_t *t, int32_t n,
                         const int32_t *pages)
{
    int32_t have[MAXT], nb = n / r->P;
    int32_t k = rm_match(r, ns, t, n, have);
    for (int32_t j = k / r->P + 1; j <= nb; j++) {
        ck_assert_int_lt(r->n, MAXE);
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

static int64_t rm_evict(ref_model *r, int64_t n)
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

typedef struct held {
    cache_match m;
} held;

/* Loop index: P in {1, 2, 4} times digests of 128 or 3 bits. */
START_TEST(random_against_reference)
{
    static const int32_t Ps[] = {1, 2, 4};
    const int32_t P = Ps[_i % 3];
    const int bits = _i < 3 ? 128 : 3;
    unsigned seed = 9090u + (unsigned)_i;
    srand(seed);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 24, P), RKV_OK);
    cache *c = tu_create("hash", NULL, &pool);
    ck_assert_int_eq(cache_hash_debug_set_bits(c, bits), RKV_OK);
    static ref_model r;
    memset(&r, 0, sizeof r);
    r.P = P;
    held hold[MAXHELD];
    int nheld = 0;
    int32_t prev[MAXT] = {0}, t[MAXT], pages[MAXT], want[MAXT];
    for (int step = 0; step < 400; step++) {
        int op = rand() % 10;
        if (op < 6) {
            int32_t n = 1 + rand() % MAXT, keep = rand() % (n + 1);
            for (int32_t i = 0; i < n; i++) t[i] = i < keep ? prev[i] : rand() % 3;
            memcpy(prev, t, sizeof t);
            uint64_t ns = (uint64_t)(rand() % 2) * 5;
            held *h = nheld < MAXHELD ? &hold[nheld] : NULL;
            cache_match tmp;
            cache_match *m = h ? &h->m : &tmp;
            cache_match_init(m);
            ck_assert_int_eq(cache_match_prefix(c, t, n, ns, m), RKV_OK);
            int32_t rl = rm_match(&r, ns, t, n, want);
            ck_assert_msg(m->len == rl, "seed %u step %d: matched %d, reference %d", seed, step,
                          m->len, rl);
            for (int32_t i = 0; i < m->num_pages; i++)
                ck_assert_msg(m->pages[i] == want[i], "seed %u step %d: page %d", seed, step, i);
            ck_assert_int_eq(cache_lock(c, m), RKV_OK);
            rm_lock(&r, m->pages, m->num_pages, +1);
            int32_t nb = n / P, need = nb - m->num_pages, fr = page_pool_num_free(&pool);
            if (need > fr) {
                int64_t e = cache_evict(c, (int64_t)(need - fr) * P);
                ck_assert_msg(e == rm_evict(&r, (int64_t)(need - fr) * P),
                              "seed %u step %d: evicted %lld", seed, step, (long long)e);
            }
            int ok = need <= page_pool_num_free(&pool);
            if (ok) {
                if (m->num_pages) memcpy(pages, m->pages, sizeof(int32_t) * (size_t)m->num_pages);
                ck_assert_int_eq(page_pool_alloc(&pool, need, pages + m->num_pages), RKV_OK);
                int32_t prefix = -1;
                ck_assert_int_eq(cache_insert(c, t, n, pages, ns, &prefix), RKV_OK);
                int32_t rp = rm_insert(&r, ns, t, n, pages);
                ck_assert_msg(prefix == rp, "seed %u step %d: prefix %d, reference %d", seed,
                              step, prefix, rp);
            }
            if (h && ok && rand() % 2) {
                nheld++;
            } else {
                ck_assert_int_eq(cache_unlock(c, m), RKV_OK);
                rm_lock(&r, m->pages, m->num_pages, -1);
                cache_match_free(m);
            }
        } else if (op < 8 && nheld > 0) {
            int k = rand() % nheld;
            ck_assert_int_eq(cache_unlock(c, &hold[k].m), RKV_OK);
            rm_lock(&r, hold[k].m.pages, hold[k].m.num_pages, -1);
            cache_match_free(&hold[k].m);
            hold[k] = hold[--nheld];
        } else {
            int64_t want_n = rand() % (3 * P + 1);
            int64_t e = cache_evict(c, want_n);
            ck_assert_msg(e == rm_evict(&r, want_n), "seed %u step %d: evicted %lld", seed,
                          step, (long long)e);
        }
        cache_sizes s;
        cache_get_sizes(c, &s);
        int64_t pr = 0;
        for (int32_t i = 0; i < r.n; i++) pr += r.b[i].ref ? P : 0;
        ck_assert_msg(s.protected_tokens == pr && s.evictable_tokens == (int64_t)r.qn * P &&
                          s.num_nodes == r.n,
                      "seed %u step %d: sizes %lld/%lld/%lld, reference %lld/%lld/%d", seed, step,
                      (long long)s.evictable_tokens, (long long)s.protected_tokens,
                      (long long)s.num_nodes, (long long)r.qn * P, (long long)pr, r.n);
        char err[512] = "";
        ck_assert_msg(cache_check(c, err, sizeof err) == RKV_OK, "seed %u step %d: %s", seed,
                      step, err);
    }
    /* The queue's order, head first, as the dump shows it. */
    char *buf = NULL, exp[4096] = "\"free_queue\":[";
    size_t len = 0;
    for (int32_t q = 0; q < r.qn; q++)
        snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%d", q ? "," : "",
                 r.b[r.queue[q]].page);
    strcat(exp, "]");
    FILE *f = open_memstream(&buf, &len);
    cache_dump(c, f, CACHE_DUMP_JSON);
    fclose(f);
    ck_assert_msg(strstr(buf, exp) != NULL, "seed %u: queue %s not in %s", seed, exp, buf);
    free(buf);
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
    Suite *s = suite_create("cache_hash");
    TCase *tc = tcase_create("hash");
    tcase_add_test(tc, only_full_blocks_hit);
    tcase_add_test(tc, chained_hashes_differ);
    tcase_add_test(tc, free_queue_order);
    tcase_add_test(tc, insert_refreshes_its_chain);
    tcase_add_test(tc, token_recheck_rejects_collision);
    tcase_add_loop_test(tc, collisions_change_nothing, 0, 3);
    tcase_add_test(tc, nocache_hashes_but_never_hits);
    tcase_add_loop_test(tc, each_hash_function, 0, 3);
    tcase_add_test(tc, bad_names_rejected);
    tcase_add_test(tc, bad_calls_change_nothing);
    tcase_add_test(tc, dump_formats);
    tcase_add_loop_test(tc, random_against_reference, 0, 6);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
