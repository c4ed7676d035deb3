/* tier_opts.h - the spill-tier options shared by `radixkv run` and
 * `radixkv cache-sim` (cache_tier.h), and the tier's summary fields.
 *
 *   --tier-host TOKENS        host-memory tier capacity (ceil(TOKENS / P) pages)
 *   --tier-disk TOKENS        disk tier capacity (0: none)
 *   --tier-dir DIR            the disk tier's file there, unlinked while open
 *   --tier-policy P           write-back (default) | write-through
 *   --host-bw GBPS            host <-> GPU bandwidth for the time model (default 50)
 *   --disk-bw GBPS            disk <-> host bandwidth (default 3)
 *   --tier-fail-disk-after N  fault injection: the disk is full after N page writes
 *   --tier-remote URL         shared remote tier on redis://HOST:PORT[/DB] (tier_remote.h)
 *   --tier-remote-tokens T    this engine's share of it (its LRU index of stored keys)
 *   --tier-remote-policy P    write-through (default) | write-back
 *   --tier-remote-timeout MS  connect and reply timeout (default 1000)
 *   --tier-remote-ns NAME     key namespace (default "default")
 *   --remote-bw GBPS          remote bandwidth for the time model (default 12.5)
 *   --remote-latency US       remote round trip for the time model (default 50)
 */
#ifndef RKV_TIER_OPTS_H
#define RKV_TIER_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cache_tier.h"
#include "cli.h"

typedef struct tier_opts {
    bool on;                /* any --tier-host / --tier-disk given */
    int64_t host_tokens, disk_tokens, remote_tokens;
    tier_config cfg;        /* pages filled in by tier_opts_finish */
} tier_opts;

void tier_opts_init(tier_opts *o);
/* 1: name was a tier option (value consumed, *bad set to a message on a bad
 * value); 0: not a tier option. */
int tier_opts_parse(tier_opts *o, const char *name, const char *value, char *bad, size_t badlen);
/* The options above as cli.h table entries, appended at opts[*n] (room for
 * TIER_OPTS_CLI more) and parsed into o by tier_opts_parse. */
enum { TIER_OPTS_CLI = 15 };
void tier_opts_cli(tier_opts *o, cli_opt *opts, int *n);
/* Capacities from tokens to pages of P tokens. */
void tier_opts_finish(tier_opts *o, int32_t page_size);
/* The remote tier's model identity: a hash of a description of everything
 * that shapes a page's K/V (model, weights, seed, backend, dtype). */
void tier_opts_set_model(tier_opts *o, const char *identity);
/* Help lines for the options above. */
void tier_opts_usage(FILE *f, int width);
/* Summary fields with leading commas: "tier_policy", per tier hit tokens and
 * rates over prompt_tokens, pages spilled/dropped, failures, bytes moved,
 * modelled load/spill seconds. Nothing when s is NULL. gpu_hit_tokens =
 * matched - tier hits: exact in cache-sim; in run, tier hits are counted at
 * every match (re-matches after preemption, lpm's look-ahead) while matched
 * tokens are counted at first admission, so the split is approximate there
 * (kept >= 0).
 * With a remote tier (remote non-NULL) its fields follow, "remote_*". */
void tier_print_json(FILE *f, const tier_opts *o, const tier_stats *s,
                     const tier_remote_stats *remote, int64_t prompt_tokens, int64_t matched_tokens);

#endif
