/* test_pin.c - pinned static prefixes (cache_pin.h) in every kind: under heavy
 * pressure the pins are never evicted, every request that starts with one
 * matches it whole, the page invariant counts the pinned pages, and bad pins
 * (shorter than a page, longer than the pool, more than the pool together)
 * fail clearly and leave earlier pins in place. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "cache.h"
#include "cache_pin.h"
#include "cache_test_util.h"

static const char *const kinds[] = {"radix", "hash", "trie", "none", "hash-nocache"};
enum { NKINDS = 5 };

static bool keeps(const char *kind) { return strcmp(kind, "none") && strcmp(kind, "hash-nocache"); }

/* free + evictable + protected + in flight = pool, protected >= pinned, and
 * between requests (nothing locked but the pins) protected == pinned. */
static void ck_invariant(cache *c, const cache_pins *pins, unsigned seed, int step)
{
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    const page_pool *p = c->pool;
    int64_t P = c->page_size;
    ck_assert_msg(p->num_free + (sz.evictable_tokens + sz.protected_tokens) / P + p->num_inflight
                      == p->num_pages,
                  "seed %u step %d: free %d + evictable %lld + protected %lld + in flight %d != %d",
                  seed, step, p->num_free, (long long)(sz.evictable_tokens / P),
                  (long long)(sz.protected_tokens / P), p->num_inflight, p->num_pages);
    ck_assert_msg(sz.protected_tokens == sz.pinned_tokens,
                  "seed %u step %d: protected %lld != pinned %lld between requests", seed, step,
                  (long long)sz.protected_tokens, (long long)sz.pinned_tokens);
    char err[256] = "";
    ck_assert_msg(cache_pins_check(c, pins, err, sizeof err) == RKV_OK, "seed %u step %d: %s", seed,
                  step, err);
    ck_cache_ok(c);
}

/* Three pins (two share their first 3 pages) in a pool of 40 pages of 4; 400
 * requests of up to 30 pages each keep it full, half of them start with a pin. */
START_TEST(test_pins_survive_pressure)
{
    const char *kind = kinds[_i % NKINDS];
    unsigned seed = 4242u + (unsigned)_i;
    srand(seed);
    enum { P = 4, PAGES = 40 };
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *c = tu_create(kind, NULL, &pool);
    int32_t pin[3][24];
    int32_t pin_len[3] = {20, 23, 8}; /* 23: cut to 20 */
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 24; j++) pin[k][j] = k == 1 && j < 12 ? pin[0][j] : 1000 * (k + 1) + j;
    cache_pins pins;
    cache_pins_init(&pins);
    int32_t got[3];
    char err[256];
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(cache_pin(c, &pins, pin[k], pin_len[k], 0, &got[k], err, sizeof err) == RKV_OK,
                      "%s: %s", kind, err);
        int32_t want = keeps(kind) ? pin_len[k] - pin_len[k] % P : 0;
        ck_assert_msg(got[k] == want, "%s pin %d: %d pinned, want %d", kind, k, got[k], want);
    }
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    /* 20 + (20 - 12 shared) + 8 distinct tokens. */
    ck_assert_int_eq(sz.pinned_tokens, keeps(kind) ? 36 : 0);
    ck_invariant(c, &pins, seed, -1);

    int32_t toks[200];
    int fresh = 50000;
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    for (int step = 0; step < 400; step++) {
        int k = rand() % 6; /* 0..2: starts with pin k; else no pin */
        int32_t n = 0;
        if (k < 3) {
            memcpy(toks, pin[k], sizeof(int32_t) * (size_t)pin_len[k]);
            n = pin_len[k];
        }
        int32_t extra = 1 + rand() % 100;
        if (rand() % 3 == 0 && step > 0) { /* reuse an old suffix sometimes */
            for (int32_t j = 0; j < extra; j++) toks[n + j] = 7000 + (rand() % 3) * 100 + j;
        } else {
            for (int32_t j = 0; j < extra; j++) toks[n + j] = fresh++;
        }
        n += extra;
        int32_t matched = 0, prefix = 0;
        rkv_status st = tu_request(c, toks, n, 0, &m, &matched, &prefix);
        ck_assert_msg(st == RKV_OK || st == RKV_ENOSPC, "seed %u step %d: %s", seed, step,
                      rkv_status_str(st));
        if (k < 3 && keeps(kind))
            ck_assert_msg(matched >= got[k], "seed %u %s step %d: request with pin %d matched %d < %d",
                          seed, kind, step, k, matched, got[k]);
        if (st == RKV_OK) ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
        ck_invariant(c, &pins, seed, step);
    }
    ck_assert_msg(!keeps(kind) || c->stats.evicted_tokens > 0, "%s: no pressure", kind);
    cache_seq_free(&m);

    /* Released, the pins become ordinary evictable entries. */
    ck_assert_int_eq(cache_pins_release(c, &pins), RKV_OK);
    cache_get_sizes(c, &sz);
    ck_assert_int_eq(sz.pinned_tokens, 0);
    ck_assert_int_eq(sz.protected_tokens, 0);
    cache_evict(c, (int64_t)PAGES * P);
    ck_assert_int_eq(pool.num_free, PAGES);
    cache_pins_free(&pins);
    cache_destroy(c);
    page_pool_destroy(&pool);
}
END_TEST

START_TEST(test_pin_bad_input)
{
    const char *kind = kinds[_i];
    enum { P = 4, PAGES = 10 };
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *c = tu_create(kind, NULL, &pool);
    cache_pins pins;
    cache_pins_init(&pins);
    int32_t t[64];
    for (int j = 0; j < 64; j++) t[j] = 10 + j;
    char err[256] = "";
    int32_t got = -1;

    /* Shorter than one page: nothing to pin. */
    ck_assert_int_eq(cache_pin(c, &pins, t, 3, 0, &got, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "shorter than one page"), "%s", err);
    /* Longer than the whole pool. */
    ck_assert_int_eq(cache_pin(c, &pins, t, 44, 0, &got, err, sizeof err), RKV_ENOSPC);
    ck_assert_msg(strstr(err, "whole pool holds 10"), "%s", err);
    ck_assert_int_eq(pins.n, 0);
    ck_assert_int_eq(pool.num_free, PAGES);

    /* Two that fit alone but not together: the first stays pinned. */
    ck_assert_int_eq(cache_pin(c, &pins, t, 24, 0, &got, err, sizeof err), RKV_OK);
    rkv_status st = cache_pin(c, &pins, t + 30, 24, 0, &got, err, sizeof err);
    if (keeps(kind)) {
        ck_assert_int_eq(st, RKV_ENOSPC);
        ck_assert_msg(strstr(err, "only 4 are free"), "%s", err);
        ck_assert_int_eq(pins.n, 1);
        cache_sizes sz;
        cache_get_sizes(c, &sz);
        ck_assert_int_eq(sz.pinned_tokens, 24);
        ck_assert_int_eq(pool.num_free, PAGES - 6);
        ck_assert_int_eq(pool.num_inflight, 0);
    } else {
        ck_assert_int_eq(st, RKV_OK);
        ck_assert_int_eq(pool.num_free, PAGES);
    }
    ck_cache_ok(c);
    ck_assert_int_eq(cache_pins_release(c, &pins), RKV_OK);
    ck_assert_int_eq(cache_pins_release(c, &pins), RKV_OK); /* idempotent */
    cache_pins_free(&pins);
    cache_destroy(c);
    ck_assert_int_eq(pool.num_free, PAGES);
    page_pool_destroy(&pool);
}
END_TEST

Suite *pin_suite(void)
{
    Suite *s = suite_create("pin");
    TCase *tc = tcase_create("pin");
    tcase_add_loop_test(tc, test_pins_survive_pressure, 0, 3 * NKINDS);
    tcase_add_loop_test(tc, test_pin_bad_input, 0, NKINDS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(pin_suite());
}
