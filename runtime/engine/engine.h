/* engine.h - the serving engine's C API: requests in, tokens and timings out.
 *
 * The engine owns the backend, the page pool, the cache and the scheduler,
 * and every request added (until engine_destroy). One step reads as three
 * calls (see docs/ARCHITECTURE.md, "Data flow of one request"):
 *
 *   engine_step():  scheduler_schedule()  -> plan: who runs which rows, pages
 *                   backend forward()     -> one token per sampling sequence
 *                   scheduler_commit()    -> append, insert, unlock, finish
 *
 * Schedules, one short function each in engine.c (step_sync, step_overlap),
 * both the same named phases (engine_phase: schedule, launch, collect,
 * commit), each timed in thread CPU (engine_stats.phase_cpu_seconds):
 *   sync     schedule, launch, collect, commit, one after another.
 *   overlap  step n+1 is planned while step n is in flight, with step n's
 *            sampled tokens still pending (their slots are reserved, values
 *            filled just before launch). A request that stops on a stop token
 *            in step n is dropped from step n+1's plan; one that reaches
 *            max_tokens is never planned again. Planning in flight never
 *            preempts: when nothing fits, step n is committed first and the
 *            step is planned as in sync. Outputs are identical to sync.
 *            Backends with submit/collect overlap on the device itself:
 *            n+1 is launched (submitted) before n is committed; otherwise
 *            n is collected and committed, then n+1 launched.
 *
 * Time (engine_clock.h). Backends whose step times are modelled
 * (BACKEND_CAP_MODELLED_TIME: sim) run on a modelled clock: a step costs the
 * backend's modelled time, plus the scheduler's measured CPU time in sync
 * mode, or the larger of the two in overlap mode (the CPU work hides behind
 * the GPU's). A configured host cost (host_step_s per step, host_token_s per
 * token the cache matches or inserts) joins the scheduler's time on the
 * modelled clock, also with fixed_clock. Other backends use wall time. Arrival times are honoured: an
 * idle engine jumps to the next arrival (no sleeping). Offline mode submits
 * all at t = 0.
 *
 * Page accounting (free + evictable + protected + in flight = pool, and every
 * in-flight page held by one running request) is checked after every step in
 * builds without NDEBUG and whenever the engine is idle in all builds.
 */
#ifndef RKV_ENGINE_H
#define RKV_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cache.h"
#include "rkv_status.h"

typedef struct engine engine;

typedef struct engine_config {
    const char *backend;            /* "cpu" (default), "sim", "cuda" */
    backend_config backend_cfg;     /* model, weights, page_size, num_pages, gpu_profile... */
    cache_config cache_cfg;         /* kind, eviction policy, hash function */
    const char *policy;             /* "fcfs" (default), "lpm", "dfs-weight", "random" */
    const char *schedule;           /* engine_schedule_names: "sync" (default), "overlap" */
    int32_t max_num_batched_tokens; /* token budget per step (default 8192) */
    int32_t max_running;            /* running requests at most (default 256) */
    int32_t lpm_queue_limit;        /* lpm/dfs-weight act as fcfs above this queue length (128) */
    uint64_t seed;                  /* policy `random`; default per-request sampling seeds */
    bool offline;                   /* ignore arrival times: everything at t = 0 */
    bool fixed_clock;               /* sim: leave measured CPU time out of the clock, so
                                       timings are repeatable (tests) */
    bool unmeasured_sched;          /* with fixed_clock on a modelled clock: do not read
                                       the CPU clock at all (sched_cpu_seconds stays 0);
                                       for drivers that never report it (replicas.h),
                                       where the reads cost a third of a step */
    bool keep_logits;               /* keep each output's logits (V floats; tests) */
    bool rebuild_batches;           /* build every step's batch whole: no stable decode
                                       step reuses the last batch's page table (outputs
                                       are the same either way; tests compare them).
                                       engine_config_default sets it when the
                                       environment has RKV_REBUILD_BATCHES=1 */
    bool step_once;                 /* engine_step_until takes one step per call, as
                                       engine_step (outputs are the same either way;
                                       tests compare them). engine_config_default sets
                                       it when the environment has RKV_STEP_ONCE=1 */
    /* A host cost injected on a modelled clock (sim only; 0: none), counted
     * with fixed_clock too, as scheduler time: sync adds it to each step,
     * overlap hides it behind the step in flight (engine_clock.h). */
    double host_step_s;             /* seconds per launched step */
    double host_token_s;            /* seconds per token the cache matches or inserts
                                       (cache_stats matched_tokens + inserted_tokens) */
    const struct tier_config *tier; /* spill tier under the cache (cache_tier.h); NULL: none.
                                       K/V bytes move through the backend's read_page /
                                       write_page; on sim, load time joins the clock */
} engine_config;

/* Defaults as documented above (backend cpu, cache radix, page size 16). */
void engine_config_default(engine_config *c);

/* The step loops by name, NULL-terminated: "sync" (the default), "overlap". */
extern const char *const engine_schedule_names[];

/* The phases of one step, in order (both schedules run them; overlap runs
 * the collect and commit of the step in flight beside the next one's
 * schedule and launch). */
typedef enum engine_phase {
    ENGINE_PHASE_SCHEDULE, /* plan who runs which rows (scheduler_schedule) */
    ENGINE_PHASE_LAUNCH,   /* build the batch, hand it to the backend (a
                              synchronous forward runs the model here) */
    ENGINE_PHASE_COLLECT,  /* the step's tokens exist (async: wait for them) */
    ENGINE_PHASE_COMMIT,   /* append, insert, unlock, finish (scheduler_commit) */
    ENGINE_NUM_PHASES
} engine_phase;
extern const char *const engine_phase_names[]; /* by engine_phase, NULL-ended */

typedef struct engine_request {
    const int32_t *tokens;   /* (n_tokens) prompt, ids in [0, vocab) */
    int32_t n_tokens;        /* >= 1 */
    int32_t max_tokens;      /* outputs to generate, >= 1 */
    int32_t stop_token;      /* < 0: none */
    sampling_params sampling; /* seed 0: derived from the engine seed and the id */
    double arrival;          /* seconds from the start, >= 0 */
    uint64_t ns;             /* cache namespace (0: default) */
    int32_t priority;        /* eviction priority (the priority policy; 0: default) */
    bool prompt_logits;      /* keep every prompt row's logits (vLLM's prompt_logprobs):
                                the cache's prefix is not matched, as vLLM skips it, so
                                each row is computed; needs a backend with
                                BACKEND_CAP_ROW_LOGITS (else RKV_EINVAL) */
} engine_request;

typedef struct engine_result {
    bool finished;
    const char *error;       /* non-NULL: the request failed (never fits, too long) */
    const int32_t *output_ids; /* (num_output), valid until engine_destroy */
    int32_t num_output;
    const float *logits;     /* (num_output, vocab) with keep_logits, else NULL */
    const float *prompt_logits; /* (prompt_tokens, vocab) with engine_request.prompt_logits:
                                   row t predicts token t + 1 (the last row the first
                                   output); complete once the first output exists */
    int32_t prompt_tokens;
    int32_t cached_tokens;   /* matched at first admission */
    int32_t num_preemptions;
    double arrival, first_token_time, finish_time; /* engine clock, seconds */
    double scheduled_time;   /* engine clock when its first step was launched; < 0: not yet */
    double ttft;             /* first token - arrival */
    double tpot;             /* (finish - first token) / (outputs - 1); 0 for one output */
    double latency;          /* finish - arrival */
} engine_result;

typedef struct engine_stats {
    int64_t num_requests, num_finished, num_errors;
    int64_t steps;
    int64_t batched_tokens;  /* rows computed */
    int64_t prompt_tokens, cached_tokens, output_tokens;
    int64_t preemptions;
    int64_t max_step_tokens; /* largest step (never above the budget) */
    double sched_cpu_seconds; /* scheduling + commit + batch building, summed;
                                 0 with unmeasured_sched (engine_clock_host_cpu) */
    double model_seconds;    /* backend step times, summed */
    double phase_cpu_seconds[ENGINE_NUM_PHASES]; /* thread CPU per phase, summed;
                                 0 with unmeasured_sched */
    int64_t cache_touched_tokens;  /* tokens the cache matched or inserted */
    double injected_host_seconds;  /* host_step_s and host_token_s charged, summed */
    double clock;            /* engine time now */
    int64_t num_pages;
    int64_t num_running, num_waiting; /* now (waiting: arrived, not admitted) */
    int64_t steps_moved;     /* of steps: stable decode steps whose batch was the last
                                one moved by a row (rebuild_batches: 0) */
    int64_t step_calls;      /* engine_step and engine_step_until calls: a driver's
                                events (step_once: one per engine_step call) */
    int64_t steps_quiet;     /* of engine_step_until's steps, the quiet ones taken
                                beyond its until (other engines' steps in between) */
} engine_stats;

/* Create the backend by name and everything around it. Bad names or values:
 * RKV_EINVAL with a message naming the field. */
rkv_status engine_create(const engine_config *cfg, engine **out, char *err, size_t errlen);
/* The same around a backend built by the caller (tests); the engine takes it
 * over and destroys it, also on failure. */
rkv_status engine_create_with_backend(const engine_config *cfg, backend *b, engine **out,
                                      char *err, size_t errlen);
void engine_destroy(engine *e);

/* Add a request; *id is its index (0, 1, 2, ... in call order). Bad fields
 * (empty prompt, token outside the vocabulary, max_tokens < 1, arrival < 0):
 * RKV_EINVAL / RKV_ERANGE with a message, nothing added. A request that can
 * never fit (more pages than the pool, longer than the model's context) is
 * accepted and finishes at once with an error result. */
rkv_status engine_add(engine *e, const engine_request *req, int64_t *id, char *err,
                      size_t errlen);

/* One step. *done = true when every request added so far has finished. */
rkv_status engine_step(engine *e, bool *done, char *err, size_t errlen);

/* Several steps in one call, up to the caller's next event (a driver of
 * many engines: k steps of one engine per pass of its loop, not one).
 *
 *   clock ──[any step]──[any step]── until ──[quiet]──[quiet]── quiet_until
 *            the caller would pick     |      steps nobody outside the engine
 *            this engine again         |      sees, before anything can reach it
 *
 * engine_step runs at least once, then again while the engine is not done,
 * no request finished in the step (its on_finish ran: the caller may act on
 * it, e.g. hand the request over), fewer than max_steps (>= 1) calls were
 * made (a caller checks for signals between calls), and either
 *   - the clock is below h->until (or equal, with h->inclusive): the caller
 *     would step this engine next anyway (every other engine it steps is
 *     later in its order), or
 *   - the next step is quiet and the clock is below h->quiet_until: a stable
 *     decode step (sync; every running request one row, nothing waiting or
 *     arriving by now, the new rows' pages free in the pool, so nothing is
 *     evicted or preempted) in which no request can finish (none has a stop
 *     token, each has outputs to go after this one), and quiet_until the first
 *     time anything outside could reach this engine (an arrival routed to it,
 *     a handoff, another engine's step that could hand it work). Another
 *     engine stepped in between would see nothing of these steps, nor they of
 *     it, so the order does not matter.
 * The steps are the ones engine_step would take, so the outputs, timings and
 * step counts are those of a call per step. With cfg.step_once
 * (RKV_STEP_ONCE=1) it is engine_step: one step per call. *steps: the
 * engine_step calls made. */
typedef struct engine_horizon {
    double until;       /* INFINITY: no bound */
    bool inclusive;
    double quiet_until; /* <= until: no quiet steps beyond until */
    int64_t max_steps;
} engine_horizon;
rkv_status engine_step_until(engine *e, const engine_horizon *h, bool *done, int64_t *steps,
                             char *err, size_t errlen);

/* Called for each request as it finishes (results valid from then on). */
typedef void (*engine_finish_fn)(void *ctx, engine *e, int64_t id);
void engine_on_finish(engine *e, engine_finish_fn fn, void *ctx);

/* Steps until every request has finished, then checks the page accounting. */
rkv_status engine_run(engine *e, char *err, size_t errlen);

rkv_status engine_result_get(const engine *e, int64_t id, engine_result *out);
void engine_get_stats(const engine *e, engine_stats *out);
/* Engine time now (engine_stats.clock without the rest: a multi-engine
 * driver reads it after every step). */
double engine_now(const engine *e);

/* Check a request before engine_add: the same field checks, and whether it
 * can ever fit (prompt + max_tokens within the model's context, their K/V
 * within the pool). engine_add accepts a request that never fits and fails
 * it; a server refuses it up front instead. Reads only what is fixed at
 * creation, so any thread may call it while another steps the engine.
 * RKV_EINVAL / RKV_ERANGE (a field) or RKV_ENOSPC (never fits), with a
 * message. */
rkv_status engine_check_request(const engine *e, const engine_request *req, char *err,
                                size_t errlen);

/* Stop a request that has not finished (a client went away): it finishes at
 * once with the error "cancelled". A running request's computed full pages
 * go to the cache as a finished request's would; everything else it holds
 * goes back to the pool. Finished or unknown ids: no-op. Call between steps. */
rkv_status engine_cancel(engine *e, int64_t id, char *err, size_t errlen);

/* Free a finished request's memory (a server copies its outputs first);
 * engine_result_get then fails for it. Until called, the engine keeps every
 * request for the run's report. A request a step in flight still names is
 * freed after that step. */
void engine_forget(engine *e, int64_t id);

/* For tests and tools. */
backend *engine_backend(engine *e);
cache *engine_cache(engine *e);
/* The page accounting check the engine runs when idle. */
rkv_status engine_check(const engine *e, char *err, size_t errlen);

#endif
