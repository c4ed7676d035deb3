/* cache_pin.h - pinned static prefixes: token sequences inserted into a cache
 * at start-up and locked for the cache's life, so that every request that
 * starts with one shares its pages and none of them is ever evicted (the
 * configured-prefix manager of FasterTransformer-style servers, on top of any
 * cache kind, through cache.h's interface only).
 *
 *   pin "s0..s39" (P = 16):   insert s0..s31 (two whole pages), lock the match
 *
 *        (root)                 pinned: 32 tokens, lock held by the pin set
 *          |
 *      [s0 .. s31]  lock >= 1   <- never an eviction candidate
 *        /     \
 *     [req a] [req b]           requests hang below it and come and go
 *
 * Whole pages: a prefix is cut down to a multiple of the page size (the
 * tokens of its partial last page are not pinned, as with every insert), so a
 * pinned page never needs a copy. A prefix shorter than one page pins nothing
 * and is refused (RKV_EINVAL). Pins go in namespace ns (0: the default tenant).
 *
 * Pin before any request runs: the pages come from the free pool (evicting
 * unpinned entries if the pool is full); RKV_ENOSPC when the prefixes do not
 * fit in the pool beside the pins already made (nothing of this prefix stays
 * pinned, earlier pins are kept).
 *
 * KV data: pinned pages must hold the prefix's K/V before any request shares
 * them; the fill callback of the set computes it (runtime: a prefill through
 * the backend at start-up, before the engine's clock starts).
 *
 * Sizes: c->pinned_tokens counts the distinct pinned tokens (two pins sharing
 * a prefix count it once); cache_get_sizes() reports them as pinned_tokens, a
 * subset of protected_tokens. Kinds that never reuse ("none",
 * "hash-nocache") keep nothing: a pin there holds 0 tokens and succeeds.
 *
 * Ownership: the pin set owns its locks (one cache_seq per pin);
 * cache_pins_release() unlocks them all (call it before cache_destroy, or to
 * unpin), cache_pins_free() then frees the set.
 */
#ifndef RKV_CACHE_PIN_H
#define RKV_CACHE_PIN_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"

/* The cache holds page ids only; whoever owns the KV memory fills the pages of
 * a new pin: compute K/V of tokens[cached_len .. n) into pages (the first
 * cached_len / P of them already hold an earlier pin's prefix). Called after
 * the pages are allocated and before they are inserted; an error undoes the
 * pin. NULL (cache-sim): pages hold no data. */
typedef rkv_status (*cache_pin_fill_fn)(void *ctx, const int32_t *tokens, int32_t n,
                                        const int32_t *pages, int32_t cached_len);

typedef struct cache_pins {
    cache_seq *m;     /* (n) one locked match per pin */
    int32_t n, cap;
    bool released;
    cache_pin_fill_fn fill; /* optional, see above */
    void *fill_ctx;
} cache_pins;

void cache_pins_init(cache_pins *p);

/* Pin tokens[0 .. n - n % P) in namespace ns. *pinned_len (may be NULL) gets
 * the tokens now locked for this pin (n cut to whole pages; 0 for kinds that
 * never reuse). Errors name the reason in err. */
rkv_status cache_pin(cache *c, cache_pins *p, const int32_t *tokens, int32_t n, uint64_t ns,
                     int32_t *pinned_len, char *err, size_t errlen);

/* Each pin still matches its whole length and is still locked, and the pinned
 * tokens are a subset of the protected ones. RKV_ECORRUPT with a message. */
rkv_status cache_pins_check(cache *c, const cache_pins *p, char *err, size_t errlen);

/* Unlock every pin (c->pinned_tokens back to 0); idempotent. */
rkv_status cache_pins_release(cache *c, cache_pins *p);
void cache_pins_free(cache_pins *p);

#endif
