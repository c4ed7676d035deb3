/* cache_hash.h - test hooks of the hash cache kind (see cache_hash.c).
 *
 * Construct the kind through cache_create() or cache_hash_create()
 * (cache_kinds.h); this header only adds what tests need to reach inside.
 */
#ifndef RKV_CACHE_HASH_H
#define RKV_CACHE_HASH_H

#include "cache.h"

/* Keep only the low `bits` bits (1..64) of every block digest, or all 128 with
 * bits = 128, from now on; the cache must be empty. Short digests collide
 * often, which exercises the token re-check that guards every hit. RKV_EINVAL
 * for a non-hash cache, a non-empty one, or bits out of range. */
rkv_status cache_hash_debug_set_bits(cache *c, int bits);

#endif
