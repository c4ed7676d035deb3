/* router.h - which of N data-parallel replicas takes a request: the routing
 * policy, apart from any driver (replicas.h drives N engines in one process
 * with it; a server in front of engines could use it alike).
 *
 * Routers:
 *   round-robin  the k-th request goes to replica k mod N
 *   least-load   fewest outstanding requests (ties: fewest routed, lowest index)
 *   cache-aware  longest match in the replica's approximate tree (SGLang's
 *                router): a radix tree of the prompts routed there, with its
 *                own LRU capacity, never told what the replica really cached
 *                or evicted. Unless the best replica's load exceeds the least
 *                loaded one's by more than the balance threshold (then
 *                least-load), or the best match covers less than the cache
 *                threshold of the prompt (then the replica whose tree holds the
 *                fewest tokens, so new prefixes spread out).
 *
 * Errors are never swallowed: a failed allocation in an approximate tree
 * fails the call (RKV_ENOMEM) rather than silently changing the route. A tree
 * too full of locked entries to take a prompt forgets it: that is the
 * approximation, not an error.
 *
 * Ownership: router_create copies cfg; the caller keeps the loads.
 */
#ifndef RKV_ROUTER_H
#define RKV_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

typedef enum router_kind { ROUTER_ROUND_ROBIN = 0, ROUTER_LEAST_LOAD, ROUTER_CACHE_AWARE } router_kind;

/* The registry: names in router_kind order, NULL-terminated. */
extern const char *const router_names[];
/* "round-robin" | "least-load" | "cache-aware"; RKV_EINVAL otherwise. */
rkv_status router_kind_parse(const char *name, router_kind *out);

typedef struct router_config {
    router_kind kind;
    int32_t replicas;              /* >= 1 */
    int32_t balance_threshold;     /* cache-aware: load gap that forces least-load */
    double cache_threshold;        /* cache-aware: match share below which the emptiest tree wins */
    int32_t page_size;             /* cache-aware: the approximate trees' page size */
    const int64_t *approx_pages;   /* cache-aware: (replicas) each tree's capacity in pages */
} router_config;

/* What the router knows of a replica's load. */
typedef struct router_load {
    int64_t outstanding;           /* routed and not finished */
    int64_t routed;                /* routed so far */
} router_load;

typedef struct router router;

rkv_status router_create(const router_config *cfg, router **out, char *err, size_t errlen);
void router_destroy(router *r);

/* Route request number k (0-based, in arrival order) with prompt
 * tokens[0..n): *replica is the pick, *predicted the match the router
 * expects there (cache-aware; -1 otherwise). load: (replicas). */
rkv_status router_route(router *r, const int32_t *tokens, int32_t n, int64_t k,
                        const router_load *load, int32_t *replica, int32_t *predicted, char *err,
                        size_t errlen);

#endif
