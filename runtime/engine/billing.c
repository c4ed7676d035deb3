/* billing.c - see billing.h. */
#include "billing.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

void billing_prices_default(billing_prices *p)
{
    p->cached = BILLING_DEFAULT_PRICE_CACHED;
    p->uncached = BILLING_DEFAULT_PRICE_UNCACHED;
}

void billing_compute(const billing_prices *p, int64_t prompt_tokens, int64_t cached_tokens,
                     billing *out)
{
    if (prompt_tokens < 0) prompt_tokens = 0;
    if (cached_tokens < 0) cached_tokens = 0;
    if (cached_tokens > prompt_tokens) cached_tokens = prompt_tokens;
    out->cached_tokens = cached_tokens;
    out->uncached_tokens = prompt_tokens - cached_tokens;
    out->cost = ((double)cached_tokens * p->cached + (double)out->uncached_tokens * p->uncached) / 1e6;
    out->cost_no_cache = (double)prompt_tokens * p->uncached / 1e6;
    out->saving = out->cost_no_cache > 0 ? 1.0 - out->cost / out->cost_no_cache : 0.0;
}

rkv_status billing_parse_price(const char *s, double *out)
{
    if (!s || !*s) return RKV_EINVAL;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    /* Bounded so that every cost a summary prints stays a finite JSON number
     * (1e308 once printed "inf"). */
    if (errno || end == s || *end || !isfinite(x) || x < 0 || x > BILLING_MAX_PRICE) return RKV_EINVAL;
    *out = x;
    return RKV_OK;
}

int billing_parse_price_opt(void *ctx, const char *opt, const char *s, char *err, size_t errlen)
{
    if (billing_parse_price(s, ctx) == RKV_OK) return 0;
    rkv_set_err(err, errlen, "%s: expected a price in [0, %g] per million tokens, got '%s'", opt,
                BILLING_MAX_PRICE,
                s ? s : "");
    return 1;
}

void billing_print_json(FILE *f, const billing_prices *p, const billing *b)
{
    fprintf(f, ",\"billed_cached_tokens\":%" PRId64 ",\"billed_uncached_tokens\":%" PRId64
            ",\"price_cached\":%.9g,\"price_uncached\":%.9g,\"cost\":%.9g,\"cost_no_cache\":%.9g"
            ",\"cost_saving\":%.6f",
            b->cached_tokens, b->uncached_tokens, p->cached, p->uncached, b->cost,
            b->cost_no_cache, b->saving);
}
