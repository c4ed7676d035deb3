/* router.c - see router.h. */
#include "router.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cache_client.h"
#include "cache_pin.h"
#include "cache_tier.h"
#include "page_pool.h"
#include "pin_file.h"
#include "progress.h"
#include "trace.h"
#include "rkv_core.h"

const char *const router_names[] = {"round-robin", "least-load", "cache-aware", NULL};

rkv_status router_kind_parse(const char *name, router_kind *out)
{
    for (int i = 0; router_names[i]; i++)
        if (name && !strcmp(name, router_names[i])) {
            *out = (router_kind)i;
            return RKV_OK;
        }
    return RKV_EINVAL;
}

typedef struct rreq {
    int32_t *tokens;
    int32_t n, max_tokens;
    double arrival;
    sampling_params sampling;
    uint64_t ns;       /* cache namespace */
    int32_t priority;  /* eviction priority */
    char *id_json;
    int32_t replica;
    int64_t eid;
    int32_t predicted; /* -1: no prediction */
} rreq;

/* One replica's approximate prefix tree: a radix cache over its own pool. */
typedef struct approx {
    page_pool pool;
    cache *c;
} approx;

typedef struct replica {
    engine *e;
    cache_pins pins;
    approx a;
    int64_t outstanding, routed;
    bool busy;
    int64_t *req_of; /* (routed) engine id -> index into reqs */
    int64_t req_cap;
} replica;

typedef struct driver {
    const replicas_config *rc;
    replica *r;
    rreq *reqs;
    int64_t n, cap;
    FILE *out;
    progress prog;
    int64_t done;
} driver;

typedef struct fin_ctx { driver *d; int32_t i; } fin_ctx;

static void on_finish(void *vctx, engine *e, int64_t eid)
{
    fin_ctx *fc = vctx;
    driver *d = fc->d;
    replica *rp = &d->r[fc->i];
    rp->outstanding--;
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

/* Longest prefix of tokens[0..n) in the approximate tree. */
static int32_t approx_match(approx *a, const int32_t *tokens, int32_t n, uint64_t ns)
{
    cache_match m;
    cache_match_init(&m);
    int32_t len = cache_match_prefix(a->c, tokens, n, ns, &m) == RKV_OK ? m.len : 0;
    cache_match_free(&m);
    return len;
}

/* Remember that tokens went to this replica (LRU room made inside the tree). */
static rkv_status approx_insert(approx *a, const int32_t *tokens, int32_t n, uint64_t ns)
{
    const int32_t P = a->pool.page_size;
    int32_t nb = n / P;
    if (nb < 1) return RKV_OK;
    if (nb > a->pool.num_pages) nb = a->pool.num_pages;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)nb);
    if (!pages) return RKV_ENOMEM;
    cache_match m;
    cache_match_init(&m);
    /* A tree too full of locked entries just forgets this prompt. */
    rkv_status st = cache_client_admit(a->c, tokens, nb * P, ns, nb, &m, pages, NULL);
    if (st == RKV_OK) {
        st = cache_client_commit(a->c, tokens, nb * P, ns, pages, m.num_pages, nb, NULL);
        rkv_status us = cache_client_release(a->c, &m, NULL, 0);
        if (st == RKV_OK) st = us;
    } else if (st == RKV_ENOSPC) {
        st = RKV_OK;
    }
    cache_match_free(&m);
    free(pages);
    return st;
}

/* Fewest outstanding requests; ties: fewest routed so far, then lowest index. */
static int32_t least_loaded(const driver *d)
{
    int32_t best = 0;
    for (int32_t i = 1; i < d->rc->replicas; i++)
        if (d->r[i].outstanding < d->r[best].outstanding
            || (d->r[i].outstanding == d->r[best].outstanding && d->r[i].routed < d->r[best].routed))
            best = i;
    return best;
}

/* The replica whose approximate tree holds the fewest tokens; ties: least loaded. */
static int32_t smallest_tree(const driver *d)
{
    int32_t best = -1;
    int64_t best_tokens = 0;
    for (int32_t i = 0; i < d->rc->replicas; i++) {
        cache_sizes sz;
        cache_get_sizes(d->r[i].a.c, &sz);
        int64_t t = sz.evictable_tokens + sz.protected_tokens;
        if (best < 0 || t < best_tokens
            || (t == best_tokens && (d->r[i].outstanding < d->r[best].outstanding
                                     || (d->r[i].outstanding == d->r[best].outstanding
                                         && d->r[i].routed < d->r[best].routed)))) {
            best = i;
            best_tokens = t;
        }
    }
    return best;
}

static int32_t route(driver *d, rreq *q, int64_t k)
{
    const replicas_config *rc = d->rc;
    q->predicted = -1;
    switch (rc->router) {
    case ROUTER_ROUND_ROBIN: return (int32_t)(k % rc->replicas);
    case ROUTER_LEAST_LOAD: return least_loaded(d);
    case ROUTER_CACHE_AWARE: break;
    }
    int32_t best = -1, best_len = 0, low = least_loaded(d);
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)rc->replicas);
    for (int32_t i = 0; i < rc->replicas; i++) {
        int32_t len = approx_match(&d->r[i].a, q->tokens, q->n - 1, q->ns);
        if (lens) lens[i] = len;
        if (len > best_len || (len == best_len && best >= 0 && len > 0
                               && d->r[i].outstanding < d->r[best].outstanding)) {
            best = i;
            best_len = len;
        }
    }
    int32_t pick = best;
    if (best >= 0 && d->r[best].outstanding - d->r[low].outstanding > rc->balance_threshold)
        pick = low;
    else if (best < 0 || (double)best_len < rc->cache_threshold * (double)q->n)
        pick = smallest_tree(d); /* little to reuse anywhere: grow the emptiest tree */
    q->predicted = lens ? lens[pick] : (pick == best ? best_len : 0);
    free(lens);
    approx_insert(&d->r[pick].a, q->tokens, q->n, q->ns);
    return pick;
}

/* Step the busy replica furthest behind while it is behind t (t < 0: until
 * every replica is done). */
static rkv_status advance(driver *d, double t, char *err, size_t errlen)
{
    for (;;) {
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
        char why[400];
        rkv_status st = engine_step(d->r[pick].e, &done, why, sizeof why);
        if (st != RKV_OK) {
            snprintf(err, errlen, "replica %d: %s", pick, why);
            return st;
        }
        if (done) d->r[pick].busy = false;
    }
}

static rkv_status load_trace(driver *d, int32_t vocab, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    trace_options topt = {.format = TRACE_FORMAT_AUTO, .tokens = TRACE_TOKENS_VOCAB, .vocab_size = vocab,
                          .namespace_name = rc->namespace_name};
    trace_reader *tr = NULL;
    rkv_status st = trace_open(rc->trace, &topt, &tr, err, errlen);
    if (st) return st;
    trace_request q;
    trace_request_init(&q);
    for (;;) {
        bool eof = false;
        if ((st = trace_next(tr, &q, &eof, err, errlen)) || eof) break;
        if (d->n == d->cap) {
            int64_t nc = d->cap ? 2 * d->cap : 256;
            rreq *a = realloc(d->reqs, sizeof *a * (size_t)nc);
            if (!a) { st = RKV_ENOMEM; break; }
            d->reqs = a;
            d->cap = nc;
        }
        rreq *r = &d->reqs[d->n];
        memset(r, 0, sizeof *r);
        r->tokens = malloc(sizeof(int32_t) * (size_t)q.n_tokens);
        r->id_json = strdup(q.id_json ? q.id_json : "null");
        if (!r->tokens || !r->id_json) {
            free(r->tokens);
            free(r->id_json);
            st = RKV_ENOMEM;
            break;
        }
        memcpy(r->tokens, q.tokens, sizeof(int32_t) * (size_t)q.n_tokens);
        r->n = q.n_tokens;
        r->max_tokens = q.max_tokens >= 0 ? q.max_tokens : rc->default_max_tokens;
        r->ns = q.ns;
        r->priority = q.priority;
        r->arrival = rc->engine->offline || q.arrival < 0 ? 0 : q.arrival;
        r->sampling = (sampling_params){
            .temperature = q.temperature >= 0 ? (float)q.temperature : 0.0f,
            .top_k = q.top_k >= 0 ? q.top_k : 0,
            .top_p = q.top_p >= 0 ? (float)q.top_p : 1.0f,
            .seed = q.seed >= 0 ? ((uint64_t)q.seed << 1) | 1 : 0,
        };
        d->n++;
    }
    if (st == RKV_ENOMEM) snprintf(err, errlen, "%s: out of host memory", rc->trace);
    trace_request_free(&q);
    trace_close(tr);
    return st;
}

static int cmp_arrival(const void *a, const void *b, void *ctx)
{
    const rreq *r = ctx;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (r[i].arrival != r[j].arrival) return r[i].arrival < r[j].arrival ? -1 : 1;
    return (i > j) - (i < j);
}

static void summary(driver *d)
{
    const replicas_config *rc = d->rc;
    int64_t prompt = 0, cached = 0, outputs = 0, errors = 0, nt = 0, npred = 0, over = 0;
    double t_end = 0, abs_err = 0, pred_prompt = 0;
    double *ttft = malloc(sizeof(double) * (size_t)(d->n + 1));
    for (int64_t k = 0; k < d->n; k++) {
        rreq *q = &d->reqs[k];
        engine_result res;
        engine_result_get(d->r[q->replica].e, q->eid, &res);
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
    for (int32_t i = 0; i < rc->replicas; i++) fprintf(f, i ? ",%lld" : "%lld", (long long)d->r[i].routed);
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
    fprintf(f, ",\"pinned_tokens\":%lld}\n", (long long)sz.pinned_tokens); /* in every replica */
    fprintf(stderr, "  replicas        %d, router %s\n  requests        %lld (%lld errors) in %.3f s\n"
            "  hit rate        %.1f %%, TTFT p50 %.2f ms, p99 %.2f ms\n", rc->replicas,
            router_names[rc->router], (long long)d->n, (long long)errors, span, 100 * hit,
            ttft ? 1e3 * rkv_percentile(ttft, nt, 50) : 0, ttft ? 1e3 * rkv_percentile(ttft, nt, 99) : 0);
    if (npred)
        fprintf(stderr, "  router error    %.1f %% of prompt tokens mispredicted, %.1f %% of requests over\n",
                pred_prompt > 0 ? 100 * abs_err / pred_prompt : 0, 100.0 * (double)over / (double)npred);
    free(ttft);
}

/* Replica i: its engine (reporting to on_finish through fc), its pins, and
 * for the cache-aware router its approximate tree. */
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
        char why[400];
        if ((st = pin_file_apply(engine_cache(rp->e), pb, rc->pin, pb->vocab_size, &rp->pins, &ps,
                                 why, sizeof why))) {
            snprintf(err, errlen, "--pin %s", why);
            return st;
        }
    }
    if (rc->router != ROUTER_CACHE_AWARE) return RKV_OK;
    backend *be = engine_backend(rp->e);
    int64_t pages = rc->approx_tokens > 0 ? (rc->approx_tokens + be->page_size - 1) / be->page_size
                                          : be->num_pages;
    if (pages > INT32_MAX) pages = INT32_MAX;
    if ((st = page_pool_init(&rp->a.pool, (int32_t)pages, be->page_size)) != RKV_OK
        || (st = cache_create(NULL, &rp->a.pool, &rp->a.c, err, errlen)) != RKV_OK)
        snprintf(err, errlen, "router: approximate tree of replica %d: %s", i, rkv_status_str(st));
    return st;
}

/* Every request in arrival order (order[]): the clock advances to its
 * arrival, the router picks a replica, the replica's engine takes it. */
static rkv_status dispatch(driver *d, const int64_t *order, char *err, size_t errlen)
{
    rkv_status st = RKV_OK;
    for (int64_t j = 0; j < d->n && st == RKV_OK; j++) {
        rreq *q = &d->reqs[order[j]];
        if ((st = advance(d, q->arrival, err, errlen))) break;
        int32_t i = route(d, q, j);
        replica *rp = &d->r[i];
        if ((st = rkv_grow((void **)&rp->req_of, &rp->req_cap, rp->routed + 1,
                           sizeof *rp->req_of)))
            break;
        rp->req_of[rp->routed] = order[j];
        engine_request er = {.tokens = q->tokens, .n_tokens = q->n, .max_tokens = q->max_tokens,
                             .stop_token = -1, .sampling = q->sampling, .arrival = q->arrival,
                             .ns = q->ns, .priority = q->priority};
        q->replica = i;
        rp->outstanding++;
        rp->routed++;
        char why[256];
        if ((st = engine_add(rp->e, &er, &q->eid, why, sizeof why))) {
            snprintf(err, errlen, "%s: request %s: %s", d->rc->trace, q->id_json, why);
            break;
        }
        rp->busy = true;
    }
    if (st == RKV_OK) st = advance(d, -1, err, errlen);
    return st;
}

static void driver_free(driver *d)
{
    for (int32_t i = 0; d->r && i < d->rc->replicas; i++) {
        replica *rp = &d->r[i];
        if (rp->e) cache_pins_release(engine_cache(rp->e), &rp->pins);
        cache_pins_free(&rp->pins);
        engine_destroy(rp->e);
        if (rp->a.c) cache_destroy(rp->a.c);
        if (rp->a.pool.state) page_pool_destroy(&rp->a.pool);
        free(rp->req_of);
    }
    for (int64_t k = 0; k < d->n; k++) {
        free(d->reqs[k].tokens);
        free(d->reqs[k].id_json);
    }
    free(d->reqs);
    free(d->r);
}

rkv_status replicas_run(const replicas_config *rc, FILE *out, char *err, size_t errlen)
{
    if (rc->replicas < 1) {
        snprintf(err, errlen, "--replicas must be >= 1");
        return RKV_EINVAL;
    }
    driver d = {.rc = rc, .out = out};
    rkv_status st = RKV_OK;
    d.r = calloc((size_t)rc->replicas, sizeof *d.r);
    fin_ctx *fc = calloc((size_t)rc->replicas, sizeof *fc);
    int64_t *order = NULL;
    if (!d.r || !fc) {
        st = RKV_ENOMEM;
        goto done;
    }
    for (int32_t i = 0; i < rc->replicas && st == RKV_OK; i++)
        st = replica_open(&d, i, &fc[i], err, errlen);
    if (st) goto done;
    fprintf(stderr, "radixkv run: %d replicas of %s; router %s\n", rc->replicas,
            engine_backend(d.r[0].e)->description, router_names[rc->router]);
    if ((st = load_trace(&d, engine_backend(d.r[0].e)->vocab_size, err, errlen))) goto done;
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
    for (int32_t i = 0; st == RKV_OK && i < rc->replicas; i++) {
        char why[400];
        if ((st = engine_check(d.r[i].e, why, sizeof why))) snprintf(err, errlen, "replica %d: %s", i, why);
    }
    if (st == RKV_OK) summary(&d);
done:
    if (st == RKV_ENOMEM && !err[0]) snprintf(err, errlen, "replicas: out of host memory");
    driver_free(&d);
    free(fc);
    free(order);
    return st;
}
