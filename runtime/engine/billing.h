/* billing.h - what a user would pay for the input tokens of a run, billed the
 * way context-caching APIs bill them: a prompt token served from the prefix
 * cache costs the cached price, every other prompt token the uncached price.
 *
 *   prompt of n tokens, m of them matched in the cache:
 *       cost = m * price_cached / 1e6 + (n - m) * price_uncached / 1e6
 *   and, for comparison, the same prompts without any cache:
 *       cost_no_cache = n * price_uncached / 1e6
 *
 * Prices are per million tokens. The defaults, 0.1 (cached) and 1 (uncached),
 * are the ratio of the DeepSeek API's published context-cache prices (a hit
 * costs a tenth of a miss); pass the prices of the API being modelled.
 * Output tokens are not billed here: the cache does not change them.
 *
 * Ownership: plain values, nothing allocated.
 */
#ifndef RKV_BILLING_H
#define RKV_BILLING_H

#include <stdint.h>
#include <stdio.h>

#include "rkv_status.h"

/* The highest price accepted (per million tokens): costs of any trace stay finite. */
#define BILLING_MAX_PRICE 1e9

#define BILLING_DEFAULT_PRICE_CACHED 0.1
#define BILLING_DEFAULT_PRICE_UNCACHED 1.0

typedef struct billing_prices {
    double cached;   /* per million cached input tokens, >= 0 */
    double uncached; /* per million uncached input tokens, >= 0 */
} billing_prices;

typedef struct billing {
    int64_t cached_tokens;   /* prompt tokens served from the cache */
    int64_t uncached_tokens; /* prompt tokens computed */
    double cost;             /* at the prices */
    double cost_no_cache;    /* every prompt token at the uncached price */
    double saving;           /* 1 - cost / cost_no_cache; 0 when nothing is billed */
} billing;

void billing_prices_default(billing_prices *p);

/* prompt_tokens >= cached_tokens >= 0 (a cached count above the prompt count
 * is clamped: it cannot be billed twice). */
void billing_compute(const billing_prices *p, int64_t prompt_tokens, int64_t cached_tokens,
                     billing *out);

/* A price option's value: a finite decimal >= 0. RKV_EINVAL otherwise (the
 * caller names the option in its message). */
rkv_status billing_parse_price(const char *s, double *out);
/* The same as a cli.h custom option: ctx is the double to set; 0, or non-zero
 * with "OPT: expected a price ..." in err. */
int billing_parse_price_opt(void *ctx, const char *opt, const char *s, char *err, size_t errlen);

/* The fields for a summary line, each with a leading comma:
 *   ,"billed_cached_tokens":..,"billed_uncached_tokens":..,"price_cached":..,
 *   "price_uncached":..,"cost":..,"cost_no_cache":..,"cost_saving":..     */
void billing_print_json(FILE *f, const billing_prices *p, const billing *b);

#endif
