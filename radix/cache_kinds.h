/* cache_kinds.h - constructors of the cache kinds, called by cache_create().
 * Each validates cfg (policy / hash names) and writes a message to err naming
 * the bad value. The pool outlives the cache. */
#ifndef RKV_CACHE_KINDS_H
#define RKV_CACHE_KINDS_H

#include "cache.h"

rkv_status cache_radix_create(const cache_config *cfg, page_pool *pool, cache **out,
                              char *err, size_t errlen);
rkv_status cache_none_create(const cache_config *cfg, page_pool *pool, cache **out,
                             char *err, size_t errlen);
/* nocache = true gives "hash-nocache". */
rkv_status cache_hash_create(const cache_config *cfg, page_pool *pool, bool nocache,
                             cache **out, char *err, size_t errlen);
rkv_status cache_trie_create(const cache_config *cfg, page_pool *pool, cache **out,
                             char *err, size_t errlen);

#endif
