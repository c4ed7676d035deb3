/* cache_client.h - the one implementation of page ownership around cache.h.
 *
 * Every caller that puts a sequence into a cache (the scheduler, cache-sim,
 * pins, the router's approximate trees, the spill tier, the benches) walks the
 * same protocol; these functions are that protocol, written once:
 *
 *   admit    match(tokens) + lock         the cached prefix, held
 *            reserve(pages for the rest)  evicting the shortfall first
 *   ...      the caller computes the K/V of its own pages
 *   commit   insert(tokens, pages)        the cache adopts what it lacked
 *            free what insert left        duplicates and partial pages
 *   release  unlock(match)                (and free own pages never committed)
 *
 * A sequence of 7 tokens, P = 2, 4 of them cached (as in cache.h):
 *
 *   pages    [ p9 ][ p4 ] [ p12 ][ p13 ]
 *            \_ s.pages _/ \__ own ___/
 *            CACHED, locked INFLIGHT, from reserve
 *
 *   admit    -> s.len = 4, pages = {p9, p4, p12, p13}
 *   commit   insert(tokens, 6, pages) adopts p12 (CACHED); p13 stays
 *            INFLIGHT, so commit frees it. Had another sequence inserted
 *            t4 t5 first, p12 would be freed too: one owner per page.
 *   release  unlock(s): p9, p4 become evictable again (p12, adopted but
 *            never locked by s, already was).
 *
 * The request's namespace and priority travel in its cache_seq (cache.h):
 * every call here takes the seq, not a namespace.
 *
 * Ownership: the caller owns the cache_seq and the page table; the cache
 * owns every page it adopted (state CACHED); a page still INFLIGHT after
 * commit belongs to nobody else, and commit returns it to the pool. The rule
 * "free what is still INFLIGHT" (rather than "free below prefix_len") covers
 * every kind: `none` adopts nothing, `hash-nocache` frees its own.
 */
#ifndef RKV_CACHE_CLIENT_H
#define RKV_CACHE_CLIENT_H

#include <stdint.h>

#include "cache.h"

/* Match tokens[0..n) in s's namespace and lock the match (s->pages: the
 * cache's pages). On failure nothing stays locked. */
rkv_status cache_client_match(cache *c, cache_seq *s, const int32_t *tokens, int32_t n);

/* Evict so that at least n pages are free: one cache_evict of the shortfall,
 * none when they already are. *evicted (may be NULL) += tokens freed.
 * RKV_ENOSPC when they are still not free (locked entries). */
rkv_status cache_client_make_room(cache *c, int64_t n, int64_t *evicted);

/* make_room(n), then n pages from the pool to out[0..n), INFLIGHT, the
 * caller's. RKV_ENOSPC: nothing allocated. */
rkv_status cache_client_reserve(cache *c, int32_t n, int32_t *out, int64_t *evicted);

/* match + lock tokens[0..n_match), then the page table pages[0..total): the
 * matched pages followed by total - s->num_pages reserved ones. RKV_ENOSPC
 * (or any failure): the match is unlocked again (s still says what matched,
 * for the caller's message) and nothing is allocated. */
rkv_status cache_client_admit(cache *c, cache_seq *s, const int32_t *tokens, int32_t n_match,
                              int32_t total, int32_t *pages, int64_t *evicted);

/* insert(tokens[0..n), pages) for s's request, then every page of
 * pages[own..num_pages) that the cache did not adopt (still INFLIGHT) goes
 * back to the pool, in order. pages[] and s are left as they were. The frees
 * happen even when insert fails, so nothing leaks; insert's status is
 * returned. *prefix_len may be NULL. */
rkv_status cache_client_commit(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                               const int32_t *pages, int32_t own, int32_t num_pages,
                               int32_t *prefix_len);

/* Free own[0..n_own) (pages never committed), then unlock s (NULL: nothing
 * locked) and clear its length, pages and handle. First error returned. */
rkv_status cache_client_release(cache *c, cache_seq *s, const int32_t *own, int32_t n_own);

#endif
