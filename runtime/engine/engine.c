/* engine.c - see engine.h. */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_tier.h"
#include "engine_clock.h"
#include "page_pool.h"
#include "scheduler.h"
#include "rkv_core.h"

/* The step loops, in the order of the help ("sync" is the default). */
const char *const engine_schedule_names[] = {"sync", "overlap", NULL};

/* The phases of a step, in the order both loops run them (engine_phase). */
const char *const engine_phase_names[] = {"schedule", "launch", "collect", "commit", NULL};

typedef struct eng_req {
    sched_req s;
    double arrival;
    double first_token_time; /* < 0: none yet */
    double sched_time;       /* its first step's launch; < 0: none yet */
    double finish_time;
    bool reported;
    float *logits;           /* (max_tokens, V) with keep_logits */
    float *prompt_logits;    /* (prompt_len, V) with engine_request.prompt_logits */
} eng_req;

struct engine {
    engine_config cfg;
    backend *be;
    page_pool pool;
    cache *cache;
    scheduler sched;
    bool overlap;
    bool async;          /* overlap through the backend's submit/collect */
    bool submitted;      /* async: plans[cur] is submitted, not yet collected */
    bool started;        /* engine_step has run */

    eng_req **reqs;
    int64_t num_reqs, reqs_cap;
    /* Not yet arrived, sorted by arrival (stable): indices into reqs. */
    int64_t *future;
    int64_t future_head, num_future, future_cap;

    /* Two plans: the one in flight (overlap) and the one being built. */
    sched_plan plans[2];
    int cur;              /* index of the plan in flight */
    bool inflight;
    double inflight_end;  /* modelled time its GPU work ends */
    int32_t *out_tokens[2];
    int32_t out_cap[2];
    float *out_logits[2];    /* (plan n, V) with keep_logits */
    int64_t logits_cap[2];

    /* batch buffers */
    int32_t *token_ids, *positions, *slot_mapping;
    int32_t tok_cap;
    int32_t *q_starts, *prefix_lens, *sample_rows, *sample_steps;
    sampling_params *sampling;
    int32_t seq_cap;
    int32_t *page_table;
    int64_t pt_cap;
    float **row_logits;      /* (rl_cap) fwd_batch.row_logits */
    int32_t *row_logits_n;
    int32_t rl_cap;

    engine_clock clock;
    int64_t num_finished, num_errors;
    int64_t steps, batched_tokens, max_step_tokens, output_tokens;
    int64_t prompt_tokens, cached_tokens;
    double sched_cpu, model_seconds;
    int empty_steps;
    /* Injected host cost (cfg.host_step_s, host_token_s): the cache's
     * matched + inserted tokens already charged, and the seconds charged. */
    uint64_t touched_charged;
    double injected;

    engine_finish_fn on_finish;
    void *on_finish_ctx;

    /* engine_forget'en requests a step in flight still names: freed later. */
    int64_t *forget;
    int64_t num_forget, forget_cap;

    double phase_cpu[ENGINE_NUM_PHASES]; /* thread CPU per step phase, summed */

    /* The batch in the buffers above, when it was decode-only (one sampled
     * row per sequence, no prompt logits) and its forward succeeded: which
     * plan, its requests in order, its page table's width and the
     * scheduler's preemption count then. A next plan of the same requests,
     * each one row further, is that batch moved by one row (batch_move: a
     * page appended where a row starts one), not rebuilt from every page of
     * every sequence. RKV_REBUILD_BATCHES=1 turns it off. */
    bool batch_decode;
    int batch_k;
    sched_req **batch_reqs;
    int32_t batch_n, batch_reqs_cap, batch_maxp;
    uint64_t batch_preempts;
    int64_t batch_reused;   /* steps launched from the moved batch */
    int64_t step_calls;     /* engine_step / engine_step_until calls */
    int64_t steps_quiet;    /* quiet steps engine_step_until took beyond its until */
};

/* The host CPU clock as the engine's clock reads it: not at all under a
 * fixed modelled clock when cfg.unmeasured_sched says nobody reports it
 * (engine_clock.h).
 * A macro so the step functions (each holds its engine as e) stay as they
 * are. */
#define cpu_now() engine_clock_host_cpu(&e->clock)

/* A switch in the environment: set, not empty and not "0". */
static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

void engine_config_default(engine_config *c)
{
    memset(c, 0, sizeof *c);
    c->backend = "cpu";
    c->backend_cfg.page_size = 16;
    c->backend_cfg.seed = 0;
    c->cache_cfg.kind = "radix";
    c->policy = "fcfs";
    c->schedule = "sync";
    c->max_num_batched_tokens = 8192;
    c->max_running = 256;
    c->lpm_queue_limit = 128;
    /* The switch is in the environment so that every driver (run, the
     * replicas, the benches) can be compared against whole builds without
     * an option of its own. */
    c->rebuild_batches = env_on("RKV_REBUILD_BATCHES");
    c->step_once = env_on("RKV_STEP_ONCE");
}

static double now(const engine *e) { return engine_clock_now(&e->clock); }

/* The spill tier moves pages through the backend. */
static rkv_status tier_read(void *ctx, int32_t page, void *dst)
{
    backend *b = ctx;
    return b->ops->read_page(b, page, dst);
}

static rkv_status tier_write(void *ctx, int32_t page, const void *src)
{
    backend *b = ctx;
    return b->ops->write_page(b, page, src);
}

static rkv_status wrap_tier(engine *e, const tier_config *tc, char *err, size_t errlen)
{
    backend *b = e->be;
    tier_mover mv = {b, 0, tier_read, tier_write};
    if (!b->ops->page_bytes || !b->ops->read_page || !b->ops->write_page
        || b->ops->page_bytes(b, &mv.page_bytes) != RKV_OK) {
        snprintf(err, errlen, "engine: the %s backend cannot move KV pages to a spill tier", b->ops->name);
        return RKV_ENOTSUP;
    }
    cache *w = NULL;
    rkv_status st = cache_tier_wrap(e->cache, tc, &mv, &w, err, errlen);
    if (st == RKV_OK) e->cache = w;
    return st;
}

rkv_status engine_create_with_backend(const engine_config *cfg_in, backend *b, engine **out,
                                      char *err, size_t errlen)
{
    *out = NULL;
    engine_config cfg = *cfg_in;
    if (!cfg.policy) cfg.policy = "fcfs";
    if (!cfg.schedule) cfg.schedule = engine_schedule_names[0];
    sched_policy pol;
    if (sched_policy_parse(cfg.policy, &pol)) {
        char names[128];
        snprintf(err, errlen, "engine: unknown policy '%s' (%s)", cfg.policy,
                 rkv_join_names(names, sizeof names, sched_policy_names));
        backend_destroy(b);
        return RKV_EINVAL;
    }
    if (strcmp(cfg.schedule, engine_schedule_names[0]) && strcmp(cfg.schedule, engine_schedule_names[1])) {
        snprintf(err, errlen, "engine: unknown schedule '%s' (sync, overlap)", cfg.schedule);
        backend_destroy(b);
        return RKV_EINVAL;
    }
    if (cfg.max_num_batched_tokens < 1 || cfg.max_running < 1) {
        snprintf(err, errlen, "engine: max_num_batched_tokens (%d) and max_running (%d) must be >= 1",
                 cfg.max_num_batched_tokens, cfg.max_running);
        backend_destroy(b);
        return RKV_EINVAL;
    }
    if (b->num_pages > INT32_MAX || b->num_pages < 1) {
        snprintf(err, errlen, "engine: backend has %lld KV pages", (long long)b->num_pages);
        backend_destroy(b);
        return RKV_EINVAL;
    }
    if (!(cfg.host_step_s >= 0 && cfg.host_step_s < 1e6) || !(cfg.host_token_s >= 0 && cfg.host_token_s < 1e6)) {
        snprintf(err, errlen, "engine: injected host time per step (%g s) and per cache token (%g s)"
                 " must be finite and >= 0", cfg.host_step_s, cfg.host_token_s);
        backend_destroy(b);
        return RKV_EINVAL;
    }
    if ((cfg.host_step_s > 0 || cfg.host_token_s > 0) && !(b->ops->caps & BACKEND_CAP_MODELLED_TIME)) {
        snprintf(err, errlen, "engine: injected host time needs a modelled clock (the sim backend),"
                 " not the %s backend, whose clock is wall time", b->ops->name);
        backend_destroy(b);
        return RKV_EINVAL;
    }
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        backend_destroy(b);
        return RKV_ENOMEM;
    }
    e->cfg = cfg;
    e->be = b;
    engine_clock_init(&e->clock, (b->ops->caps & BACKEND_CAP_MODELLED_TIME) != 0,
                      cfg.fixed_clock);
    e->clock.unmeasured = cfg.unmeasured_sched;
    e->overlap = !strcmp(cfg.schedule, engine_schedule_names[1]);
    /* collect() returns no logits, so keep_logits stays on forward(). */
    e->async = e->overlap && b->ops->submit && b->ops->collect && !cfg.keep_logits;
    rkv_status st = page_pool_init(&e->pool, (int32_t)b->num_pages, b->page_size);
    if (st) {
        const long long pages = (long long)b->num_pages; /* read before the backend goes */
        engine_destroy(e);
        return rkv_fail(st, err, errlen, "engine: page pool of %lld pages: %s", pages,
                        rkv_status_str(st));
    }
    st = cache_create(&cfg.cache_cfg, &e->pool, &e->cache, err, errlen);
    if (st == RKV_OK && cfg.tier) st = wrap_tier(e, cfg.tier, err, errlen);
    if (st) {
        engine_destroy(e);
        return st;
    }
    scheduler_config sc = {
        .policy = pol,
        .max_num_batched_tokens = cfg.max_num_batched_tokens,
        .max_running = cfg.max_running,
        .lpm_queue_limit = cfg.lpm_queue_limit,
        .seed = cfg.seed,
        /* Kinds that never reuse gain nothing from early inserts, and may
         * free what they are given at once. */
        .insert_unfinished = cache_can(e->cache, CACHE_CAP_REUSE),
    };
    /* Waiting a step pays only where the prefix will be found in the cache. */
    if (sc.insert_unfinished) sc.dedup_tokens = b->page_size > 32 ? b->page_size : 32;
    if ((st = scheduler_init(&e->sched, &sc, e->cache, &e->pool))) {
        engine_destroy(e);
        return rkv_fail(st, err, errlen, "engine: scheduler");
    }
    engine_clock_start(&e->clock);
    *out = e;
    return RKV_OK;
}

rkv_status engine_create(const engine_config *cfg, engine **out, char *err, size_t errlen)
{
    backend *b = NULL;
    rkv_status st = backend_create(cfg->backend ? cfg->backend : "cpu", &cfg->backend_cfg, &b,
                                   err, errlen);
    if (st) return st;
    return engine_create_with_backend(cfg, b, out, err, errlen);
}

void engine_destroy(engine *e)
{
    if (!e) return;
    if (e->submitted) {
        /* A step still on the device writes into pages: wait for it first. */
        double t;
        e->be->ops->collect(e->be, e->out_tokens[e->cur], &t);
    }
    if (e->sched.pool) scheduler_destroy(&e->sched);
    if (e->cache) cache_destroy(e->cache);
    page_pool_destroy(&e->pool);
    backend_destroy(e->be);
    for (int64_t i = 0; i < e->num_reqs; i++) {
        if (!e->reqs[i]) continue;
        sched_req_free(&e->reqs[i]->s);
        free(e->reqs[i]->logits);
        free(e->reqs[i]->prompt_logits);
        free(e->reqs[i]);
    }
    free(e->reqs);
    free(e->row_logits);
    free(e->row_logits_n);
    free(e->forget);
    free(e->future);
    for (int i = 0; i < 2; i++) {
        sched_plan_free(&e->plans[i]);
        free(e->out_tokens[i]);
        free(e->out_logits[i]);
    }
    free(e->token_ids);
    free(e->positions);
    free(e->slot_mapping);
    free(e->q_starts);
    free(e->prefix_lens);
    free(e->sample_rows);
    free(e->sample_steps);
    free(e->sampling);
    free(e->page_table);
    free(e->batch_reqs);
    free(e);
}

void engine_on_finish(engine *e, engine_finish_fn fn, void *ctx)
{
    e->on_finish = fn;
    e->on_finish_ctx = ctx;
}

backend *engine_backend(engine *e) { return e->be; }
cache *engine_cache(engine *e) { return e->cache; }

rkv_status engine_check(const engine *e, char *err, size_t errlen)
{
    return scheduler_check(&e->sched, err, errlen);
}

/* Record a finished request: timings, counters, the callback. */
static void finish_record(engine *e, eng_req *q, double t)
{
    if (q->reported) return;
    q->reported = true;
    q->finish_time = t;
    e->num_finished++;
    if (q->s.error) e->num_errors++;
    else {
        e->output_tokens += q->s.num_out;
        e->prompt_tokens += q->s.prompt_len;
        e->cached_tokens += q->s.cached_tokens;
    }
    if (e->on_finish) e->on_finish(e->on_finish_ctx, e, q->s.id);
}

static void drain_finished(engine *e, double t)
{
    for (int32_t i = 0; i < e->sched.num_finished; i++)
        finish_record(e, (eng_req *)e->sched.finished[i], t);
    e->sched.num_finished = 0;
}

/* A request the engine can take at all: tokens in the vocabulary, sane
 * sampling and arrival. The message in err names the field. */
static rkv_status check_request(const engine *e, const engine_request *req, char *err,
                                size_t errlen)
{
    if (!req->tokens || req->n_tokens < 1)
        return rkv_fail(RKV_EINVAL, err, errlen, "request has no prompt tokens");
    if (req->max_tokens < 1)
        return rkv_fail(RKV_EINVAL, err, errlen, "max_tokens %d must be >= 1", req->max_tokens);
    if (!(req->arrival >= 0) || isinf(req->arrival))
        return rkv_fail(RKV_EINVAL, err, errlen, "arrival %g must be a finite number >= 0",
                        req->arrival);
    for (int32_t i = 0; i < req->n_tokens; i++)
        if (req->tokens[i] < 0 || req->tokens[i] >= e->be->vocab_size)
            return rkv_fail(RKV_ERANGE, err, errlen,
                            "token %d (%d) is outside the vocabulary [0, %d)", i, req->tokens[i],
                            e->be->vocab_size);
    if (!(req->sampling.temperature >= 0) || !(req->sampling.top_p > 0))
        return rkv_fail(RKV_EINVAL, err, errlen, "temperature must be >= 0 and top_p > 0");
    if (req->prompt_logits && !(e->be->ops->caps & BACKEND_CAP_ROW_LOGITS))
        return rkv_fail(RKV_EINVAL, err, errlen, "prompt_logits: the %s backend computes no "
                        "logits of prompt rows", e->be->ops->name);
    return RKV_OK;
}

/* Can the request ever run? The K/V of prompt + outputs - 1 tokens (the last
 * output is never fed back) must fit the whole pool, and the model's context.
 * false: why in msg. */
static bool fits(const engine *e, const engine_request *req, char *msg, size_t msglen)
{
    int64_t total = (int64_t)req->n_tokens + req->max_tokens;
    int64_t pages = (total - 1 + e->pool.page_size - 1) / e->pool.page_size;
    if (total > e->be->max_context) {
        snprintf(msg, msglen, "prompt + max_tokens = %lld tokens exceeds the model's context of %d",
                 (long long)total, e->be->max_context);
        return false;
    }
    if (pages > e->pool.num_pages) {
        snprintf(msg, msglen, "needs %lld KV pages, the pool has %d", (long long)pages,
                 e->pool.num_pages);
        return false;
    }
    return true;
}

rkv_status engine_check_request(const engine *e, const engine_request *req, char *err,
                                size_t errlen)
{
    rkv_status st = check_request(e, req, err, errlen);
    if (st) return st;
    return fits(e, req, err, errlen) ? RKV_OK : RKV_ENOSPC;
}

/* A new request struct for req, id e->num_reqs (room for prompt, outputs and
 * one pending slot; logits with keep_logits). A request that can never run
 * (fit false) gets room for its prompt only: it finishes at once with an
 * error, and max_tokens 2^31 - 1 must not cost gigabytes first. */
static rkv_status eng_req_new(engine *e, const engine_request *req, bool fit, eng_req **out)
{
    eng_req *q = calloc(1, sizeof *q);
    if (!q) return RKV_ENOMEM;
    sched_req *r = &q->s;
    int32_t outs = fit ? req->max_tokens : 1;
    int64_t total = (int64_t)req->n_tokens + outs;
    r->tokens = malloc(sizeof(int32_t) * (size_t)(total + 1));
    r->out_ids = malloc(sizeof(int32_t) * (size_t)outs);
    cache_seq_init(&r->match, 0, 0);
    if (!r->tokens || !r->out_ids
        || (e->cfg.keep_logits
            && !(q->logits = malloc(sizeof(float) * (size_t)outs
                                    * (size_t)e->be->vocab_size)))
        || (fit && req->prompt_logits
            && !(q->prompt_logits = malloc(sizeof(float) * (size_t)req->n_tokens
                                           * (size_t)e->be->vocab_size)))) {
        sched_req_free(r);
        free(q->logits);
        free(q->prompt_logits);
        free(q);
        return RKV_ENOMEM;
    }
    r->no_match = q->prompt_logits != NULL;
    memcpy(r->tokens, req->tokens, sizeof(int32_t) * (size_t)req->n_tokens);
    r->cap = (int32_t)(total + 1);
    r->n_tokens = r->prompt_len = req->n_tokens;
    r->max_tokens = req->max_tokens;
    r->stop_token = req->stop_token;
    r->ns = req->ns;
    r->priority = req->priority;
    r->sampling = req->sampling;
    r->id = e->num_reqs;
    if (r->sampling.seed == 0)
        r->sampling.seed = rkv_splitmix64(e->cfg.seed ^ rkv_splitmix64((uint64_t)r->id + 1));
    r->state = REQ_FUTURE;
    q->arrival = e->cfg.offline ? 0 : req->arrival;
    q->first_token_time = -1;
    q->sched_time = -1;
    *out = q;
    return RKV_OK;
}

/* Into the arrival-sorted future list, after equal arrivals. */
static rkv_status future_insert(engine *e, const eng_req *q)
{
    rkv_status st = rkv_grow((void **)&e->future, &e->future_cap, e->num_future + 1,
                             sizeof(int64_t));
    if (st) return st;
    int64_t lo = e->future_head, hi = e->num_future;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (e->reqs[e->future[mid]]->arrival <= q->arrival) lo = mid + 1;
        else hi = mid;
    }
    memmove(e->future + lo + 1, e->future + lo, sizeof(int64_t) * (size_t)(e->num_future - lo));
    e->future[lo] = q->s.id;
    e->num_future++;
    return RKV_OK;
}

rkv_status engine_add(engine *e, const engine_request *req, int64_t *id, char *err,
                      size_t errlen)
{
    rkv_status st = check_request(e, req, err, errlen);
    if (st) return st;
    if ((st = rkv_grow((void **)&e->reqs, &e->reqs_cap, e->num_reqs + 1, sizeof(void *))))
        return st;
    char msg[160];
    bool fit = fits(e, req, msg, sizeof msg);
    eng_req *q = NULL;
    if ((st = eng_req_new(e, req, fit, &q))) return st;
    e->reqs[e->num_reqs++] = q;
    *id = q->s.id;

    /* Never fits: accepted, finished at once with the reason. */
    if (fit) return future_insert(e, q);
    if ((st = scheduler_fail(&e->sched, &q->s, msg))) return st;
    q->first_token_time = q->arrival;
    drain_finished(e, q->arrival);
    return RKV_OK;
}

static rkv_status admit_arrivals(engine *e, double t)
{
    while (e->future_head < e->num_future && e->reqs[e->future[e->future_head]]->arrival <= t) {
        rkv_status st = scheduler_add(&e->sched, &e->reqs[e->future[e->future_head]]->s);
        if (st) return st;
        e->future_head++;
    }
    /* Drop the admitted prefix once it is most of the list, so a server
     * that adds requests for days keeps the list at its backlog's size
     * (amortized: each index moves at most once per halving). */
    if (e->future_head >= 64 && e->future_head * 2 >= e->num_future) {
        memmove(e->future, e->future + e->future_head,
                sizeof(int64_t) * (size_t)(e->num_future - e->future_head));
        e->num_future -= e->future_head;
        e->future_head = 0;
    }
    return RKV_OK;
}

/* The batch in the engine's buffers: B sequences, T rows, page tables maxp
 * wide (build_batch writes them whole, batch_move moves them by a row). */
static fwd_batch batch_view(const engine *e, int32_t B, int32_t T, int32_t maxp)
{
    return (fwd_batch){
        .num_seqs = B,
        .num_tokens = T,
        .token_ids = e->token_ids,
        .positions = e->positions,
        .q_starts = e->q_starts,
        .prefix_lens = e->prefix_lens,
        .page_table = e->page_table,
        .max_pages = maxp,
        .slot_mapping = e->slot_mapping,
        .sample_rows = e->sample_rows,
        .sampling = e->sampling,
        .sample_steps = e->sample_steps,
    };
}

/* Flatten a plan into the backend's batch (token ids read now: in overlap
 * mode the pending tokens have just been committed). */
static rkv_status build_batch(engine *e, const sched_plan *plan, fwd_batch *b)
{
    const int32_t P = e->pool.page_size;
    int32_t B = plan->n, T = plan->num_tokens, maxp = 1;
    for (int32_t i = 0; i < B; i++) {
        int32_t np = page_pool_pages_for(&e->pool, plan->e[i].start + plan->e[i].rows);
        if (np > maxp) maxp = np;
    }
    rkv_status st;
    /* Arrays that share one capacity grow together (rkv_grow32_arrays: on
     * failure nothing leaks and a later step retries). */
    void **const tok[] = {(void **)&e->token_ids, (void **)&e->positions, (void **)&e->slot_mapping};
    const size_t tok_elem[] = {sizeof(int32_t), sizeof(int32_t), sizeof(int32_t)};
    if ((st = rkv_grow32_arrays(tok, tok_elem, 3, &e->tok_cap, T))) return st;
    void **const seq[] = {(void **)&e->q_starts, (void **)&e->prefix_lens, (void **)&e->sample_rows,
                          (void **)&e->sample_steps, (void **)&e->sampling};
    const size_t seq_elem[] = {sizeof(int32_t), sizeof(int32_t), sizeof(int32_t), sizeof(int32_t),
                               sizeof(sampling_params)};
    if ((st = rkv_grow32_arrays(seq, seq_elem, 5, &e->seq_cap, B + 1))) return st;
    if ((st = rkv_grow((void **)&e->page_table, &e->pt_cap, (int64_t)B * maxp, sizeof(int32_t))))
        return st;
    bool rows_asked = false;
    for (int32_t i = 0; i < B && !rows_asked; i++)
        rows_asked = ((const eng_req *)plan->e[i].r)->prompt_logits != NULL;
    void **const rl[] = {(void **)&e->row_logits, (void **)&e->row_logits_n};
    const size_t rl_elem[] = {sizeof(float *), sizeof(int32_t)};
    if (rows_asked && (st = rkv_grow32_arrays(rl, rl_elem, 2, &e->rl_cap, B))) return st;
    int32_t row = 0;
    for (int32_t i = 0; i < B; i++) {
        const sched_entry *en = &plan->e[i];
        const sched_req *r = en->r;
        e->q_starts[i] = row;
        e->prefix_lens[i] = en->start;
        int32_t *pt = e->page_table + (size_t)i * maxp;
        int32_t np = page_pool_pages_for(&e->pool, en->start + en->rows);
        memcpy(pt, r->pages, sizeof(int32_t) * (size_t)np);
        for (int32_t k = np; k < maxp; k++) pt[k] = -1;
        for (int32_t j = 0; j < en->rows; j++, row++) {
            int32_t pos = en->start + j;
            e->token_ids[row] = r->tokens[pos];
            e->positions[row] = pos;
            e->slot_mapping[row] = pt[pos / P] * P + pos % P;
        }
        /* Prompt logits: the rows of this step still inside the prompt (a
         * preempted request's rerun also computes its outputs' rows). */
        const eng_req *q = (const eng_req *)r;
        if (rows_asked) {
            bool in_prompt = q->prompt_logits && en->start < r->prompt_len;
            int32_t n = in_prompt ? r->prompt_len - en->start : 0;
            e->row_logits[i] = in_prompt ? q->prompt_logits + (size_t)en->start
                                                              * (size_t)e->be->vocab_size : NULL;
            e->row_logits_n[i] = n < en->rows ? n : en->rows;
        }
        e->sample_rows[i] = en->sample ? row - 1 : -1;
        e->sample_steps[i] = en->sample ? en->sample_index : 0;
        e->sampling[i] = r->sampling;
        /* The penalties and min_tokens read the tokens so far: every
         * output before this one is in r->tokens by now (sync commits first,
         * overlap fills the pending slots before it launches). */
        if (en->sample) {
            e->sampling[i].history = r->tokens;
            e->sampling[i].n_prompt = r->prompt_len;
            e->sampling[i].n_out = en->sample_index;
        }
    }
    e->q_starts[B] = row;
    *b = batch_view(e, B, row, maxp);
    if (rows_asked) {
        b->row_logits = e->row_logits;
        b->row_logits_n = e->row_logits_n;
    }
    return RKV_OK;
}

/* Is plans[k] the batch in the buffers moved by one row (engine.batch_*)?
 * The same requests in the same order, nobody admitted or preempted since
 * (a readmitted request has new pages), each with one sampled row right
 * after the last one, within the buffers' page-table width: then each
 * request's page table is the one the buffers hold, plus the page reserved
 * for the new row when it starts one (pages change only by reserving,
 * preempting, or inserting a multi-row or finished request's pages). A
 * batch of many requests has one at a page boundary on most steps, so a
 * new page is appended, not a reason to rebuild. */
static bool batch_moves(const engine *e, int k, const sched_plan *plan)
{
    if (!e->batch_decode || e->cfg.rebuild_batches || e->batch_k != k || plan->n != e->batch_n
        || plan->num_tokens != plan->n || plan->num_admitted != 0
        || e->sched.num_preemptions != e->batch_preempts)
        return false;
    for (int32_t i = 0; i < plan->n; i++) {
        const sched_entry *en = &plan->e[i];
        if (en->r != e->batch_reqs[i] || en->rows != 1 || !en->sample
            || en->start != e->prefix_lens[i] + 1
            || page_pool_pages_for(&e->pool, en->start + 1) > e->batch_maxp)
            return false;
    }
    return true;
}

/* The batch in the buffers, moved by one row per sequence: what build_batch
 * writes for plan, without copying the unchanged page tables. */
static void batch_move(engine *e, const sched_plan *plan, fwd_batch *b)
{
    const int32_t P = e->pool.page_size, maxp = e->batch_maxp;
    for (int32_t i = 0; i < plan->n; i++) {
        const sched_entry *en = &plan->e[i];
        const sched_req *r = en->r;
        const int32_t pos = en->start;
        e->prefix_lens[i] = pos;
        e->token_ids[i] = r->tokens[pos];
        e->positions[i] = pos;
        int32_t *pt = e->page_table + (size_t)i * maxp;
        if (pos % P == 0) pt[pos / P] = r->pages[pos / P]; /* reserved for this row */
        e->slot_mapping[i] = pt[pos / P] * P + pos % P;
        e->sample_steps[i] = en->sample_index;
        e->sampling[i] = r->sampling;
        e->sampling[i].history = r->tokens;
        e->sampling[i].n_prompt = r->prompt_len;
        e->sampling[i].n_out = en->sample_index;
    }
    *b = batch_view(e, plan->n, plan->n, maxp);
    b->same_pages = 1;
}

/* After plans[k]'s forward succeeded as batch b: may the next step move it? */
static void batch_remember(engine *e, int k, const sched_plan *plan, const fwd_batch *b)
{
    e->batch_decode = false;
    if (e->cfg.rebuild_batches || b->row_logits || b->num_tokens != b->num_seqs) return;
    for (int32_t i = 0; i < plan->n; i++)
        if (!plan->e[i].sample) return;
    /* No memory to remember it: the next step builds whole. */
    if (rkv_grow32((void **)&e->batch_reqs, &e->batch_reqs_cap, plan->n + 1, sizeof *e->batch_reqs))
        return;
    for (int32_t i = 0; i < plan->n; i++) e->batch_reqs[i] = plan->e[i].r;
    e->batch_n = plan->n;
    e->batch_k = k;
    e->batch_maxp = b->max_pages;
    e->batch_preempts = e->sched.num_preemptions;
    e->batch_decode = true;
}

/* Build the batch of plans[k] (scheduler-side CPU work, added to sched_cpu
 * and returned in *prep_cpu) and run it; tokens land in out_tokens[k]. */
static rkv_status launch(engine *e, int k, double *prep_cpu, double *step_seconds, char *err,
                         size_t errlen)
{
    sched_plan *plan = &e->plans[k];
    fwd_batch b;
    /* When each request was first scheduled (vLLM's queue and prefill
     * times split there); a preemption's rerun keeps the first. */
    const double t_sched = now(e);
    for (int32_t i = 0; i < plan->n; i++) {
        eng_req *q = (eng_req *)plan->e[i].r;
        if (q->sched_time < 0) q->sched_time = t_sched;
    }
    double c0 = cpu_now();
    rkv_status st = RKV_OK;
    if (batch_moves(e, k, plan)) {
        batch_move(e, plan, &b);
        e->batch_reused++;
    } else {
        e->batch_decode = false; /* the buffers are rewritten below */
        st = build_batch(e, plan, &b);
    }
    if (st == RKV_OK)
        st = rkv_grow32((void **)&e->out_tokens[k], &e->out_cap[k], plan->n + 1, sizeof(int32_t));
    if (st) return rkv_fail(st, err, errlen, "engine: out of host memory building a batch");
    for (int32_t i = 0; i < plan->n; i++) e->out_tokens[k][i] = -1;
    float *logits = NULL;
    if (e->cfg.keep_logits) {
        st = rkv_grow((void **)&e->out_logits[k], &e->logits_cap[k],
                    (int64_t)(plan->n + 1) * e->be->vocab_size, sizeof(float));
        if (st) return rkv_fail(st, err, errlen, "engine: out of host memory for logits");
        logits = e->out_logits[k];
    }
    *prep_cpu = cpu_now() - c0;
    e->sched_cpu += *prep_cpu;
    *step_seconds = 0;
    if (e->async) st = e->be->ops->submit(e->be, &b);
    else st = e->be->ops->forward(e->be, &b, e->out_tokens[k], logits, step_seconds);
    if (st) {
        e->batch_decode = false;
        snprintf(err, errlen, "engine: %s backend step failed: %s", e->be->ops->name,
                 rkv_status_str(st));
        return st;
    }
    batch_remember(e, k, plan, &b);
    e->steps++;
    e->batched_tokens += b.num_tokens;
    if (b.num_tokens > e->max_step_tokens) e->max_step_tokens = b.num_tokens;
    e->model_seconds += *step_seconds;
    return RKV_OK;
}

/* async: wait for the submitted step plans[cur]; its tokens land in out_tokens[cur]. */
static rkv_status collect(engine *e, char *err, size_t errlen)
{
    double step_s = 0;
    rkv_status st = e->be->ops->collect(e->be, e->out_tokens[e->cur], &step_s);
    e->submitted = false;
    if (st) {
        snprintf(err, errlen, "engine: %s backend step failed: %s", e->be->ops->name,
                 rkv_status_str(st));
        return st;
    }
    e->model_seconds += step_s;
    return RKV_OK;
}

/* The sampled tokens of plans[k] into their requests' pending slots, before
 * the commit proper, so that the next step's batch can read them. */
static void fill_pending(engine *e, int k)
{
    const sched_plan *plan = &e->plans[k];
    for (int32_t i = 0; i < plan->n; i++) {
        sched_req *r = plan->e[i].r;
        if (plan->e[i].sample && r->state == REQ_RUNNING)
            r->tokens[r->prompt_len + plan->e[i].sample_index] = e->out_tokens[k][i];
    }
}

/* Commit plans[k]; first tokens and finishes are stamped at time t. */
static rkv_status commit(engine *e, int k, double t, char *err, size_t errlen)
{
    sched_plan *plan = &e->plans[k];
    if (e->cfg.keep_logits) {
        const int64_t V = e->be->vocab_size;
        for (int32_t i = 0; i < plan->n; i++) {
            const sched_entry *en = &plan->e[i];
            eng_req *q = (eng_req *)en->r;
            if (en->sample && en->r->state == REQ_RUNNING)
                memcpy(q->logits + en->sample_index * V, e->out_logits[k] + i * V,
                       sizeof(float) * (size_t)V);
        }
    }
    rkv_status st = scheduler_commit(&e->sched, plan, e->out_tokens[k], err, errlen);
    if (st) return st;
    for (int32_t i = 0; i < plan->n; i++) {
        eng_req *q = (eng_req *)plan->e[i].r;
        if (q->first_token_time < 0 && q->s.num_out > 0) q->first_token_time = t;
    }
    drain_finished(e, t);
    return RKV_OK;
}

static rkv_status check_accounting(engine *e, char *err, size_t errlen)
{
    char msg[256] = "";
    rkv_status st = scheduler_check(&e->sched, msg, sizeof msg);
    /* The check's own allocation failing says nothing about the pages. */
    if (st == RKV_ENOMEM)
        snprintf(err, errlen, "engine: out of memory checking the page accounting: %s", msg);
    else if (st)
        snprintf(err, errlen, "engine: page accounting broken: %s", msg);
    return st;
}

/* Nothing running, nothing waiting: done, or idle until the next arrival.
 * The accounting check walks the whole pool and tree, so release builds skip
 * it here as after every step (step_done): an engine of many that goes idle
 * between each of its requests paid it once per request. engine_run and
 * engine_check still check at the end in every build. */
static rkv_status step_idle(engine *e, bool *done, char *err, size_t errlen)
{
#ifndef NDEBUG
    rkv_status st = check_accounting(e, err, errlen);
    if (st) return st;
#endif
    if (e->future_head >= e->num_future) {
        *done = true;
        return RKV_OK;
    }
    double next = e->reqs[e->future[e->future_head]]->arrival;
    return admit_arrivals(e, engine_clock_idle_until(&e->clock, next));
}

/* The injected per-token host cost of the cache work done since the last
 * call (cfg.host_token_s per token matched or inserted); counted in
 * e->injected. */
static double injected_tokens(engine *e)
{
    const cache_stats *cs = &e->cache->stats;
    uint64_t touched = cs->matched_tokens + cs->inserted_tokens;
    double s = e->cfg.host_token_s * (double)(touched - e->touched_charged);
    e->touched_charged = touched;
    e->injected += s;
    return s;
}

static rkv_status step_done(engine *e, char *err, size_t errlen)
{
#ifndef NDEBUG
    return check_accounting(e, err, errlen);
#else
    (void)e, (void)err, (void)errlen;
    return RKV_OK;
#endif
}

/* One step as both loops run it: the named phases schedule, launch, collect,
 * commit (engine_phase). Each phase adds its thread CPU to
 * e->phase_cpu[phase]; `host` sums the host work of this step done before
 * its launch, which the modelled clock charges ahead of the launch. */
typedef struct step_state {
    int k;           /* plans[k]: the step being planned and launched */
    bool has_floor;  /* a step was in flight: launch no earlier than floor */
    double floor;
    double host;     /* host CPU before the launch (schedule, and in overlap
                        the commit of the step in flight) */
    double inj;      /* injected host seconds of the cache work planned */
    double step_s;   /* modelled device seconds of the launched step */
    bool empty;      /* the plan is empty: nothing launches */
} step_state;

static double phase_end(engine *e, engine_phase p, double c0)
{
    double c = cpu_now() - c0;
    e->phase_cpu[p] += c;
    return c;
}

/* schedule: plan plans[s->k]. preempt is false while a step is in flight (its
 * rows hold pages; planning beside it never preempts). */
static rkv_status phase_schedule(engine *e, step_state *s, bool preempt, char *err, size_t errlen)
{
    double c0 = cpu_now();
    rkv_status st = scheduler_schedule(&e->sched, &e->plans[s->k], preempt, err, errlen);
    double c = phase_end(e, ENGINE_PHASE_SCHEDULE, c0);
    s->host += c;
    e->sched_cpu += c;
    return st;
}

/* The plan is final: take its injected cost and the tier's load time onto
 * the clock. An empty plan (nothing fits: a preemption just freed pages, or
 * every running request finished in flight) still moves the clock, and
 * repeatedly empty with nothing running means the scheduler is stuck, which
 * is a bug. */
static rkv_status planned(engine *e, step_state *s, char *err, size_t errlen)
{
    s->inj = injected_tokens(e);
    engine_clock_transfer(&e->clock, cache_tier_take_seconds(e->cache));
    s->empty = e->plans[s->k].n == 0;
    if (!s->empty) {
        e->empty_steps = 0;
        return RKV_OK;
    }
    engine_clock_launch(&e->clock, s->host, s->inj, s->has_floor, s->floor);
    if (++e->empty_steps > 2 && e->sched.num_running == 0) {
        snprintf(err, errlen, "engine: %d requests waiting and none can be scheduled",
                 e->sched.num_waiting);
        return RKV_ECORRUPT;
    }
    return RKV_OK;
}

/* launch: build the batch of plans[s->k] and hand it to the backend (forward,
 * or submit when async); it becomes the current plan. The clock launches it
 * after the host work (s->host + batch building, the injected s->inj +
 * host_step_s), not before the floor. The phase's CPU includes the backend
 * call (a synchronous forward's model run on the cpu backend). */
static rkv_status phase_launch(engine *e, step_state *s, char *err, size_t errlen)
{
    double c0 = cpu_now(), prep = 0;
    rkv_status st = launch(e, s->k, &prep, &s->step_s, err, errlen);
    phase_end(e, ENGINE_PHASE_LAUNCH, c0);
    if (st) return st;
    e->cur = s->k;
    e->submitted = e->async;
    e->injected += e->cfg.host_step_s;
    engine_clock_launch(&e->clock, s->host + prep, s->inj + e->cfg.host_step_s, s->has_floor,
                        s->floor);
    return RKV_OK;
}

/* collect: the tokens of the current step exist. Async backends are waited
 * for; otherwise the step ran in launch, and the time its tokens exist is
 * returned in *t (sync: now, after its device time; overlap: the end of the
 * step in flight on a modelled clock). */
static rkv_status phase_collect(engine *e, const step_state *s, bool in_flight, double *t,
                                char *err, size_t errlen)
{
    double c0 = cpu_now();
    rkv_status st = RKV_OK;
    if (e->async && in_flight) st = collect(e, err, errlen);
    else if (!in_flight) engine_clock_device(&e->clock, s->step_s);
    *t = in_flight && e->clock.modelled && !e->async ? e->inflight_end : now(e);
    phase_end(e, ENGINE_PHASE_COLLECT, c0);
    return st;
}

/* commit: plans[k]'s tokens into their requests (finishes stamped at t,
 * inserts, unlocks). Its CPU is returned in *cpu. */
static rkv_status phase_commit(engine *e, int k, double t, double *cpu, char *err, size_t errlen)
{
    double c0 = cpu_now();
    rkv_status st = commit(e, k, t, err, errlen);
    *cpu = phase_end(e, ENGINE_PHASE_COMMIT, c0);
    e->sched_cpu += *cpu;
    return st;
}

/* sync: schedule, launch, collect, commit; the step's tokens exist at its
 * end, and its commit is host time after the device's. */
static rkv_status step_sync(engine *e, char *err, size_t errlen)
{
    step_state s = {.k = e->cur};
    double t = 0, cc = 0;
    rkv_status st = phase_schedule(e, &s, true, err, errlen);
    if (st == RKV_OK) st = planned(e, &s, err, errlen);
    if (st || s.empty) return st;
    if ((st = phase_launch(e, &s, err, errlen))) return st;
    if ((st = phase_collect(e, &s, false, &t, err, errlen))) return st;
    if ((st = phase_commit(e, s.k, t, &cc, err, errlen))) return st;
    engine_clock_host(&e->clock, cc, injected_tokens(e));
    return step_done(e, err, errlen);
}

/* overlap: the same phases, with step n in flight while step n+1 is
 * scheduled (step n's sampled tokens pending), then n collected and
 * committed. What overlaps differs by backend:
 *   async (submit/collect): n+1 launches right after n is collected, its
 *     rows filled with n's tokens, and n's commit (finishes, inserts) runs
 *     beside it on the device. A request that stops in step n computes one
 *     wasted row in n+1, ignored at its commit; its pages are only reused by
 *     steps queued after n+1 on the device.
 *   otherwise: n is committed first and n+1 is compacted (requests that
 *     stopped in n dropped); the host work hides behind n's device time on
 *     the modelled clock (n+1 launches when n ends at the earliest).
 * When n+1's plan is empty (nothing fit without preempting), it is planned
 * again as in sync once n is committed and nothing is in flight. */
static rkv_status step_overlap(engine *e, char *err, size_t errlen)
{
    const bool in_flight = e->inflight;
    const int prev = e->cur;
    step_state s = {.k = in_flight ? prev ^ 1 : prev};
    double t = 0, cc = 0;
    rkv_status st = phase_schedule(e, &s, !in_flight, err, errlen);
    if (st == RKV_OK && in_flight) st = phase_collect(e, &s, true, &t, err, errlen);
    if (st) return st;
    if (in_flight && e->async && e->plans[s.k].n > 0) {
        fill_pending(e, prev);
        if ((st = planned(e, &s, err, errlen))) return st;
        if ((st = phase_launch(e, &s, err, errlen))) return st;
        if ((st = phase_commit(e, prev, now(e), &cc, err, errlen))) return st;
        return step_done(e, err, errlen);
    }
    if (in_flight) {
        if ((st = phase_commit(e, prev, t, &cc, err, errlen))) return st;
        e->inflight = false;
        s.has_floor = !e->async;
        s.floor = t;
        s.host += cc;
        sched_plan_compact(&e->plans[s.k]);
        if (e->plans[s.k].n == 0 && (st = phase_schedule(e, &s, true, err, errlen))) return st;
    }
    if ((st = planned(e, &s, err, errlen)) || s.empty) return st;
    if ((st = phase_launch(e, &s, err, errlen))) return st;
    e->inflight = true;
    e->inflight_end = now(e) + s.step_s;
    return step_done(e, err, errlen);
}

static bool inflight_names(const engine *e, const eng_req *q)
{
    if (!e->inflight) return false;
    const sched_plan *p = &e->plans[e->cur];
    for (int32_t i = 0; i < p->n; i++)
        if (p->e[i].r == &q->s) return true;
    return false;
}

static void forget_now(engine *e, int64_t id)
{
    sched_req_free(&e->reqs[id]->s);
    free(e->reqs[id]->logits);
    free(e->reqs[id]->prompt_logits);
    free(e->reqs[id]);
    e->reqs[id] = NULL;
}

/* Free the forgotten requests no step in flight names any more. */
static void forget_pending(engine *e)
{
    int64_t m = 0;
    for (int64_t i = 0; i < e->num_forget; i++) {
        int64_t id = e->forget[i];
        if (inflight_names(e, e->reqs[id])) e->forget[m++] = id;
        else forget_now(e, id);
    }
    e->num_forget = m;
}

void engine_forget(engine *e, int64_t id)
{
    if (id < 0 || id >= e->num_reqs || !e->reqs[id] || !e->reqs[id]->reported) return;
    for (int64_t i = 0; i < e->num_forget; i++)
        if (e->forget[i] == id) return;
    if (!inflight_names(e, e->reqs[id])) {
        forget_now(e, id);
        return;
    }
    /* Out of memory for the list: keep the request (freed at destroy). */
    if (rkv_grow((void **)&e->forget, &e->forget_cap, e->num_forget + 1, sizeof(int64_t))) return;
    e->forget[e->num_forget++] = id;
}

rkv_status engine_cancel(engine *e, int64_t id, char *err, size_t errlen)
{
    if (id < 0 || id >= e->num_reqs || !e->reqs[id]) return RKV_OK;
    eng_req *q = e->reqs[id];
    if (q->reported || q->s.state == REQ_FINISHED) return RKV_OK;
    rkv_status st;
    if (q->s.state == REQ_FUTURE) {
        for (int64_t i = e->future_head; i < e->num_future; i++) {
            if (e->future[i] != id) continue;
            memmove(e->future + i, e->future + i + 1,
                    sizeof(int64_t) * (size_t)(e->num_future - i - 1));
            e->num_future--;
            break;
        }
        st = scheduler_fail(&e->sched, &q->s, "cancelled");
    } else {
        st = scheduler_cancel(&e->sched, &q->s, "cancelled", err, errlen);
    }
    if (st) return st;
    drain_finished(e, now(e));
    return RKV_OK;
}

/* One step (engine_step without counting the call). */
static rkv_status step_one(engine *e, bool *done, char *err, size_t errlen)
{
    *done = false;
    if (!e->started) {
        /* Wall clocks start with the first step, not at creation: loading a
         * trace is not serving time. */
        e->started = true;
        engine_clock_start(&e->clock);
    }
    forget_pending(e);
    rkv_status st = admit_arrivals(e, now(e));
    if (st) return st;
    if (!e->inflight && scheduler_idle(&e->sched)) return step_idle(e, done, err, errlen);
    return e->overlap ? step_overlap(e, err, errlen) : step_sync(e, err, errlen);
}

rkv_status engine_step(engine *e, bool *done, char *err, size_t errlen)
{
    e->step_calls++;
    return step_one(e, done, err, errlen);
}

/* Is the next step quiet (engine_step_until): a stable decode step that
 * nobody outside the engine sees? Every running request decodes one row
 * (none waiting, none arriving by now; the budget holds them all), can not
 * finish in it (no stop token, and outputs to go after this one), and the
 * pages of the rows that start one are free (no eviction, no preemption, so
 * no request fails for lack of pages). */
static bool next_step_quiet(const engine *e)
{
    const scheduler *s = &e->sched;
    if (e->overlap || s->num_waiting || s->num_running == 0
        || s->num_running > e->cfg.max_num_batched_tokens)
        return false;
    if (e->future_head < e->num_future && e->reqs[e->future[e->future_head]]->arrival <= now(e))
        return false;
    int32_t need = 0;
    for (int32_t i = 0; i < s->num_running; i++) {
        const sched_req *r = s->running[i];
        if (r->stop_token >= 0 || r->out_planned + 1 >= r->max_tokens
            || r->n_tokens - r->kv_sched != 1)
            return false;
        need += page_pool_pages_for(&e->pool, r->kv_sched + 1) > r->num_pages;
    }
    return need <= page_pool_num_free(&e->pool);
}

rkv_status engine_step_until(engine *e, const engine_horizon *h, bool *done, int64_t *steps,
                             char *err, size_t errlen)
{
    e->step_calls++;
    *steps = 0;
    for (;;) {
        const int64_t finished = e->num_finished;
        rkv_status st = step_one(e, done, err, errlen);
        ++*steps;
        if (st || *done || e->num_finished != finished || e->cfg.step_once
            || *steps >= h->max_steps)
            return st;
        const double t = now(e);
        if (t < h->until || (h->inclusive && t == h->until)) continue;
        if (!(t < h->quiet_until) || !next_step_quiet(e)) return RKV_OK;
        e->steps_quiet++;
    }
}

rkv_status engine_run(engine *e, char *err, size_t errlen)
{
    bool done = false;
    while (!done) {
        rkv_status st = engine_step(e, &done, err, errlen);
        if (st) return st;
    }
    return check_accounting(e, err, errlen);
}

rkv_status engine_result_get(const engine *e, int64_t id, engine_result *out)
{
    if (id < 0 || id >= e->num_reqs || !e->reqs[id]) return RKV_EINVAL;
    const eng_req *q = e->reqs[id];
    const sched_req *r = &q->s;
    memset(out, 0, sizeof *out);
    out->finished = q->reported;
    out->error = r->error;
    out->output_ids = r->out_ids;
    out->num_output = r->num_out;
    out->logits = q->logits;
    out->prompt_logits = q->prompt_logits;
    out->prompt_tokens = r->prompt_len;
    out->cached_tokens = r->cached_tokens;
    out->num_preemptions = r->num_preemptions;
    out->arrival = q->arrival;
    out->first_token_time = q->first_token_time;
    out->scheduled_time = q->sched_time;
    out->finish_time = q->finish_time;
    if (q->reported) {
        out->ttft = q->first_token_time - q->arrival;
        out->latency = q->finish_time - q->arrival;
        out->tpot = r->num_out > 1 ? (q->finish_time - q->first_token_time) / (r->num_out - 1) : 0;
    }
    return RKV_OK;
}

double engine_now(const engine *e) { return now(e); }

void engine_get_stats(const engine *e, engine_stats *out)
{
    memset(out, 0, sizeof *out);
    out->num_requests = e->num_reqs;
    out->num_finished = e->num_finished;
    out->num_errors = e->num_errors;
    out->steps = e->steps;
    out->batched_tokens = e->batched_tokens;
    out->prompt_tokens = e->prompt_tokens;
    out->cached_tokens = e->cached_tokens;
    out->output_tokens = e->output_tokens;
    out->preemptions = (int64_t)e->sched.num_preemptions;
    out->max_step_tokens = e->max_step_tokens;
    out->sched_cpu_seconds = e->sched_cpu;
    for (int p = 0; p < ENGINE_NUM_PHASES; p++) out->phase_cpu_seconds[p] = e->phase_cpu[p];
    out->model_seconds = e->model_seconds;
    out->cache_touched_tokens = (int64_t)(e->cache->stats.matched_tokens + e->cache->stats.inserted_tokens);
    out->injected_host_seconds = e->injected;
    out->clock = now(e);
    out->num_pages = e->pool.num_pages;
    out->num_running = e->sched.num_running;
    out->num_waiting = e->sched.num_waiting;
    out->steps_moved = e->batch_reused;
    out->step_calls = e->step_calls;
    out->steps_quiet = e->steps_quiet;
}
