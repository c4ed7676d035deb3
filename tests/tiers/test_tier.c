/* test_tier.c - the host/disk tier under every kind (cache_tier.h): pages
 * loaded back hold exactly the bytes that were spilled, tier hits happen under
 * pressure, the kinds stay consistent, and the faults (a directory that cannot
 * be written, a disk that fills during a spill) fail clearly, cost only the
 * spilled copy and never a pinned or locked page. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "cache.h"
#include "cache_client.h"
#include "cache_pin.h"
#include "cache_test_util.h"
#include "cache_tier.h"

enum { P = 4, PAGES = 24, PB = 32 };

/* A fake KV memory: (PAGES, PB) bytes, moved by the tier's mover. */
typedef struct fake_kv { uint8_t b[PAGES][PB]; int writes, reads; } fake_kv;

static rkv_status kv_read(void *ctx, int32_t page, void *dst)
{
    fake_kv *kv = ctx;
    memcpy(dst, kv->b[page], PB);
    kv->reads++;
    return RKV_OK;
}

static rkv_status kv_write(void *ctx, int32_t page, const void *src)
{
    fake_kv *kv = ctx;
    memcpy(kv->b[page], src, PB);
    kv->writes++;
    return RKV_OK;
}

/* One request as the engine makes it; every matched page must hold its bytes.
 * Returns the matched length, -1 when locked pages leave no room. m stays
 * locked (unlocked here when no room). */
static int32_t request(cache *c, fake_kv *kv, const int32_t *tokens, int32_t n, cache_seq *m,
                       unsigned seed, int step)
{
    int32_t nb = n / P, pages[PAGES];
    rkv_status st = cache_client_admit(c, m, tokens, n, nb, pages, NULL);
    if (st == RKV_ENOSPC) return -1;
    ck_assert_int_eq(st, RKV_OK);
    uint8_t want[PB];
    for (int32_t k = 0; k < m->num_pages; k++) {
        tu_page_bytes(tokens, k, P, want, PB);
        ck_assert_msg(!memcmp(kv->b[m->pages[k]], want, PB),
                      "seed %u step %d: page %d of the match (pool page %d) holds other bytes",
                      seed, step, k, m->pages[k]);
    }
    for (int32_t k = m->num_pages; k < nb; k++) tu_page_bytes(tokens, k, P, kv->b[pages[k]], PB);
    ck_assert_int_eq(cache_client_commit(c, m, tokens, nb * P, pages, m->num_pages, nb, NULL),
                     RKV_OK);
    return m->len;
}

/* Requests: 8 "documents" of 3..5 pages, each followed by a fresh question,
 * revisited at random so that most come back after being evicted. */
static int32_t make_request(int32_t *toks, int *fresh)
{
    int doc = rand() % 8;
    int32_t n = 0, len = (3 + doc % 3) * P;
    for (int32_t j = 0; j < len; j++) toks[n++] = 100 * (doc + 1) + j;
    int32_t q = P * (1 + rand() % 2);
    for (int32_t j = 0; j < q; j++) toks[n++] = (*fresh)++;
    return n;
}

static cache *make_tier(const char *kind, page_pool *pool, const tier_config *tc, fake_kv *kv)
{
    cache *inner = tu_create(kind, NULL, pool);
    tier_mover mv = {kv, PB, kv_read, kv_write};
    cache *c = NULL;
    char err[256] = "";
    ck_assert_msg(cache_tier_wrap(inner, tc, &mv, &c, err, sizeof err) == RKV_OK, "%s", err);
    return c;
}

static const char *const kinds[] = {"radix", "hash", "trie"};

/* Loop index: kind (3) x write-through (2) x disk tier (2). */
START_TEST(test_tier_loads_the_spilled_bytes)
{
    const char *kind = kinds[_i % 3];
    bool through = (_i / 3) % 2, disk = _i / 6;
    unsigned seed = 900u + (unsigned)_i;
    srand(seed);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    fake_kv *kv = calloc(1, sizeof *kv);
    tier_config tc;
    tier_config_default(&tc);
    tc.host_pages = disk ? 6 : 40;
    tc.disk_pages = disk ? 40 : 0;
    tc.write_through = through;
    char dir[] = "/tmp/rkv-tier-XXXXXX";
    if (disk) ck_assert_ptr_nonnull(mkdtemp(dir));
    tc.disk_dir = disk ? dir : NULL;
    cache *c = make_tier(kind, &pool, &tc, kv);

    cache_seq m;
    cache_seq_init(&m, 0, 0);
    int32_t toks[64];
    int fresh = 10000;
    int64_t matched = 0;
    for (int step = 0; step < 300; step++) {
        int32_t n = make_request(toks, &fresh);
        int32_t got = request(c, kv, toks, n, &m, seed, step);
        if (got >= 0) {
            matched += got;
            ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
        }
        ck_cache_ok(c);
        ck_assert_int_eq(pool.num_inflight, 0);
    }
    const tier_stats *ts = cache_tier_get_stats(c);
    ck_assert_ptr_nonnull(ts);
    ck_assert_msg(ts->host_hit_pages > 0, "seed %u %s: no host hits", seed, kind);
    if (disk) ck_assert_msg(ts->disk_hit_pages > 0, "seed %u %s: no disk hits", seed, kind);
    ck_assert_msg(ts->spill_failures == 0, "%s", cache_tier_last_error(c));
    ck_assert_int_eq(ts->host_hit_tokens, ts->host_hit_pages * P);
    ck_assert(ts->load_seconds > 0);
    ck_assert_int_eq((int64_t)kv->writes, (int64_t)(ts->host_hit_pages + ts->disk_hit_pages));

    /* The same trace without a tier matches fewer tokens. */
    page_pool pool2;
    ck_assert_int_eq(page_pool_init(&pool2, PAGES, P), RKV_OK);
    cache *plain = tu_create(kind, NULL, &pool2);
    fake_kv *kv2 = calloc(1, sizeof *kv2);
    srand(seed);
    fresh = 10000;
    int64_t matched2 = 0;
    for (int step = 0; step < 300; step++) {
        int32_t n = make_request(toks, &fresh);
        int32_t got = request(plain, kv2, toks, n, &m, seed, step);
        if (got >= 0) {
            matched2 += got;
            ck_assert_int_eq(cache_unlock(plain, &m), RKV_OK);
        }
    }
    ck_assert_msg(matched > matched2, "seed %u %s: tier matched %lld, plain %lld", seed, kind,
                  (long long)matched, (long long)matched2);
    cache_destroy(plain);
    page_pool_destroy(&pool2);
    free(kv2);

    cache_seq_free(&m);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, PAGES);
    if (disk) { /* the tier's files are gone with it */
        DIR *d = opendir(dir);
        struct dirent *de;
        int files = 0;
        while ((de = readdir(d))) files += de->d_name[0] != '.';
        closedir(d);
        ck_assert_int_eq(files, 0);
        rmdir(dir);
    }
    page_pool_destroy(&pool);
    free(kv);
}
END_TEST

/* The disk fills after a few writes: spills fail as plain evictions, with a
 * message; pinned and locked pages stay, the kind stays consistent, every
 * match still holds the right bytes. */
START_TEST(test_tier_disk_full)
{
    const char *kind = kinds[_i];
    unsigned seed = 1300u + (unsigned)_i;
    srand(seed);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    fake_kv *kv = calloc(1, sizeof *kv);
    char dir[] = "/tmp/rkv-tier-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    tier_config tc;
    tier_config_default(&tc);
    tc.host_pages = 3;
    tc.disk_pages = 30;
    tc.disk_dir = dir;
    tc.fail_disk_writes_after = 5;
    cache *c = make_tier(kind, &pool, &tc, kv);

    /* A pinned prefix of 2 pages, filled like a request's. */
    int32_t pin[2 * P];
    for (int32_t j = 0; j < 2 * P; j++) pin[j] = 7000 + j;
    cache_pins pins;
    cache_pins_init(&pins);
    char err[256];
    ck_assert_msg(cache_pin(c, &pins, pin, 2 * P, 0, NULL, err, sizeof err) == RKV_OK, "%s", err);
    for (int32_t k = 0; k < 2; k++) tu_page_bytes(pin, k, P, kv->b[pins.m[0].pages[k]], PB);

    cache_seq m, held;
    cache_seq_init(&m, 0, 0);
    cache_seq_init(&held, 0, 0);
    int32_t toks[64];
    int fresh = 20000;
    /* A request locked throughout: its pages must survive too. */
    int32_t hn = make_request(toks, &fresh);
    int32_t held_toks[64];
    memcpy(held_toks, toks, sizeof toks);
    ck_assert_int_ge(request(c, kv, held_toks, hn, &held, seed, -1), 0);
    cache_seq_free(&held);
    cache_seq_init(&held, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &held, held_toks, hn), RKV_OK);
    ck_assert_int_eq(cache_lock(c, &held), RKV_OK);
    int32_t held_len = held.len;
    for (int step = 0; step < 300; step++) {
        int32_t n = make_request(toks, &fresh);
        if (rand() % 4 == 0) { /* start with the pin */
            memmove(toks + 2 * P, toks, sizeof(int32_t) * (size_t)n);
            memcpy(toks, pin, sizeof pin);
            n += 2 * P;
            if (n > 64) n = 64 - 64 % P;
        }
        int32_t got = request(c, kv, toks, n, &m, seed, step);
        if (toks[0] == pin[0]) ck_assert_msg(got >= 2 * P, "seed %u step %d: pin not matched whole (%d)", seed, step, got);
        if (got >= 0) ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
        ck_cache_ok(c);
        char e2[256] = "";
        ck_assert_msg(cache_pins_check(c, &pins, e2, sizeof e2) == RKV_OK, "%s", e2);
    }
    const tier_stats *ts = cache_tier_get_stats(c);
    ck_assert_msg(ts->spill_failures > 0, "%s: the disk never filled", kind);
    ck_assert_ptr_nonnull(cache_tier_last_error(c));
    ck_assert_msg(strstr(cache_tier_last_error(c), "No space left") && strstr(cache_tier_last_error(c), dir),
                  "message: %s", cache_tier_last_error(c));
    ck_assert_int_le(ts->disk_used, 5);
    /* The locked request still matches what it held, with its bytes. */
    cache_seq again;
    cache_seq_init(&again, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &again, held_toks, hn), RKV_OK);
    ck_assert_int_ge(again.len, held_len);
    cache_seq_free(&again);
    ck_assert_int_eq(cache_unlock(c, &held), RKV_OK);
    ck_assert_int_eq(cache_pins_release(c, &pins), RKV_OK);
    cache_pins_free(&pins);
    cache_seq_free(&m);
    cache_seq_free(&held);
    cache_destroy(c);
    rmdir(dir);
    ck_assert_int_eq(pool.num_free, PAGES);
    page_pool_destroy(&pool);
    free(kv);
}
END_TEST

/* The KV memory fails every third read: those spills are plain evictions. */
static rkv_status kv_read_flaky(void *ctx, int32_t page, void *dst)
{
    fake_kv *kv = ctx;
    if (++kv->reads % 3 == 0) return RKV_EDEVICE;
    memcpy(dst, kv->b[page], PB);
    return RKV_OK;
}

START_TEST(test_tier_read_fails)
{
    const char *kind = kinds[_i];
    unsigned seed = 1700u + (unsigned)_i;
    srand(seed);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    fake_kv *kv = calloc(1, sizeof *kv);
    tier_config tc;
    tier_config_default(&tc);
    tc.host_pages = 40;
    cache *inner = tu_create(kind, NULL, &pool), *c = NULL;
    tier_mover mv = {kv, PB, kv_read_flaky, kv_write};
    char err[256] = "";
    ck_assert_msg(cache_tier_wrap(inner, &tc, &mv, &c, err, sizeof err) == RKV_OK, "%s", err);
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    int32_t toks[64];
    int fresh = 30000;
    for (int step = 0; step < 200; step++) {
        int32_t n = make_request(toks, &fresh);
        if (request(c, kv, toks, n, &m, seed, step) >= 0) ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
        ck_cache_ok(c);
    }
    const tier_stats *ts = cache_tier_get_stats(c);
    ck_assert_msg(ts->spill_failures > 0 && ts->host_hit_pages > 0, "%s: failures %llu hits %llu", kind,
                  (unsigned long long)ts->spill_failures, (unsigned long long)ts->host_hit_pages);
    ck_assert_msg(strstr(cache_tier_last_error(c), "reading page"), "%s", cache_tier_last_error(c));
    cache_seq_free(&m);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, PAGES);
    page_pool_destroy(&pool);
    free(kv);
}
END_TEST

START_TEST(test_tier_bad_config)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    fake_kv kv;
    tier_mover mv = {&kv, PB, kv_read, kv_write};
    cache *inner = tu_create("radix", NULL, &pool), *c = NULL;
    tier_config tc;
    tier_config_default(&tc);
    tc.host_pages = 4;
    tc.disk_pages = 4;
    char err[256] = "";
    tc.disk_dir = "/nonexistent-rkv-dir/tier";
    ck_assert_int_eq(cache_tier_wrap(inner, &tc, &mv, &c, err, sizeof err), RKV_EIO);
    ck_assert_msg(strstr(err, "/nonexistent-rkv-dir/tier cannot be written"), "%s", err);
    ck_assert_ptr_null(c);
    tc.disk_dir = NULL;
    ck_assert_int_eq(cache_tier_wrap(inner, &tc, &mv, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "needs a directory"), "%s", err);
    tc.host_pages = -1;
    ck_assert_int_eq(cache_tier_wrap(inner, &tc, &mv, &c, err, sizeof err), RKV_EINVAL);
    /* Without data to move (a simulator) the disk tier needs no directory. */
    tc.host_pages = 4;
    ck_assert_int_eq(cache_tier_wrap(inner, &tc, NULL, &c, err, sizeof err), RKV_OK);
    ck_cache_ok(c);
    cache_destroy(c); /* destroys inner too */
    ck_assert_int_eq(pool.num_free, PAGES);
    page_pool_destroy(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tier");
    TCase *tc = tcase_create("tier");
    tcase_add_loop_test(tc, test_tier_loads_the_spilled_bytes, 0, 12);
    tcase_add_loop_test(tc, test_tier_disk_full, 0, 3);
    tcase_add_loop_test(tc, test_tier_read_fails, 0, 3);
    tcase_add_test(tc, test_tier_bad_config);
    suite_add_tcase(s, tc);
    return check_run(s);
}
