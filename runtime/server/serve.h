/* serve.h - `radixkv serve`: the engine on its own thread behind an HTTP server.
 *
 *   HTTP thread (libmicrohttpd)            engine thread
 *   ---------------------------            -------------
 *   parse + check a completion  --job-->   inbox --> engine_add (arrival = now)
 *   (400 / 503 answered here)              engine_step
 *   suspended connection  <--resume--      publish: new tokens, finishes
 *   SSE chunks / one JSON body             engine_forget once copied
 *   client gone: job->cancelled  ----->    engine_cancel
 *
 * One mutex (serve->mu) guards every job and the inbox; the engine itself is
 * touched by the engine thread only (engine_check_request reads what is fixed
 * at creation, so the HTTP thread may call it). A job is shared by the two
 * threads and freed when both have let go of it (refs).
 *
 * Metrics are a snapshot the engine thread refreshes after every step, so
 * GET /metrics never waits for a step.
 */
#ifndef RKV_SERVE_H
#define RKV_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "run_opts.h"

typedef struct serve_config {
    const char *host;          /* numeric IPv4 or IPv6 address to bind */
    int port;                  /* 0: any free port (printed at start) */
    const char *model_name;    /* the id /v1/models lists */
    bool text_ids;             /* --tokenizer ids: text is decimal ids */
    int64_t max_queue;         /* outstanding prompts above max_running: 503 */
    double drain_seconds;      /* SIGINT/SIGTERM: finish in-flight work this long */
    double keepalive_seconds;  /* a stream silent this long (queued, no token yet)
                                  writes an SSE comment, so a client that went
                                  away is noticed and its request cancelled */
    int32_t default_max_tokens;
    const run_opts *run;       /* engine options, as `radixkv run` parsed them */
} serve_config;

/* Latency histogram with fixed upper bounds (seconds), Prometheus style. */
#define SERVE_HIST_BUCKETS 14
typedef struct serve_hist {
    uint64_t count[SERVE_HIST_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t n;
} serve_hist;

typedef struct serve_metrics {
    engine_stats es;
    int64_t pages_free, pages_cached, pages_inflight, pages_total;
    uint64_t evicted_tokens, evict_calls;
    int64_t requests_ok, requests_cancelled, requests_rejected, requests_failed;
    int64_t prefix_queries, prefix_hits;
    int64_t outstanding;       /* prompts submitted, not yet finished */
    bool accounting_ok;        /* the engine's page check when last idle */
    serve_hist ttft, itl, e2e;
} serve_metrics;

typedef struct serve_seq serve_seq;
typedef struct serve_job serve_job;

/* One prompt of a completion request. */
struct serve_seq {
    int32_t *tokens;           /* (n_tokens) */
    int32_t n_tokens;
    int64_t eid;               /* engine id once added, else -1 */
    int32_t *out;              /* (max_tokens) outputs published so far */
    int32_t n_out, sent;       /* published; written to the client (stream) */
    int32_t cached_tokens;
    bool done;
    bool finish_sent;          /* stream: its finish_reason went out */
    char *error;               /* finished with an error (malloc'd) */
    double t_last;             /* wall time of the last published token */
};

/* One completion request: n prompts answered together. */
struct serve_job {
    int refs;                  /* HTTP side + engine side */
    serve_job *next;           /* inbox link */
    serve_seq *seq;
    int32_t n_seq, n_done;
    int32_t max_tokens;
    int32_t stop_token;
    sampling_params sampling;
    bool stream, include_usage;
    bool cancelled;            /* the client went away */
    bool suspended;            /* its connection waits for the engine */
    void *conn;                /* struct MHD_Connection * */
    double t_recv;             /* wall time the request was parsed */
    char id[48];
    int64_t created;           /* unix seconds */
    /* SSE output not yet taken by the connection */
    char *sse;
    size_t sse_len, sse_cap, sse_off;
    bool sse_final;            /* [DONE] written to sse */
    double t_written;          /* wall time the stream last wrote (keep-alive) */
    bool keepalive;            /* woken to write an SSE comment: a client that
                                  went away while queued is noticed */
};

typedef struct serve serve;
struct serve {
    serve_config cfg;
    engine *e;
    int32_t vocab, max_context, page_size, num_pages;
    const char *backend_name;
    bool paced;                /* sim: the modelled clock kept in step with wall time */

    pthread_mutex_t mu;
    pthread_cond_t wake;       /* engine thread: inbox, cancel, stop */
    pthread_cond_t drained;    /* main thread: outstanding reached 0 */
    serve_job *inbox, *inbox_tail;
    bool draining;             /* refuse new work (503) */
    bool stop;                 /* engine thread: exit */
    bool cancel_pending;       /* a job was cancelled: scan */
    int64_t outstanding;
    int64_t http_jobs;         /* jobs a connection still holds */
    serve_metrics m;
    char fatal[512];           /* engine error: the server stops */
    double t0;                 /* wall clock origin */
    pthread_t thread;

    /* engine thread only */
    serve_seq **active;        /* added to the engine, not finished */
    serve_job **active_job;
    int64_t n_active, active_cap;

    void *daemon;              /* struct MHD_Daemon * */
};

double serve_wall(void);

/* Engine thread (serve_engine.c). */
int serve_engine_start(serve *s, char *err, size_t errlen);
void serve_engine_stop(serve *s);
/* Queue a checked job (under s->mu). */
void serve_submit_locked(serve *s, serve_job *j);
/* Drop one reference (under s->mu); frees the job at zero. */
void serve_job_unref_locked(serve_job *j);
void serve_hist_observe(serve_hist *h, double seconds);
/* Prometheus text of the snapshot into a malloc'd string. */
char *serve_metrics_text(const serve *s, const serve_metrics *m);

/* HTTP side (serve_http.c). */
int serve_http_start(serve *s, char *err, size_t errlen);
/* Stop accepting connections; in-flight ones go on. */
void serve_http_quiesce(serve *s);
void serve_http_stop(serve *s);
/* Wake a suspended connection (under s->mu). */
void serve_http_resume_locked(serve *s, serve_job *j);
/* The port bound. */
int serve_http_port(const serve *s);

#endif
