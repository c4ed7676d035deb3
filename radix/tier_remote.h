/* tier_remote.h - a shared remote tier for KV pages on a Redis server, below
 * the host and disk tiers of cache_tier.h. Every engine (process or replica)
 * that names the same server, model and namespace loads what the others
 * stored: a prefix computed once is a hit everywhere (Mooncake's KV store,
 * LMCache's remote backends).
 *
 *   engine A --+                      Redis (one server, its own maxmemory /
 *   engine B --+-- pipelined GET/SET --> allkeys-lru eviction)
 *   engine C --+     per page: key -> header | tokens | page bytes
 *
 * Keys never hold a page id (page ids are private to one pool). A page is
 * named by what it holds:
 *
 *   rkv:<namespace>:<model id, 16 hex>:p<page size>:<chain hash, 32 hex>
 *
 * where the chain hash covers every token before and in the page and the
 * request namespace (cache_tier.h), the model id covers shapes, weights,
 * seed and backend (pages of different models or dtypes never meet), and
 * <namespace> separates tenants or experiments sharing a server.
 *
 * Values: a 32-byte header (magic "RKVP", version, page size, payload bytes,
 * modelled bytes, XXH3-64 of what follows), the page's P tokens (collision
 * guard: a hit re-checks them), then the page's bytes as the backend's
 * read_page gives them (K/V on cpu and cuda; on sim a few stand-in bytes, the
 * record's modelled size being what its clock charges). A value that is
 * missing, short, long, or fails its checksum or token check is a miss,
 * never an error; bad ones are counted (corrupt_values).
 *
 * Batching. Stores queue in one pipeline (hiredis appends) and are sent in
 * batches of TIER_REMOTE_BATCH or before the next lookup; a lookup of a run
 * of pages sends its GETs a batch at a time and stops at the first miss.
 *
 * Index. Each engine keeps an LRU index of the keys it stored (capacity:
 * cfg.pages), touched when it stores or loads one of them again. A page
 * already in it is not stored again; when the index is full its least
 * recently used key is deleted on the server, so one engine's share stays
 * bounded (another engine that loaded that page then misses it). The server
 * may drop any key earlier (maxmemory): a miss.
 *
 * Faults. Open fails with a message naming the URL when the server cannot be
 * reached. After an I/O error or timeout mid-run the tier is down: lookups
 * are misses and stores are drops, each announced by one warning on stderr
 * (per outage: a later outage warns again); a reconnect is tried at most once
 * a second and, when it works, every key of the index is stored again when
 * next met (the server may have restarted empty).
 *
 * Time model (the sim clock): a lookup costs one round trip (latency) per
 * batch sent plus modelled bytes / bw per page used; a store costs
 * modelled bytes / bw, overlapped with compute like the host tier's spills.
 *
 * Ownership: tier_remote_close frees everything and closes the connection;
 * the caller keeps the configuration's strings alive while the tier lives.
 * Not thread-safe: one engine, one connection.
 */
#ifndef RKV_TIER_REMOTE_H
#define RKV_TIER_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

enum {
    TIER_REMOTE_BATCH = 32,
    TIER_REMOTE_NS_MAX = 63,        /* namespace characters */
    TIER_REMOTE_TTL_MAX = 31536000, /* key expiry, seconds (a year) */
};

typedef struct tier_remote_config {
    const char *url;          /* redis://HOST:PORT[/DB]; NULL: no remote tier */
    int64_t pages;            /* this engine's index capacity in pages (> 0) */
    bool write_back;          /* false (default): store a page when the cache adopts it
                                 (write-through: others see it at once); true: when it
                                 leaves the last local tier */
    double timeout_s;         /* connect and reply timeout (0: 1 s) */
    double bw;                /* modelled bytes/s to and from the server (0: 12.5e9) */
    double latency_s;         /* modelled round trip per batch (0: 50e-6) */
    const char *ns;           /* key namespace (NULL: "default") */
    uint64_t model_id;        /* identity of the model whose K/V the pages hold */
    double modelled_page_bytes; /* what one page costs to move (0: its real bytes) */
    int64_t ttl_s;            /* expiry of every stored key, seconds; 0: none
                                 (default 86400) */
} tier_remote_config;

void tier_remote_config_default(tier_remote_config *c);

typedef struct tier_remote_stats {
    uint64_t hit_pages, hit_tokens;  /* pages loaded from the server and used */
    uint64_t lookups;                /* GETs sent */
    uint64_t misses;                 /* runs that ended at a missing key */
    uint64_t corrupt_values;         /* values present but rejected (miss) */
    uint64_t stored_pages;           /* SETs the server confirmed */
    uint64_t refused_pages;          /* SETs the server refused (error reply) */
    uint64_t skipped_pages;          /* stores skipped: in the index already */
    uint64_t deleted_pages;          /* index full: oldest key deleted on the server */
    uint64_t dropped_pages;          /* stores lost while the server was down */
    uint64_t failed_lookups;         /* lookups made while the server was down */
    uint64_t reconnects;
    double bytes_loaded, bytes_stored; /* modelled */
    double load_seconds, store_seconds; /* modelled */
    int64_t indexed;                 /* keys in the index now */
    bool down;                       /* the server is unreachable now */
} tier_remote_stats;

typedef struct tier_remote tier_remote;

/* Connects and checks the server (PING). page_bytes: bytes one page carries
 * (0: tokens only); P: tokens per page. Unreachable server or bad URL:
 * RKV_EIO / RKV_EINVAL with a message naming the URL. */
rkv_status tier_remote_open(const tier_remote_config *cfg, int32_t page_size, size_t page_bytes,
                            tier_remote **out, char *err, size_t errlen);
/* Sends what is queued, then closes. NULL is fine. */
void tier_remote_close(tier_remote *r);

/* Store one page (key: its chain hash; toks: its P tokens; bytes: page_bytes
 * of them, NULL when page_bytes is 0). Queued; a page in the index is only
 * touched. Never fails: a down server drops it (counted). */
void tier_remote_put(tier_remote *r, const uint64_t key[2], const int32_t *toks, const void *bytes);
/* Send the queued stores now and read their replies. */
void tier_remote_flush(tier_remote *r);

/* Look up pages 0 .. n (keys[2i], tokens + i * P) in batches; returns how
 * many leading pages were found valid. Their bytes stay readable through
 * tier_remote_page(r, i) until the next call of fetch. */
int32_t tier_remote_fetch(tier_remote *r, const uint64_t *keys, const int32_t *tokens, int32_t n);
const void *tier_remote_page(const tier_remote *r, int32_t i);
/* The caller used the first `used` pages (0 too) of the last fetch: counts
 * them as hits and returns the modelled seconds: the fetch's round trips
 * (charged once, hit or miss) plus the used pages' bytes. */
double tier_remote_take_loaded(tier_remote *r, int32_t used);

bool tier_remote_write_back(const tier_remote *r);
/* sum += s, counter by counter (replicas' totals); down and indexed: or, sum. */
void tier_remote_stats_add(tier_remote_stats *sum, const tier_remote_stats *s);
const tier_remote_stats *tier_remote_get_stats(const tier_remote *r);

/* The value format, for tests and fuzzing: what a value must match. */
typedef struct tier_remote_value_id {
    int32_t page_size;
    size_t page_bytes;
    uint64_t k0, k1;   /* chain hash (the key) */
    uint64_t model_id;
    const char *ns;    /* at most TIER_REMOTE_NS_MAX characters */
} tier_remote_value_id;

/* Bytes of one value. */
size_t tier_remote_value_bytes(int32_t page_size, size_t page_bytes);
/* Writes the value of id with tokens toks (page_size) and bytes (page_bytes)
 * to out (tier_remote_value_bytes of room). */
void tier_remote_value_encode(const tier_remote_value_id *id, const int32_t *toks, const void *bytes,
                              double modelled, uint8_t *out);
/* The page bytes inside val (len bytes) when it is the valid value of id for
 * toks; NULL otherwise (any length, any content). */
const void *tier_remote_value_check(const tier_remote_value_id *id, const int32_t *toks,
                                    const void *val, size_t len);

/* Parses redis://HOST:PORT[/DB] into host (hostlen bytes), port and db. 0 on
 * success; -1 with a reason in why. */
int tier_remote_parse_url(const char *url, char *host, size_t hostlen, int *port, int *db,
                          char *why, size_t whylen);
/* Whether this build has the remote tier (hiredis found at configure time). */
bool tier_remote_available(void);

#endif
