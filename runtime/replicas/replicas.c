/* replicas.c - see replicas.h. */
#include "replicas.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_sim.h"
#include "cache.h"
#include "cache_client.h"
#include "cache_pin.h"
#include "cache_tier.h"
#include "page_pool.h"
#include "pin_file.h"
#include "progress.h"
#include "interrupt.h"
#include "rkv_core.h"
#include "router.h"
#include "trace_engine.h"

typedef struct rreq {
    engine_request er;  /* its tokens are owned here */
    char *id_json;
    int32_t replica;
    int64_t eid;
    int32_t predicted; /* -1: no prediction */
} rreq;

typedef struct replica {
    engine *e;
    cache_pins pins;
    bool busy;
    int64_t *req_of; /* (routed) engine id -> index into reqs */
    int64_t req_cap;
} replica;

typedef struct driver {
    const replicas_config *rc;
    replica *r;
    router_load *load; /* (replicas) what the router sees */
    router *rt;
    rreq *reqs;
    int64_t n, cap;
    FILE *out;
    progress prog;
    int64_t done;
    bool interrupted;  /* a signal stopped the run between steps (interrupt.h) */
} driver;

typedef struct fin_ctx { driver *d; int32_t i; } fin_ctx;

static void on_finish(void *vctx, engine *e, int64_t eid)
{
    fin_ctx *fc = vctx;
    driver *d = fc->d;
    replica *rp = &d->r[fc->i];
    d->load[fc->i].outstanding--;
    rreq *q = &d->reqs[rp->req_of[eid]];
    engine_result res;
    engine_result_get(e, eid, &res);
    FILE *f = d->out;
    fprintf(f, "{\"type\":\"request\",\"id\":%s,\"replica\":%d", q->id_json, fc->i);
    if (q->predicted >= 0) fprintf(f, ",\"predicted\":%d", q->predicted);
    if (res.error) {
        fputs(",\"error\":", f);
        rkv_json_string(f, res.error);
        fprintf(f, ",\"prompt_tokens\":%d}\n", res.prompt_tokens);
    } else {
        fprintf(f, ",\"ttft\":%.6f,\"latency\":%.6f,\"prompt_tokens\":%d,\"cached_tokens\":%d,"
                "\"output_tokens\":%d,\"output_ids\":[", res.ttft, res.latency, res.prompt_tokens,
                res.cached_tokens, res.num_output);
        for (int32_t k = 0; k < res.num_output; k++) fprintf(f, k ? ",%d" : "%d", res.output_ids[k]);
        fputs("]}\n", f);
    }
    progress_update(&d->prog, ++d->done);
}

/* Step the busy replica furthest behind while it is behind t (t < 0: until
 * every replica is done). */
static rkv_status advance(driver *d, double t, char *err, size_t errlen)
{
    for (;;) {
        if ((d->interrupted = interrupt_pending() != 0)) return RKV_OK;
        int32_t pick = -1;
        double low = 0;
        for (int32_t i = 0; i < d->rc->replicas; i++) {
            if (!d->r[i].busy) continue;
            engine_stats s;
            engine_get_stats(d->r[i].e, &s);
            if (t >= 0 && s.clock >= t) continue;
            if (pick < 0 || s.clock < low) {
                pick = i;
                low = s.clock;
            }
        }
        if (pick < 0) return RKV_OK;
        bool done = false;
        char why[400] = "";
        rkv_status st = engine_step(d->r[pick].e, &done, why, sizeof why);
        if (st != RKV_OK) {
            snprintf(err, errlen, "replica %d: %s", pick, why[0] ? why : rkv_status_str(st));
            return st;
        }
        if (done) d->r[pick].busy = false;
    }
}

/* One trace request kept for dispatch (trace_engine_load's callback). */
static rkv_status keep_request(void *vctx, const trace_request *tq, const engine_request *er,
                               char *err, size_t errlen)
{
    driver *d = vctx;
    if (rkv_grow((void **)&d->reqs, &d->cap, d->n + 1, sizeof *d->reqs)) goto oom;
    rreq *r = &d->reqs[d->n];
    memset(r, 0, sizeof *r);
    r->er = *er;
    r->eid = -1;
    /* Offline: every request is there at time 0 (arrivals ignored). */
    if (d->rc->engine->offline) r->er.arrival = 0;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)er->n_tokens);
    r->id_json = strdup(tq->id_json ? tq->id_json : "null");
    if (!tokens || !r->id_json) {
        free(tokens);
        free(r->id_json);
        goto oom;
    }
    memcpy(tokens, er->tokens, sizeof(int32_t) * (size_t)er->n_tokens);
    r->er.tokens = tokens;
    d->n++;
    return RKV_OK;
oom:
    snprintf(err, errlen, "out of host memory");
    return RKV_ENOMEM;
}

static int cmp_arrival(const void *a, const void *b, void *ctx)
{
    const rreq *r = ctx;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (r[i].er.arrival != r[j].er.arrival) return r[i].er.arrival < r[j].er.arrival ? -1 : 1;
    return (i > j) - (i < j);
}

static rkv_status summary(driver *d, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    int64_t prompt = 0, cached = 0, outputs = 0, errors = 0, nt = 0, npred = 0, over = 0;
    double t_end = 0, abs_err = 0, pred_prompt = 0;
    double *ttft = malloc(sizeof(double) * (size_t)(d->n + 1));
    if (!ttft) {
        /* Without them the summary's times would be zeros that look measured. */
        snprintf(err, errlen, "out of host memory for the summary's latency percentiles");
        return RKV_ENOMEM;
    }
    for (int64_t k = 0; k < d->n; k++) {
        rreq *q = &d->reqs[k];
        if (q->eid < 0) continue; /* never dispatched (interrupted) */
        engine_result res;
        engine_result_get(d->r[q->replica].e, q->eid, &res);
        if (!res.finished) continue;
        if (res.error) {
            errors++;
            continue;
        }
        prompt += res.prompt_tokens;
        cached += res.cached_tokens;
        outputs += res.num_output;
        if (ttft) ttft[nt++] = res.ttft;
        if (res.finish_time > t_end) t_end = res.finish_time;
        if (q->predicted >= 0) {
            npred++;
            abs_err += fabs((double)q->predicted - res.cached_tokens);
            pred_prompt += res.prompt_tokens;
            over += q->predicted > res.cached_tokens;
        }
    }
    if (ttft) qsort(ttft, (size_t)nt, sizeof(double), rkv_cmp_double);
    double span = t_end > 0 ? t_end : 1e-9;
    double hit = prompt ? (double)cached / (double)prompt : 0;
    FILE *f = d->out;
    fprintf(f, "{\"type\":\"summary\",\"replicas\":%d,\"router\":\"%s\",\"cache\":\"%s\",\"requests\":%lld,"
            "\"errors\":%lld,\"duration\":%.6f,\"requests_per_s\":%.6f,\"output_tokens_per_s\":%.6f,"
            "\"prompt_tokens\":%lld,\"cached_tokens\":%lld,\"hit_rate\":%.6f,\"ttft_p50\":%.6f,"
            "\"ttft_p99\":%.6f,\"per_replica_requests\":[",
            rc->replicas, router_names[rc->router],
            rc->engine->cache_cfg.kind ? rc->engine->cache_cfg.kind : "radix", (long long)d->n,
            (long long)errors, span, (double)(d->n - errors) / span, (double)outputs / span,
            (long long)prompt, (long long)cached, hit, ttft ? rkv_percentile(ttft, nt, 50) : 0,
            ttft ? rkv_percentile(ttft, nt, 99) : 0);
    for (int32_t i = 0; i < rc->replicas; i++) fprintf(f, i ? ",%lld" : "%lld", (long long)d->load[i].routed);
    fputs("],\"per_replica_hit_rate\":[", f);
    for (int32_t i = 0; i < rc->replicas; i++) {
        engine_stats s;
        engine_get_stats(d->r[i].e, &s);
        fprintf(f, i ? ",%.6f" : "%.6f", s.prompt_tokens ? (double)s.cached_tokens / (double)s.prompt_tokens : 0);
    }
    fputc(']', f);
    if (npred)
        fprintf(f, ",\"predicted_requests\":%lld,\"router_abs_error\":%.6f,\"router_overestimates\":%.6f",
                (long long)npred, pred_prompt > 0 ? abs_err / pred_prompt : 0, (double)over / (double)npred);
    /* Every modelled number names the profile that made it (replicas share one). */
    const sim_profile *sp = backend_sim_profile(engine_backend(d->r[0].e));
    if (sp) fprintf(f, ",\"sim_profile\":\"%s\",\"sim_profile_hash\":\"%s\"", sp->id, sp->hash);
    billing_prices def;
    billing_prices_default(&def);
    billing b;
    billing_compute(rc->prices ? rc->prices : &def, prompt, cached, &b);
    billing_print_json(f, rc->prices ? rc->prices : &def, &b);
    /* Spill and remote tiers, summed over replicas (the remote experiment). */
    tier_stats tsum = {0};
    tier_remote_stats rsum = {0};
    bool any_tier = false, any_remote = false;
    double model_s = 0;
    for (int32_t i = 0; i < rc->replicas; i++) {
        engine_stats s;
        engine_get_stats(d->r[i].e, &s);
        model_s += s.model_seconds;
        const tier_stats *ts = cache_tier_get_stats(engine_cache(d->r[i].e));
        const tier_remote_stats *rs = cache_tier_remote_stats(engine_cache(d->r[i].e));
        if (ts) {
            any_tier = true;
            tsum.host_hit_tokens += ts->host_hit_tokens;
            tsum.disk_hit_tokens += ts->disk_hit_tokens;
            tsum.load_seconds += ts->load_seconds;
        }
        if (rs) {
            any_remote = true;
            tier_remote_stats_add(&rsum, rs);
        }
    }
    fprintf(f, ",\"model_seconds\":%.6f", model_s);
    if (any_tier)
        fprintf(f, ",\"host_hit_tokens\":%llu,\"disk_hit_tokens\":%llu,\"tier_load_seconds\":%.6f",
                (unsigned long long)tsum.host_hit_tokens, (unsigned long long)tsum.disk_hit_tokens,
                tsum.load_seconds);
    if (any_remote)
        fprintf(f, ",\"remote_hit_tokens\":%llu,\"remote_stored_pages\":%llu,\"remote_deleted_pages\":%llu"
                ",\"remote_bytes_loaded\":%.0f,\"remote_bytes_stored\":%.0f,\"remote_load_seconds\":%.6f",
                (unsigned long long)rsum.hit_tokens, (unsigned long long)rsum.stored_pages,
                (unsigned long long)rsum.deleted_pages, rsum.bytes_loaded, rsum.bytes_stored,
                rsum.load_seconds);
    cache_sizes sz;
    cache_get_sizes(engine_cache(d->r[0].e), &sz);
    fprintf(f, ",\"pinned_tokens\":%lld", (long long)sz.pinned_tokens); /* in every replica */
    if (d->interrupted) fputs(",\"interrupted\":true", f);
    fputs("}\n", f);
    fprintf(stderr, "  replicas        %d, router %s\n  requests        %lld (%lld errors) in %.3f s\n"
            "  hit rate        %.1f %%, TTFT p50 %.2f ms, p99 %.2f ms\n", rc->replicas,
            router_names[rc->router], (long long)d->n, (long long)errors, span, 100 * hit,
            ttft ? 1e3 * rkv_percentile(ttft, nt, 50) : 0, ttft ? 1e3 * rkv_percentile(ttft, nt, 99) : 0);
    if (npred)
        fprintf(stderr, "  router error    %.1f %% of prompt tokens mispredicted, %.1f %% of requests over\n",
                pred_prompt > 0 ? 100 * abs_err / pred_prompt : 0, 100.0 * (double)over / (double)npred);
    free(ttft);
    return RKV_OK;
}

/* Replica i: its engine (reporting to on_finish through fc) and its pins. */
static rkv_status replica_open(driver *d, int32_t i, fin_ctx *fc, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    replica *rp = &d->r[i];
    rkv_status st = engine_create(rc->engine, &rp->e, err, errlen);
    if (st) return st;
    *fc = (fin_ctx){d, i};
    engine_on_finish(rp->e, on_finish, fc);
    cache_pins_init(&rp->pins);
    if (rc->pin) {
        pin_file_stats ps;
        backend *pb = engine_backend(rp->e);
        char why[400] = "";
        if ((st = pin_file_apply(engine_cache(rp->e), pb, rc->pin, pb->vocab_size, &rp->pins, &ps,
                                 why, sizeof why))) {
            snprintf(err, errlen, "--pin %s", why[0] ? why : rkv_status_str(st));
            return st;
        }
    }
    return RKV_OK;
}

/* The router over the open replicas: cache-aware trees of the replicas' KV
 * tokens unless --router-tokens says otherwise. */
static rkv_status router_open(driver *d, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    backend *be = engine_backend(d->r[0].e);
    int64_t *pages = malloc(sizeof(int64_t) * (size_t)rc->replicas);
    if (!pages) return RKV_ENOMEM;
    for (int32_t i = 0; i < rc->replicas; i++) {
        backend *bi = engine_backend(d->r[i].e);
        pages[i] = rc->approx_tokens > 0 ? (rc->approx_tokens + bi->page_size - 1) / bi->page_size
                                         : bi->num_pages;
    }
    router_config cfg = {
        .kind = rc->router, .replicas = rc->replicas, .balance_threshold = rc->balance_threshold,
        .cache_threshold = rc->cache_threshold, .page_size = be->page_size, .approx_pages = pages,
    };
    rkv_status st = router_create(&cfg, &d->rt, err, errlen);
    free(pages);
    return st;
}

/* Every request in arrival order (order[]): the clock advances to its
 * arrival, the router picks a replica, the replica's engine takes it. */
static rkv_status dispatch(driver *d, const int64_t *order, char *err, size_t errlen)
{
    rkv_status st = RKV_OK;
    for (int64_t j = 0; j < d->n && st == RKV_OK; j++) {
        rreq *q = &d->reqs[order[j]];
        if ((st = advance(d, q->er.arrival, err, errlen)) || d->interrupted) break;
        int32_t i;
        if ((st = router_route(d->rt, q->er.tokens, q->er.n_tokens, j, d->load, &i, &q->predicted,
                               err, errlen)))
            break;
        replica *rp = &d->r[i];
        router_load *ld = &d->load[i];
        if ((st = rkv_grow((void **)&rp->req_of, &rp->req_cap, ld->routed + 1,
                           sizeof *rp->req_of))) {
            snprintf(err, errlen, "replicas: out of host memory");
            break;
        }
        rp->req_of[ld->routed] = order[j];
        q->replica = i;
        ld->outstanding++;
        ld->routed++;
        char why[256] = "";
        if ((st = engine_add(rp->e, &q->er, &q->eid, why, sizeof why))) {
            snprintf(err, errlen, "%s: request %s: %s", d->rc->trace, q->id_json,
                     why[0] ? why : rkv_status_str(st));
            break;
        }
        rp->busy = true;
    }
    if (st == RKV_OK && !d->interrupted) st = advance(d, -1, err, errlen);
    return st;
}

static void driver_free(driver *d)
{
    for (int32_t i = 0; d->r && i < d->rc->replicas; i++) {
        replica *rp = &d->r[i];
        if (rp->e) cache_pins_release(engine_cache(rp->e), &rp->pins);
        cache_pins_free(&rp->pins);
        engine_destroy(rp->e);
        free(rp->req_of);
    }
    for (int64_t k = 0; k < d->n; k++) {
        free((void *)d->reqs[k].er.tokens);
        free(d->reqs[k].id_json);
    }
    router_destroy(d->rt);
    free(d->reqs);
    free(d->load);
    free(d->r);
}

rkv_status replicas_run(const replicas_config *rc, FILE *out, bool *interrupted, char *err,
                        size_t errlen)
{
    *interrupted = false;
    if (rc->replicas < 1) {
        snprintf(err, errlen, "--replicas must be >= 1");
        return RKV_EINVAL;
    }
    driver d = {.rc = rc, .out = out};
    rkv_status st = RKV_OK;
    d.r = calloc((size_t)rc->replicas, sizeof *d.r);
    d.load = calloc((size_t)rc->replicas, sizeof *d.load);
    fin_ctx *fc = calloc((size_t)rc->replicas, sizeof *fc);
    int64_t *order = NULL;
    if (!d.r || !d.load || !fc) {
        st = RKV_ENOMEM;
        goto done;
    }
    for (int32_t i = 0; i < rc->replicas && st == RKV_OK; i++)
        st = replica_open(&d, i, &fc[i], err, errlen);
    if (st || (st = router_open(&d, err, errlen))) goto done;
    fprintf(stderr, "radixkv run: %d replicas of %s; router %s\n", rc->replicas,
            engine_backend(d.r[0].e)->description, router_names[rc->router]);
    if ((st = trace_engine_load(rc->trace, engine_backend(d.r[0].e)->vocab_size,
                                rc->default_max_tokens, keep_request, &d, err, errlen)))
        goto done;
    order = malloc(sizeof(int64_t) * (size_t)(d.n + 1));
    if (!order) {
        st = RKV_ENOMEM;
        goto done;
    }
    for (int64_t k = 0; k < d.n; k++) order[k] = k;
    qsort_r(order, (size_t)d.n, sizeof *order, cmp_arrival, d.reqs);
    progress_start(&d.prog, "run", "requests", d.n, rc->progress);
    st = dispatch(&d, order, err, errlen);
    progress_finish(&d.prog);
    for (int32_t i = 0; st == RKV_OK && !d.interrupted && i < rc->replicas; i++) {
        char why[400] = "";
        if ((st = engine_check(d.r[i].e, why, sizeof why)))
            snprintf(err, errlen, "replica %d: %s", i, why[0] ? why : rkv_status_str(st));
    }
    if (st == RKV_OK) st = summary(&d, err, errlen);
    *interrupted = d.interrupted;
done:
    if (st == RKV_ENOMEM && !err[0]) snprintf(err, errlen, "replicas: out of host memory");
    driver_free(&d);
    free(fc);
    free(order);
    return st;
}
