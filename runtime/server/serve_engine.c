/* serve_engine.c - the engine thread of `radixkv serve` and its metrics
 * (see serve.h for who touches what). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "serve.h"

double serve_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- jobs --------------------------------------------------------------- */

static void job_free(serve_job *j)
{
    for (int32_t i = 0; i < j->n_seq; i++) {
        free(j->seq[i].tokens);
        free(j->seq[i].out);
        free(j->seq[i].error);
    }
    free(j->seq);
    free(j->sse);
    free(j);
}

void serve_job_unref_locked(serve_job *j)
{
    if (--j->refs == 0) job_free(j);
}

void serve_submit_locked(serve *s, serve_job *j)
{
    j->refs++; /* the engine side's */
    j->next = NULL;
    if (s->inbox_tail) s->inbox_tail->next = j;
    else s->inbox = j;
    s->inbox_tail = j;
    s->outstanding += j->n_seq;
    pthread_cond_signal(&s->wake);
}

/* ---- metrics ------------------------------------------------------------ */

static const double hist_bounds[SERVE_HIST_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

void serve_hist_observe(serve_hist *h, double seconds)
{
    int k = 0;
    while (k < SERVE_HIST_BUCKETS && seconds > hist_bounds[k]) k++;
    h->count[k]++;
    h->sum += seconds;
    h->n++;
}

static void hist_print(FILE *f, const char *name, const char *help, const serve_hist *h)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int k = 0; k < SERVE_HIST_BUCKETS; k++) {
        cum += h->count[k];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, hist_bounds[k], (unsigned long long)cum);
    }
    cum += h->count[SERVE_HIST_BUCKETS];
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
            (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->n);
}

static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* Names follow vLLM's where one exists (prefix_cache_queries/hits,
 * num_requests_running/waiting, time_to_first_token_seconds,
 * inter_token_latency_seconds), under the radixkv: prefix. */
char *serve_metrics_text(const serve *s, const serve_metrics *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    metric(f, "radixkv:num_requests_running", "gauge", "Requests the engine is running.",
           (double)m->es.num_running);
    metric(f, "radixkv:num_requests_waiting", "gauge",
           "Requests queued: submitted, not yet running.",
           (double)(m->outstanding - m->es.num_running));
    metric(f, "radixkv:prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the prefix cache (finished requests).",
           (double)m->prefix_queries);
    metric(f, "radixkv:prefix_cache_hits_total", "counter",
           "Prompt tokens found in the prefix cache (finished requests).", (double)m->prefix_hits);
    metric(f, "radixkv:prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
           (double)m->es.prompt_tokens);
    metric(f, "radixkv:generation_tokens_total", "counter", "Tokens generated.",
           (double)m->es.output_tokens);
    fprintf(f, "# HELP radixkv:kv_pages KV pages of the pool by state.\n"
               "# TYPE radixkv:kv_pages gauge\n"
               "radixkv:kv_pages{state=\"free\"} %lld\n"
               "radixkv:kv_pages{state=\"cached\"} %lld\n"
               "radixkv:kv_pages{state=\"inflight\"} %lld\n",
            (long long)m->pages_free, (long long)m->pages_cached, (long long)m->pages_inflight);
    metric(f, "radixkv:kv_pages_total", "gauge", "KV pages in the pool.", (double)m->pages_total);
    metric(f, "radixkv:page_accounting_ok", "gauge",
           "1 when free + cached + in flight = pool and every in-flight page has one owner "
           "(checked when the engine was last idle).", m->accounting_ok ? 1 : 0);
    metric(f, "radixkv:evicted_tokens_total", "counter", "Tokens evicted from the prefix cache.",
           (double)m->evicted_tokens);
    metric(f, "radixkv:evictions_total", "counter", "Eviction calls on the prefix cache.",
           (double)m->evict_calls);
    metric(f, "radixkv:num_preemptions_total", "counter", "Requests preempted (recomputed).",
           (double)m->es.preemptions);
    fprintf(f, "# HELP radixkv:requests_total Completion prompts by outcome.\n"
               "# TYPE radixkv:requests_total counter\n"
               "radixkv:requests_total{outcome=\"ok\"} %lld\n"
               "radixkv:requests_total{outcome=\"cancelled\"} %lld\n"
               "radixkv:requests_total{outcome=\"rejected\"} %lld\n"
               "radixkv:requests_total{outcome=\"failed\"} %lld\n",
            (long long)m->requests_ok, (long long)m->requests_cancelled,
            (long long)m->requests_rejected, (long long)m->requests_failed);
    metric(f, "radixkv:engine_steps_total", "counter", "Engine steps.", (double)m->es.steps);
    hist_print(f, "radixkv:time_to_first_token_seconds",
               "Time from the request's arrival at the server to its first token.", &m->ttft);
    hist_print(f, "radixkv:inter_token_latency_seconds", "Time between two tokens of a request.",
               &m->itl);
    hist_print(f, "radixkv:e2e_request_latency_seconds",
               "Time from the request's arrival to its last token.", &m->e2e);
    (void)s;
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void snapshot_locked(serve *s)
{
    serve_metrics *m = &s->m;
    engine_get_stats(s->e, &m->es);
    cache *c = engine_cache(s->e);
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    m->pages_total = c->pool->num_pages;
    m->pages_free = page_pool_num_free(c->pool);
    m->pages_inflight = c->pool->num_inflight;
    m->pages_cached = (sz.evictable_tokens + sz.protected_tokens) / c->page_size;
    m->evicted_tokens = c->stats.evicted_tokens;
    m->evict_calls = c->stats.evict_calls;
    m->outstanding = s->outstanding;
}

/* ---- the engine thread -------------------------------------------------- */

static int active_push(serve *s, serve_seq *q, serve_job *j)
{
    if (s->n_active == s->active_cap) {
        int64_t nc = s->active_cap ? s->active_cap * 2 : 256;
        serve_seq **a = realloc(s->active, sizeof(*a) * (size_t)nc);
        if (!a) return -1;
        s->active = a;
        serve_job **b = realloc(s->active_job, sizeof(*b) * (size_t)nc);
        if (!b) return -1;
        s->active_job = b;
        s->active_cap = nc;
    }
    s->active[s->n_active] = q;
    s->active_job[s->n_active++] = j;
    return 0;
}

/* A prompt is over (under s->mu): count it, and when it was the job's last,
 * wake its connection and let go of the engine side's reference. */
static void seq_finish_locked(serve *s, serve_job *j, serve_seq *q, const char *error)
{
    q->done = true;
    if (error && !q->error) q->error = strdup(error);
    if (!q->error) {
        s->m.requests_ok++;
        s->m.prefix_queries += q->n_tokens;
        s->m.prefix_hits += q->cached_tokens;
    } else if (j->cancelled) {
        s->m.requests_cancelled++;
    } else {
        s->m.requests_failed++;
    }
    if (--s->outstanding == 0) pthread_cond_broadcast(&s->drained);
    if (++j->n_done == j->n_seq) {
        if (!j->cancelled) serve_hist_observe(&s->m.e2e, serve_wall() - j->t_recv);
        serve_http_resume_locked(s, j);
        serve_job_unref_locked(j);
    }
}

/* Copy what the last step produced into the jobs (under s->mu). */
static void publish_locked(serve *s)
{
    double t = serve_wall();
    for (int64_t i = 0; i < s->n_active;) {
        serve_seq *q = s->active[i];
        serve_job *j = s->active_job[i];
        engine_result r;
        if (engine_result_get(s->e, q->eid, &r)) {
            i++;
            continue;
        }
        int32_t k = r.num_output - q->n_out;
        if (k > 0) {
            if (q->n_out == 0) {
                serve_hist_observe(&s->m.ttft, t - j->t_recv);
                for (int32_t x = 1; x < k; x++) serve_hist_observe(&s->m.itl, 0);
            } else {
                for (int32_t x = 0; x < k; x++) serve_hist_observe(&s->m.itl, (t - q->t_last) / k);
            }
            memcpy(q->out + q->n_out, r.output_ids + q->n_out, sizeof(int32_t) * (size_t)k);
            q->n_out = r.num_output;
            q->t_last = t;
        }
        if (r.finished) {
            q->cached_tokens = r.cached_tokens;
            s->active[i] = s->active[s->n_active - 1];
            s->active_job[i] = s->active_job[s->n_active - 1];
            s->n_active--;
            /* seq_finish copies r.error and may free the job: forget after,
             * by the id saved here. */
            int64_t eid = q->eid;
            seq_finish_locked(s, j, q, r.error);
            engine_forget(s->e, eid);
            continue;
        }
        if (k > 0 && j->stream) {
            serve_http_resume_locked(s, j);
        } else if (j->stream && j->suspended && t - j->t_written > s->cfg.keepalive_seconds) {
            j->keepalive = true;
            serve_http_resume_locked(s, j);
        }
        i++;
    }
}

/* Every active prompt fails with msg (the engine broke): answers go out. */
static void fail_all_locked(serve *s, const char *msg)
{
    while (s->n_active > 0) {
        s->n_active--;
        seq_finish_locked(s, s->active_job[s->n_active], s->active[s->n_active], msg);
    }
}

static void add_job(serve *s, serve_job *j)
{
    char err[256];
    for (int32_t i = 0; i < j->n_seq; i++) {
        serve_seq *q = &j->seq[i];
        engine_stats es;
        engine_get_stats(s->e, &es);
        double wall = serve_wall() - s->t0;
        engine_request er = {
            .tokens = q->tokens, .n_tokens = q->n_tokens, .max_tokens = j->max_tokens,
            .stop_token = j->stop_token, .sampling = j->sampling,
            .arrival = es.clock > wall ? es.clock : wall,
        };
        pthread_mutex_lock(&s->mu);
        bool cancelled = j->cancelled;
        pthread_mutex_unlock(&s->mu);
        rkv_status st = cancelled ? RKV_EINVAL : engine_add(s->e, &er, &q->eid, err, sizeof err);
        pthread_mutex_lock(&s->mu);
        if (st != RKV_OK || active_push(s, q, j)) {
            q->eid = -1;
            seq_finish_locked(s, j, q, cancelled ? "cancelled" : st ? err : "out of memory");
        }
        pthread_mutex_unlock(&s->mu);
    }
}

static void *engine_main(void *arg)
{
    serve *s = arg;
    char err[400];
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && !s->inbox && s->n_active == 0)
            pthread_cond_wait(&s->wake, &s->mu);
        if (s->stop && !s->inbox && s->n_active == 0) break;
        serve_job *in = s->inbox;
        s->inbox = s->inbox_tail = NULL;
        bool scan = s->cancel_pending;
        s->cancel_pending = false;
        /* Cancelled prompts, gathered while the lock is held. */
        int64_t ncancel = 0;
        int64_t *cancel = NULL;
        if (scan && s->n_active > 0 && (cancel = malloc(sizeof(int64_t) * (size_t)s->n_active)))
            for (int64_t i = 0; i < s->n_active; i++)
                if (s->active_job[i]->cancelled) cancel[ncancel++] = s->active[i]->eid;
        if (scan && !cancel && s->n_active > 0) s->cancel_pending = true; /* retry */
        pthread_mutex_unlock(&s->mu);

        while (in) {
            serve_job *next = in->next;
            add_job(s, in);
            in = next;
        }
        rkv_status st = RKV_OK;
        for (int64_t i = 0; i < ncancel && !st; i++) st = engine_cancel(s->e, cancel[i], err, sizeof err);
        free(cancel);
        bool done = true;
        if (!st && s->n_active > 0) st = engine_step(s->e, &done, err, sizeof err);

        pthread_mutex_lock(&s->mu);
        if (st) {
            snprintf(s->fatal, sizeof s->fatal, "engine: %s", err);
            publish_locked(s);
            fail_all_locked(s, s->fatal);
            snapshot_locked(s);
            s->stop = true;
            pthread_cond_broadcast(&s->drained);
            continue;
        }
        /* sim: tokens come out when the modelled clock says the step ends:
         * wait until wall time reaches it, so clients see modelled latencies
         * and arrivals land on the same clock. */
        if (s->paced) {
            engine_stats es;
            engine_get_stats(s->e, &es);
            double target = s->t0 + es.clock;
            while (!s->stop && serve_wall() < target) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                double d = target - serve_wall();
                if (d > 1) d = 1;
                long ns = until.tv_nsec + (long)(d * 1e9);
                until.tv_sec += ns / 1000000000L;
                until.tv_nsec = ns % 1000000000L;
                pthread_cond_timedwait(&s->wake, &s->mu, &until);
            }
        }
        publish_locked(s);
        if (s->n_active == 0) {
            char msg[512];
            s->m.accounting_ok = engine_check(s->e, msg, sizeof msg) == RKV_OK;
            if (!s->m.accounting_ok) snprintf(s->fatal, sizeof s->fatal, "%s", msg);
        }
        snapshot_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serve_engine_start(serve *s, char *err, size_t errlen)
{
    /* The engine's wall clock starts at its first step: take it now, so
     * arrivals (seconds since t0) and the engine's clock share an origin. */
    bool done;
    if (engine_step(s->e, &done, err, errlen)) return -1;
    s->t0 = serve_wall();
    s->m.accounting_ok = true;
    snapshot_locked(s);
    if (pthread_create(&s->thread, NULL, engine_main, s)) {
        snprintf(err, errlen, "cannot start the engine thread");
        return -1;
    }
    return 0;
}

void serve_engine_stop(serve *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    free(s->active);
    free(s->active_job);
    s->active = NULL;
    s->active_job = NULL;
}
