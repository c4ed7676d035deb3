/* cmd_serve.c - `radixkv serve`: an OpenAI-compatible completion server.
 *
 *   options (serve's own + run's engine options) -> engine_create, pins
 *   -> engine thread + HTTP thread (serve.h) -> wait for SIGINT/SIGTERM
 *   -> drain: refuse new work, finish what is in flight (or cancel it after
 *      --drain-timeout or at a second signal), check the page accounting,
 *      print a summary, exit 0.
 *
 * Signals are taken on interrupt.h's signal thread, started before any
 * other thread of the command, so no thread ever takes the default action.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "commands.h"

#ifndef RKV_HAVE_SERVE

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "radixkv serve: this build has no HTTP server (libmicrohttpd was not found "
                    "when it was configured; scripts/deps.sh installs it)\n");
    return 2;
}

#else

#include <jansson.h>

#include "cache_pin.h"
#include "interrupt.h"
#include "pin_file.h"
#include "rkv_core.h"
#include "serve.h"
#include "serve_http.h"

static void usage_serve(FILE *f)
{
    fprintf(f,
        "usage: radixkv serve [--host ADDR] [--port N] [options]\n"
        "\n"
        "Serves the engine over HTTP, OpenAI-style: POST /v1/completions (prompts as token ids,\n"
        "streaming as server-sent events), GET /v1/models, /health, /metrics (Prometheus),\n"
        "/model_info and /server_info (what a router asks a worker). The engine steps on its\n"
        "own thread. SIGINT/SIGTERM: refuse new work (503), finish the requests in flight,\n"
        "exit 0; a second signal cancels what is left at once (answers and the summary are\n"
        "still written).\n"
        "On start one JSON line {\"type\":\"listening\",\"port\":N,...} goes to stdout; at the end\n"
        "a summary line.\n"
        "\n"
        "  --host ADDR             numeric address to bind (default 127.0.0.1)\n"
        "  --port N                TCP port; 0 picks a free one (default 8000)\n"
        "  --model-name NAME       the model id clients name (default: --model's value)\n"
        "  --tokenizer NAME        none (token ids only) | ids (text prompts are decimal\n"
        "                          token ids separated by spaces; outputs as text too)\n"
        "                          | DIR: the model's tokenizer (DIR/tokenizer.json, byte-level\n"
        "                          BPE): text prompts, /v1/chat/completions (the chat template\n"
        "                          of DIR/tokenizer_config.json), /tokenize, /detokenize\n"
        "                          (default: --model's directory when it holds tokenizer.json,\n"
        "                          else none)\n"
        "  --chat-template FILE    a chat template instead of the tokenizer config's\n"
        "  --max-queue N           prompts waiting beyond --max-running before new requests get\n"
        "                          503 with Retry-After (default 1024)\n"
        "  --drain-timeout S       on SIGINT/SIGTERM, seconds to finish in-flight requests\n"
        "                          before cancelling them (default 30)\n"
        "  --max-body-bytes N      larger request bodies get 413, checked against\n"
        "                          Content-Length before reading (default 8388608)\n"
        "  --connection-timeout S  close a connection silent for S seconds while it sends its\n"
        "                          request or idles between requests; 0: never (default 10)\n"
        "  --max-connections N     open connections at most; more wait (default 1024)\n"
        "  --max-connections-per-peer N  open connections from one address at most; more\n"
        "                          are closed as they come (default: --max-connections; a\n"
        "                          router in front is one address)\n"
        "  --request-read-timeout S  a connection has S seconds to deliver a whole request\n"
        "                          (headers and body, however slowly it trickles), counted\n"
        "                          from its opening or its last request's end; 0: no limit\n"
        "                          (default 30)\n"
        "  --max-logprobs N        requests may ask for logprobs up to N (at most 20); the\n"
        "                          engine then keeps each output's logits (vocab floats per\n"
        "                          token). 0 (default): logprobs > 0 is refused\n"
        "  --keepalive S           a stream with nothing to send for S seconds writes an SSE\n"
        "                          comment, so a client gone while queued is noticed (default 1)\n"
        "  --api-key KEY           /v1 paths answer 401 without \"Authorization: Bearer KEY\"\n"
        "                          (default: $VLLM_API_KEY, else none)\n"
        "  --role prefill|decode   one half of a disaggregated pair behind a router's PD mode\n"
        "                          (sglang-router --pd-disaggregation): requests carrying\n"
        "                          bootstrap_room are prefilled here and their full pages\n"
        "                          stored in --tier-remote (prefill), or wait for that handoff,\n"
        "                          load the pages and decode (decode); others are served whole\n"
        "  --pd-timeout S          decode: seconds a request waits for its handoff before it\n"
        "                          fails naming its room (default 30)\n"
        "\n"
        "vLLM's spellings, same meaning: --served-model-name (= --model-name), --max-model-len N\n"
        "(prompt + output at most N tokens, at most the model's context), --block-size\n"
        "(= --page-size), --max-num-seqs (= --max-running), --max-num-batched-tokens\n"
        "(= --max-batched-tokens), --enable-prefix-caching (the default),\n"
        "--no-enable-prefix-caching (= --cache none), --disable-log-requests and\n"
        "--disable-log-stats (serve logs neither). Other vLLM options are refused by name.\n"
        "\n"
        "Engine options: those of `radixkv run` (see radixkv run --help) but --trace, --out,\n"
        "--replicas and --router*; --max-tokens is the default for requests without max_tokens.\n"
        "With --backend sim the modelled clock is kept in step with wall time.\n");
}

/* cli.h's value parsers, their message printed as serve's. */
static int serve_int(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char err[256];
    int rc = cli_parse_int(opt, v, lo, hi, out, err, sizeof err);
    if (rc) fprintf(stderr, "radixkv serve: %s\n", err);
    return rc;
}

static int serve_double(const char *opt, const char *v, double lo, double hi, double *out)
{
    char err[256];
    int rc = cli_parse_double(opt, v, lo, hi, out, err, sizeof err);
    if (rc) fprintf(stderr, "radixkv serve: %s\n", err);
    return rc;
}

static void serve_defaults(serve_config *sc)
{
    sc->host = "127.0.0.1";
    sc->port = 8000;
    sc->max_queue = 1024;
    sc->drain_seconds = 30;
    sc->keepalive_seconds = 1;
    sc->max_body = 8 << 20;
    sc->conn_timeout = 10;
    sc->max_connections = 1024;
    sc->read_timeout = 30;
    sc->pd_timeout = 30;
}

/* --tokenizer's value: none, ids, or a directory holding tokenizer.json. */
static int serve_tokenizer_opt(serve_config *sc, const char *v)
{
    if (!strcmp(v, "ids") || !strcmp(v, "none")) {
        sc->text_ids = !strcmp(v, "ids");
        sc->tokenizer_named = true;
        return -1;
    }
    struct stat sb;
    if (stat(v, &sb) || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "radixkv serve: --tokenizer: unknown value '%s' (none, ids, or a "
                "directory holding tokenizer.json)\n", v);
        return 2;
    }
    sc->tokenizer_dir = v; /* loaded by serve_load_text once options are read */
    sc->tokenizer_named = true;
    return -1;
}

/* --role's value, from serve_pd_role_names. */
static int serve_role_opt(serve_config *sc, const char *v)
{
    for (int r = SERVE_PD_PREFILL; serve_pd_role_names[r]; r++)
        if (!strcmp(v, serve_pd_role_names[r])) {
            sc->role = (serve_pd_role)r;
            return -1;
        }
    fprintf(stderr, "radixkv serve: --role: unknown value '%s' (prefill or decode)\n", v);
    return 2;
}

/* One of serve's own options with its value v: -1 to go on, else the exit status. */
static int serve_opt(serve_config *sc, const char *name, const char *v)
{
    int64_t x;
    int rc = -1;
    if (!strcmp(name, "--host")) sc->host = v;
    else if (!strcmp(name, "--model-name") || !strcmp(name, "--served-model-name"))
        sc->model_name = v;
    else if (!strcmp(name, "--api-key")) {
        if (!*v) {
            fprintf(stderr, "radixkv serve: --api-key: empty\n");
            return 2;
        }
        sc->api_key = v;
    } else if (!strcmp(name, "--max-model-len")) {
        if (!(rc = serve_int(name, v, 1, INT32_MAX, &x))) sc->max_model_len = (int32_t)x;
    } else if (!strcmp(name, "--port")) {
        if (!(rc = serve_int(name, v, 0, 65535, &x))) sc->port = (int)x;
    } else if (!strcmp(name, "--max-queue")) {
        if (!(rc = serve_int(name, v, 0, 1 << 24, &x))) sc->max_queue = x;
    } else if (!strcmp(name, "--drain-timeout")) {
        rc = serve_double(name, v, 0, 86400, &sc->drain_seconds);
    } else if (!strcmp(name, "--max-body-bytes")) {
        if (!(rc = serve_int(name, v, 1, (int64_t)1 << 40, &x))) sc->max_body = x;
    } else if (!strcmp(name, "--connection-timeout")) {
        if (!(rc = serve_int(name, v, 0, 86400, &x))) sc->conn_timeout = (unsigned)x;
    } else if (!strcmp(name, "--max-connections-per-peer")) {
        if (!(rc = serve_int(name, v, 1, 1 << 20, &x))) sc->max_per_peer = (unsigned)x;
    } else if (!strcmp(name, "--request-read-timeout")) {
        rc = serve_double(name, v, 0, 86400, &sc->read_timeout);
    } else if (!strcmp(name, "--max-connections")) {
        if (!(rc = serve_int(name, v, 1, 1 << 20, &x))) sc->max_connections = (unsigned)x;
    } else if (!strcmp(name, "--max-logprobs")) {
        if (!(rc = serve_int(name, v, 0, SERVE_MAX_LOGPROBS, &x))) sc->max_logprobs = (int32_t)x;
    } else if (!strcmp(name, "--keepalive")) {
        rc = serve_double(name, v, 0.01, 3600, &sc->keepalive_seconds);
    } else if (!strcmp(name, "--chat-template")) {
        sc->chat_template_path = v;
    } else if (!strcmp(name, "--role")) {
        return serve_role_opt(sc, v);
    } else if (!strcmp(name, "--pd-timeout")) {
        rc = serve_double(name, v, 0.01, 86400, &sc->pd_timeout);
    } else {
        return serve_tokenizer_opt(sc, v);
    }
    return rc ? rc : -1;
}

/* vLLM's spellings: flags that change nothing here (prefix caching is on by
 * default, serve writes no per-request or periodic log) are dropped, the
 * others go on as run's options. 1: a vLLM spelling (handled, *i may move
 * past its value), 0: not one, 2: its value is missing. */
static int serve_vllm_opt(int argc, char **argv, int *i, const char *name, const char *val,
                          char **rest, int *nrest)
{
    static const char *const renamed[][2] = {{"--block-size", "--page-size"},
                                             {"--max-num-seqs", "--max-running"},
                                             {"--max-num-batched-tokens", "--max-batched-tokens"},
                                             {NULL, NULL}};
    const char *a = argv[*i];
    if (!strcmp(a, "--enable-prefix-caching") || !strcmp(a, "--disable-log-requests") ||
        !strcmp(a, "--disable-log-stats"))
        return 1;
    if (!strcmp(a, "--no-enable-prefix-caching")) {
        rest[(*nrest)++] = "--cache";
        rest[(*nrest)++] = "none";
        return 1;
    }
    int rn = 0;
    while (renamed[rn][0] && strcmp(renamed[rn][0], name)) rn++;
    if (!renamed[rn][0]) return 0;
    const char *v = val ? val : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!v) {
        fprintf(stderr, "radixkv serve: %s needs a value\n", name);
        return 2;
    }
    rest[(*nrest)++] = (char *)renamed[rn][1];
    rest[(*nrest)++] = (char *)v;
    return 1;
}

/* serve's own options; everything else goes to run_parse_options. */
static int parse_serve(int argc, char **argv, serve_config *sc, char **rest, int *nrest)
{
    static const char *const own[] = {"--host", "--port", "--model-name", "--tokenizer",
                                      "--max-queue", "--drain-timeout", "--keepalive",
                                      "--max-body-bytes", "--connection-timeout",
                                      "--max-connections", "--max-logprobs",
                                      "--served-model-name", "--max-model-len", "--api-key",
                                      "--max-connections-per-peer",
                                      "--request-read-timeout", "--chat-template", "--role",
                                      "--pd-timeout", NULL};
    serve_defaults(sc);
    *nrest = 0;
    rest[(*nrest)++] = argv[0]; /* run_parse_options names the command from it */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char name[32];
        const char *eq = strchr(a, '=');
        if (!strncmp(a, "--", 2) && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            usage_serve(stdout);
            return 0;
        }
        int vr = serve_vllm_opt(argc, argv, &i, name, val, rest, nrest);
        if (vr == 2) return 2;
        if (vr) continue;
        int k = 0;
        while (own[k] && strcmp(own[k], name)) k++;
        if (!own[k]) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        const char *v = val ? val : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "radixkv serve: %s needs a value\n", name);
            return 2;
        }
        int rc = serve_opt(sc, name, v);
        if (rc >= 0) return rc;
    }
    return -1;
}

static void summary(FILE *f, serve *s)
{
    const serve_metrics *m = &s->m;
    fprintf(f,
            "{\"type\":\"summary\",\"requests_ok\":%lld,\"requests_cancelled\":%lld,"
            "\"requests_rejected\":%lld,\"requests_failed\":%lld,\"prompt_tokens\":%lld,"
            "\"cached_tokens\":%lld,\"output_tokens\":%lld,\"hit_rate\":%.6f,\"steps\":%lld,"
            "\"preemptions\":%lld,\"pages_free\":%lld,\"pages_cached\":%lld,"
            "\"pages_inflight\":%lld,\"num_pages\":%lld",
            (long long)m->requests_ok, (long long)m->requests_cancelled,
            (long long)m->requests_rejected, (long long)m->requests_failed,
            (long long)m->prefix_queries, (long long)m->prefix_hits, (long long)m->generation_tokens,
            m->prefix_queries ? (double)m->prefix_hits / (double)m->prefix_queries : 0,
            (long long)m->es.steps, (long long)m->es.preemptions, (long long)m->pages_free,
            (long long)m->pages_cached, (long long)m->pages_inflight, (long long)m->pages_total);
    /* --role: the handoffs of this side (serve_pd.h). */
    const serve_pd_counts *pc = &s->pd_counts;
    if (s->cfg.role == SERVE_PD_PREFILL)
        fprintf(f, ",\"role\":\"prefill\",\"handoffs_sent\":%lld,\"handoffs_lost\":%lld",
                (long long)pc->sent, (long long)pc->lost);
    else if (s->cfg.role == SERVE_PD_DECODE)
        fprintf(f, ",\"role\":\"decode\",\"handoffs_admitted\":%lld,\"handoffs_failed\":%lld",
                (long long)pc->admitted, (long long)pc->failed);
    fprintf(f, "}\n");
    fflush(f);
}

/* Wait on s->drained until the deadline passes, nothing is outstanding
 * (http: no connection holds a job any more) or min_stop signals came. */
static void wait_drained_locked(serve *s, double seconds, bool http, int min_stop)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)seconds;
    until.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (http ? s->http_jobs > 0 : s->outstanding > 0 && !s->fatal[0] && s->signals < min_stop)
        if (pthread_cond_timedwait(&s->drained, &s->mu, &until) == ETIMEDOUT) break;
}

/* The signal thread: the first signal starts the drain, a second cuts it
 * short (wait_drained_locked wakes on s->drained). */
static void on_signal(int sig, int count, void *arg)
{
    serve *s = arg;
    fprintf(stderr, "radixkv serve: %s: %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            count == 1 ? "draining" : count == 2 ? "cancelling the requests in flight"
                                                 : "already cancelling");
    pthread_mutex_lock(&s->mu);
    if (s->signals++ == 0) s->first_signal = sig;
    pthread_cond_broadcast(&s->drained);
    pthread_mutex_unlock(&s->mu);
}

/* --tokenizer DIR and --chat-template FILE into sc (serve_text.h). A model's
 * own template that radixkv does not know leaves chat refused by name at
 * request time; a --chat-template it does not know is refused now. */
static int serve_load_text(serve_config *sc, tokenizer **tok, chat_template **chat)
{
    if (!sc->tokenizer_dir) {
        if (!sc->chat_template_path) return -1;
        fprintf(stderr, "radixkv serve: --chat-template needs --tokenizer DIR\n");
        return 2;
    }
    char err[512];
    if (tokenizer_load(sc->tokenizer_dir, tok, err, sizeof err)) {
        fprintf(stderr, "radixkv serve: --tokenizer %s\n", err);
        return 1;
    }
    const char *src = tokenizer_chat_template(*tok);
    const char *name = "tokenizer_config.json: chat_template";
    char *file = NULL;
    if (sc->chat_template_path) {
        size_t n;
        if (rkv_read_file(sc->chat_template_path, 0, &file, &n, err, sizeof err)) {
            fprintf(stderr, "radixkv serve: --chat-template %s\n", err);
            tokenizer_free(*tok);
            return 1;
        }
        src = file;
        name = sc->chat_template_path;
    }
    int rc = -1;
    if (!src)
        snprintf(sc->no_chat, sizeof sc->no_chat, "%s/tokenizer_config.json has no chat_template; "
                 "start the server with --chat-template FILE", sc->tokenizer_dir);
    else if (chat_template_create(src, name, tokenizer_bos_token(*tok), tokenizer_eos_token(*tok),
                                  chat, sc->no_chat, sizeof sc->no_chat) && file) {
        fprintf(stderr, "radixkv serve: --chat-template %s\n", sc->no_chat);
        tokenizer_free(*tok);
        rc = 2;
    }
    free(file);
    sc->tok = rc < 0 ? *tok : NULL;
    sc->chat = *chat;
    return rc;
}

/* --role's needs: the tier it hands pages through, stored as they are made. */
static int check_role(const serve_config *sc, const run_opts *o)
{
    if (sc->role == SERVE_PD_NONE) return -1;
    const char *why = !o->tier.cfg.remote.url ? "needs --tier-remote URL: the pages are handed "
                                                 "over through that server"
                      : o->tier.cfg.remote.write_back ? "needs --tier-remote-policy write-through: "
                                                          "the prefill's pages must reach the tier "
                                                          "as they are made"
                      : NULL;
    if (!why) return -1;
    fprintf(stderr, "radixkv serve: --role %s %s\n", serve_pd_role_names[sc->role], why);
    return 2;
}

/* Options into sc and o, and what they mean together: -1 to go on, else
 * the exit status. */
static int serve_options(int argc, char **argv, serve_config *sc, run_opts *o)
{
    /* Room for --no-enable-prefix-caching's two words and --name=value split in two. */
    char **rest = calloc(2 * (size_t)argc + 2, sizeof(char *));
    if (!rest) return 1;
    int nrest = 0;
    int rc = parse_serve(argc, argv, sc, rest, &nrest);
    memset(o, 0, sizeof *o);
    if (rc < 0) rc = run_parse_options(nrest, rest, o, false);
    free(rest);
    if (rc >= 0) return rc;
    if (o->trace || o->namespace_name || o->out || o->replicas > 1 || o->router) {
        fprintf(stderr, "radixkv serve: %s is an option of run only: serve takes requests over "
                        "HTTP (start N servers behind a router for replicas)\n",
                o->trace ? "--trace" : o->namespace_name ? "--namespace" : o->out ? "--out"
                : o->replicas > 1 ? "--replicas" : "--router");
        return 2;
    }
    if ((rc = check_role(sc, o)) >= 0) return rc;
    sc->default_max_tokens = o->default_max_tokens;
    /* Off unless asked: a router in front is one peer holding many
     * connections; --request-read-timeout is what frees slots a slowloris
     * holds. */
    if (!sc->max_per_peer || sc->max_per_peer > sc->max_connections)
        sc->max_per_peer = sc->max_connections;
    /* logprobs come from the logits the engine keeps per output. */
    if (sc->max_logprobs > 0) o->ec.keep_logits = true;
    sc->run = o;
    if (!sc->api_key) {
        const char *k = getenv("VLLM_API_KEY");
        if (k && *k) sc->api_key = k;
    }
    if (!sc->model_name) sc->model_name = o->ec.backend_cfg.model ? o->ec.backend_cfg.model : "default";
    /* As vLLM does, the model directory is where the tokenizer is looked for
     * first; a model named by preset or config file has none. */
    const char *mdir = o->ec.backend_cfg.model;
    char *probe = NULL;
    struct stat sb;
    if (!sc->tokenizer_named && mdir && !stat(mdir, &sb) && S_ISDIR(sb.st_mode) &&
        (probe = malloc(strlen(mdir) + sizeof "/tokenizer.json"))) {
        sprintf(probe, "%s/tokenizer.json", mdir);
        if (!stat(probe, &sb)) sc->tokenizer_dir = mdir;
    }
    free(probe);
    return -1;
}

static serve *serve_new(const serve_config *sc)
{
    serve *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *sc;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->drained, NULL);
    return s;
}

static void serve_delete(serve *s)
{
    pthread_cond_destroy(&s->drained);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* The engine's shape into s, and what the options ask of it. 0 or the exit status. */
static int serve_engine_shape(serve *s, const serve_config *sc)
{
    backend *be = engine_backend(s->e);
    cache *c = engine_cache(s->e);
    s->vocab = be->vocab_size;
    s->max_context = be->max_context;
    if (sc->max_model_len > be->max_context) {
        fprintf(stderr, "radixkv serve: --max-model-len %d is above the model's context of %d\n",
                sc->max_model_len, be->max_context);
        return 2;
    }
    if (sc->max_model_len > 0) s->max_context = sc->max_model_len;
    s->page_size = c->page_size;
    s->num_pages = c->pool->num_pages;
    s->backend_name = be->ops->name;
    s->paced = (be->ops->caps & BACKEND_CAP_MODELLED_TIME) != 0;
    if (sc->tok && tokenizer_vocab_size(sc->tok) > s->vocab) {
        fprintf(stderr, "radixkv serve: --tokenizer %s: ids up to %d, more than the model's "
                "vocabulary of %d\n", sc->tokenizer_dir, tokenizer_vocab_size(sc->tok) - 1, s->vocab);
        return 2;
    }
    return 0;
}

/* Start the engine thread, the handoff thread (--role) and HTTP; print the
 * listening line. 0 or the exit status (nothing left running). */
static int serve_start(serve *s, const run_opts *o)
{
    char err[512];
    if (serve_engine_start(s, err, sizeof err)) {
        fprintf(stderr, "radixkv serve: %s\n", err);
        return 1;
    }
    if (s->cfg.role != SERVE_PD_NONE &&
        serve_pd_start(s, s->cfg.role, o->tier.cfg.remote.url, o->tier.cfg.remote.ns,
                       s->cfg.pd_timeout, err, sizeof err)) {
        fprintf(stderr, "radixkv serve: %s\n", err);
        serve_engine_stop(s);
        return 2;
    }
    if (serve_http_start(s, err, sizeof err)) {
        fprintf(stderr, "radixkv serve: %s\n", err);
        serve_pd_stop(s);
        serve_engine_stop(s);
        return 2;
    }
    int port = serve_http_port(s);
    /* jansson writes the line: a model name may hold quotes. */
    json_t *hello = json_pack("{s:s,s:s,s:i,s:s,s:s,s:s}", "type", "listening", "host", s->cfg.host,
                              "port", port, "model", s->cfg.model_name, "backend", s->backend_name,
                              "role", serve_pd_role_names[s->cfg.role]);
    char *line = hello ? json_dumps(hello, JSON_COMPACT) : NULL;
    json_decref(hello);
    printf("%s\n", line ? line : "{\"type\":\"listening\"}");
    free(line);
    fflush(stdout);
    fprintf(stderr, "radixkv serve: %s; cache %s, policy %s; listening on %s port %d\n",
            engine_backend(s->e)->description, o->ec.cache_cfg.kind ? o->ec.cache_cfg.kind : "radix",
            o->ec.policy, s->cfg.host, port);
    return 0;
}

/* Until a signal or an engine failure (both broadcast s->drained); then the
 * drain: new work gets 503 (the port stays open, so a probe reads 503 rather
 * than a refused connection), in-flight requests finish, then the rest is
 * cancelled; connections get their answers before the daemon stops. */
static void serve_wait_and_drain(serve *s)
{
    pthread_mutex_lock(&s->mu);
    while (!s->signals && !s->fatal[0]) pthread_cond_wait(&s->drained, &s->mu);
    s->draining = true;
    wait_drained_locked(s, s->cfg.drain_seconds, false, 2);
    if (s->outstanding > 0) {
        fprintf(stderr, "radixkv serve: cancelling %lld requests still in flight\n",
                (long long)s->outstanding);
        for (int64_t i = 0; i < s->n_active; i++) s->active_job[i]->cancelled = true;
        for (serve_job *j = s->inbox; j; j = j->next) j->cancelled = true;
        serve_pd_cancel_locked(s);
        s->cancel_pending = true;
        pthread_cond_signal(&s->wake);
        wait_drained_locked(s, 10, false, INT32_MAX);
    }
    pthread_mutex_unlock(&s->mu);
    /* Held handoffs fail into the engine's inbox before it stops. */
    serve_pd_stop(s);
    serve_engine_stop(s);
    /* Answers already produced still have to reach their clients. */
    pthread_mutex_lock(&s->mu);
    wait_drained_locked(s, 5, true, INT32_MAX);
    pthread_mutex_unlock(&s->mu);
    serve_http_stop(s);
}

/* After the drain: the engine's failure, the page accounting, the pins. */
static int serve_final_check(serve *s, const run_opts *o, cache_pins *pins)
{
    char err[512];
    rkv_status st;
    if (s->fatal[0]) {
        fprintf(stderr, "radixkv serve: %s\n", s->fatal);
        return 1;
    }
    if ((st = engine_check(s->e, err, sizeof err))) {
        /* The check's own allocation failing says nothing about the pages. */
        fprintf(stderr, "radixkv serve: %s%s\n",
                st == RKV_ENOMEM ? "out of memory checking the page accounting at exit: " : "", err);
        return 1;
    }
    if (o->pin && cache_pins_check(engine_cache(s->e), pins, err, sizeof err)) {
        fprintf(stderr, "radixkv serve: %s\n", err);
        return 1;
    }
    return 0;
}

/* Engine, pins, threads, the run until a signal, the summary. */
static int serve_engine_run(serve *s, run_opts *o)
{
    char err[512];
    rkv_status st = engine_create(&o->ec, &s->e, err, sizeof err);
    if (st) {
        fprintf(stderr, "radixkv serve: %s\n", err);
        return st == RKV_EINVAL || st == RKV_ENOTSUP ? 2 : 1;
    }
    backend *be = engine_backend(s->e);
    cache *c = engine_cache(s->e);
    cache_pins pins;
    cache_pins_init(&pins);
    int status = serve_engine_shape(s, &s->cfg);
    if (!status && o->pin) {
        pin_file_stats ps;
        if ((st = pin_file_apply(c, be, o->pin, be->vocab_size, &pins, &ps, err, sizeof err))) {
            fprintf(stderr, "radixkv serve: --pin %s\n", err);
            status = st == RKV_EIO || st == RKV_ENOMEM ? 1 : 2;
        }
    }
    if (!status && !(status = serve_start(s, o))) {
        serve_wait_and_drain(s);
        status = serve_final_check(s, o, &pins);
        pthread_mutex_lock(&s->mu);
        summary(stdout, s);
        pthread_mutex_unlock(&s->mu);
    }
    cache_pins_release(c, &pins);
    cache_pins_free(&pins);
    engine_destroy(s->e);
    return status;
}

int cmd_serve(int argc, char **argv)
{
    serve_config sc = {0};
    run_opts o;
    int rc = serve_options(argc, argv, &sc, &o);
    if (rc >= 0) return rc;
    tokenizer *tok = NULL;
    chat_template *chat = NULL;
    if ((rc = serve_load_text(&sc, &tok, &chat)) >= 0) return rc;
    serve *s = serve_new(&sc);
    int status = 1;
    /* Before any thread starts (the engine's backend may start some): every
     * later thread inherits the blocked mask. A client that goes away must
     * not kill the server: SIGPIPE is ignored. */
    if (!s) {
        fprintf(stderr, "radixkv serve: out of memory\n");
    } else if (interrupt_thread_start(on_signal, s)) {
        fprintf(stderr, "radixkv serve: cannot start the signal thread: %s\n", strerror(errno));
    } else {
        signal(SIGPIPE, SIG_IGN);
        status = serve_engine_run(s, &o);
        interrupt_thread_stop();
    }
    if (s) serve_delete(s);
    tokenizer_free(tok);
    chat_template_free(chat);
    return status;
}


#endif
