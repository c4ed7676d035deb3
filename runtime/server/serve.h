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
 * GET /metrics never waits for a step; the idle page check runs without
 * s->mu for the same reason. A suspended non-streaming connection is not
 * polled by libmicrohttpd, so the engine thread peeks at its socket every
 * keepalive_seconds and cancels the job of a client that went away.
 * Signals arrive on interrupt.h's signal thread (cmd_serve.c).
 */
#ifndef RKV_SERVE_H
#define RKV_SERVE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat_template.h"
#include "engine.h"
#include "run_opts.h"
#include "serve_pd.h"
#include "tokenizer.h"

typedef struct serve_config {
    const char *host;          /* numeric IPv4 or IPv6 address to bind */
    int port;                  /* 0: any free port (printed at start) */
    const char *model_name;    /* the id /v1/models lists */
    bool text_ids;             /* --tokenizer ids: text is decimal ids */
    const char *tokenizer_dir; /* --tokenizer DIR (serve_text.h) */
    bool tokenizer_named;      /* --tokenizer given: --model's directory is not looked in */
    const char *chat_template_path; /* --chat-template FILE */
    const tokenizer *tok;      /* loaded from tokenizer_dir; NULL: none */
    const chat_template *chat; /* NULL: chat completions say no_chat */
    char no_chat[512];         /* why there is no chat template */
    int64_t max_queue;         /* outstanding prompts above max_running: 503 */
    double drain_seconds;      /* SIGINT/SIGTERM: finish in-flight work this long;
                                  a second signal cuts it short */
    int64_t max_body;          /* bytes; larger bodies get 413 (Content-Length
                                  is checked before any byte is read) */
    unsigned conn_timeout;     /* seconds a connection may stay silent while it
                                  sends headers or body (or idles between
                                  requests); 0: never */
    unsigned max_connections;  /* open connections; more wait in the backlog */
    unsigned max_per_peer;     /* open connections from one address at most */
    double read_timeout;       /* seconds a connection has to deliver a whole
                                  request (headers and body), counted from its
                                  opening or its previous request's end, however
                                  it trickles; 0: no limit */
    double keepalive_seconds;  /* a stream silent this long (queued, no token yet)
                                  writes an SSE comment, so a client that went
                                  away is noticed and its request cancelled */
    int32_t default_max_tokens;
    int32_t max_logprobs;      /* logprobs asked for at most; 0: the engine keeps
                                  no logits and logprobs > 0 is refused */
    const char *api_key;       /* /v1 paths need "Authorization: Bearer KEY"; NULL: open */
    int32_t max_model_len;     /* --max-model-len: prompt + outputs at most; 0: the model's */
    const run_opts *run;       /* engine options, as `radixkv run` parsed them */
    serve_pd_role role;        /* --role: prefill/decode disaggregation (serve_pd.h) */
    double pd_timeout;         /* --pd-timeout: seconds a decode request waits for its handoff */
} serve_config;

/* Latency histogram, Prometheus style. It counts on the union of the bucket
 * bounds it is printed with (radixkv's own, vLLM's), so each printed set of
 * cumulative buckets is exact from one observation. */
#define SERVE_HIST_MAX 64
typedef struct serve_hist {
    double le[SERVE_HIST_MAX];              /* upper bounds (s), ascending */
    int n_le;
    uint64_t count[SERVE_HIST_MAX + 1];     /* per bucket; last: +Inf */
    double sum;
    uint64_t n;
} serve_hist;

/* Why a prompt ended: vLLM's finished_reason values. */
typedef enum serve_finish {
    SERVE_FINISH_STOP, SERVE_FINISH_LENGTH, SERVE_FINISH_ABORT, SERVE_FINISH_ERROR,
    SERVE_FINISH_KINDS
} serve_finish;
extern const char *const serve_finish_names[SERVE_FINISH_KINDS];

typedef struct serve_metrics {
    engine_stats es;
    int64_t pages_free, pages_cached, pages_inflight, pages_total;
    uint64_t evicted_tokens, evict_calls;
    int64_t requests_ok, requests_cancelled, requests_rejected, requests_failed;
    /* Counted as they happen (prefill done, token published, finish), for
     * every request whatever its end, as vLLM counts them. */
    int64_t prefix_queries, prefix_hits, prompt_tokens, generation_tokens;
    int64_t finished[SERVE_FINISH_KINDS]; /* by serve_finish */
    int64_t outstanding;       /* prompts submitted, not yet finished */
    bool accounting_ok;        /* the engine's page check when last idle */
    int64_t pages_evictable;   /* cached, unlocked: reclaimable */
    serve_hist ttft, itl, e2e;
    /* vLLM's per finished prompt (each sample its own request, as vLLM's
     * children): decode time, time per output token, preemptions, prompt
     * tokens computed (not cached); per prompt once its samples all ended:
     * n and the most tokens a sample generated; per engine step: tokens. */
    serve_hist decode, tpot, req_preempt, req_kv_computed, req_max_gen, iter_tokens;
    serve_hist queue, prefill, inference;
    int64_t queue_full;        /* 503s for a full queue (vLLM's admission_rejections) */
    int64_t batched_tokens;    /* the engine's rows computed at the last step */
    /* Per finished prompt, in tokens (vLLM's 1-2-5 bounds up to the context):
     * prompt length, tokens generated, max_tokens asked; n per request. */
    serve_hist req_prompt, req_gen, req_max_tokens, req_n;
} serve_metrics;

#define SERVE_MAX_N 128          /* samples per prompt (n) */
#define SERVE_MAX_LOGPROBS 20    /* as vLLM's default --max-logprobs */
#define SERVE_MAX_PROMPT_LOGITS_BYTES (256 << 20) /* prompt rows' logits one request may hold */

typedef struct serve_seq serve_seq;
typedef struct serve_job serve_job;

/* One prompt of a completion request. */
struct serve_seq {
    int32_t *tokens;           /* (n_tokens) */
    int32_t n_tokens;
    int64_t eid;               /* engine id once added, else -1 */
    int32_t *out;              /* (max_tokens) outputs published so far */
    int32_t n_out, sent;       /* published; written to the client (stream) */
    size_t sent_chars;         /* stream: text written so far (logprobs offsets) */
    size_t text_sent;          /* stream with a tokenizer: bytes of the decoded
                                  output written so far (the echo not counted) */
    bool echo_sent;            /* stream: the echoed prompt went out */
    int32_t cached_tokens;
    int32_t stop_reason;       /* the stop token id that ended it; -1: none */
    bool stop_cut;             /* a stop id the engine does not watch came out:
                                  outputs end there, the engine request is
                                  cancelled, the prompt finishes as a stop */
    bool prefilled;            /* its prompt was counted (first token out) */
    int32_t sample;            /* 0..n-1 among the samples of its prompt */
    bool added;                /* handed to the engine (or failed there) */
    int32_t stop_str;          /* index of the stop string that ended it; -1 */
    char *text;                /* stop strings: the output text so far */
    size_t text_len, text_cap, text_cut; /* text_cut: where the stop string began */
    float *lp;                 /* logprobs: (max_tokens) the sampled token's */
    int32_t *top_ids;          /* (max_tokens, logprobs) the most likely ids */
    float *top_lp;             /* (max_tokens, logprobs) their logprobs */
    /* Prompt logprobs (job's prompt_lp >= 0), on sample 0 only (the others
     * share its prompt): position t >= 1 is token t under the logits of row
     * t - 1; filled with its first output (p_ready). */
    float *p_lp;               /* (n_tokens) */
    int32_t *p_rank;           /* (n_tokens) 1 + ids with a larger logprob (ties count) */
    int32_t *p_top_ids;        /* (n_tokens, prompt_lp) */
    float *p_top_lp;           /* (n_tokens, prompt_lp) */
    bool p_ready;
    bool done;
    bool finish_sent;          /* stream: its finish_reason went out */
    char *error;               /* finished with an error (malloc'd) */
    double t_last;             /* wall time of the last published token */
    double t_first;            /* wall time of its first token */
    int32_t samples_done;      /* sample 0: samples of its prompt that ended */
    int32_t max_gen;           /* sample 0: most outputs a sample of its prompt made */
    int32_t preemptions;       /* the engine's count, at its end */
    /* vLLM's request phases on the engine clock, from its result at the end
     * (all 0 for a prompt the engine never took): queued, first scheduled,
     * first token, last token. */
    double e_arrival, e_sched, e_first, e_finish;
};

/* One completion request: n prompts answered together. */
struct serve_job {
    int refs;                  /* HTTP side + engine side */
    serve_job *next;           /* inbox link */
    serve_seq *seq;
    int32_t n_seq, n_done;
    int32_t n_samples;         /* n: seq[i*n + k] is sample k of prompt i;
                                  samples k > 0 start once sample 0 has its
                                  first token, so they find the prompt's pages
                                  in the cache */
    uint64_t seed;             /* request seed (seeded) */
    bool seeded;
    bool echo;                 /* the prompt leads each choice */
    int32_t logprobs;          /* top-k per output token; -1: none */
    int32_t prompt_lp;         /* top-k per prompt token (prompt_logprobs, or logprobs
                                  with echo, as vLLM); -1: none */
    const char *prompt_lp_param; /* the field that asked for them (errors name it) */
    char **stop_str;           /* (n_stop_str) stop strings (--tokenizer ids or DIR) */
    bool chat;                 /* /v1/chat/completions: answers shaped as chat */
    const tokenizer *tok;      /* the server's tokenizer (stop strings on its bytes) */
    int32_t n_stop_str;
    size_t stop_str_max;       /* longest, bytes */
    int32_t max_tokens;
    int32_t *stop_ids;         /* (n_stop) stop_token_ids; the engine watches
                                  the first, the engine thread the others */
    int32_t n_stop;
    sampling_params sampling;
    logit_procs procs;         /* sampling.procs points here when any is asked */
    int32_t *allowed;          /* procs' arrays (malloc'd) */
    int32_t *bias_ids;
    float *bias_vals;
    int32_t *bad_ids, *bad_starts; /* procs' bad words */
    bool stream, include_usage;
    bool continuous_usage;     /* stream_options.continuous_usage_stats: usage in
                                  every chunk (with include_usage, as vLLM) */
    bool include_stop;         /* include_stop_str_in_output: a stop token's or a
                                  stop string's text stays in the text (vLLM
                                  leaves it out) */
    bool tokens_as_ids;        /* return_tokens_as_token_ids: logprobs name
                                  tokens "token_id:ID" */
    bool return_token_ids;     /* prompt_token_ids in every choice */
    int32_t truncate;          /* truncate_prompt_tokens: keep k tokens; 0: all */
    bool truncate_right;       /* truncation_side right: the first k */
    bool echo_only;            /* echo with max_tokens 0: the prompt alone is the
                                  text (the engine still runs one token, as vLLM) */
    bool cancelled;            /* the client went away */
    bool suspended;            /* its connection waits for the engine */
    void *conn;                /* struct MHD_Connection * */
    double t_recv;             /* wall time the request was parsed */
    char id[112];              /* cmpl-<request_id or a counter> */
    int64_t created;           /* unix seconds */
    /* SSE output not yet taken by the connection */
    char *sse;
    size_t sse_len, sse_cap, sse_off;
    bool sse_final;            /* [DONE] written to sse */
    bool sse_oom;              /* out of memory: a static error event and
                                  [DONE] end the stream instead */
    size_t oom_off;            /* bytes of that static text written */
    double t_written;          /* wall time the stream last wrote (keep-alive) */
    bool keepalive;            /* woken to write an SSE comment: a client that
                                  went away while queued is noticed */
    serve_pd_job pd;           /* the router's bootstrap fields (serve_pd.h) */
};

typedef struct serve_guard serve_guard;

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
    int signals;               /* SIGINT/SIGTERM received (the signal thread) */
    int first_signal;
    bool stop;                 /* engine thread: exit */
    bool cancel_pending;       /* a job was cancelled: scan */
    int64_t outstanding;
    int64_t http_jobs;         /* jobs a connection still holds */
    int64_t http_parsing;      /* large bodies parsed off the HTTP thread (their
                                  connections suspended until done) */
    serve_metrics m;
    char fatal[512];           /* engine error: the server stops */
    double t0;                 /* wall clock origin */
    pthread_t thread;

    /* engine thread only */
    serve_seq **active;        /* added to the engine, not finished */
    serve_job **active_job;
    int64_t n_active, active_cap;

    /* The HTTP side's hooks, set by serve_http_start before any job exists;
     * the engine thread calls them under s->mu. */
    struct {
        /* Wake a suspended connection. */
        void (*resume_locked)(serve *s, serve_job *j);
        /* Has the client of a suspended, non-streaming job gone away? */
        bool (*client_gone_locked)(const serve_job *j);
    } http;
    void *daemon;              /* struct MHD_Daemon * */
    serve_guard *guard;        /* --request-read-timeout's watch */
    serve_pd *pd;              /* --role's handoff thread; NULL: none */
    serve_pd_counts pd_counts;
};

double serve_wall(void);

/* Engine thread (serve_engine.c). */
int serve_engine_start(serve *s, char *err, size_t errlen);
void serve_engine_stop(serve *s);
/* Queue a checked job (under s->mu). */
void serve_submit_locked(serve *s, serve_job *j);
/* Drop one reference (under s->mu); frees the job at zero. */
void serve_job_unref_locked(serve_job *j);
/* The histograms' bounds (radixkv's and vLLM's) into s->m. */
void serve_metrics_init(serve *s);
void serve_hist_observe(serve_hist *h, double seconds);
/* Why q ended (q->done). */
serve_finish serve_seq_finish(const serve_job *j, const serve_seq *q);
/* Prometheus text of the snapshot into a malloc'd string. */
char *serve_metrics_text(const serve *s, const serve_metrics *m);

/* Fields (serve_fields.c): every key of a completion request against
 * vLLM's protocol. false when one asks for what radixkv does not do: *param
 * names it and msg says why. Keys vLLM does not define are ignored, as vLLM does. */
bool serve_fields_check(json_t *req, const char **param, char *msg, size_t len);

/* The request-read deadline (serve_guard.c): a thread shuts down the socket
 * of a connection that has not delivered a whole request in time. NULL
 * (deadline <= 0, or no memory/thread): nothing is watched. */
serve_guard *serve_guard_start(double deadline_seconds);
void serve_guard_stop(serve_guard *g);
/* The daemon's connection notifications: fd opened (sets *socket_context) or
 * closed. */
void serve_guard_opened(serve_guard *g, int fd, void **socket_context);
void serve_guard_closed(serve_guard *g, void *socket_context);
/* A request was received whole (true) or ended, the next one starting (false). */
void serve_guard_received(serve_guard *g, void *socket_context, bool received);
/* Connections shut for the deadline so far. */
int64_t serve_guard_shut(serve_guard *g);

/* The HTTP side's declarations are in serve_http.h: it calls the engine
 * thread's functions above, and the engine thread reaches it only through
 * the hooks in struct serve (s->http), so the two files depend one way. */

#endif
