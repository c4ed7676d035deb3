/* run_opts.h - the options of `radixkv run` as data: the engine's
 * configuration and what sits around an engine (trace, output, pins, tier,
 * prices, replicas and router, disaggregation and SLOs). The command line fills it (cli/cmd_run.c's
 * run_parse_options); `radixkv serve` and the multi-replica driver read it.
 */
#ifndef RKV_RUN_OPTS_H
#define RKV_RUN_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "billing.h"
#include "engine.h"
#include "tier_opts.h"

typedef struct run_opts {
    engine_config ec;
    const char *trace;
    const char *namespace_name; /* --namespace: trace lines without "namespace" */
    const char *out;
    const char *pin;
    int64_t kv_tokens;
    int32_t default_max_tokens;
    bool progress;
    billing_prices prices;
    tier_opts tier;
    int32_t replicas;
    const char *router;
    int32_t router_threshold;
    int64_t router_tokens;
    double router_cache_threshold;
    int32_t prefill, decode;       /* disaggregated engines (replicas.h); 0: colocated */
    const char *link;              /* the handoff's link (kv_link.h) */
    const char *decode_router;     /* router_names: which decode engine takes a handoff */
    double slo_ttft, slo_tpot;     /* seconds; 0: none */
    bool sim_host;                 /* --sim-host-us-per-step or --sim-host-ns-per-token given
                                      (ec.host_step_s, ec.host_token_s): the summary reports them */
} run_opts;

#endif
