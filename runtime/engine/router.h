/* router.h - data-parallel replicas in one process: N engines on one clock
 * and a router in front of them (`radixkv run --replicas N --router NAME`).
 *
 *   trace (by arrival) --> router --> engine 0 .. engine N-1  (own cache each)
 *                            |  load = requests routed and not finished
 *                            |  cache-aware: one approximate prefix tree per
 *                            |  replica, fed only with what it routed there
 *
 * One clock: before the request arriving at t is routed, every replica with
 * work whose clock is below t is stepped (the one furthest behind first), so
 * the router sees the loads of time t. Replicas never share pages.
 *
 * Routers:
 *   round-robin  replica i mod N
 *   least-load   fewest outstanding requests (ties: lowest index)
 *   cache-aware  longest match in the replica's approximate tree (SGLang's
 *                router): a radix tree of the prompts routed there, with its
 *                own LRU capacity (the replica's KV tokens by default), never
 *                told what the replica really cached or evicted. Unless the
 *                best replica's load exceeds the least loaded one's by more
 *                than the balance threshold (default 8 requests: then
 *                least-load), or the best match covers less than the cache
 *                threshold of the prompt (default 0.5: then the replica whose
 *                tree holds the fewest tokens, so new prefixes spread out).
 *
 * Approximation error: for each request routed with a prediction, the
 * predicted match (tokens, in the chosen replica's approximate tree) against
 * the tokens the replica really found cached at first admission; reported
 * as the mean absolute error over prompt tokens, and the share of requests
 * predicted too high.
 *
 * Ownership: replicas_run creates and destroys the engines; the caller keeps
 * cfg and the output stream.
 */
#ifndef RKV_ROUTER_H
#define RKV_ROUTER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "billing.h"
#include "engine.h"

typedef enum router_kind { ROUTER_ROUND_ROBIN = 0, ROUTER_LEAST_LOAD, ROUTER_CACHE_AWARE } router_kind;

/* "round-robin" | "least-load" | "cache-aware"; RKV_EINVAL otherwise. */
rkv_status router_kind_parse(const char *name, router_kind *out);
extern const char *const router_names[];

typedef struct replicas_config {
    const engine_config *engine;   /* every replica's configuration */
    int32_t replicas;              /* >= 1 */
    router_kind router;
    int32_t balance_threshold;     /* cache-aware: load gap that forces least-load */
    double cache_threshold;        /* cache-aware: match share below which the emptiest tree wins */
    int64_t approx_tokens;         /* cache-aware: each approximate tree's capacity;
                                      <= 0: the replica's KV tokens */
    const char *trace;
    const char *namespace_name;    /* trace lines without "namespace" (trace.h) */
    int32_t default_max_tokens;
    const billing_prices *prices;
    const char *pin;               /* --pin FILE: pinned in every replica (pin_file.h) */
    bool progress;
} replicas_config;

/* Route and serve the whole trace; per-request lines (with "replica" and,
 * for cache-aware, "predicted") and one summary line on out, a table on
 * stderr. Errors name the place in err. */
rkv_status replicas_run(const replicas_config *rc, FILE *out, char *err, size_t errlen);

#endif
