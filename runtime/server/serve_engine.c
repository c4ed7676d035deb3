/* serve_engine.c - the engine thread of `radixkv serve` and its metrics
 * (see serve.h for who touches what). */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "rkv_core.h"
#include "serve.h"
#include "serve_text.h"

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
        free(j->seq[i].text);
        free(j->seq[i].lp);
        free(j->seq[i].top_ids);
        free(j->seq[i].top_lp);
        free(j->seq[i].p_lp);
        free(j->seq[i].p_rank);
        free(j->seq[i].p_top_ids);
        free(j->seq[i].p_top_lp);
    }
    free(j->seq);
    free(j->stop_ids);
    free(j->allowed);
    free(j->bias_ids);
    free(j->bias_vals);
    free(j->bad_ids);
    free(j->bad_starts);
    for (int32_t i = 0; i < j->n_stop_str; i++) free(j->stop_str[i]);
    free(j->stop_str);
    free(j->sse);
    serve_pd_job_clear(&j->pd);
    free(j);
}

void serve_job_unref_locked(serve_job *j)
{
    if (--j->refs == 0) job_free(j);
}

void serve_submit_locked(serve *s, serve_job *j)
{
    /* A decode request waits for its prefill's handoff first (serve_pd.h). */
    if (serve_pd_submit_locked(s, j)) return;
    j->refs++; /* the engine side's */
    j->next = NULL;
    if (s->inbox_tail) s->inbox_tail->next = j;
    else s->inbox = j;
    s->inbox_tail = j;
    s->outstanding += j->n_seq;
    pthread_cond_signal(&s->wake);
}

/* ---- metrics ------------------------------------------------------------ */

const char *const serve_finish_names[SERVE_FINISH_KINDS] = {"stop", "length", "abort", "error"};

/* vLLM's order: a stop token ends a prompt as "stop" even on its last
 * allowed token. */
serve_finish serve_seq_finish(const serve_job *j, const serve_seq *q)
{
    if (q->error) return j->cancelled || !strcmp(q->error, "cancelled") ? SERVE_FINISH_ABORT
                                                                        : SERVE_FINISH_ERROR;
    if (q->stop_reason >= 0 || q->stop_str >= 0) return SERVE_FINISH_STOP;
    return q->n_out >= j->max_tokens ? SERVE_FINISH_LENGTH : SERVE_FINISH_STOP;
}

/* radixkv's own bounds, for all three latencies. */
static const double rkv_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                1,     2.5,    5,     10,   30,    60,   120, 300,  600};
/* vLLM's (vllm/v1/metrics/loggers.py), so its dashboards' quantiles read alike. */
static const double vllm_ttft_le[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                      0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                      20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double vllm_itl_le[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                     0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double vllm_e2e_le[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0, 15.0, 20.0,
                                     30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
#define NLE(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* vLLM's request_params_n, request_num_preemptions and iteration_tokens
 * bounds (vllm/v1/metrics/buckets.py). */
static const double vllm_n_le[] = {1, 2, 5, 10, 20};
static const double vllm_preempt_le[] = {1, 2, 3, 4, 5, 10, 20};
static const double vllm_iter_le[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

/* h counts on the union of bounds a and b (ascending each). */
static void hist_init(serve_hist *h, const double *a, int na, const double *b, int nb)
{
    memset(h, 0, sizeof *h);
    int i = 0, k = 0;
    while ((i < na || k < nb) && h->n_le < SERVE_HIST_MAX) {
        double x = k == nb || (i < na && a[i] < b[k]) ? a[i++] : b[k++];
        if (h->n_le == 0 || h->le[h->n_le - 1] < x) h->le[h->n_le++] = x;
    }
}

/* vLLM's build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50, ... up to max. */
static int bounds_125(double *le, int cap, double max)
{
    int n = 0;
    for (double e = 1; n < cap; e *= 10)
        for (int m = 0; m < 3 && n < cap; m++) {
            double x = e * (m == 0 ? 1 : m == 1 ? 2 : 5);
            if (x > max) return n;
            le[n++] = x;
        }
    return n;
}

void serve_metrics_init(serve *s)
{
    hist_init(&s->m.ttft, rkv_le, NLE(rkv_le), vllm_ttft_le, NLE(vllm_ttft_le));
    hist_init(&s->m.itl, rkv_le, NLE(rkv_le), vllm_itl_le, NLE(vllm_itl_le));
    hist_init(&s->m.e2e, rkv_le, NLE(rkv_le), vllm_e2e_le, NLE(vllm_e2e_le));
    double le[SERVE_HIST_MAX];
    int n = bounds_125(le, SERVE_HIST_MAX, s->max_context);
    hist_init(&s->m.req_prompt, le, n, NULL, 0);
    hist_init(&s->m.req_gen, le, n, NULL, 0);
    hist_init(&s->m.req_max_tokens, le, n, NULL, 0);
    hist_init(&s->m.req_n, vllm_n_le, NLE(vllm_n_le), NULL, 0);
    hist_init(&s->m.req_kv_computed, le, n, NULL, 0);
    hist_init(&s->m.req_max_gen, le, n, NULL, 0);
    hist_init(&s->m.decode, vllm_e2e_le, NLE(vllm_e2e_le), NULL, 0);
    hist_init(&s->m.queue, vllm_e2e_le, NLE(vllm_e2e_le), NULL, 0);
    hist_init(&s->m.prefill, vllm_e2e_le, NLE(vllm_e2e_le), NULL, 0);
    hist_init(&s->m.inference, vllm_e2e_le, NLE(vllm_e2e_le), NULL, 0);
    hist_init(&s->m.tpot, vllm_itl_le, NLE(vllm_itl_le), NULL, 0);
    hist_init(&s->m.req_preempt, vllm_preempt_le, NLE(vllm_preempt_le), NULL, 0);
    hist_init(&s->m.iter_tokens, vllm_iter_le, NLE(vllm_iter_le), NULL, 0);
}

void serve_hist_observe(serve_hist *h, double seconds)
{
    int k = 0;
    while (k < h->n_le && seconds > h->le[k]) k++;
    h->count[k]++;
    h->sum += seconds;
    h->n++;
}

/* The histogram cut at bounds le (each one of h's), under name{labels}. */
static void hist_print(FILE *f, const char *name, const char *labels, const char *help,
                       const serve_hist *h, const double *le, int n_le)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    const char *sep = *labels ? "," : "";
    uint64_t cum = 0;
    int k = 0;
    for (int i = 0; i < n_le; i++) {
        while (k < h->n_le && h->le[k] <= le[i]) cum += h->count[k++];
        fprintf(f, "%s_bucket{%s%sle=\"%.17g\"} %llu\n", name, labels, sep, le[i],
                (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)h->n);
    const char *open = *labels ? "{" : "", *close = *labels ? "}" : "";
    fprintf(f, "%s_sum%s%s%s %.9g\n%s_count%s%s%s %llu\n", name, open, labels, close, h->sum, name,
            open, labels, close, (unsigned long long)h->n);
}

/* One histogram family: h cut at le (n_le of them, each one of h's bounds),
 * or at all of h's own bounds where le is NULL. */
typedef struct hist_family {
    const char *name, *help;
    const serve_hist *h;
    const double *le;
    int n_le;
} hist_family;

static void hist_print_all(FILE *f, const char *labels, const hist_family *fam, int n)
{
    for (int i = 0; i < n; i++) {
        const serve_hist *h = fam[i].h;
        hist_print(f, fam[i].name, labels, fam[i].help, h, fam[i].le ? fam[i].le : h->le,
                   fam[i].le ? fam[i].n_le : h->n_le);
    }
}

static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* One vLLM sample family: a gauge, or a counter (whose name ends in _total
 * in HELP, TYPE and sample, as prometheus_client writes the text format). */
static void vllm_metric(FILE *f, const char *name, bool counter, const char *labels,
                        const char *help, double v)
{
    const char *t = counter ? "_total" : "";
    fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n%s%s{%s} %.17g\n", name, t, help, name, t,
            counter ? "counter" : "gauge", name, t, labels, v);
}

/* The quantities vLLM's OpenAI server exports and radixkv has too, under
 * vLLM's names, types, labels and buckets, so its dashboards work as they are. */
/* The rest of what vLLM's logger defines for one engine without KV
 * transfer, LoRA, multimodal input or sleep: families that cannot move
 * here are exported at 0 as vLLM exports them.
 * labels: the engine's label set; name: the escaped model name. */
static void vllm_metrics_fixed(FILE *f, const serve_metrics *m, const char *labels,
                               const char *name)
{
    char lab[400];
    fprintf(f, "# HELP vllm:num_requests_waiting_by_reason Number of waiting requests by reason.\n"
               "# TYPE vllm:num_requests_waiting_by_reason gauge\n"
               "vllm:num_requests_waiting_by_reason{%s,reason=\"capacity\"} %lld\n"
               "vllm:num_requests_waiting_by_reason{%s,reason=\"deferred\"} 0\n",
            labels, (long long)(m->outstanding - m->es.num_running), labels);
    fprintf(f, "# HELP vllm:engine_sleep_state Engine sleep state.\n"
               "# TYPE vllm:engine_sleep_state gauge\n"
               "vllm:engine_sleep_state{%s,sleep_state=\"awake\"} 1\n"
               "vllm:engine_sleep_state{%s,sleep_state=\"weights_offloaded\"} 0\n"
               "vllm:engine_sleep_state{%s,sleep_state=\"discard_all\"} 0\n", labels, labels, labels);
    vllm_metric(f, "vllm:external_prefix_cache_queries", true, labels,
                "External prefix cache queries from KV connector cross-instance cache sharing.", 0);
    vllm_metric(f, "vllm:external_prefix_cache_hits", true, labels,
                "External prefix cache hits from KV connector cross-instance cache sharing.", 0);
    vllm_metric(f, "vllm:mm_cache_queries", true, labels,
                "Multi-modal cache queries, in terms of number of queried items.", 0);
    vllm_metric(f, "vllm:mm_cache_hits", true, labels,
                "Multi-modal cache hits, in terms of number of cached items.", 0);
    vllm_metric(f, "vllm:prompt_tokens_cached", true, labels,
                "Number of cached prompt tokens (local + external).", (double)m->prefix_hits);
    fprintf(f, "# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.\n"
               "# TYPE vllm:prompt_tokens_by_source_total counter\n");
    const char *const src[] = {"local_compute", "local_cache_hit", "external_kv_transfer"};
    const double srcv[] = {(double)(m->prompt_tokens - m->prefix_hits), (double)m->prefix_hits, 0};
    for (int i = 0; i < 3; i++)
        fprintf(f, "vllm:prompt_tokens_by_source_total{%s,source=\"%s\"} %.17g\n", labels, src[i],
                srcv[i]);
    /* radixkv's hits are matched in device pages at admission. */
    fprintf(f, "# HELP vllm:prompt_tokens_cached_by_source_total Prefix-cache hit tokens by the "
               "cache tier that supplied them.\n"
               "# TYPE vllm:prompt_tokens_cached_by_source_total counter\n");
    const char *const tier[] = {"device", "host", "p2p", "disk", "external_unspecified"};
    for (int i = 0; i < 5; i++)
        fprintf(f, "vllm:prompt_tokens_cached_by_source_total{%s,source=\"%s\"} %lld\n", labels,
                tier[i], (long long)(i == 0 ? m->prefix_hits : 0));
    snprintf(lab, sizeof lab, "model_name=\"%s\"", name);
    fprintf(f, "# HELP vllm:admission_rejections_total Number of admission attempts rejected by a "
               "queue limit, by reason.\n# TYPE vllm:admission_rejections_total counter\n"
               "vllm:admission_rejections_total{%s,reason=\"max_num_queued_reqs\"} %lld\n"
               "vllm:admission_rejections_total{%s,reason=\"max_num_queued_tokens\"} 0\n", lab,
            (long long)m->queue_full, lab);
}

static void vllm_metrics(FILE *f, const serve *s, const serve_metrics *m)
{
    /* Label values escape \ and " (a model name is the user's). */
    char name[256], labels[320];
    size_t k = 0;
    for (const char *p = s->cfg.model_name; *p && k + 2 < sizeof name; p++) {
        if (*p == '\\' || *p == '"') name[k++] = '\\';
        name[k++] = *p == '\n' ? ' ' : *p;
    }
    name[k] = 0;
    snprintf(labels, sizeof labels, "engine=\"0\",model_name=\"%s\"", name);
    vllm_metric(f, "vllm:num_requests_running", false, labels,
                "Number of requests in model execution batches.", (double)m->es.num_running);
    vllm_metric(f, "vllm:num_requests_waiting", false, labels,
                "Number of requests waiting to be processed.",
                (double)(m->outstanding - m->es.num_running));
    double used = m->pages_total ? (double)(m->pages_total - m->pages_free - m->pages_evictable)
                                       / (double)m->pages_total : 0;
    vllm_metric(f, "vllm:kv_cache_usage_perc", false, labels,
                "KV-cache usage. 1 means 100 percent usage.", used);
    vllm_metric(f, "vllm:prefix_cache_queries", true, labels,
                "Prefix cache queries, in terms of number of queried tokens.",
                (double)m->prefix_queries);
    vllm_metric(f, "vllm:prefix_cache_hits", true, labels,
                "Prefix cache hits, in terms of number of cached tokens.", (double)m->prefix_hits);
    vllm_metric(f, "vllm:num_preemptions", true, labels, "Cumulative number of preemption from the engine.",
                (double)m->es.preemptions);
    vllm_metric(f, "vllm:prompt_tokens", true, labels, "Number of prefill tokens processed.",
                (double)m->prompt_tokens);
    vllm_metric(f, "vllm:generation_tokens", true, labels, "Number of generation tokens processed.",
                (double)m->generation_tokens);
    fprintf(f, "# HELP vllm:request_success_total Count of successfully processed requests.\n"
               "# TYPE vllm:request_success_total counter\n");
    for (int r = 0; r < SERVE_FINISH_KINDS; r++)
        fprintf(f, "vllm:request_success_total{%s,finished_reason=\"%s\"} %lld\n", labels,
                serve_finish_names[r], (long long)m->finished[r]);
    /* vLLM's fifth reason: repetition_detection is refused here, so 0. */
    fprintf(f, "vllm:request_success_total{%s,finished_reason=\"repetition\"} 0\n", labels);
    /* In vLLM's order, around the families vllm_metrics_fixed writes. */
    const hist_family head[] = {
        {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
         &m->ttft, vllm_ttft_le, NLE(vllm_ttft_le)},
        {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
         &m->itl, vllm_itl_le, NLE(vllm_itl_le)},
        {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
         &m->e2e, vllm_e2e_le, NLE(vllm_e2e_le)},
        {"vllm:request_prompt_tokens", "Number of prefill tokens processed.", &m->req_prompt,
         NULL, 0},
        {"vllm:request_generation_tokens", "Number of generation tokens processed.", &m->req_gen,
         NULL, 0},
        {"vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
         &m->req_max_tokens, NULL, 0},
        {"vllm:request_params_n", "Histogram of the n request parameter.", &m->req_n, NULL, 0},
    };
    hist_print_all(f, labels, head, NLE(head));
    vllm_metrics_fixed(f, m, labels, name);
    const hist_family tail[] = {
        {"vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
         &m->iter_tokens, NULL, 0},
        {"vllm:request_max_num_generation_tokens",
         "Histogram of maximum number of requested generation tokens.", &m->req_max_gen, NULL, 0},
        {"vllm:request_time_per_output_token_seconds",
         "Histogram of time_per_output_token_seconds per request.", &m->tpot, NULL, 0},
        {"vllm:request_decode_time_seconds",
         "Histogram of time spent in DECODE phase for request.", &m->decode, NULL, 0},
        {"vllm:request_queue_time_seconds",
         "Histogram of time spent in WAITING phase for request.", &m->queue, NULL, 0},
        {"vllm:request_inference_time_seconds",
         "Histogram of time spent in RUNNING phase for request.", &m->inference, NULL, 0},
        {"vllm:request_prefill_time_seconds",
         "Histogram of time spent in PREFILL phase for request.", &m->prefill, NULL, 0},
        {"vllm:request_num_preemptions",
         "Histogram of the number of times a request was preempted.", &m->req_preempt, NULL, 0},
        {"vllm:request_prefill_kv_computed_tokens",
         "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
         &m->req_kv_computed, NULL, 0},
    };
    hist_print_all(f, labels, tail, NLE(tail));
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
           "Prompt tokens looked up in the prefix cache (prefilled requests).",
           (double)m->prefix_queries);
    metric(f, "radixkv:prefix_cache_hits_total", "counter",
           "Prompt tokens found in the prefix cache (prefilled requests).", (double)m->prefix_hits);
    metric(f, "radixkv:prompt_tokens_total", "counter", "Prompt tokens of prefilled requests.",
           (double)m->prompt_tokens);
    metric(f, "radixkv:generation_tokens_total", "counter", "Tokens generated.",
           (double)m->generation_tokens);
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
    const hist_family lat[] = {
        {"radixkv:time_to_first_token_seconds",
         "Time from the request's arrival at the server to its first token.", &m->ttft, rkv_le,
         NLE(rkv_le)},
        {"radixkv:inter_token_latency_seconds", "Time between two tokens of a request.", &m->itl,
         rkv_le, NLE(rkv_le)},
        {"radixkv:e2e_request_latency_seconds", "Time from the request's arrival to its last token.",
         &m->e2e, rkv_le, NLE(rkv_le)},
    };
    hist_print_all(f, "", lat, NLE(lat));
    vllm_metrics(f, s, m);
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
    m->pages_evictable = sz.evictable_tokens / c->page_size;
    m->evicted_tokens = c->stats.evicted_tokens;
    m->evict_calls = c->stats.evict_calls;
    m->outstanding = s->outstanding;
}

/* ---- the engine thread -------------------------------------------------- */

/* Room for one more active prompt, made before engine_add so that a prompt
 * the engine took is always listed (an unlisted one would run unseen). */
static int active_reserve(serve *s)
{
    /* two arrays, one capacity: it moves only once both have grown */
    int64_t ca = s->active_cap, cb = s->active_cap;
    if (rkv_grow((void **)&s->active, &ca, s->n_active + 1, sizeof *s->active) ||
        rkv_grow((void **)&s->active_job, &cb, s->n_active + 1, sizeof *s->active_job))
        return -1;
    s->active_cap = ca;
    return 0;
}

static void active_push(serve *s, serve_seq *q, serve_job *j)
{
    s->active[s->n_active] = q;
    s->active_job[s->n_active++] = j;
}

/* A prompt is over (under s->mu): count it, and when it was the job's last,
 * wake its connection and let go of the engine side's reference. */
static void seq_finish_locked(serve *s, serve_job *j, serve_seq *q, const char *error)
{
    q->done = true;
    if (error && !q->error) q->error = strdup(error);
    /* A prefill job's handoff record goes out however it ended (finished,
     * failed at admission, cancelled, the engine broke): its decode side is
     * waiting for it. */
    serve_pd_prefilled_locked(s, j, q, q->error ? q->error : error);
    if (!q->error && q->n_out > 0)
        for (int32_t k = 0; k < j->n_stop && q->stop_reason < 0; k++)
            if (q->out[q->n_out - 1] == j->stop_ids[k]) q->stop_reason = j->stop_ids[k];
    /* vLLM observes these once per finished request, each sample being one
     * (its parallel sampling makes children); n and the most tokens a
     * sample generated once per prompt, when its last sample ends. */
    double now = serve_wall();
    s->m.finished[serve_seq_finish(j, q)]++;
    serve_hist_observe(&s->m.req_prompt, q->n_tokens);
    serve_hist_observe(&s->m.req_gen, q->n_out);
    serve_hist_observe(&s->m.req_max_tokens, j->max_tokens);
    serve_hist_observe(&s->m.e2e, now - j->t_recv);
    serve_hist_observe(&s->m.req_preempt, q->preemptions);
    serve_hist_observe(&s->m.req_kv_computed, q->prefilled ? q->n_tokens - q->cached_tokens : 0);
    /* The phases as vLLM splits them, on the engine's clock; a phase that
     * never began counts 0 (a prompt that waited and was cancelled spent
     * all its time queued). */
    bool sched = q->e_sched >= 0 && q->e_finish > 0, first = sched && q->e_first >= 0;
    double queue = q->e_finish > 0 ? (sched ? q->e_sched : q->e_finish) - q->e_arrival : 0;
    double decode = first ? q->e_finish - q->e_first : 0;
    serve_hist_observe(&s->m.queue, queue > 0 ? queue : 0);
    serve_hist_observe(&s->m.prefill, first ? q->e_first - q->e_sched : sched ? q->e_finish - q->e_sched : 0);
    serve_hist_observe(&s->m.inference, sched ? q->e_finish - q->e_sched : 0);
    serve_hist_observe(&s->m.decode, decode);
    serve_hist_observe(&s->m.tpot, q->n_out > 1 ? decode / (q->n_out - 1) : 0);
    serve_seq *lead = q - q->sample;
    if (q->n_out > lead->max_gen) lead->max_gen = q->n_out;
    if (++lead->samples_done == j->n_samples) {
        serve_hist_observe(&s->m.req_n, j->n_samples);
        serve_hist_observe(&s->m.req_max_gen, lead->max_gen);
    }
    if (!q->error) {
        s->m.requests_ok++;
    } else if (j->cancelled) {
        s->m.requests_cancelled++;
    } else {
        s->m.requests_failed++;
    }
    if (--s->outstanding == 0) pthread_cond_broadcast(&s->drained);
    if (++j->n_done == j->n_seq) {
        s->http.resume_locked(s, j);
        serve_job_unref_locked(j);
    }
}

static void add_followers_locked(serve *s, serve_job *j, serve_seq *lead, const char *fail);
static bool text_stop_search(const serve_job *j, serve_seq *q, size_t from);

/* Stop strings (--tokenizer ids): append tok's text to q's output text;
 * true when a stop string now occurs in it (q->stop_str, q->text_cut set).
 * Only the tail can hold a new match: earlier text was searched before. */
static bool text_stop(const serve_job *j, serve_seq *q, int32_t tok)
{
    char piece[16];
    int n = 0;
    size_t from0 = q->text_len + 1 > j->stop_str_max ? q->text_len + 1 - j->stop_str_max : 0;
    if (j->tok) {
        /* the token's bytes (serve_text.h); a match may begin in earlier text */
        if (!serve_text_append(j->tok, tok, &q->text, &q->text_len, &q->text_cap)) return false;
        return text_stop_search(j, q, from0);
    }
    n = snprintf(piece, sizeof piece, " %d", tok);
    if (rkv_grow_size((void **)&q->text, &q->text_cap, q->text_len + (size_t)n + 1, 1))
        return false; /* out of memory: this token's match is missed */
    memcpy(q->text + q->text_len, piece, (size_t)n + 1);
    q->text_len += (size_t)n;
    return text_stop_search(j, q, from0);
}

/* The earliest stop string in q->text at or after from. */
static bool text_stop_search(const serve_job *j, serve_seq *q, size_t from)
{
    size_t best = SIZE_MAX;
    for (int32_t i = 0; i < j->n_stop_str; i++) {
        const char *m = strstr(q->text + from, j->stop_str[i]);
        if (m && (size_t)(m - q->text) < best) {
            best = (size_t)(m - q->text);
            q->stop_str = i;
        }
    }
    if (best == SIZE_MAX) return false;
    q->text_cut = best;
    return true;
}

/* logprobs: the sampled token's log-probability under the model's own
 * distribution (log_softmax of the logits, before temperature or top-p, as
 * vLLM reports by default) and the j->logprobs most likely tokens. */
static float row_lse(const float *logits, int32_t V)
{
    float mx = -INFINITY;
    for (int32_t v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int32_t v = 0; v < V; v++) sum += exp((double)(logits[v] - mx));
    return mx + (float)log(sum);
}

/* The K most likely ids of a row and their logprobs (lse: row_lse). */
static void row_top(const float *logits, int32_t V, int32_t K, float lse, int32_t *ids, float *lps)
{
    /* Insertion into a sorted list of K: V * K at worst, K is small. Ties go
     * to the smaller id. */
    int32_t have = 0;
    for (int32_t v = 0; K > 0 && v < V; v++) {
        float x = logits[v];
        if (have == K && !(x > lps[K - 1])) continue;
        int32_t p = have < K ? have++ : K - 1;
        while (p > 0 && x > lps[p - 1]) {
            lps[p] = lps[p - 1];
            ids[p] = ids[p - 1];
            p--;
        }
        lps[p] = x;
        ids[p] = v;
    }
    for (int32_t i = 0; i < K; i++) lps[i] -= lse;
}

static void logprobs_fill(const serve_job *j, serve_seq *q, int32_t t, const float *logits,
                          int32_t V, int32_t tok)
{
    const float lse = row_lse(logits, V);
    q->lp[t] = logits[tok] - lse;
    const int32_t K = j->logprobs;
    row_top(logits, V, K, lse, q->top_ids + (size_t)t * (size_t)K,
            q->top_lp + (size_t)t * (size_t)K);
}

/* Prompt logprobs (vLLM's prompt_logprobs) from the engine's prompt rows:
 * raw log_softmax, no processors or temperature, as vLLM computes them; the
 * rank counts the ids at least as likely (vLLM's >=). */
static void prompt_logprobs_fill(const serve_job *j, serve_seq *q, const float *logits, int32_t V)
{
    const int32_t K = j->prompt_lp;
    for (int32_t t = 1; t < q->n_tokens; t++) {
        const float *row = logits + (size_t)(t - 1) * (size_t)V;
        const int32_t tok = q->tokens[t];
        const float lse = row_lse(row, V);
        q->p_lp[t] = row[tok] - lse;
        int32_t rank = 0;
        for (int32_t v = 0; v < V; v++) rank += row[v] - lse >= q->p_lp[t];
        q->p_rank[t] = rank;
        row_top(row, V, K, lse, q->p_top_ids + (size_t)t * (size_t)K,
                q->p_top_lp + (size_t)t * (size_t)K);
    }
    q->p_ready = true;
}

/* A decode request whose handed-over pages were not all found ends with the
 * reason before any token of it goes out (serve_pd.h). */
static void pd_check_locked(serve *s, serve_job *j, serve_seq *q, const engine_result *r)
{
    char pdmsg[320];
    const char *pdfail = !q->prefilled && !q->stop_cut && r->num_output > 0
                         ? serve_pd_check_locked(s, j, r->cached_tokens, pdmsg, sizeof pdmsg) : NULL;
    if (!pdfail) return;
    q->error = strdup(pdfail);
    q->stop_cut = true;
    char err[256];
    if (!q->error || (!r->finished && engine_cancel(s->e, q->eid, err, sizeof err) != RKV_OK
                      && !s->fatal[0]))
        snprintf(s->fatal, sizeof s->fatal, "engine: %s", q->error ? err : "out of memory");
}

/* Of the k new outputs, how many go out: stop ids past the first and stop
 * strings end them at the first one met, and the engine request is
 * cancelled (it may have run on a step further). */
static int32_t cut_at_stops_locked(serve *s, serve_job *j, serve_seq *q, const engine_result *r,
                                   int32_t k)
{
    for (int32_t x = 0; x < k; x++) {
        int32_t tok = r->output_ids[q->n_out + x];
        bool hit = false;
        for (int32_t y = 1; y < j->n_stop && !hit; y++)
            if (tok == j->stop_ids[y]) {
                q->stop_reason = tok;
                hit = true;
            }
        if (!hit && j->n_stop_str) hit = text_stop(j, q, tok);
        if (!hit) continue;
        q->stop_cut = true;
        char err[256];
        if (!r->finished && engine_cancel(s->e, q->eid, err, sizeof err) != RKV_OK && !s->fatal[0])
            snprintf(s->fatal, sizeof s->fatal, "engine: %s", err);
        return x + 1;
    }
    return k;
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
        pd_check_locked(s, j, q, &r);
        int32_t k = q->stop_cut ? 0 : cut_at_stops_locked(s, j, q, &r, r.num_output - q->n_out);
        if (k > 0 && j->logprobs >= 0 && r.logits)
            for (int32_t x = 0; x < k; x++)
                logprobs_fill(j, q, q->n_out + x, r.logits + (size_t)(q->n_out + x) * (size_t)s->vocab,
                              s->vocab, r.output_ids[q->n_out + x]);
        /* The other samples of the prompt start once its pages are cached. */
        if ((k > 0 || r.finished) && q->sample == 0 && j->n_samples > 1 && !q[1].added)
            add_followers_locked(s, j, q, NULL);
        if (k > 0 && !q->prefilled) {
            if (q->p_lp && r.prompt_logits) prompt_logprobs_fill(j, q, r.prompt_logits, s->vocab);
            q->prefilled = true;
            s->m.prompt_tokens += q->n_tokens;
            s->m.prefix_queries += q->n_tokens;
            s->m.prefix_hits += r.cached_tokens;
        }
        s->m.generation_tokens += k > 0 ? k : 0;
        if (k > 0) {
            if (q->n_out == 0) {
                q->t_first = t;
                serve_hist_observe(&s->m.ttft, t - j->t_recv);
                for (int32_t x = 1; x < k; x++) serve_hist_observe(&s->m.itl, 0);
            } else {
                for (int32_t x = 0; x < k; x++) serve_hist_observe(&s->m.itl, (t - q->t_last) / k);
            }
            memcpy(q->out + q->n_out, r.output_ids + q->n_out, sizeof(int32_t) * (size_t)k);
            q->n_out += k;
            q->t_last = t;
        }
        if (r.finished) {
            q->cached_tokens = r.cached_tokens;
            q->preemptions = r.num_preemptions;
            q->e_arrival = r.arrival;
            q->e_sched = r.scheduled_time;
            q->e_first = r.first_token_time;
            q->e_finish = r.finish_time;
            s->active[i] = s->active[s->n_active - 1];
            s->active_job[i] = s->active_job[s->n_active - 1];
            s->n_active--;
            /* seq_finish copies r.error and may free the job: forget after,
             * by the id saved here. */
            int64_t eid = q->eid;
            seq_finish_locked(s, j, q, q->stop_cut ? NULL : r.error);
            engine_forget(s->e, eid);
            continue;
        }
        if (!j->stream && !j->cancelled && t - j->t_written > s->cfg.keepalive_seconds) {
            /* A suspended connection is not polled: look at its socket, so a
             * client that went away stops its generation (as vLLM does). */
            j->t_written = t;
            if (s->http.client_gone_locked(j)) {
                j->cancelled = true;
                s->cancel_pending = true;
            }
        }
        if (k > 0 && j->stream) {
            s->http.resume_locked(s, j);
        } else if (j->stream && j->suspended && t - j->t_written > s->cfg.keepalive_seconds) {
            j->keepalive = true;
            s->http.resume_locked(s, j);
        }
        i++;
    }
}

/* Every active prompt fails with msg (the engine broke): answers go out. */
static void fail_all_locked(serve *s, const char *msg)
{
    while (s->n_active > 0) {
        s->n_active--;
        serve_job *j = s->active_job[s->n_active];
        serve_seq *q = s->active[s->n_active];
        if (q->sample == 0 && j->n_samples > 1 && !q[1].added) add_followers_locked(s, j, q, msg);
        seq_finish_locked(s, j, q, msg);
    }
}

/* Hand q to the engine (under s->mu, on the engine thread); a prompt that
 * cannot start finishes at once with the reason. fail: finish it with that
 * instead. The job stays alive: a job's last prompt is never added here
 * before the others finished. */
static void add_seq_locked(serve *s, serve_job *j, serve_seq *q, const char *fail)
{
    char err[256];
    q->added = true;
    engine_stats es;
    engine_get_stats(s->e, &es);
    double wall = serve_wall() - s->t0;
    engine_request er = {
        .tokens = q->tokens, .n_tokens = q->n_tokens, .max_tokens = j->max_tokens,
        .stop_token = j->n_stop ? j->stop_ids[0] : -1, .sampling = j->sampling,
        .arrival = es.clock > wall ? es.clock : wall,
        /* Every sample skips the cache as vLLM's children do (usage says 0
         * cached); sample 0's rows alone are read (q->p_lp). */
        .prompt_logits = j->prompt_lp >= 0,
    };
    /* Each sample its own stream: sample 0 keeps the request's own seed. */
    if (j->seeded) er.sampling.seed = ((j->seed + (uint64_t)q->sample) << 1) | 1;
    if (!fail && j->cancelled) fail = "cancelled";
    rkv_status st = fail ? RKV_EINVAL : active_reserve(s) ? RKV_ENOMEM
                  : engine_add(s->e, &er, &q->eid, err, sizeof err);
    if (st == RKV_ENOMEM && !fail) snprintf(err, sizeof err, "out of memory");
    if (st == RKV_OK) {
        active_push(s, q, j);
        return;
    }
    q->eid = -1;
    const char *why = fail ? fail : err;
    if (q->sample == 0 && j->n_samples > 1) add_followers_locked(s, j, q, why);
    seq_finish_locked(s, j, q, why);
}

static void add_followers_locked(serve *s, serve_job *j, serve_seq *lead, const char *fail)
{
    for (int32_t k = 1; k < j->n_samples; k++) add_seq_locked(s, j, lead + k, fail);
}

static void add_job(serve *s, serve_job *j)
{
    pthread_mutex_lock(&s->mu);
    /* Cached: the job may be freed with its last prompt. */
    const int32_t n = j->n_seq, step = j->n_samples;
    const char *fail = j->pd.fail[0] ? j->pd.fail : NULL; /* its handoff failed */
    for (int32_t i = 0; i < n; i += step) add_seq_locked(s, j, &j->seq[i], fail);
    pthread_mutex_unlock(&s->mu);
}

/* The page accounting check of an idle engine, on the engine thread without
 * s->mu: it walks every page (milliseconds for millions), and the HTTP side
 * must not wait for it. The engine is touched by this thread only, so the
 * check sees a quiet engine all the same.
 * RKV_SERVE_TEST_CHECK_GATE names a FIFO the check first reads to its end:
 * a test holds the engine inside the check that way and asks the server
 * meanwhile. */
static rkv_status idle_check(serve *s, char *msg, size_t len)
{
    const char *gate = getenv("RKV_SERVE_TEST_CHECK_GATE");
    if (gate && *gate) {
        int fd = open(gate, O_RDONLY | O_CLOEXEC);
        char b[64];
        if (fd >= 0) {
            while (read(fd, b, sizeof b) > 0) {}
            close(fd);
        }
    }
    return engine_check(s->e, msg, len);
}

static void *engine_main(void *arg)
{
    serve *s = arg;
    char err[400];
    bool stepped = false; /* since the last idle check */
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
        if (!st && s->n_active > 0) {
            st = engine_step(s->e, &done, err, sizeof err);
            stepped = true;
        }

        pthread_mutex_lock(&s->mu);
        if (st) {
            snprintf(s->fatal, sizeof s->fatal, strncmp(err, "engine", 6) ? "engine: %s" : "%s", err);
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
        snapshot_locked(s);
        /* vLLM's iteration_tokens: the rows each step computed. */
        if (s->m.es.batched_tokens > s->m.batched_tokens)
            serve_hist_observe(&s->m.iter_tokens,
                               (double)(s->m.es.batched_tokens - s->m.batched_tokens));
        s->m.batched_tokens = s->m.es.batched_tokens;
        if (s->n_active == 0 && stepped) {
            char msg[512];
            stepped = false;
            pthread_mutex_unlock(&s->mu);
            rkv_status cst = idle_check(s, msg, sizeof msg);
            bool ok = cst == RKV_OK;
            pthread_mutex_lock(&s->mu);
            /* Out of memory inside the check: it could not look, which says
             * nothing about the pages; the next idle moment looks again. */
            if (cst == RKV_ENOMEM) {
                fprintf(stderr, "radixkv serve: %s (the check runs again when next idle)\n", msg);
                stepped = true;
                ok = true;
            }
            s->m.accounting_ok = ok;
            if (!ok) {
                snprintf(s->fatal, sizeof s->fatal, "%s", msg);
                pthread_cond_broadcast(&s->drained);
            }
        }
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
    serve_metrics_init(s);
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
