/* cache_sim.h - replay a request trace through one cache kind, no model
 * (`radixkv cache-sim`). The contract is docs/ARCHITECTURE.md's "Cache simulator
 * contract"; in short, per step (consecutive requests with equal step):
 *
 *   1. in trace order: match(tokens, n - 1), lock          -> matched_i
 *   2. shortfall = sum ceil((n_i - matched_i) / P) - free pages
 *      if > 0: evict(shortfall * P), once
 *   3. allocate each request's pages in trace order while they fit
 *      (a request that does not fit: unlocked, not inserted, error line)
 *   4. in trace order: insert(tokens, n, matched pages + new pages);
 *      free the pages insert found already cached and the partial last page
 *   5. unlock every match
 *
 * That is --step-semantics sglang (the default; SGLang inserts when a request
 * ends). --step-semantics vllm follows vLLM's scheduler instead: per request
 * in trace order, match + lock, evict that request's own shortfall, allocate,
 * insert its full blocks at once (later requests of the step hit them), and
 * hold its whole chain and partial page until the step ends; then every
 * request is released in trace order (tail blocks first). Whether a request
 * fits is asked before it evicts or locks anything, as vLLM's allocate_slots
 * does: need <= free + evictable pages - its own evictable hits. One that does
 * not fit leaves the cache as its match found it and gets the error line, and
 * so do the rest of its step (vLLM stops scheduling there). Tree kinds hold the chain through a second match of the
 * full pages, which moves their clock and hit counts once more.
 *
 * A request needing more pages than the pool holds is reported and skipped.
 * Under a spill tier (cache_tier.h) a match in step 1 may itself allocate
 * pages and evict to load kept pages back; the step's one eviction of step 2
 * then covers only what is still short.
 *
 * Output, JSON Lines on `out`:
 *   {"type":"request","id":..,"step":..,"matched":..,"new":..}   (or "error":"...")
 *   {"type":"step","step":..,"evicted":[[edge tokens],...]}     steps that called evict
 *     (the list may be empty: evict was called for a shortfall that only
 *     locked entries could have covered)
 *     radix: each evicted node's own edge tokens, from the tree's eviction log;
 *     other kinds: each evicted page's tokens, in the order the kind returned
 *     the pages to the pool (for hash: its free-queue order)
 *   {"type":"summary",...}                                      once, at the end
 *
 * Ownership: the caller creates the pool and the cache (the pool holds
 * floor(capacity / P) pages) and keeps both; cache_sim_run only drives them.
 */
#ifndef RKV_CACHE_SIM_H
#define RKV_CACHE_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "billing.h"
#include "cache.h"
#include "trace.h"

/* --step-semantics: how the requests of one step meet the cache. */
typedef enum cache_sim_step {
    CACHE_SIM_STEP_SGLANG = 0, /* the default: all match, then all insert */
    CACHE_SIM_STEP_VLLM,       /* one request after another, each inserted at once */
} cache_sim_step;
/* "sglang", "vllm" by cache_sim_step, NULL-terminated. */
extern const char *const cache_sim_step_names[];

typedef struct cache_sim_options {
    const char *kind;       /* for the summary line */
    const char *policy;     /* for the summary line (NULL: not applicable) */
    const char *hash_fn;    /* for the summary line (NULL: not applicable) */
    const char *hash_duplicates; /* for the summary line: given by --hash-duplicates */
    cache_sim_step step_semantics;
    bool step_semantics_given;   /* the summary names it only when given */
    int64_t capacity;       /* tokens, for the summary line */
    const char *dump_dir;   /* NULL: no per-step pictures */
    bool check;             /* full cache_check after every step */
    bool progress;          /* progress bar on stderr (long runs only) */
    bool summary_only;      /* no request/step lines (capacity sweeps) */
    const billing_prices *prices; /* summary's input-token bill; NULL: the defaults */
    /* Time model (optional): each served request's prefill, alone, as the sim
     * backend's roofline prices it; with a spill tier (cache_tier.h) also what
     * recomputing its tier hits would have cost. NULL: no times. */
    const struct model_config *model;
    const struct sim_profile *gpu;
    const struct tier_opts *tier;   /* for the summary's tier fields; NULL: none */
} cache_sim_options;

typedef struct cache_sim_summary {
    int64_t requests;       /* lines of the trace */
    int64_t errors;         /* requests reported with an error line */
    int64_t steps;
    int64_t prompt_tokens;  /* sum of len(tokens) over requests served */
    int64_t matched_tokens;
    int64_t new_tokens;
    int64_t evicted_tokens;
    int64_t evicted_nodes;  /* nodes (tree kinds) or blocks */
    int64_t evict_calls;
    double seconds;
    /* With a time model: sum over served requests of the prefill with its match
     * (pre = matched, s = new), and of recomputing its tier hits instead:
     * prefill(pre = matched - tier hits, s = tier hits + new) - prefill(pre =
     * matched, s = new). */
    double prefill_seconds;
    double recompute_seconds;
    /* SIGINT/SIGTERM (interrupt.h) stopped the replay after a whole step; the
     * summary says "interrupted": true. */
    bool interrupted;
} cache_sim_summary;

/* Replays the whole trace. Returns RKV_OK when the trace was read to its end
 * (request errors included); malformed input gives RKV_EPARSE with
 * "file:line: reason" in err; RKV_ECORRUPT when a check fails (the step is
 * named); RKV_EIO when a dump cannot be written. */
rkv_status cache_sim_run(cache *c, const cache_sim_options *opt, trace_reader *tr, FILE *out,
                         cache_sim_summary *sum, char *err, size_t errlen);

/* The summary as one JSON line (without a trailing newline). It bills the
 * served requests' prompt tokens (billing.h): matched tokens at the cached
 * price, the rest at the uncached one. "pinned_tokens" are the tokens pinned
 * for the whole replay (cache_pin.h; they count among the pool's pages). */
void cache_sim_print_summary(FILE *out, const cache_sim_options *opt, const cache *c,
                             const cache_sim_summary *sum);

#endif
