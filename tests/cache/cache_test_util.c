/* cache_test_util.c - see cache_test_util.h. */
#include "cache_test_util.h"

#include <stdlib.h>
#include <string.h>

#include "cache_client.h"

rkv_status tu_request(cache *c, const int32_t *tokens, int32_t n, uint64_t ns, cache_seq *m,
                      int32_t *matched, int32_t *prefix)
{
    const int32_t nb = n / c->page_size;
    int32_t *pages = malloc(sizeof *pages * (size_t)(nb ? nb : 1));
    if (!pages) return RKV_ENOMEM;
    m->ns = ns;
    rkv_status st = cache_client_admit(c, m, tokens, n, nb, pages, NULL);
    *matched = m->len;
    if (st == RKV_OK) st = cache_client_commit(c, m, tokens, n, pages, m->num_pages, nb, prefix);
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

uint64_t tu_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int32_t tu_rand_below(uint64_t *state, int32_t n) { return (int32_t)(tu_rand(state) % (uint64_t)n); }

void tu_page_bytes(const int32_t *tokens, int32_t k, int32_t P, uint8_t *out, int32_t nbytes)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the tokens */
    for (int32_t i = 0; i < (k + 1) * P; i++) h = (h ^ (uint32_t)tokens[i]) * 1099511628211ull;
    for (int32_t j = 0; j < nbytes; j++) {
        h ^= h >> 29;
        h *= 0xbf58476d1ce4e5b9ull;
        out[j] = (uint8_t)(h >> 56);
    }
}

long tu_diff_steps(long dflt)
{
    const char *e = getenv("RKV_DIFF_SCALE");
    long k = e ? strtol(e, NULL, 10) : 1;
    return dflt * (k > 0 ? k : 1);
}

int32_t tu_adversarial(uint64_t *rng, int32_t P, const int32_t *prev, int32_t prev_n,
                       int32_t max_n, int32_t *out)
{
    int32_t n = 0, full = prev_n / P;
    int32_t pick = tu_rand_below(rng, 6);
    switch (pick < 3 ? 0 : pick - 2) {
    case 0: { /* twin: the same pages, the next one differs in its last token
               * (often at the first page, so that siblings pile up) */
        int32_t k = full && tu_rand_below(rng, 2) ? tu_rand_below(rng, full) : 0;
        if ((k + 1) * P > max_n) k = max_n / P - 1;
        if (k < 0) k = 0;
        n = k * P;
        memmove(out, prev, sizeof(int32_t) * (size_t)n);
        for (int32_t i = 0; i < P && n < max_n; i++, n++)
            out[n] = n < prev_n ? prev[n] : 1 + tu_rand_below(rng, 2);
        if (n == (k + 1) * P) out[n - 1] = 100 + tu_rand_below(rng, 64);
        break;
    }
    case 1: { /* repeat: one token, or one page of tokens, again and again */
        int32_t len = 1 + tu_rand_below(rng, max_n), v = tu_rand_below(rng, 3);
        int32_t page[64];
        int32_t per = P < 64 ? P : 64;
        for (int32_t i = 0; i < per; i++) page[i] = tu_rand_below(rng, 2) ? v : tu_rand_below(rng, 3);
        int one = tu_rand_below(rng, 2);
        for (n = 0; n < len; n++) out[n] = one ? v : page[n % per];
        break;
    }
    case 2: { /* boundary: cut prev beside a page boundary */
        int32_t k = full ? tu_rand_below(rng, full + 1) : 0;
        n = k * P + tu_rand_below(rng, 3) - 1;
        if (n < 0) n = 0;
        if (n > prev_n) n = prev_n;
        if (n > max_n - 1) n = max_n - 1;
        memmove(out, prev, sizeof(int32_t) * (size_t)n);
        int32_t len = n + 1 + tu_rand_below(rng, max_n - n);
        for (; n < len; n++) out[n] = tu_rand_below(rng, 4);
        break;
    }
    default: { /* random after a random cut */
        int32_t keep = tu_rand_below(rng, (prev_n < max_n ? prev_n : max_n) + 1);
        memmove(out, prev, sizeof(int32_t) * (size_t)keep);
        int32_t len = keep + tu_rand_below(rng, max_n - keep + 1);
        if (len < 1) len = 1;
        for (n = keep; n < len; n++) out[n] = tu_rand_below(rng, 3);
        break;
    }
    }
    if (n < 1) out[n++] = 0;
    return n;
}
