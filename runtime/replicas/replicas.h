/* replicas.h - data-parallel replicas in one process: N engines on one clock
 * and a router (router.h) in front of them (`radixkv run --replicas N
 * --router NAME`).
 *
 *   trace (by arrival) --> router --> engine 0 .. engine N-1  (own cache each)
 *                            |  load = requests routed and not finished
 *
 * One clock: before the request arriving at t is routed, every replica with
 * work whose clock is below t is stepped (the one furthest behind first), so
 * the router sees the loads of time t. Replicas never share pages (unless a
 * shared remote tier is configured, cache_tier.h).
 *
 * The trace is read by the same loader as a single engine's (trace_engine.h),
 * so every field a line carries reaches the engine alike.
 *
 * Signals (interrupt.h): the first SIGINT/SIGTERM stops dispatch between
 * steps; the finished requests' lines and a summary with "interrupted": true
 * are written, and *interrupted tells the caller to exit 128 + signal.
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
#ifndef RKV_REPLICAS_H
#define RKV_REPLICAS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "billing.h"
#include "engine.h"
#include "router.h"

typedef struct replicas_config {
    const engine_config *engine;   /* every replica's configuration */
    int32_t replicas;              /* >= 1 */
    router_kind router;
    int32_t balance_threshold;     /* cache-aware: load gap that forces least-load */
    double cache_threshold;        /* cache-aware: match share below which the emptiest tree wins */
    int64_t approx_tokens;         /* cache-aware: each approximate tree's capacity;
                                      <= 0: the replica's KV tokens */
    const char *trace;
    int32_t default_max_tokens;
    const billing_prices *prices;
    const char *pin;               /* --pin FILE: pinned in every replica (pin_file.h) */
    bool progress;
} replicas_config;

/* Route and serve the whole trace; per-request lines (with "replica" and,
 * for cache-aware, "predicted") and one summary line on out, a table on
 * stderr. Errors name the place in err. */
rkv_status replicas_run(const replicas_config *rc, FILE *out, bool *interrupted, char *err,
                        size_t errlen);

#endif
