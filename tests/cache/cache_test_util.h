/* cache_test_util.h - helpers shared by the cache suite's programs. */
#ifndef RKV_CACHE_TEST_UTIL_H
#define RKV_CACHE_TEST_UTIL_H

#include <check.h>
#include <stdint.h>

#include "cache.h"
#include "cache_kinds.h"

/* cache_check() must pass; on failure the message says what broke. */
#define ck_cache_ok(c)                                                          \
    do {                                                                        \
        char e_[512] = "";                                                      \
        rkv_status s_ = cache_check((c), e_, sizeof e_);                       \
        ck_assert_msg(s_ == RKV_OK, "cache_check: %s (%s)", e_, rkv_status_str(s_)); \
    } while (0)

/* One request as the engine makes it: match tokens[0..n) in ns (into m, which
 * stays locked for the caller to unlock), evict the shortfall, allocate pages
 * for the full blocks past the match, insert, free the duplicates insert
 * reports and any page the cache left in flight (the none kind keeps
 * nothing). *matched / *prefix get match's length and insert's prefix.
 * RKV_ENOSPC (match unlocked, nothing inserted) when locked pages leave no room. */
rkv_status tu_request(cache *c, const int32_t *tokens, int32_t n, uint64_t ns, cache_seq *m,
                      int32_t *matched, int32_t *prefix);

/* Create a kind by name over pool (any name in cache_kinds[]). */
cache *tu_create(const char *kind, const char *hash_fn, page_pool *pool);

/* Adversarial requests for the random differential tests (issue 29): the
 * shapes plain random tokens almost never make (twin half the time, the
 * others a sixth each):
 *   twin      prev's first k whole pages, then prev's page k with only its
 *             last token changed (pages that share all but their last token)
 *   repeat    one token over and over, or one page's tokens repeated: equal
 *             pages after different prefixes
 *   boundary  prev's first k·P - 1, k·P or k·P + 1 tokens, then new ones
 *             (splits at and beside page boundaries)
 *   random    tokens from a small alphabet, after a random cut of prev
 * Writes 1..max_n tokens to out (which may alias prev) and returns how many;
 * *rng is the caller's seeded state (tu_rand). */
int32_t tu_adversarial(uint64_t *rng, int32_t P, const int32_t *prev, int32_t prev_n,
                       int32_t max_n, int32_t *out);

/* splitmix64 step on *state, and a draw in [0, n). */
uint64_t tu_rand(uint64_t *state);
int32_t tu_rand_below(uint64_t *state, int32_t n);

/* The bytes page k of tokens (P a page) must hold in the tier tests' fake
 * KV: nbytes that depend on every token up to the page's end, so that a page
 * moved, reloaded or matched after another prefix shows. */
void tu_page_bytes(const int32_t *tokens, int32_t k, int32_t P, uint8_t *out, int32_t nbytes);

/* Operations a differential test runs per case: its default, times
 * RKV_DIFF_SCALE when set (a long run: RKV_DIFF_SCALE=100). */
long tu_diff_steps(long dflt);

#endif
