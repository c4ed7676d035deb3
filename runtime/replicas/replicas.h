/* replicas.h - data-parallel replicas in one process: N engines on one clock
 * and a router (router.h) in front of them (`radixkv run --replicas N
 * --router NAME`).
 *
 *   trace (by arrival) --> router --> engine 0 .. engine N-1  (own cache each)
 *                            |  load = requests routed and not finished
 *
 * One clock: before the request arriving at t is routed, every replica with
 * work whose clock is below t is stepped (the one furthest behind first, ties
 * to the lower index; a heap of the busy engines' clocks, so a step costs
 * O(log N), not a pass over N engines), so the router sees the loads of
 * time t. The replica picked takes several steps per pass, up to the next
 * event (engine_step_until: while it would be picked again, then through
 * quiet decode steps, which nobody else sees, up to the next arrival), with
 * the outputs of a pass per step (RKV_STEP_ONCE=1). Replicas never share pages (unless a
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
 * Disaggregation (prefill > 0 and decode > 0; sim backend): engines 0..N-1
 * prefill, N..N+M-1 decode, each with its own cache.
 *
 *   arrival: never fits a decode engine (engine_check_request)? error line,
 *      |    no prefill ("prefill": null)
 *   --router--> prefill i: prompt, max_tokens 1 -> first token at t1
 *      |  its full pages read from prefill i's cache (match, read_page, unlock)
 *      v  (queued until every busy engine's clock has reached t1)
 *   least-load --> decode j: pages j already holds stay; the others are
 *      written into fresh pages of j and inserted into j's cache (unlocked,
 *      as any cached prefix: holds for requests not yet admitted could fill
 *      j's pool so that none of them runs; held until admission, 1,000
 *      Mooncake requests on 3 prefill + 1 decode engines left a lone running
 *      request without a page to grow into, which its scheduler fails as
 *      never fitting); request = prompt + first token,
 *      max_tokens - 1, arriving at t1 + link_wait + kv_link_seconds(pages
 *      sent), link_wait the time until both engines' NICs were free (one
 *      NIC per engine, first come first served; kv_link.h). Should
 *      j evict them before it admits the request, it computes them again
 *      (the line's "decode_cached_tokens" is below the pages handed over;
 *      the summary counts such requests in "kv_evicted_requests").
 *
 * A decode engine's quiet steps (above) stop below the first queued handoff
 * and every busy prefill engine's clock: that engine's next step may finish
 * a prompt whose handoff comes to it.
 *
 * Decode engines are picked by decode_router (router.h; `run` defaults to
 * least-load: a decode step's cost grows with its batch, and a prefix cache
 * only lowers what is sent). cache-aware pairs a prompt with the decode
 * engine whose approximate tree holds most of it (fewer pages over the link)
 * unless that engine's load is too far above the least loaded one's. A
 * prompt's partial last page is not sent: the decode engine recomputes it with
 * the first token (a few rows). When j has no room even after eviction while
 * it runs requests, the handoff waits on j and is tried again each time one
 * of j's requests finishes (counted in "kv_waited_requests"; the pages stay
 * on the prefill side, the link leaves no earlier than the retry). Only an
 * idle j without room (its pins fill it) recomputes the prompt
 * ("kv_recompute_requests").
 * The prefill engine's match to read the pages is an access (it refreshes the
 * prompt's LRU time there, as the commit that just inserted it did).
 * Times: ttft = t1 - arrival, tpot = (finish - t1) / (outputs - 1), latency =
 * finish - arrival. At temperature 0 the outputs equal a colocated engine's;
 * at temperature > 0 the decode engine's draws restart their step count.
 *
 * SLOs (slo_ttft, slo_tpot > 0): a request meets them when it finished without
 * error within both; the summary gives the share of requests that do
 * ("slo_attainment") and how many per second of the run
 * ("good_requests_per_s"). DistServe's goodput is not a per-run number: it
 * is the highest request rate at which >= 90 % of requests meet both SLOs,
 * found by a rate sweep (experiments/disaggregation/run).
 *
 * Both summaries give the spill and remote tiers' counters summed over every
 * engine (the shared remote pool under disaggregation too).
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
#include "kv_link.h"
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
    const char *namespace_name;    /* trace lines without "namespace" (trace.h) */
    int32_t default_max_tokens;
    const billing_prices *prices;
    const char *pin;               /* --pin FILE: pinned in every replica (pin_file.h) */
    bool progress;
    int32_t prefill, decode;       /* both > 0: disaggregated (replicas unused) */
    const char *link;              /* kv_link.h spec; NULL: rdma */
    router_kind decode_router;     /* which decode engine takes a handoff; the
                                      zero value is round-robin, cmd_run's
                                      default least-load */
    double slo_ttft, slo_tpot;     /* seconds; <= 0: no such SLO */
    /* NULL, or every engine's steps (engine_stats steps, steps_moved,
     * step_calls) are added here when the run ends (benches: the simulated
     * steps, and the driver's calls that ran them). */
    struct replicas_steps { int64_t steps, moved, calls; } *steps;
} replicas_config;

/* Route and serve the whole trace; per-request lines (with "replica" and,
 * for cache-aware, "predicted") and one summary line on out, a table on
 * stderr. Errors name the place in err. */
rkv_status replicas_run(const replicas_config *rc, FILE *out, bool *interrupted, char *err,
                        size_t errlen);

#endif
