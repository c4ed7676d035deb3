/* test_engine.c - the engine end to end on the sim and cpu backends.
 *
 * The central property: caching is invisible in the outputs. For every cache
 * kind, chunked or not, preempted or not, sync or overlap, each request's
 * tokens equal those of a plain run with cache `none` (and on the cpu
 * backend the logits agree within 1e-4). The sim backend's outputs hash the
 * whole context it finds in the KV pages, so a wrong page shows up there too.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "engine.h"
#include "workloads.h"

typedef struct run_opts {
    const char *backend;
    const char *model;
    const char *kind;
    const char *policy;
    const char *schedule;
    int32_t page_size;
    int64_t num_pages;
    int32_t budget;
    int32_t max_running;
    int32_t stop_token;
    bool keep_logits;
    bool offline;
    bool rebuild;     /* engine_config.rebuild_batches */
    bool until;       /* step by engine_step_until, quiet steps only after the first */
    bool step_once;   /* engine_config.step_once */
} run_opts;

/* The cpu tests run a tiny Qwen2-shaped model (q/k/v biases, GQA 2:1), from
 * a config.json written at start. */
static char tiny_model[256];

static void write_tiny_model(void)
{
    char dir[] = "/tmp/rkv_engine_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(tiny_model, sizeof tiny_model, "%s/config.json", dir);
    FILE *f = fopen(tiny_model, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"model_type\": \"qwen2\", \"vocab_size\": 512, \"hidden_size\": 128,"
          " \"intermediate_size\": 256, \"num_hidden_layers\": 2, \"num_attention_heads\": 2,"
          " \"num_key_value_heads\": 1, \"rope_theta\": 10000.0, \"rms_norm_eps\": 1e-06,"
          " \"tie_word_embeddings\": false, \"max_position_embeddings\": 1024,"
          " \"hidden_act\": \"silu\"}", f);
    fclose(f);
}

static void remove_tiny_model(void)
{
    unlink(tiny_model);
    *strrchr(tiny_model, '/') = 0;
    rmdir(tiny_model);
}

static run_opts defaults(const char *be)
{
    return (run_opts){.backend = be, .model = strcmp(be, "cpu") ? NULL : tiny_model, .kind = "none", .policy = "fcfs", .schedule = "sync",
                      .page_size = 4, .num_pages = 2048, .budget = 8192, .max_running = 64,
                      .stop_token = -1, .offline = true};
}

typedef struct run_out {
    int64_t n;
    int32_t V;
    int32_t **ids;
    int32_t *nout;
    int32_t *cached;
    float **logits;
    double *ttft, *latency;
    char **err;
    engine_stats st;
} run_out;

static void out_free(run_out *o)
{
    for (int64_t i = 0; i < o->n; i++) {
        free(o->ids[i]);
        free(o->err[i]);
        if (o->logits) free(o->logits[i]);
    }
    free(o->ids);
    free(o->nout);
    free(o->cached);
    free(o->logits);
    free(o->ttft);
    free(o->latency);
    free(o->err);
    memset(o, 0, sizeof *o);
}

static engine *make(const run_opts *ro)
{
    engine_config c;
    engine_config_default(&c);
    c.backend = ro->backend;
    c.backend_cfg.model = ro->model;
    c.backend_cfg.page_size = ro->page_size;
    c.backend_cfg.num_pages = ro->num_pages;
    c.backend_cfg.num_threads = 1;
    c.backend_cfg.seed = 7;
    c.cache_cfg.kind = ro->kind;
    c.policy = ro->policy;
    c.schedule = ro->schedule;
    c.max_num_batched_tokens = ro->budget;
    c.max_running = ro->max_running;
    c.keep_logits = ro->keep_logits;
    c.offline = ro->offline;
    c.rebuild_batches = ro->rebuild;
    c.step_once = ro->step_once;
    c.fixed_clock = true;
    c.seed = 3;
    engine *e = NULL;
    char err[512] = "";
    rkv_status st = engine_create(&c, &e, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "engine_create: %s", err);
    return e;
}

static void collect(engine *e, int64_t n, run_out *o)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    o->V = engine_backend(e)->vocab_size;
    o->ids = calloc((size_t)n, sizeof *o->ids);
    o->nout = calloc((size_t)n, sizeof *o->nout);
    o->cached = calloc((size_t)n, sizeof *o->cached);
    o->ttft = calloc((size_t)n, sizeof *o->ttft);
    o->latency = calloc((size_t)n, sizeof *o->latency);
    o->err = calloc((size_t)n, sizeof *o->err);
    o->logits = calloc((size_t)n, sizeof *o->logits);
    for (int64_t i = 0; i < n; i++) {
        engine_result r;
        ck_assert_int_eq(engine_result_get(e, i, &r), RKV_OK);
        ck_assert(r.finished);
        o->nout[i] = r.num_output;
        o->ids[i] = malloc(sizeof(int32_t) * (size_t)(r.num_output + 1));
        memcpy(o->ids[i], r.output_ids, sizeof(int32_t) * (size_t)r.num_output);
        o->cached[i] = r.cached_tokens;
        o->ttft[i] = r.ttft;
        o->latency[i] = r.latency;
        o->err[i] = r.error ? strdup(r.error) : NULL;
        if (r.logits) {
            size_t sz = sizeof(float) * (size_t)r.num_output * (size_t)o->V;
            o->logits[i] = malloc(sz + 1);
            memcpy(o->logits[i], r.logits, sz);
        }
    }
    engine_get_stats(e, &o->st);
}

/* engine_step_until's finishes: each must come in its call's first launched
 * step when the call's until is in the past (every later step is quiet). */
typedef struct until_log {
    int64_t call_start; /* engine_stats.steps when the call began */
    int64_t late;       /* finishes in a later step */
} until_log;

static void until_finish(void *ctx, engine *e, int64_t id)
{
    (void)id;
    until_log *l = ctx;
    engine_stats st;
    engine_get_stats(e, &st);
    if (st.steps > l->call_start + 1) l->late++;
}

/* The run by engine_step_until with until in the past: the first step of
 * each call is any step, the rest quiet ones. */
static rkv_status run_until(engine *e, int64_t *calls, char *err, size_t errlen)
{
    until_log log = {0};
    engine_on_finish(e, until_finish, &log);
    const engine_horizon h = {.until = -INFINITY, .quiet_until = INFINITY, .max_steps = 1 << 20};
    bool done = false;
    rkv_status st = RKV_OK;
    for (*calls = 0; !done && st == RKV_OK; ++*calls) {
        engine_stats es;
        engine_get_stats(e, &es);
        log.call_start = es.steps;
        int64_t steps = 0;
        st = engine_step_until(e, &h, &done, &steps, err, errlen);
        ck_assert_int_ge(steps, 1);
    }
    engine_on_finish(e, NULL, NULL);
    ck_assert_msg(log.late == 0, "%lld requests finished in a quiet step", (long long)log.late);
    return st ? st : engine_check(e, err, errlen);
}

static void run_workload(const run_opts *ro, const workload *w, run_out *o)
{
    engine *e = make(ro);
    char err[512] = "";
    for (int64_t i = 0; i < w->n; i++) {
        const wl_request *q = &w->reqs[i];
        engine_request er = {.tokens = q->tokens, .n_tokens = q->n_tokens,
                             .max_tokens = q->max_tokens, .stop_token = ro->stop_token,
                             .sampling = {.temperature = q->temperature > 0 ? (float)q->temperature : 0,
                                          .top_p = 1.0f, .seed = q->seed > 0 ? (uint64_t)q->seed : 0},
                             .arrival = q->arrival > 0 ? q->arrival : 0};
        int64_t id;
        ck_assert_msg(engine_add(e, &er, &id, err, sizeof err) == RKV_OK, "add: %s", err);
        ck_assert_int_eq(id, i);
    }
    int64_t calls = 0;
    rkv_status st = ro->until ? run_until(e, &calls, err, sizeof err) : engine_run(e, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "engine_run (%s, %s, %s): %s", ro->backend, ro->kind,
                  ro->schedule, err);
    collect(e, w->n, o);
    if (ro->until) ck_assert_int_eq(o->st.step_calls, calls);
    engine_destroy(e);
}

/* Same tokens for every request; logits within tol when both kept them. */
static void assert_same(const run_out *a, const run_out *b, const char *what, double tol)
{
    ck_assert_int_eq(a->n, b->n);
    for (int64_t i = 0; i < a->n; i++) {
        ck_assert_msg(!a->err[i] && !b->err[i], "%s: request %lld failed: %s", what,
                      (long long)i, a->err[i] ? a->err[i] : b->err[i]);
        ck_assert_msg(a->nout[i] == b->nout[i], "%s: request %lld: %d vs %d outputs", what,
                      (long long)i, a->nout[i], b->nout[i]);
        for (int32_t j = 0; j < a->nout[i]; j++)
            ck_assert_msg(a->ids[i][j] == b->ids[i][j], "%s: request %lld output %d: %d vs %d",
                          what, (long long)i, j, a->ids[i][j], b->ids[i][j]);
        if (a->logits[i] && b->logits[i]) {
            double worst = 0;
            for (int64_t k = 0; k < (int64_t)a->nout[i] * a->V; k++) {
                double d = fabs((double)a->logits[i][k] - b->logits[i][k]);
                if (d > worst) worst = d;
            }
            ck_assert_msg(worst <= tol, "%s: request %lld logits differ by %g", what,
                          (long long)i, worst);
        }
    }
}

static void gen_v(workload *w, const char *kind, int32_t num, int32_t L, int32_t O, int32_t S,
                  uint64_t seed, int32_t vocab)
{
    workload_config c;
    workload_config_default(&c);
    c.vocab_size = vocab;
    c.kind = kind;
    c.seed = seed;
    c.num = num;
    c.prompt_len = L;
    c.output_len = O;
    c.shared_len = S;
    c.turns = 3;
    c.branching = 3;
    c.examples = 4;
    c.shots = 2;
    c.depth = 1;
    c.hit_rate = 0.5;
    char err[256];
    ck_assert_msg(workload_generate(&c, w, err, sizeof err) == RKV_OK, "%s", err);
}

static void gen(workload *w, const char *kind, int32_t num, int32_t L, int32_t O, int32_t S,
                uint64_t seed)
{
    gen_v(w, kind, num, L, O, S, seed, 4096);
}

/* Every variation against the plain run (none, sync, unchunked, roomy pool). */
static void invisible(const char *be, const workload *w, const char *name, bool logits)
{
    /* A pool one page above the largest request: never two large ones at once. */
    int32_t small_pages = 0;
    for (int64_t i = 0; i < w->n; i++) {
        int32_t need = (w->reqs[i].n_tokens + w->reqs[i].max_tokens - 1 + 3) / 4 + 1;
        if (need > small_pages) small_pages = need;
    }
    const char *kinds[] = {"radix", "hash", "trie", "hash-nocache", "none"};
    run_opts ro = defaults(be);
    ro.keep_logits = logits;
    run_out ref, o;
    int64_t preemptions = 0;
    run_workload(&ro, w, &ref);
    for (int k = 0; k < 5; k++) {
        char what[128];
        ro = defaults(be);
        ro.keep_logits = logits;
        ro.kind = kinds[k];
        /* one request at a time, so each sees what its predecessors cached */
        ro.max_running = 1;
        run_workload(&ro, w, &o);
        snprintf(what, sizeof what, "%s/%s/%s sequential", be, name, kinds[k]);
        assert_same(&ref, &o, what, 1e-4);
        int64_t cached = 0;
        for (int64_t i = 0; i < o.n; i++) cached += o.cached[i];
        if (k < 3) ck_assert_msg(cached > 0, "%s: nothing was cached", what);
        out_free(&o);

        ro.max_running = 64;
        ro.budget = 7; /* chunked prefill, decodes mixed in */
        ro.schedule = k % 2 ? "overlap" : "sync";
        run_workload(&ro, w, &o);
        snprintf(what, sizeof what, "%s/%s/%s chunked %s", be, name, kinds[k], ro.schedule);
        assert_same(&ref, &o, what, 1e-4);
        out_free(&o);

        ro.budget = 64;
        ro.num_pages = small_pages; /* preempted and recomputed */
        /* sync: planning in flight (overlap) waits for pages rather than preempt */
        ro.schedule = "sync";
        ro.policy = k == 0 ? "lpm" : k == 1 ? "dfs-weight" : k == 2 ? "random" : "fcfs";
        run_workload(&ro, w, &o);
        snprintf(what, sizeof what, "%s/%s/%s small pool %s %s", be, name, kinds[k],
                 ro.schedule, ro.policy);
        assert_same(&ref, &o, what, 1e-4);
        preemptions += o.st.preemptions;
        out_free(&o);
    }
    /* Sharing relieves the pool for the caching kinds; `none` must preempt. */
    ck_assert_msg(preemptions > 0, "%s/%s: the small pool never preempted", be, name);
    out_free(&ref);
}

START_TEST(test_sim_caching_invisible)
{
    workload w;
    gen(&w, "multi-turn", 4, 10, 16, 20, 11);
    invisible("sim", &w, "multi-turn", false);
    workload_free(&w);
    gen(&w, "few-shot", 8, 8, 16, 12, 12);
    invisible("sim", &w, "few-shot", false);
    workload_free(&w);
    gen(&w, "sweep", 8, 40, 40, 1, 13);
    invisible("sim", &w, "sweep", false);
    workload_free(&w);
}
END_TEST

START_TEST(test_cpu_caching_invisible)
{
    workload w;
    write_tiny_model();
    gen_v(&w, "multi-turn", 2, 8, 12, 16, 21, 512);
    invisible("cpu", &w, "multi-turn", true);
    workload_free(&w);
    gen_v(&w, "few-shot", 4, 6, 10, 8, 22, 512);
    invisible("cpu", &w, "few-shot", true);
    workload_free(&w);
    gen_v(&w, "sweep", 4, 24, 16, 1, 23, 512);
    invisible("cpu", &w, "sweep", true);
    workload_free(&w);
    remove_tiny_model();
}
END_TEST

START_TEST(test_sim_deterministic)
{
    workload w;
    gen(&w, "sweep", 16, 50, 8, 1, 5);
    run_opts ro = defaults("sim");
    ro.kind = "radix";
    ro.budget = 64;
    ro.schedule = "overlap";
    run_out a, b;
    run_workload(&ro, &w, &a);
    run_workload(&ro, &w, &b);
    assert_same(&a, &b, "repeat", 0);
    for (int64_t i = 0; i < a.n; i++) {
        ck_assert(a.ttft[i] == b.ttft[i] && a.latency[i] == b.latency[i]);
        ck_assert_int_eq(a.cached[i], b.cached[i]);
        ck_assert(a.ttft[i] > 0 && a.ttft[i] <= a.latency[i]);
    }
    ck_assert(a.st.clock == b.st.clock && a.st.clock > 0);
    ck_assert_int_le(a.st.max_step_tokens, 64);
    out_free(&a);
    out_free(&b);
    workload_free(&w);
}
END_TEST

START_TEST(test_budget_and_too_large)
{
    workload w;
    gen(&w, "sweep", 6, 50, 10, 1, 9);
    /* Request 3 becomes far too long for a pool of 40 pages x 4 tokens. */
    free(w.reqs[3].tokens);
    w.reqs[3].n_tokens = 400;
    w.reqs[3].tokens = calloc(400, sizeof(int32_t));
    run_opts ro = defaults("sim");
    ro.kind = "radix";
    ro.budget = 16;
    ro.num_pages = 40;
    run_out o;
    run_workload(&ro, &w, &o);
    ck_assert_int_le(o.st.max_step_tokens, 16);
    ck_assert_int_eq(o.st.num_errors, 1);
    ck_assert_ptr_nonnull(o.err[3]);
    ck_assert_msg(strstr(o.err[3], "pages"), "message: %s", o.err[3]);
    ck_assert_int_eq(o.nout[3], 0);

    /* The others are unharmed: the same outputs as a run without request 3. */
    workload w2 = w;
    wl_request keep = w.reqs[3];
    memmove(&w.reqs[3], &w.reqs[4], sizeof(wl_request) * 2);
    w2.n = 5;
    run_out o2;
    ro.num_pages = 4096;
    run_workload(&ro, &w2, &o2);
    for (int64_t i = 0, j = 0; i < 6; i++) {
        if (i == 3) continue;
        ck_assert_int_eq(o.nout[i], o2.nout[j]);
        ck_assert_int_eq(memcmp(o.ids[i], o2.ids[j], sizeof(int32_t) * (size_t)o.nout[i]), 0);
        j++;
    }
    memmove(&w.reqs[4], &w.reqs[3], sizeof(wl_request) * 2);
    w.reqs[3] = keep;
    out_free(&o);
    out_free(&o2);
    workload_free(&w);
}
END_TEST

/* The decode-step variants the next two tests run both ways: v 0 plain
 * (4-token pages), 1 a pool of 60 pages (it must preempt), 2 stop token 7;
 * on a multi-turn workload whose requests arrive in threes, 2 ms apart. */
static void decode_workload(workload *w, uint64_t seed)
{
    gen(w, "multi-turn", 6, 10, 40, 12, seed);
    for (int64_t i = 0; i < w->n; i++) w->reqs[i].arrival = 0.002 * (double)(i / 3);
}

static run_opts decode_variant(int v)
{
    run_opts ro = defaults("sim");
    ro.kind = "radix";
    ro.offline = false;
    if (v == 1) ro.num_pages = 60;
    if (v == 2) ro.stop_token = 7;
    return ro;
}

/* Two runs of one variant took the same steps: tokens, times and step
 * statistics equal (the preempting variant did preempt). */
static void assert_same_steps(const run_out *a, const run_out *b, const char *what, int v)
{
    assert_same(a, b, what, 0);
    for (int64_t i = 0; i < a->n; i++)
        ck_assert(a->ttft[i] == b->ttft[i] && a->latency[i] == b->latency[i]);
    ck_assert(a->st.clock == b->st.clock && a->st.model_seconds == b->st.model_seconds);
    ck_assert_int_eq(a->st.steps, b->st.steps);
    ck_assert_int_eq(a->st.batched_tokens, b->st.batched_tokens);
    ck_assert_int_eq(a->st.preemptions, b->st.preemptions);
    if (v == 1) ck_assert_int_gt(a->st.preemptions, 0);
}

/* Stable decode steps move the last batch by a row (engine.c batch_moves);
 * a run that builds every batch whole must give the same tokens, times and
 * step statistics. Long outputs on 4-token pages cross page boundaries; the
 * small pool preempts; the stop token and arrivals end stable runs early. */
START_TEST(test_moved_batches_equal_whole)
{
    workload w;
    decode_workload(&w, 41);
    for (int v = 0; v < 3; v++) {
        run_opts ro = decode_variant(v);
        run_out a, b;
        run_workload(&ro, &w, &a);
        ro.rebuild = true;
        run_workload(&ro, &w, &b);
        assert_same_steps(&a, &b, "moved vs whole batches", v);
        /* The path under test ran, and the switch turns it off. */
        ck_assert_msg(a.st.steps_moved > a.st.steps / 4, "variant %d: %lld of %lld steps moved", v, (long long)a.st.steps_moved, (long long)a.st.steps);
        ck_assert_int_eq(b.st.steps_moved, 0);
        out_free(&a);
        out_free(&b);
    }
    workload_free(&w);
}
END_TEST

/* engine_step_until with until in the past takes, after each call's first
 * step, only quiet steps: stable decode steps in which nothing can finish
 * (run_until checks that no request does). The steps are engine_step's, so
 * tokens, times and step counts equal engine_run's; quiet steps ran (most of
 * a long decode), and step_once turns them off. Variants: page boundaries
 * (4-token pages), a small pool (preemptions), a stop token (no quiet step:
 * any token may end a request), overlap (none either), arrivals throughout. */
START_TEST(test_step_until_equals_steps)
{
    workload w;
    decode_workload(&w, 43);
    for (int v = 0; v < 5; v++) {
        run_opts ro = decode_variant(v);
        if (v == 3) ro.schedule = "overlap";
        run_out a, b;
        run_workload(&ro, &w, &a);
        ro.until = true;
        ro.step_once = v == 4;
        run_workload(&ro, &w, &b);
        assert_same_steps(&a, &b, "engine_step_until vs engine_step", v);
        ck_assert_int_eq(a.st.steps_moved, b.st.steps_moved);
        ck_assert_int_eq(a.st.steps_quiet, 0); /* engine_step takes none */
        if (v == 0) {
            ck_assert_msg(b.st.steps_quiet > b.st.steps / 2, "%lld of %lld steps quiet",
                          (long long)b.st.steps_quiet, (long long)b.st.steps);
            ck_assert_int_lt(b.st.step_calls, b.st.steps / 2);
        } else if (v == 1) {
            /* Fewer: a boundary without a free page ends a run. */
            ck_assert_int_gt(b.st.steps_quiet, 0);
        } else {
            ck_assert_int_eq(b.st.steps_quiet, 0);
        }
        out_free(&a);
        out_free(&b);
    }
    workload_free(&w);
}
END_TEST

START_TEST(test_stop_token_overlap_equals_sync)
{
    workload w;
    gen(&w, "few-shot", 8, 8, 12, 12, 31);
    run_opts ro = defaults("sim");
    ro.kind = "radix";
    run_out plain;
    run_workload(&ro, &w, &plain);
    ro.stop_token = plain.ids[0][2];
    run_out s, ov;
    ro.budget = 9;
    run_workload(&ro, &w, &s);
    ck_assert_int_eq(s.nout[0], 3); /* stops on (and keeps) the stop token */
    ro.schedule = "overlap";
    run_workload(&ro, &w, &ov);
    assert_same(&s, &ov, "overlap vs sync with a stop token", 0);
    ro.num_pages = 20;
    out_free(&ov);
    run_workload(&ro, &w, &ov);
    assert_same(&s, &ov, "overlap vs sync, small pool", 0);
    out_free(&plain);
    out_free(&s);
    out_free(&ov);
    workload_free(&w);
}
END_TEST

START_TEST(test_arrivals_honoured)
{
    int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int offline = 0; offline < 2; offline++) {
        run_opts ro = defaults("sim");
        ro.offline = offline;
        engine *e = make(&ro);
        char err[256];
        for (int i = 0; i < 3; i++) {
            engine_request r = {.tokens = t, .n_tokens = 8, .max_tokens = 4, .stop_token = -1,
                                .sampling = {.top_p = 1}, .arrival = 10.0 * (2 - i)};
            int64_t id;
            ck_assert_int_eq(engine_add(e, &r, &id, err, sizeof err), RKV_OK);
        }
        ck_assert_int_eq(engine_run(e, err, sizeof err), RKV_OK);
        for (int i = 0; i < 3; i++) {
            engine_result r;
            engine_result_get(e, i, &r);
            ck_assert(r.arrival == (offline ? 0 : 10.0 * (2 - i)));
            ck_assert(r.first_token_time > r.arrival);
            ck_assert(r.ttft < 0.5); /* an idle engine starts at once */
        }
        engine_stats st;
        engine_get_stats(e, &st);
        ck_assert(offline ? st.clock < 1 : st.clock > 20);
        engine_destroy(e);
    }
}
END_TEST

START_TEST(test_add_rejects_bad_requests)
{
    run_opts ro = defaults("sim");
    engine *e = make(&ro);
    char err[256];
    int64_t id = -1;
    int32_t t[3] = {1, 2, 4096};
    engine_request r = {.tokens = t, .n_tokens = 3, .max_tokens = 2, .stop_token = -1,
                        .sampling = {.top_p = 1}};
    ck_assert_int_eq(engine_add(e, &r, &id, err, sizeof err), RKV_ERANGE);
    ck_assert_msg(strstr(err, "vocabulary"), "%s", err);
    r.n_tokens = 2;
    r.max_tokens = 0;
    ck_assert_int_eq(engine_add(e, &r, &id, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "max_tokens"), "%s", err);
    r.max_tokens = 2;
    r.arrival = -1;
    ck_assert_int_eq(engine_add(e, &r, &id, err, sizeof err), RKV_EINVAL);
    r.arrival = 0;
    r.n_tokens = 0;
    ck_assert_int_eq(engine_add(e, &r, &id, err, sizeof err), RKV_EINVAL);
    r.n_tokens = 2;
    ck_assert_int_eq(engine_add(e, &r, &id, err, sizeof err), RKV_OK);
    ck_assert_int_eq(id, 0); /* nothing rejected was added */
    /* Longer than the model's context: accepted, fails with a message. */
    int32_t *big = calloc(16384, sizeof(int32_t));
    r.tokens = big;
    r.n_tokens = 16380;
    r.max_tokens = 10;
    ck_assert_int_eq(engine_add(e, &r, &id, err, sizeof err), RKV_OK);
    ck_assert_int_eq(engine_run(e, err, sizeof err), RKV_OK);
    engine_result res;
    engine_result_get(e, 1, &res);
    ck_assert_msg(res.error && strstr(res.error, "context"), "%s", res.error ? res.error : "");
    engine_result_get(e, 0, &res);
    ck_assert_ptr_null(res.error);
    ck_assert_int_eq(res.num_output, 2);
    free(big);
    engine_destroy(e);
}
END_TEST

/* A backend with submit/collect around sim: submit copies the batch (as a GPU
 * backend packs it into pinned memory) and the step runs only at collect, as
 * a device would run it later. The engine's overlap path must give the same
 * outputs as sync, stop tokens and preemption included. */
typedef struct async_sim {
    backend base;
    backend *inner;
    bool pending;
    fwd_batch fb;
    int32_t *buf;
    sampling_params *sp;
} async_sim;

static int32_t *copy_into(int32_t **dst, const int32_t *src, size_t n)
{
    int32_t *d = *dst;
    memcpy(d, src, n * sizeof(int32_t));
    *dst += n;
    return d;
}

static rkv_status as_submit(backend *bb, const fwd_batch *f)
{
    async_sim *a = (async_sim *)bb;
    if (a->pending) return RKV_EINVAL;
    size_t B = (size_t)f->num_seqs, T = (size_t)f->num_tokens;
    free(a->buf);
    free(a->sp);
    a->buf = malloc(sizeof(int32_t) * (4 * T + 5 * B + 1 + B * (size_t)f->max_pages));
    a->sp = malloc(sizeof(sampling_params) * (B + 1));
    int32_t *p = a->buf;
    a->fb = *f;
    a->fb.token_ids = copy_into(&p, f->token_ids, T);
    a->fb.positions = copy_into(&p, f->positions, T);
    a->fb.slot_mapping = copy_into(&p, f->slot_mapping, T);
    a->fb.q_starts = copy_into(&p, f->q_starts, B + 1);
    a->fb.prefix_lens = copy_into(&p, f->prefix_lens, B);
    a->fb.sample_rows = copy_into(&p, f->sample_rows, B);
    a->fb.sample_steps = copy_into(&p, f->sample_steps, B);
    a->fb.page_table = copy_into(&p, f->page_table, B * (size_t)f->max_pages);
    memcpy(a->sp, f->sampling, sizeof(sampling_params) * B);
    a->fb.sampling = a->sp;
    a->pending = true;
    return RKV_OK;
}

static rkv_status as_collect(backend *bb, int32_t *out_tokens, double *step_seconds)
{
    async_sim *a = (async_sim *)bb;
    if (!a->pending) return RKV_EINVAL;
    a->pending = false;
    return a->inner->ops->forward(a->inner, &a->fb, out_tokens, NULL, step_seconds);
}

static rkv_status as_forward(backend *bb, const fwd_batch *f, int32_t *out, float *logits,
                             double *step_seconds)
{
    async_sim *a = (async_sim *)bb;
    if (a->pending) return RKV_EINVAL;
    return a->inner->ops->forward(a->inner, f, out, logits, step_seconds);
}

static void as_destroy(backend *bb)
{
    async_sim *a = (async_sim *)bb;
    backend_destroy(a->inner);
    free(a->buf);
    free(a->sp);
    free(a);
}

static const backend_ops async_sim_ops = {
    .name = "async-sim", .forward = as_forward, .submit = as_submit, .collect = as_collect,
    .destroy = as_destroy,
};

static void run_async(const run_opts *ro, const workload *w, run_out *o)
{
    backend_config bc = {.page_size = ro->page_size, .num_pages = ro->num_pages};
    async_sim *a = calloc(1, sizeof *a);
    char err[512] = "";
    ck_assert_int_eq(backend_create("sim", &bc, &a->inner, err, sizeof err), RKV_OK);
    a->base = *a->inner;
    a->base.ops = &async_sim_ops;
    engine_config c;
    engine_config_default(&c);
    c.cache_cfg.kind = ro->kind;
    c.policy = ro->policy;
    c.schedule = ro->schedule;
    c.max_num_batched_tokens = ro->budget;
    c.max_running = ro->max_running;
    c.offline = true;
    engine *e;
    ck_assert_msg(engine_create_with_backend(&c, &a->base, &e, err, sizeof err) == RKV_OK, "%s",
                  err);
    for (int64_t i = 0; i < w->n; i++) {
        engine_request er = {.tokens = w->reqs[i].tokens, .n_tokens = w->reqs[i].n_tokens,
                             .max_tokens = w->reqs[i].max_tokens, .stop_token = ro->stop_token,
                             .sampling = {.top_p = 1}};
        int64_t id;
        ck_assert_int_eq(engine_add(e, &er, &id, err, sizeof err), RKV_OK);
    }
    ck_assert_msg(engine_run(e, err, sizeof err) == RKV_OK, "%s", err);
    collect(e, w->n, o);
    engine_destroy(e);
}

START_TEST(test_submit_collect_overlap)
{
    workload w;
    gen(&w, "few-shot", 12, 8, 12, 12, 41);
    run_opts ro = defaults("sim");
    ro.kind = "radix";
    run_out ref, o;
    ro.budget = 9;
    run_workload(&ro, &w, &ref);
    ro.stop_token = ref.ids[1][3];
    out_free(&ref);
    run_workload(&ro, &w, &ref); /* sync, with a stop token */
    const char *kinds[] = {"radix", "hash", "none"};
    for (int k = 0; k < 3; k++) {
        ro.kind = kinds[k];
        ro.schedule = "overlap";
        ro.num_pages = 2048;
        run_async(&ro, &w, &o);
        assert_same(&ref, &o, "submit/collect overlap", 0);
        out_free(&o);
        ro.num_pages = 30;
        run_async(&ro, &w, &o);
        assert_same(&ref, &o, "submit/collect overlap, small pool", 0);
        out_free(&o);
    }
    out_free(&ref);
    workload_free(&w);
}
END_TEST

/* Both schedules run the same timed phases: every phase's CPU is counted, and
 * the phases cover what sched_cpu_seconds counts (schedule, batch building,
 * commit), whichever loop ran them. */
START_TEST(test_phase_cpu_cover_sched_cpu)
{
    workload w;
    gen(&w, "few-shot", 12, 8, 12, 12, 43);
    const char *schedules[] = {"sync", "overlap"};
    for (int k = 0; k < 2; k++) {
        run_opts ro = defaults("sim");
        ro.kind = "radix";
        ro.budget = 9;
        ro.schedule = schedules[k];
        run_out o;
        run_workload(&ro, &w, &o);
        double sum = 0;
        for (int p = 0; p < ENGINE_NUM_PHASES; p++) {
            ck_assert_msg(o.st.phase_cpu_seconds[p] >= 0, "%s: phase %s", schedules[k],
                          engine_phase_names[p]);
            sum += o.st.phase_cpu_seconds[p];
        }
        ck_assert_msg(o.st.phase_cpu_seconds[ENGINE_PHASE_SCHEDULE] > 0
                          && o.st.phase_cpu_seconds[ENGINE_PHASE_COMMIT] > 0,
                      "%s: %lld steps and no scheduling or commit time", schedules[k],
                      (long long)o.st.steps);
        ck_assert_msg(sum >= o.st.sched_cpu_seconds * (1 - 1e-9),
                      "%s: phases %.9f s < scheduler CPU %.9f s", schedules[k], sum,
                      o.st.sched_cpu_seconds);
        out_free(&o);
    }
    ck_assert_ptr_null(engine_phase_names[ENGINE_NUM_PHASES]);
    workload_free(&w);
}
END_TEST

/* Prompt logits (vLLM's prompt_logprobs): row t of a request's prompt rows
 * equals the last-row logits of its first t + 1 tokens run on their own,
 * whether its prefix was cached (the match is skipped: cached 0) or its
 * prompt was cut into chunks; a backend that computes no rows refuses. */
static void run_one(engine *e, const int32_t *tok, int32_t n, bool rows, int64_t *id)
{
    char err[256];
    engine_request r = {.tokens = tok, .n_tokens = n, .max_tokens = 2, .stop_token = -1,
                        .sampling = {.top_p = 1}, .prompt_logits = rows};
    ck_assert_msg(engine_add(e, &r, id, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_msg(engine_run(e, err, sizeof err) == RKV_OK, "%s", err);
}

static void assert_rows_close(const float *a, const float *b, int32_t V, const char *what, int t)
{
    for (int32_t v = 0; v < V; v++)
        ck_assert_msg(fabsf(a[v] - b[v]) <= 1e-4f + 1e-4f * fabsf(b[v]),
                      "%s row %d id %d: %g vs %g", what, t, v, (double)a[v], (double)b[v]);
}

START_TEST(test_cpu_prompt_logits)
{
    write_tiny_model();
    enum { N = 23 };
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (i * 37 + 5) % 512;
    run_opts ro = defaults("cpu");
    ro.kind = "radix";
    ro.keep_logits = true;
    engine *e = make(&ro);
    const int32_t V = engine_backend(e)->vocab_size;
    int64_t plain, rows;
    run_one(e, tok, N, false, &plain);
    run_one(e, tok, N, true, &rows);
    engine_result r;
    ck_assert_int_eq(engine_result_get(e, rows, &r), RKV_OK);
    ck_assert_ptr_nonnull(r.prompt_logits);
    ck_assert_int_eq(r.cached_tokens, 0);
    /* the last prompt row is the one that sampled the first output */
    assert_rows_close(r.prompt_logits + (size_t)(N - 1) * V, r.logits, V, "last", N - 1);
    engine_result rp;
    ck_assert_int_eq(engine_result_get(e, plain, &rp), RKV_OK);
    ck_assert_ptr_null(rp.prompt_logits);
    for (int t = 0; t < N - 1; t += 5) {
        int64_t id;
        run_one(e, tok, t + 1, false, &id);
        engine_result rt;
        ck_assert_int_eq(engine_result_get(e, id, &rt), RKV_OK);
        assert_rows_close(r.prompt_logits + (size_t)t * V, rt.logits, V, "prefix", t);
    }
    /* chunks of 5 rows */
    run_opts rc = ro;
    rc.budget = 5;
    engine *ec = make(&rc);
    int64_t cid;
    run_one(ec, tok, N, true, &cid);
    engine_result c;
    ck_assert_int_eq(engine_result_get(ec, cid, &c), RKV_OK);
    for (int t = 0; t < N; t++)
        assert_rows_close(c.prompt_logits + (size_t)t * V, r.prompt_logits + (size_t)t * V, V,
                          "chunked", t);
    engine_destroy(ec);
    engine_destroy(e);
    remove_tiny_model();
    run_opts rs = defaults("sim");
    engine *es = make(&rs);
    char err[256];
    int64_t id;
    engine_request q = {.tokens = tok, .n_tokens = 3, .max_tokens = 2, .stop_token = -1,
                        .sampling = {.top_p = 1}, .prompt_logits = true};
    ck_assert_int_eq(engine_add(es, &q, &id, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "prompt_logits") && strstr(err, "sim"), "%s", err);
    engine_destroy(es);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_add_rejects_bad_requests);
    tcase_add_test(tc, test_arrivals_honoured);
    tcase_add_test(tc, test_sim_deterministic);
    tcase_add_test(tc, test_moved_batches_equal_whole);
    tcase_add_test(tc, test_step_until_equals_steps);
    tcase_add_test(tc, test_budget_and_too_large);
    tcase_add_test(tc, test_stop_token_overlap_equals_sync);
    tcase_add_test(tc, test_sim_caching_invisible);
    tcase_add_test(tc, test_submit_collect_overlap);
    tcase_add_test(tc, test_phase_cpu_cover_sched_cpu);
    suite_add_tcase(s, tc);
    TCase *cpu = tcase_create("cpu");
    tcase_set_timeout(cpu, 240);
    tcase_add_test(cpu, test_cpu_caching_invisible);
    tcase_add_test(cpu, test_cpu_prompt_logits);
    suite_add_tcase(s, cpu);
    return s;
}

int main(void)
{
    return check_run(suite());
}
