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
rkv_status tu_request(cache *c, const int32_t *tokens, int32_t n, uint64_t ns, cache_match *m,
                      int32_t *matched, int32_t *prefix);

/* Run every test of s; the process's exit status (EXIT_FAILURE if any failed). */
int tu_run_suite(Suite *s);

/* Create a kind by name over pool (any name in cache_kinds[]). */
cache *tu_create(const char *kind, const char *hash_fn, page_pool *pool);

#endif
