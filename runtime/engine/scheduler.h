/* scheduler.h - continuous batching over a prefix cache and a page pool.
 *
 * The scheduler owns the waiting and running queues and every page a request
 * holds; it never sees model data. The engine owns the request structs (they
 * live until the engine is destroyed) and hands them in with scheduler_add().
 *
 * A request's token array and page table (P = page size):
 *
 *   tokens    [ prompt ......................... | outputs ..... | pending ]
 *   kv        [ K/V computed (kv_done) ........................ ]
 *   pages     [ c0 ][ c1 ] [ p2 ][ p3 ][ p4 ]
 *             \cache-owned/ \__ the request's own (INFLIGHT) __/
 *             num_cache_pages, locked through `match`
 *
 * One step (scheduler_schedule) walks the running requests oldest first, then
 * admits waiting ones in policy order, giving each a chunk of rows under the
 * token budget and pages for them:
 *   1) running request: rows = what is left to compute (1 for a decode), cut
 *      by the budget; a prefill chunk leaves one row for each decode behind it.
 *   2) pages short: cache_evict(shortfall), then preempt the newest running
 *      request (pages freed, match unlocked, back to the front of the queue,
 *      recomputed later); preempting itself when it is the newest.
 *   3) waiting request: match all tokens but the last, lock, allocate pages
 *      for the first chunk; pages short after eviction stops admission (new
 *      requests never preempt running ones). One that shares dedup_tokens or
 *      more uncached tokens with a request admitted in the same step waits a
 *      step, to find them in the cache instead of computing them twice.
 * Every page move around the cache goes through cache_client.h (match +
 * lock, reserve with eviction, commit, release).
 * A row set that reaches the end of the tokens samples one new token: its
 * slot is appended as "pending" at plan time and filled by scheduler_commit().
 *
 * After a step that prefilled (rows > 1) the computed full pages are inserted
 * into the cache at once (SGLang's cache_unfinished_req), so requests admitted
 * later share them before the first one finishes. On finish the committed
 * tokens (those whose K/V exists) are inserted, duplicate pages that insert
 * reports are freed, the partial last page is freed, the match is unlocked.
 *
 * Every page the pool has handed out (INFLIGHT) is held by exactly one
 * running request: scheduler_check() verifies that on top of cache_check().
 */
#ifndef RKV_SCHEDULER_H
#define RKV_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "cache.h"
#include "page_pool.h"
#include "rkv_status.h"

typedef enum sched_policy {
    SCHED_FCFS = 0,   /* queue order: arrival, preempted requests first */
    SCHED_LPM,        /* longest cached prefix first (fcfs past the queue limit) */
    SCHED_DFS_WEIGHT, /* DFS over the waiting prompts' prefix tree, heavy subtrees first */
    SCHED_RANDOM,     /* seeded shuffle */
} sched_policy;

typedef enum req_state {
    REQ_FUTURE = 0, /* added, not yet arrived (engine) */
    REQ_WAITING,
    REQ_RUNNING,
    REQ_FINISHED,
} req_state;

typedef struct sched_req {
    int64_t id;            /* engine's index */
    req_state state;
    uint64_t ns;           /* cache namespace */
    int32_t priority;      /* eviction priority its cache calls carry */
    int32_t prompt_len;
    int32_t max_tokens;    /* outputs to generate, >= 1 */
    int32_t stop_token;    /* < 0: none */
    sampling_params sampling;

    int32_t *tokens;       /* (cap) prompt, outputs, maybe one pending slot */
    int32_t n_tokens;      /* including the pending slot */
    int32_t cap;
    bool pending;          /* tokens[n_tokens-1] is sampled but not yet known */
    int32_t out_planned;   /* outputs sampled or being sampled */

    int32_t *out_ids;      /* (max_tokens) outputs known so far */
    int32_t num_out;

    int32_t kv_sched;      /* tokens whose K/V is computed or in a launched step */
    int32_t kv_done;       /* tokens whose K/V is computed */
    int32_t *pages;        /* (page_cap) page table */
    int32_t num_pages;
    int32_t page_cap;
    int32_t num_cache_pages; /* leading pages owned by the cache, locked by match */
    cache_seq match;
    bool locked;
    bool no_match;         /* every row computed: its prefix is never matched in the
                              cache (prompt logits need each row) */

    int64_t admit_seq;     /* order of (re)admission: larger = newer */
    int32_t cached_tokens; /* matched at first admission */
    bool admitted_once;
    int32_t num_preemptions;
    char *error;           /* finished with an error (malloc'd message) */
} sched_req;

/* One request's share of a step: rows [start, start + rows) of its tokens. */
typedef struct sched_entry {
    sched_req *r;
    int32_t start;
    int32_t rows;
    bool sample;           /* rows end at the token array's end: sample one */
    int32_t sample_index;  /* index of the output being sampled */
} sched_entry;

typedef struct sched_plan {
    sched_entry *e;
    int32_t n, cap;
    int32_t num_tokens;    /* sum of rows, <= the token budget */
    int32_t num_prefill_rows;
    int32_t num_admitted;
} sched_plan;

typedef struct scheduler_config {
    sched_policy policy;
    int32_t max_num_batched_tokens; /* token budget per step, >= 1 */
    int32_t max_running;            /* >= 1 */
    int32_t lpm_queue_limit;        /* lpm/dfs-weight fall back to fcfs above; <= 0: 128 */
    uint64_t seed;                  /* random policy */
    bool insert_unfinished;         /* insert prefilled pages before finish */
    int32_t dedup_tokens;           /* a waiting request sharing at least this many
                                       uncached tokens with one admitted in the same step
                                       waits a step (0: off; needs insert_unfinished) */
} scheduler_config;

typedef struct scheduler {
    scheduler_config cfg;
    cache *cache;
    page_pool *pool;
    sched_req **waiting; int32_t num_waiting, waiting_cap;
    sched_req **running; int32_t num_running, running_cap;
    sched_req **finished; int32_t num_finished, finished_cap; /* drained by the engine */
    int64_t admit_counter;
    uint64_t rng;
    uint64_t num_preemptions;
    uint64_t num_steps;
    /* scratch */
    int32_t *order; int32_t *keys; int32_t scratch_cap;
} scheduler;

/* Parse "fcfs" | "lpm" | "dfs-weight" | "random". */
/* Their names, NULL-terminated, in sched_policy order (option choices, lists). */
extern const char *const sched_policy_names[];
/* NULL: the default (fcfs). RKV_EINVAL for an unknown name. */
rkv_status sched_policy_parse(const char *name, sched_policy *out);
const char *sched_policy_name(sched_policy p);

rkv_status scheduler_init(scheduler *s, const scheduler_config *cfg, cache *c, page_pool *pool);
/* Unlocks and frees whatever requests still hold; the requests stay the caller's. */
void scheduler_destroy(scheduler *s);

/* Queue a request (state FUTURE or new) at the back of the waiting queue. */
rkv_status scheduler_add(scheduler *s, sched_req *r);

/* Plan one step into plan (cleared first). allow_preempt = false (overlap
 * planning while the previous step is in flight) stops at a page shortage
 * instead of preempting. An empty plan with work queued means: nothing fits
 * now. */
rkv_status scheduler_schedule(scheduler *s, sched_plan *plan, bool allow_preempt, char *err,
                              size_t errlen);

/* Apply a finished step: tokens[i] is the sampled token of plan entry i (for
 * entries with sample). Entries whose request finished meanwhile are skipped.
 * Finished requests are appended to s->finished. */
rkv_status scheduler_commit(scheduler *s, const sched_plan *plan, const int32_t *tokens,
                            char *err, size_t errlen);

/* Drop plan entries whose request is no longer running (finished between
 * planning and launch in overlap mode). */
void sched_plan_compact(sched_plan *plan);
void sched_plan_free(sched_plan *plan);

/* Finish a request with an error before it ever ran (never fits). */
rkv_status scheduler_fail(scheduler *s, sched_req *r, const char *msg);

/* Finish a waiting or running request now with msg as its error (a client
 * cancelled it). A running request's committed full pages are inserted into
 * the cache as at a normal finish; its own pages are freed, its match
 * unlocked. Entries of a plan in flight that name it are skipped at commit. */
rkv_status scheduler_cancel(scheduler *s, sched_req *r, const char *msg, char *err,
                            size_t errlen);

/* cache_check + page_pool_check + every INFLIGHT page held by one running request. */
rkv_status scheduler_check(const scheduler *s, char *err, size_t errlen);

/* Order the waiting queue as the policy would (exposed for tests): writes
 * num_waiting indices into s->waiting to out. */
rkv_status scheduler_policy_order(scheduler *s, int32_t *out);

static inline bool scheduler_idle(const scheduler *s)
{ return s->num_waiting == 0 && s->num_running == 0; }

void sched_req_free(sched_req *r);

#endif
