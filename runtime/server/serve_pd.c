/* serve_pd.c - prefill/decode handoff records over Redis (serve_pd.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rkv_config.h"
#include "rkv_core.h"
#include "serve.h"
#include "serve_http.h"
#include "serve_pd.h"
#include "tier_remote.h"

const char *const serve_pd_role_names[] = {"none", "prefill", "decode", NULL};

enum {
    PD_KEY_MAX = 192,        /* rkv:NS:pd:live:ID, the longest key, fits */
    PD_WAIT_KEYS = 64,       /* rooms one BLPOP waits on; the rest on the next round */
    PD_RECORD_TTL = 600,     /* seconds an unclaimed record stays on the server */
    PD_TAKEN_TTL = 600,      /* seconds a room's taken mark stays */
    PD_LIVE_MAX = 96,        /* a prefill server's liveness id */
};
/* One BLPOP round, seconds: a job held while a round is under way waits at
 * most this long for its own round (its record, once pushed, stays). */
#define PD_ROUND_S 0.05
/* A prefill server's liveness key lapses PD_LIVE_TTL_S after its last
 * refresh, and its pd thread refreshes it every PD_LIVE_REFRESH_S: a thread
 * that misses four refreshes in a row (a loaded machine) still counts as
 * alive. A decode server looks at the takers of its held rooms every
 * PD_LOOK_S, so a dead prefill ends its requests within about
 * PD_LIVE_TTL_S + PD_LOOK_S of its last refresh, not at --pd-timeout. */
#define PD_LIVE_TTL_S 5.0
#define PD_LIVE_REFRESH_S 1.0
#define PD_LOOK_S 0.5

/* What the prefill side has to push for a room: its taken mark (the
 * announcement that this server computes it) or its handoff record. */
typedef struct pd_rec {
    uint64_t room;
    bool taken;              /* json is the taken mark's value, not a record */
    bool fixed;              /* json is oom_record, not to be freed */
    char *json;
    struct pd_rec *next;
} pd_rec;

/* The record of a prefill that ran out of memory writing its own. */
static char oom_record[] = "{\"error\":\"out of memory writing the handoff record\"}";

static void rec_free(pd_rec *r)
{
    if (!r) return;
    if (!r->fixed) free(r->json);
    free(r);
}

struct serve_pd {
    serve_pd_role role;
    char url[256], host[256], ns[TIER_REMOTE_NS_MAX + 1];
    int port, db;
    double timeout_s;        /* decode: a record must come within this */
    double io_s;             /* connect and reply timeout */
    void *conn;              /* redisContext *, the pd thread's only */
    char conn_err[600];      /* why the last connection failed */
    double next_retry;       /* serve_wall() of the next reconnect */
    pthread_t thread;
    pthread_cond_t wake;     /* under serve->mu */
    bool stop;
    serve_job **held;        /* decode: jobs waiting for their record */
    int64_t n_held, cap;
    int64_t turn;            /* decode: the held job a round starts at (rotates,
                                so more than PD_WAIT_KEYS rooms all get rounds) */
    double look_next;        /* decode: serve_wall() of the next look at takers */
    pd_rec *recs, *recs_tail; /* prefill: marks and records to push */
    char live[PD_LIVE_MAX];  /* prefill: this process's liveness id */
    char name[128];          /* prefill: "HOST:PORT pid N", for decode's messages */
    double live_next;        /* prefill: serve_wall() of the next refresh */
};

/* ---- both sides, under s->mu -------------------------------------------- */

/* msg into dst[cap] (cap >= 4). A message too long for it is cut at a UTF-8
 * character boundary and ends in "...", so the cut shows: the failures copied
 * here (a room, a taker, the tier's error) can outgrow the job's field. */
static void copy_msg(char *dst, size_t cap, const char *msg)
{
    static const char mark[] = "...";
    size_t n = strlen(msg);
    if (n < cap) {
        memcpy(dst, msg, n + 1);
        return;
    }
    size_t keep = cap - sizeof mark;
    while (keep > 0 && ((unsigned char)msg[keep] & 0xC0) == 0x80) keep--;
    memcpy(dst, msg, keep);
    memcpy(dst + keep, mark, sizeof mark);
}

/* A held job goes to the engine's inbox (failed with fail when non-NULL). */
static void release_locked(serve *s, int64_t i, const char *fail)
{
    serve_pd *p = s->pd;
    serve_job *j = p->held[i];
    p->held[i] = p->held[--p->n_held];
    if (fail && !j->pd.fail[0]) copy_msg(j->pd.fail, sizeof j->pd.fail, fail);
    s->outstanding -= j->n_seq; /* counted again by the submit */
    serve_submit_locked(s, j);
    serve_job_unref_locked(j);
}

/* The handoff record of a prompt of n tokens (serve_pd.h); NULL: no memory. */
static json_t *record_json(const serve *s, int32_t n)
{
    char model[24];
    snprintf(model, sizeof model, "%016" PRIx64, s->cfg.run->tier.cfg.remote.model_id);
    return json_pack("{s:i,s:i,s:i,s:s}", "prompt_tokens", n, "tokens",
                     (n - 1) / s->page_size * s->page_size, "page_size", s->page_size, "model",
                     model);
}

/* A record o (NULL: unparsable) for job j: true with why set when it fails
 * the job (where names the handoff), else false with j->pd.tokens set. */
static bool record_check(const serve *s, serve_job *j, const json_t *o, const char *where,
                         char *why, size_t len)
{
    json_t *err = json_object_get(o, "error");
    json_t *n = json_object_get(o, "prompt_tokens"), *t = json_object_get(o, "tokens");
    json_t *ps = json_object_get(o, "page_size"), *model = json_object_get(o, "model");
    char here[24];
    snprintf(here, sizeof here, "%016" PRIx64, s->cfg.run->tier.cfg.remote.model_id);
    if (json_is_string(err)) {
        snprintf(why, len, "%s: the prefill server failed: %s", where, json_string_value(err));
    } else if (!json_is_integer(n) || !json_is_integer(t)) {
        snprintf(why, len, "%s: the handoff record is malformed (no integer prompt_tokens and "
                 "tokens)", where);
    } else if (json_is_integer(ps) && json_integer_value(ps) != s->page_size) {
        snprintf(why, len, "%s: the prefill server's pages hold %lld tokens, this server's %d "
                 "(start both with one --page-size)", where, (long long)json_integer_value(ps),
                 s->page_size);
    } else if (json_is_string(model) && strcmp(json_string_value(model), here)) {
        snprintf(why, len, "%s: the prefill server's K/V is of another model (tier model id "
                 "%.20s, here %s: start both with one --model, --weights, --seed and --backend)",
                 where, json_string_value(model), here);
    } else if (json_integer_value(n) != j->seq[0].n_tokens) {
        snprintf(why, len, "%s: the prefill server computed a prompt of %lld tokens, this one "
                 "has %d", where, (long long)json_integer_value(n), j->seq[0].n_tokens);
    } else {
        int64_t tk = json_integer_value(t);
        j->pd.tokens = tk < 0 ? 0 : tk > j->seq[0].n_tokens ? j->seq[0].n_tokens : (int32_t)tk;
        return false;
    }
    return true;
}

void serve_pd_answer_locked(const serve *s, const serve_job *j, json_t *v)
{
    if (!v || !j->pd.vllm) return;
    /* vLLM's own keys beside ours, so the router's checks see what they know. */
    json_t *kv = json_pack("{s:b,s:b,s:n,s:n,s:n,s:n,s:o}", "do_remote_prefill", 1,
                           "do_remote_decode", 0, "remote_engine_id", "remote_block_ids",
                           "remote_host", "remote_port", "rkv", record_json(s, j->seq[0].n_tokens));
    if (kv) json_object_set_new(v, "kv_transfer_params", kv);
}

/* kv_transfer_params of vllm-router's PD mode (serve_pd.h): 0, or the status
 * with msg. */
static int parse_kv_transfer(serve *s, json_t *kv, serve_job *j, char *msg, size_t len)
{
    bool remote_decode = json_is_true(json_object_get(kv, "do_remote_decode"));
    bool remote_prefill = json_is_true(json_object_get(kv, "do_remote_prefill"));
    serve_pd_role want = remote_decode ? SERVE_PD_PREFILL : remote_prefill ? SERVE_PD_DECODE
                                                                         : SERVE_PD_NONE;
    if (s->cfg.role == SERVE_PD_NONE || want != s->cfg.role) {
        snprintf(msg, len, "kv_transfer_params: %s", s->cfg.role == SERVE_PD_NONE
                 ? "not supported by radixkv serve without --role (there is no KV transfer); "
                   "leave it out"
                 : want == SERVE_PD_NONE ? "expected do_remote_decode (a prefill) or "
                                           "do_remote_prefill (a decode) true"
                 : "this server is the other half of the pair (--role)");
        return 400;
    }
    if (j->n_seq != 1 || (want == SERVE_PD_PREFILL && j->stream)) {
        snprintf(msg, len, "kv_transfer_params: one prompt, n = 1%s per disaggregated request",
                 want == SERVE_PD_PREFILL ? " and no streaming" : "");
        return 400;
    }
    j->pd.on = true;
    if (want == SERVE_PD_PREFILL) {
        j->pd.vllm = true;
        if (j->max_tokens > 1) j->max_tokens = 1;
        return 0;
    }
    /* The prefill answered before this request was sent: its pages are in
     * the tier; only what it handed over is checked, here and at the first
     * token (serve_pd_check_locked). */
    json_t *rec = json_object_get(kv, "rkv");
    if (!json_is_object(rec)) {
        snprintf(msg, len, "kv_transfer_params: no \"rkv\" handoff record in it (was the prefill "
                 "server radixkv serve --role prefill?)");
        return 400;
    }
    if (record_check(s, j, rec, "kv_transfer_params", msg, len)) return 500;
    j->pd.waited = true;
    pthread_mutex_lock(&s->mu);
    s->pd_counts.admitted++;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int serve_pd_parse(serve *s, json_t *req, serve_job *j, const char **param, char *msg, size_t len)
{
    json_t *room = json_object_get(req, "bootstrap_room");
    json_t *host = json_object_get(req, "bootstrap_host");
    json_t *port = json_object_get(req, "bootstrap_port");
    json_t *kv = json_object_get(req, "kv_transfer_params");
    if (kv && !json_is_null(kv)) {
        *param = "kv_transfer_params";
        if (!json_is_object(kv)) {
            snprintf(msg, len, "kv_transfer_params: expected an object");
            return 400;
        }
        return parse_kv_transfer(s, kv, j, msg, len);
    }
    *param = "bootstrap_room";
    if (!room || json_is_null(room)) return 0; /* a plain request: served as one */
    /* The HTTP thread reads the role from the fixed configuration: s->pd is
     * the pd thread's state, cleared under s->mu when it stops. */
    if (s->cfg.role == SERVE_PD_NONE) {
        snprintf(msg, len, "bootstrap_room: this server has no --role; start it with --role "
                 "prefill or --role decode to take part in a disaggregated pair");
        return 400;
    }
    if (!json_is_integer(room) || json_integer_value(room) < 0) {
        snprintf(msg, len, "bootstrap_room: expected one non-negative integer%s",
                 json_is_array(room) ? " (a list of prompts is not disaggregated: send one "
                                       "prompt per request)" : "");
        return 400;
    }
    /* Named by the router for its own transfer engines: the pages travel
     * through the tier here, so they are checked for shape and not used. */
    if (host && !json_is_null(host) && !json_is_string(host)) {
        *param = "bootstrap_host";
        snprintf(msg, len, "bootstrap_host: expected a string, got %s",
                 json_is_array(host) ? "an array" : "another type");
        return 400;
    }
    if (port && !json_is_null(port) && !json_is_integer(port)) {
        *param = "bootstrap_port";
        snprintf(msg, len, "bootstrap_port: expected an integer or null");
        return 400;
    }
    if (j->n_seq != 1) {
        snprintf(msg, len, "bootstrap_room: one prompt and n = 1 per disaggregated request "
                 "(this one makes %d sequences)", j->n_seq);
        return 400;
    }
    j->pd.on = true;
    j->pd.room = (uint64_t)json_integer_value(room);
    /* The prefill side computes the prompt and its first token only; the
     * decode side answers with the request's own max_tokens. */
    if (s->cfg.role == SERVE_PD_PREFILL && j->max_tokens > 1) j->max_tokens = 1;
    return 0;
}

/* Queue r for the pd thread (under s->mu). */
static void queue_rec_locked(serve_pd *p, pd_rec *r)
{
    if (p->recs_tail) p->recs_tail->next = r;
    else p->recs = r;
    p->recs_tail = r;
    pthread_cond_signal(&p->wake);
}

/* Prefill: announce j's room as taken by this server (its liveness id and
 * name), before the engine sees the job. Without memory the room is never
 * marked: the decode side then waits for the record up to --pd-timeout. */
static void announce_locked(serve *s, serve_job *j)
{
    serve_pd *p = s->pd;
    j->pd.taken = true;
    if (!p->name[0]) /* the port is known once HTTP listens, before any job */
        snprintf(p->name, sizeof p->name, "%s:%d pid %ld", s->cfg.host, serve_http_port(s),
                 (long)getpid());
    json_t *o = json_pack("{s:s,s:s}", "live", p->live, "server", p->name);
    pd_rec *r = calloc(1, sizeof *r), *rec = calloc(1, sizeof *rec);
    if (r && o) r->json = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!r || !r->json || !rec) {
        /* Unmarked, the room is still answered by its record (allocated at
         * the end); only a death goes unnoticed until --pd-timeout. */
        fprintf(stderr, "radixkv serve: out of memory marking bootstrap_room %" PRIu64 " taken "
                "(its decode side waits up to its --pd-timeout instead of watching this server)\n",
                j->pd.room);
        rec_free(r);
        free(rec);
        return;
    }
    r->room = rec->room = j->pd.room;
    r->taken = true;
    j->pd.rec = rec;
    queue_rec_locked(p, r);
}

bool serve_pd_room(const serve *s, json_t *req, uint64_t *room)
{
    json_t *r = json_object_get(req, "bootstrap_room"), *kv = json_object_get(req, "kv_transfer_params");
    if (s->cfg.role != SERVE_PD_PREFILL || !json_is_integer(r) || json_integer_value(r) < 0 ||
        (kv && !json_is_null(kv)))
        return false;
    *room = (uint64_t)json_integer_value(r);
    return true;
}

void serve_pd_refused_locked(serve *s, uint64_t room, unsigned status, const char *why)
{
    serve_pd *p = s->pd;
    if (!p || p->role != SERVE_PD_PREFILL) return;
    char msg[400];
    snprintf(msg, sizeof msg, "refused (%u): %s", status, why);
    json_t *o = json_pack("{s:s}", "error", msg);
    pd_rec *r = calloc(1, sizeof *r);
    if (r && o) r->json = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!r || !r->json) {
        fprintf(stderr, "radixkv serve: out of memory writing the refusal of bootstrap_room %"
                PRIu64 " (its decode side waits up to its --pd-timeout)\n", room);
        rec_free(r);
        return;
    }
    r->room = room;
    queue_rec_locked(p, r);
}

void serve_pd_job_clear(serve_pd_job *pj)
{
    rec_free(pj->rec);
    pj->rec = NULL;
}

bool serve_pd_submit_locked(serve *s, serve_job *j)
{
    serve_pd *p = s->pd;
    if (p && p->role == SERVE_PD_PREFILL && j->pd.on && !j->pd.vllm && !j->pd.taken &&
        !j->pd.fail[0])
        announce_locked(s, j);
    if (!p || p->role != SERVE_PD_DECODE || !j->pd.on || j->pd.waited || j->pd.fail[0]) return false;
    j->pd.waited = true;
    if (rkv_grow((void **)&p->held, &p->cap, p->n_held + 1, sizeof *p->held)) {
        snprintf(j->pd.fail, sizeof j->pd.fail, "out of memory holding the request for its handoff");
        return false;
    }
    j->refs++;
    s->outstanding += j->n_seq;
    j->pd.deadline = serve_wall() + p->timeout_s;
    p->held[p->n_held++] = j;
    pthread_cond_signal(&p->wake);
    return true;
}

void serve_pd_prefilled_locked(serve *s, serve_job *j, const serve_seq *q, const char *error)
{
    serve_pd *p = s->pd;
    pd_rec *r = j->pd.rec;
    j->pd.rec = NULL;
    if (!p || p->role != SERVE_PD_PREFILL || !j->pd.on || j->pd.vllm) {
        rec_free(r);
        return;
    }
    json_t *o = error ? json_pack("{s:s}", "error", error) : record_json(s, q->n_tokens);
    if (!r) r = calloc(1, sizeof *r);
    if (r && o) r->json = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (r && !r->json) {
        r->json = oom_record;
        r->fixed = true;
    }
    if (!r) {
        /* Neither reserved (its mark failed too) nor allocated now: the
         * decode side's deadline ends that request. */
        fprintf(stderr, "radixkv serve: out of memory writing the handoff of bootstrap_room %" PRIu64
                "\n", j->pd.room);
        return;
    }
    r->room = j->pd.room;
    queue_rec_locked(p, r);
}

const char *serve_pd_check_locked(serve *s, const serve_job *j, int32_t cached, char *msg,
                                  size_t len)
{
    const serve_pd *p = s->pd;
    if (!p || p->role != SERVE_PD_DECODE || !j->pd.on || !j->pd.waited || cached >= j->pd.tokens)
        return NULL;
    s->pd_counts.failed++;
    snprintf(msg, len, "bootstrap_room %" PRIu64 ": the prefill server handed over %d prompt "
             "tokens, %d of them were found (a page is missing from the tier %s)", j->pd.room,
             j->pd.tokens, cached, p->url);
    return msg;
}

void serve_pd_cancel_locked(serve *s)
{
    while (s->pd && s->pd->n_held > 0) release_locked(s, s->pd->n_held - 1, "cancelled");
}

#if RKV_HAVE_HIREDIS

static void pd_key(const serve_pd *p, uint64_t room, char *key, size_t len)
{
    snprintf(key, len, "rkv:%s:pd:%" PRIu64, p->ns, room);
}

/* A room's taken mark and a prefill server's liveness key: under rkv:NS:pd:
 * too, never a record key (those end in a number after "pd:"). */
static void taken_key(const serve_pd *p, uint64_t room, char *key, size_t len)
{
    snprintf(key, len, "rkv:%s:pd:taken:%" PRIu64, p->ns, room);
}

static void live_key(const serve_pd *p, const char *live, char *key, size_t len)
{
    snprintf(key, len, "rkv:%s:pd:live:%s", p->ns, live);
}

/* The record of a room, for its held job: admit it, or fail it naming why. */
static void record_locked(serve *s, uint64_t room, const char *text)
{
    serve_pd *p = s->pd;
    int64_t i = 0;
    while (i < p->n_held && p->held[i]->pd.room != room) i++;
    if (i == p->n_held) return; /* its request already ended (deadline, client gone) */
    serve_job *j = p->held[i];
    char why[400], where[48];
    snprintf(where, sizeof where, "bootstrap_room %" PRIu64, room);
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    bool bad = true;
    if (o) bad = record_check(s, j, o, where, why, sizeof why);
    else snprintf(why, sizeof why, "%s: the handoff record could not be read: %s", where, je.text);
    json_decref(o);
    if (bad) s->pd_counts.failed++;
    else s->pd_counts.admitted++;
    release_locked(s, i, bad ? why : NULL);
}

/* The held job of a room fails with why (its taker lapsed, its record lost). */
static void fail_room_locked(serve *s, uint64_t room, const char *why)
{
    serve_pd *p = s->pd;
    for (int64_t i = 0; i < p->n_held; i++)
        if (p->held[i]->pd.room == room) {
            s->pd_counts.failed++;
            release_locked(s, i, why);
            return;
        }
}

/* Held jobs whose client went away or whose deadline passed end now. */
static void expire_locked(serve *s)
{
    serve_pd *p = s->pd;
    double now = serve_wall();
    for (int64_t i = p->n_held - 1; i >= 0; i--) {
        serve_job *j = p->held[i];
        if (!j->cancelled && !j->stream && j->suspended && s->http.client_gone_locked(j))
            j->cancelled = true;
        if (j->cancelled) {
            release_locked(s, i, "cancelled");
        } else if (now > j->pd.deadline) {
            char why[800];
            snprintf(why, sizeof why, "bootstrap_room %" PRIu64 ": no handoff from the prefill "
                     "server within %g s (--pd-timeout; did it fail or die?)%s%s", j->pd.room,
                     p->timeout_s, p->conn_err[0] ? "; the tier server: " : "", p->conn_err);
            s->pd_counts.failed++;
            release_locked(s, i, why);
        }
    }
}


#include <hiredis/hiredis.h>

static struct timeval tv_of(double s)
{
    return (struct timeval){.tv_sec = (time_t)s, .tv_usec = (suseconds_t)((s - floor(s)) * 1e6)};
}

/* Connect (pd thread, without s->mu). 0 or -1 with p->conn_err set. */
static int pd_connect(serve_pd *p, char *err, size_t errlen)
{
    redisContext *c = redisConnectWithTimeout(p->host, p->port, tv_of(p->io_s));
    redisReply *r = NULL;
    if (c && !c->err) {
        /* A BLPOP round waits PD_ROUND_S on the server before it answers. */
        redisSetTimeout(c, tv_of(p->io_s + PD_ROUND_S));
        r = p->db ? redisCommand(c, "SELECT %d", p->db) : redisCommand(c, "PING");
    }
    if (!c || c->err || !r || r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s: %s", p->url,
                 !c ? "out of memory" : c->err ? c->errstr : r ? r->str : "no reply");
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        return -1;
    }
    freeReplyObject(r);
    p->conn = c;
    return 0;
}

static void pd_drop(serve_pd *p, const char *what)
{
    redisContext *c = p->conn;
    snprintf(p->conn_err, sizeof p->conn_err, "%s: %s", p->url, c && c->err ? c->errstr : what);
    fprintf(stderr, "radixkv serve: the handoff connection failed (%s); retrying every second\n",
            p->conn_err);
    if (c) redisFree(c);
    p->conn = NULL;
    p->next_retry = serve_wall() + 1;
}

/* Prefill: push the taken marks and records (without s->mu). A lost record
 * is a timeout on the decode side, which names it; a lost mark leaves the
 * decode side waiting up to its --pd-timeout. */
static void push_records(serve *s, serve_pd *p, pd_rec *r)
{
    int64_t sent = 0, lost = 0;
    while (r) {
        pd_rec *next = r->next;
        bool ok = false;
        if (p->conn) {
            char key[PD_KEY_MAX];
            redisContext *c = p->conn;
            if (r->taken) {
                taken_key(p, r->room, key, sizeof key);
                redisAppendCommand(c, "SET %s %s EX %d", key, r->json, PD_TAKEN_TTL);
            } else {
                pd_key(p, r->room, key, sizeof key);
                redisAppendCommand(c, "RPUSH %s %s", key, r->json);
                redisAppendCommand(c, "EXPIRE %s %d", key, PD_RECORD_TTL);
            }
            redisReply *a = NULL, *b = NULL;
            if (redisGetReply(c, (void **)&a) != REDIS_OK ||
                (!r->taken && redisGetReply(c, (void **)&b) != REDIS_OK))
                pd_drop(p, "no reply");
            else if (a->type == REDIS_REPLY_ERROR) /* e.g. the server's maxmemory */
                snprintf(p->conn_err, sizeof p->conn_err, "%s: %s", p->url, a->str);
            else
                ok = true;
            if (a) freeReplyObject(a);
            if (b) freeReplyObject(b);
        }
        if (ok) {
            sent += !r->taken;
        } else {
            fprintf(stderr, "radixkv serve: bootstrap_room %" PRIu64 ": %s lost (%s)\n", r->room,
                    r->taken ? "its taken mark" : "handoff record", p->conn_err);
            lost += !r->taken;
        }
        rec_free(r);
        r = next;
    }
    pthread_mutex_lock(&s->mu);
    s->pd_counts.sent += sent;
    s->pd_counts.lost += lost;
    pthread_mutex_unlock(&s->mu);
}

/* Decode: one BLPOP round over the held rooms (s->mu held on entry and exit,
 * dropped around the call). */
static void wait_round_locked(serve *s)
{
    serve_pd *p = s->pd;
    int64_t n = p->n_held < PD_WAIT_KEYS ? p->n_held : PD_WAIT_KEYS;
    char keys[PD_WAIT_KEYS][PD_KEY_MAX];
    const char *argv[PD_WAIT_KEYS + 2];
    size_t lens[PD_WAIT_KEYS + 2];
    argv[0] = "BLPOP";
    for (int64_t i = 0; i < n; i++) {
        pd_key(p, p->held[(p->turn + i) % p->n_held]->pd.room, keys[i], sizeof keys[i]);
        argv[i + 1] = keys[i];
    }
    char tmo[16];
    snprintf(tmo, sizeof tmo, "%.2f", PD_ROUND_S);
    argv[n + 1] = tmo;
    for (int64_t i = 0; i < n + 2; i++) lens[i] = strlen(argv[i]);
    pthread_mutex_unlock(&s->mu);
    redisReply *r = redisCommandArgv(p->conn, (int)n + 2, argv, lens);
    uint64_t room = 0;
    char *text = NULL;
    bool popped = false;
    if (!r) {
        pd_drop(p, "no reply");
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->str) {
        const char *k = r->element[0]->str, *colon = k ? strrchr(k, ':') : NULL;
        room = colon ? strtoull(colon + 1, NULL, 10) : 0;
        text = strdup(r->element[1]->str);
        popped = colon != NULL;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(p->conn_err, sizeof p->conn_err, "%s: %s", p->url, r->str);
    }
    if (r) freeReplyObject(r);
    pthread_mutex_lock(&s->mu);
    if (text) {
        record_locked(s, room, text);
    } else if (popped) {
        /* Taken off the server and not kept: the request cannot wait for it. */
        char why[96];
        snprintf(why, sizeof why, "bootstrap_room %" PRIu64 ": out of memory reading its handoff "
                 "record", room);
        fail_room_locked(s, room, why);
    }
    free(text);
}

/* Prefill: refresh this server's liveness key (without s->mu). */
static void live_refresh(serve_pd *p)
{
    char key[PD_KEY_MAX];
    live_key(p, p->live, key, sizeof key);
    redisReply *r = redisCommand(p->conn, "SET %s 1 PX %d", key, (int)(PD_LIVE_TTL_S * 1000));
    if (!r) pd_drop(p, "no reply");
    else if (r->type == REDIS_REPLY_ERROR)
        snprintf(p->conn_err, sizeof p->conn_err, "%s: %s", p->url, r->str);
    if (r) freeReplyObject(r);
}

/* What a look found for one room: its record, or why its taker lapsed. */
typedef struct pd_look {
    uint64_t room;
    char *text, *lapse;
    bool lost;               /* a record popped and not kept (no memory) */
} pd_look;

/* Decode, one room of a look (without s->mu): the taken mark's reply m (its
 * value or nil). A taker whose liveness key is gone fails the room, unless
 * its record came after all (pushed just before the taker stopped). */
static void look_room(serve_pd *p, pd_look *out, const redisReply *m)
{
    if (!m || m->type != REDIS_REPLY_STRING) return; /* not taken (yet) */
    json_error_t je;
    json_t *o = json_loads(m->str, 0, &je);
    const char *live = json_string_value(json_object_get(o, "live"));
    const char *name = json_string_value(json_object_get(o, "server"));
    char key[PD_KEY_MAX];
    if (live && strlen(live) < PD_LIVE_MAX) {
        live_key(p, live, key, sizeof key);
        redisReply *e = redisCommand(p->conn, "EXISTS %s", key);
        bool gone = e && e->type == REDIS_REPLY_INTEGER && e->integer == 0;
        if (e) freeReplyObject(e);
        else pd_drop(p, "no reply");
        if (gone) {
            pd_key(p, out->room, key, sizeof key);
            redisReply *r = p->conn ? redisCommand(p->conn, "LPOP %s", key) : NULL;
            if (r && r->type == REDIS_REPLY_STRING) {
                out->text = strdup(r->str);
                out->lost = !out->text;
            } else if (r && r->type == REDIS_REPLY_NIL) {
                char why[400];
                snprintf(why, sizeof why, "bootstrap_room %" PRIu64 ": the prefill server that "
                         "took it (%s) stopped refreshing its liveness in the tier %s before "
                         "handing over: it died or froze", out->room, name ? name : live, p->url);
                out->lapse = strdup(why);
            }
            if (r) freeReplyObject(r);
            else if (p->conn) pd_drop(p, "no reply");
        }
    }
    json_decref(o);
}

/* Decode: look at who took the held rooms (s->mu held on entry and exit,
 * dropped around the calls), so a room whose prefill server died ends now
 * rather than at --pd-timeout. */
static void look_round_locked(serve *s)
{
    serve_pd *p = s->pd;
    int64_t n = p->n_held < PD_WAIT_KEYS ? p->n_held : PD_WAIT_KEYS;
    char keys[PD_WAIT_KEYS][PD_KEY_MAX];
    const char *argv[PD_WAIT_KEYS + 1];
    size_t lens[PD_WAIT_KEYS + 1];
    pd_look out[PD_WAIT_KEYS];
    argv[0] = "MGET";
    lens[0] = 4;
    for (int64_t i = 0; i < n; i++) {
        out[i] = (pd_look){.room = p->held[(p->turn + i) % p->n_held]->pd.room};
        taken_key(p, out[i].room, keys[i], sizeof keys[i]);
        argv[i + 1] = keys[i];
        lens[i + 1] = strlen(keys[i]);
    }
    pthread_mutex_unlock(&s->mu);
    redisReply *r = redisCommandArgv(p->conn, (int)n + 1, argv, lens);
    if (!r) pd_drop(p, "no reply");
    else if (r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)n)
        for (int64_t i = 0; i < n && p->conn; i++) look_room(p, &out[i], r->element[i]);
    if (r) freeReplyObject(r);
    pthread_mutex_lock(&s->mu);
    for (int64_t i = 0; i < n; i++) {
        if (out[i].text) record_locked(s, out[i].room, out[i].text);
        else if (out[i].lapse) fail_room_locked(s, out[i].room, out[i].lapse);
        else if (out[i].lost) fail_room_locked(s, out[i].room, "out of memory reading the handoff "
                                              "record of a room whose prefill server lapsed");
        free(out[i].text);
        free(out[i].lapse);
    }
}

static void *pd_main(void *arg)
{
    serve *s = arg;
    serve_pd *p = s->pd;
    pthread_mutex_lock(&s->mu);
    while (!p->stop) {
        expire_locked(s);
        if (!p->conn && serve_wall() >= p->next_retry) {
            pthread_mutex_unlock(&s->mu);
            char err[sizeof p->conn_err - 64];
            if (pd_connect(p, err, sizeof err)) {
                snprintf(p->conn_err, sizeof p->conn_err, "%s", err);
                p->next_retry = serve_wall() + 1;
            } else {
                p->conn_err[0] = 0;
            }
            pthread_mutex_lock(&s->mu);
        }
        if (p->role == SERVE_PD_PREFILL && p->conn && serve_wall() >= p->live_next) {
            p->live_next = serve_wall() + PD_LIVE_REFRESH_S;
            pthread_mutex_unlock(&s->mu);
            live_refresh(p);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        if (p->recs) {
            pd_rec *r = p->recs;
            p->recs = p->recs_tail = NULL;
            pthread_mutex_unlock(&s->mu);
            push_records(s, p, r);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        if (p->n_held > 0 && p->conn && serve_wall() >= p->look_next) {
            look_round_locked(s);
            p->look_next = serve_wall() + PD_LOOK_S;
            continue;
        }
        if (p->n_held > 0 && p->conn) {
            wait_round_locked(s);
            p->turn++;
            continue;
        }
        /* Idle, or waiting to reconnect: look at deadlines and clients again
         * within 0.1 s. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + 100000000L;
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&p->wake, &s->mu, &until);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serve_pd_start(serve *s, serve_pd_role role, const char *url, const char *ns,
                   double timeout_s, char *err, size_t errlen)
{
    serve_pd *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char why[512];
    if (tier_remote_parse_url(url, p->host, sizeof p->host, &p->port, &p->db, why, sizeof why)) {
        snprintf(err, errlen, "--tier-remote '%s': %s", url, why);
        free(p);
        return -1;
    }
    p->role = role;
    snprintf(p->url, sizeof p->url, "%s", url);
    snprintf(p->ns, sizeof p->ns, "%s", ns ? ns : "default");
    p->timeout_s = timeout_s;
    p->io_s = 1;
    /* Unique per process, so a prefill server restarted on the same port is
     * not taken for the one that died: host, pid and the start time. */
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(p->live, sizeof p->live, "%.60s-%ld-%llx", host, (long)getpid(),
             (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec);
    if (pd_connect(p, why, sizeof why)) {
        snprintf(err, errlen, "--role %s: the handoff goes through the tier server, which "
                 "cannot be reached: %s", serve_pd_role_names[role], why);
        free(p);
        return -1;
    }
    pthread_cond_init(&p->wake, NULL);
    /* The engine thread already runs and reads s->pd under s->mu. */
    pthread_mutex_lock(&s->mu);
    s->pd = p;
    pthread_mutex_unlock(&s->mu);
    if (pthread_create(&p->thread, NULL, pd_main, s)) {
        snprintf(err, errlen, "cannot start the handoff thread");
        pthread_mutex_lock(&s->mu);
        s->pd = NULL;
        pthread_mutex_unlock(&s->mu);
        redisFree(p->conn);
        pthread_cond_destroy(&p->wake);
        free(p);
        return -1;
    }
    return 0;
}

void serve_pd_stop(serve *s)
{
    serve_pd *p = s->pd;
    if (!p) return;
    pthread_mutex_lock(&s->mu);
    while (p->n_held > 0) release_locked(s, p->n_held - 1, "the server is shutting down");
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(p->thread, NULL);
    /* Records queued after the thread's last round still go out; from here
     * on the engine thread finds no pd (it reads s->pd under s->mu). */
    pthread_mutex_lock(&s->mu);
    pd_rec *left = p->recs;
    p->recs = p->recs_tail = NULL;
    s->pd = NULL;
    pthread_mutex_unlock(&s->mu);
    push_records(s, p, left);
    if (p->role == SERVE_PD_PREFILL && p->conn) {
        /* Gone now, not PD_LIVE_TTL_S from now: a room this server took and
         * never answered (its record lost) fails on the decode side at once. */
        char key[PD_KEY_MAX];
        live_key(p, p->live, key, sizeof key);
        redisReply *r = redisCommand(p->conn, "DEL %s", key);
        if (r) freeReplyObject(r);
    }
    if (p->conn) redisFree(p->conn);
    pthread_cond_destroy(&p->wake);
    free(p->held);
    free(p);
}

#else

int serve_pd_start(serve *s, serve_pd_role role, const char *url, const char *ns,
                   double timeout_s, char *err, size_t errlen)
{
    (void)s, (void)url, (void)ns, (void)timeout_s;
    snprintf(err, errlen, "--role %s: this build has no Redis client (hiredis was not found "
             "when it was configured), and the handoff goes through the tier server",
             serve_pd_role_names[role]);
    return -1;
}

void serve_pd_stop(serve *s)
{
    (void)s;
}

#endif
