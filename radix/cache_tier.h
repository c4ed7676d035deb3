/* cache_tier.h - a second (and third) tier under any cache kind: pages the
 * cache evicts are kept in host memory and optionally on disk, and a later
 * match that runs past the cached prefix into kept pages loads them back
 * (SGLang's HiCache; a context cache on disk). A layer around cache.h: the
 * wrapped kind never knows.
 *
 *   GPU pool (the kind's pages)      host tier (LRU)        disk tier (LRU)
 *   +---------------------+  evict   +--------------+ full  +--------------+
 *   | radix / hash / trie | -------> | host_pages   | ----> | disk_pages   |
 *   |                     | <------- | slots        | <---- | files        |
 *   +---------------------+  match   +--------------+ load  +--------------+
 *           runs into a kept page: alloc, write_page, insert   full: LRU dropped
 *
 * Keys. A page is named by a chain hash over everything before it, as in
 * vLLM's block hashing:  key_k = xxh3-128(key_{k-1} || tokens of page k),
 * key_{-1} = the namespace. The layer records the key of every page the kind
 * adopts (insert), so when evict() hands pages back to the pool it knows what
 * each one held, whatever the kind. A kept entry also stores its page's
 * tokens; a key match re-checks them (collision guard).
 *
 * match(tokens, n): the kind's match (length L), then the keys of pages
 * L/P, L/P + 1, ... while they are kept in a tier: those pages are allocated
 * (evicting unlocked entries of the kind, the match itself locked meanwhile),
 * filled from the tier through the mover, inserted into the kind, and the
 * kind matched again. The result is one ordinary match of the kind; the
 * loaded tokens count as tier hits (per tier) with their bytes moved. Pages
 * stay in their tier after a load (inclusive tiers), so evicting them again
 * costs no write.
 *
 * Policies:
 *   write-back (default)  a page is written to the host tier when the kind
 *                         evicts it (off the critical path on real hardware:
 *                         the copy overlaps compute; the modelled time is
 *                         reported apart as spill_seconds).
 *   write-through         a page is written when the kind adopts it; eviction
 *                         then costs nothing.
 * Host tier full: its LRU entry moves to the disk tier if there is one (else
 * it is dropped); disk tier full: its LRU entry is dropped.
 *
 * Bytes. The mover copies one page between the KV memory and host bytes
 * (backend.h's read_page / write_page). Without a mover (cache-sim) the tiers
 * keep keys and tokens only. modelled_page_bytes is what a page costs to move
 * in the time model (the model's K/V bytes of one page):
 *   host <-> GPU:  bytes / host_bw    (default 50e9 B/s: PCIe Gen5 x16 is 64 GB/s
 *                                      per direction in theory; ~50 is what DMA
 *                                      copies from pinned memory reach)
 *   disk <-> host: bytes / disk_bw    (default 3e9 B/s: one PCIe 4 NVMe drive)
 * A load from disk costs both. load_seconds is on the request's critical path
 * (cache_tier_take_seconds() hands it to the engine's clock).
 *
 * Faults. A disk tier directory that cannot be written fails cache_tier_wrap
 * (RKV_EIO, message names it). A failed spill (write error, disk full, or the
 * fault injection fail_disk_writes_after) drops that entry: the page was
 * already freed by the kind, so it is a plain eviction; pinned and locked
 * pages are never evicted, so never spilled; the kind's structure is never
 * touched by the tier's failures. The first failure's message is kept
 * (cache_tier_last_error) and counted in spill_failures.
 *
 * Remote. With cfg.remote.url the wrapper opens a tier_remote (start-up
 * fails when the server cannot be reached) and keeps it below both local
 * tiers: write-through stores each page the kind adopts, write-back each
 * page leaving the last local tier (or the kind, with no local tier). A
 * match runs on past the local run into pages the server holds, loaded the
 * same way (the modelled time: round trips + bytes / remote bw + bytes /
 * host bw). Its failures are misses and drops, never errors.
 *
 * Ownership: the wrapper owns the inner cache (destroyed with it) and the
 * tier files (removed at destroy). The pool and the mover's context outlive it.
 */
#ifndef RKV_CACHE_TIER_H
#define RKV_CACHE_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "tier_remote.h"

typedef struct tier_mover {
    void *ctx;
    size_t page_bytes; /* bytes per page read/written; 0: no data moves */
    rkv_status (*read_page)(void *ctx, int32_t page, void *dst);        /* KV -> host */
    rkv_status (*write_page)(void *ctx, int32_t page, const void *src); /* host -> KV */
} tier_mover;

typedef struct tier_config {
    int64_t host_pages;          /* host tier capacity in pages (>= 0) */
    int64_t disk_pages;          /* disk tier capacity in pages (0: none) */
    const char *disk_dir;        /* the disk tier's file goes there, unlinked while open; needed with data to move */
    bool write_through;          /* false: write-back on evict */
    double modelled_page_bytes;  /* bytes one page costs to move (0: mover's page_bytes) */
    double host_bw;              /* bytes/s host <-> GPU (0: 50e9) */
    double disk_bw;              /* bytes/s disk <-> host (0: 3e9) */
    int64_t fail_disk_writes_after; /* fault injection: disk writes that succeed, then
                                       ENOSPC; < 0: never (the default to pass is -1) */
    tier_remote_config remote;   /* shared tier below host and disk (tier_remote.h);
                                    remote.url NULL: none */
} tier_config;

void tier_config_default(tier_config *c);

typedef struct tier_stats {
    uint64_t host_hit_tokens, disk_hit_tokens; /* tokens loaded back per tier */
    uint64_t host_hit_pages, disk_hit_pages;
    uint64_t spilled_pages;     /* written to a tier (host or disk) from the KV memory */
    uint64_t demoted_pages;     /* moved host -> disk */
    uint64_t dropped_pages;     /* fell out of the last tier */
    uint64_t spill_failures;    /* writes that failed: plain evictions */
    double bytes_to_host, bytes_from_host, bytes_to_disk, bytes_from_disk; /* modelled */
    double load_seconds;        /* modelled, on the critical path */
    double spill_seconds;       /* modelled, overlapped with compute */
    int64_t host_used, disk_used; /* entries now */
} tier_stats;

/* Wrap inner (ops->name "tier"; cache_tier_inner() gives the kind). mover may
 * be NULL. On failure inner is NOT destroyed and *out is NULL. */
rkv_status cache_tier_wrap(cache *inner, const tier_config *cfg, const tier_mover *mover,
                           cache **out, char *err, size_t errlen);

/* NULL when c is not a tier wrapper. */
const tier_stats *cache_tier_get_stats(const cache *c);
/* The wrapped kind; c itself when c is not a tier wrapper. */
cache *cache_tier_inner(cache *c);
/* Modelled load seconds since the last call (0 for a non-tier cache). */
double cache_tier_take_seconds(cache *c);
/* The remote tier's counters; NULL without one (or for a non-tier cache). */
const tier_remote_stats *cache_tier_remote_stats(const cache *c);
/* First spill failure's message, or NULL. */
const char *cache_tier_last_error(const cache *c);

#endif
