/* cache_test_util.c - see cache_test_util.h. */
#include "cache_test_util.h"

#include <stdlib.h>
#include <string.h>

#include "cache_client.h"

rkv_status tu_request(cache *c, const int32_t *tokens, int32_t n, uint64_t ns, cache_match *m,
                      int32_t *matched, int32_t *prefix)
{
    const int32_t nb = n / c->page_size;
    int32_t *pages = malloc(sizeof *pages * (size_t)(nb ? nb : 1));
    if (!pages) return RKV_ENOMEM;
    rkv_status st = cache_client_admit(c, tokens, n, ns, nb, m, pages, NULL);
    *matched = m->len;
    if (st == RKV_OK) st = cache_client_commit(c, tokens, n, ns, pages, m->num_pages, nb, prefix);
    free(pages);
    return st;
}

cache *tu_create(const char *kind, const char *hash_fn, page_pool *pool)
{
    /* The hash tests model deduplicating inserts (dedup); keep has its own tests. */
    cache_config cfg = {kind, NULL, hash_fn, "dedup"};
    cache *c = NULL;
    char err[256] = "";
    rkv_status st = cache_create(&cfg, pool, &c, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "cache_create(%s): %s", kind, err);
    return c;
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
